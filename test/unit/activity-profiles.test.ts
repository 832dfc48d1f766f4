import { describe, expect, it } from 'vitest';
import { msToNumber } from '@temporalio/common/lib/time.js';
import { RELEASE_FAILURE_TYPES } from '../../src/contracts/failures.js';
import { InsufficientHeldBalance, ReleasedWithoutWebhook } from '../../src/errors.js';
import { ledgerLocalActivity } from '../../src/workflows/activity-profiles.js';

/** The SDK warns of a workflow task that runs longer (TMPRL1104); the server's task timeout is twice that. */
const SLOW_WORKFLOW_TASK_MS = 5_000;

describe('the release profile (ledgerLocalActivity)', () => {
  it('case 6, the release retries locally for a few seconds only, then on durable timers', () => {
    const { retry, localRetryThreshold } = ledgerLocalActivity;
    expect(localRetryThreshold).toBeDefined();
    const thresholdMs = msToNumber(localRetryThreshold!);
    const maximumMs = msToNumber(retry!.maximumInterval!);
    // Below the maximum interval, or the backoff would never pass it and the retries would never leave the worker.
    expect(thresholdMs).toBeLessThan(maximumMs);
    // The backoffs retried in the worker (those within the threshold) leave the workflow task a quick one.
    let localMs = 0;
    for (
      let backoff = msToNumber(retry!.initialInterval!);
      backoff <= thresholdMs;
      backoff = Math.min(backoff * retry!.backoffCoefficient!, maximumMs)
    ) {
      localMs += backoff;
    }
    expect(localMs).toBeGreaterThan(0);
    expect(localMs).toBeLessThan(SLOW_WORKFLOW_TASK_MS);
  });

  it('case 6, a release that can never succeed is not retried: its named failure types are non-retryable', () => {
    expect(ledgerLocalActivity.retry!.nonRetryableErrorTypes).toEqual(expect.arrayContaining([...RELEASE_FAILURE_TYPES]));
    // Each class name is its Temporal failure type.
    expect(new InsufficientHeldBalance('h_1', 'a_1', '500').name).toBe('InsufficientHeldBalance');
    expect(new ReleasedWithoutWebhook('h_1').name).toBe('ReleasedWithoutWebhook');
    expect([...RELEASE_FAILURE_TYPES].sort()).toEqual(['InsufficientHeldBalance', 'ReleasedWithoutWebhook']);
  });
});
