import { describe, expect, it } from 'vitest';
import { msToNumber } from '@temporalio/common/lib/time.js';
import { RELEASE_FAILURE_TYPES } from '../../src/contracts/failures.js';
import { InsufficientHeldBalance, ReleasedWithoutWebhook } from '../../src/errors.js';
import { ledgerLocalActivity, webhookActivity, webhookLocalActivity } from '../../src/workflows/activity-profiles.js';
import {
  DEFAULT_DELIVERY_POLICY,
  DELIVERY_WORKFLOW_TASK_TIMEOUT_MS,
  FAST_PATH_WAIT_MAX_MS,
  IN_ACTIVITY_WAIT_MAX_MS,
  MAX_ATTEMPT_TIMEOUT_MS,
} from '../../src/contracts/delivery.js';
import { DELIVERY_FAILURE_TYPES } from '../../src/contracts/failures.js';
import { InvalidDeliveryPolicyError, resolveDeliveryPolicy } from '../../src/delivery/policy.js';

/** The SDK warns of a workflow task that runs longer (TMPRL1104); the server's task timeout is twice that. */
const SLOW_WORKFLOW_TASK_MS = 5_000;

describe('the release profile (ledgerLocalActivity)', () => {
  it('the release retries locally for a few seconds only, then on durable timers', () => {
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

  it('a release that can never succeed is not retried: its named failure types are non-retryable', () => {
    expect(ledgerLocalActivity.retry!.nonRetryableErrorTypes).toEqual(
      expect.arrayContaining([...RELEASE_FAILURE_TYPES]),
    );
    // Each class name is its Temporal failure type.
    expect(new InsufficientHeldBalance('h_1', 'a_1', '500').name).toBe('InsufficientHeldBalance');
    expect(new ReleasedWithoutWebhook('h_1').name).toBe('ReleasedWithoutWebhook');
    expect([...RELEASE_FAILURE_TYPES].sort()).toEqual(['InsufficientHeldBalance', 'ReleasedWithoutWebhook']);
  });
});

describe('the delivery profiles are derived from the policy table, and bounded', () => {
  it('a fast-path call has the longest attempt timeout a policy may set, never a shorter cut: its workflow task is heartbeated within 2 s instead', () => {
    const callMs = msToNumber(webhookLocalActivity.startToCloseTimeout!);
    expect(webhookLocalActivity.retry).toEqual({ maximumAttempts: 1 });
    // The attempt, whatever the policy allows, and the in-activity wait for the merchant's budget end first.
    expect(MAX_ATTEMPT_TIMEOUT_MS + FAST_PATH_WAIT_MAX_MS).toBeLessThan(callMs);
    // The SDK heartbeats a workflow task whose local activities outlast 80 % of its timeout: within 2 s, far below the
    // 5 s TMPRL1104 warns at, however long the release and the attempt take together.
    expect(DELIVERY_WORKFLOW_TASK_TIMEOUT_MS * 0.8).toBeLessThanOrEqual(2_000);
    expect(DELIVERY_WORKFLOW_TASK_TIMEOUT_MS).toBeLessThan(SLOW_WORKFLOW_TASK_MS);
  });

  it("a regular attempt's start-to-close covers the longest attempt timeout a policy may set: the request always ends first", () => {
    const { startToCloseTimeout, retry, scheduleToCloseTimeout } = webhookActivity(3_600_000);
    expect(msToNumber(startToCloseTimeout!)).toBeGreaterThan(MAX_ATTEMPT_TIMEOUT_MS + IN_ACTIVITY_WAIT_MAX_MS);
    expect(msToNumber(scheduleToCloseTimeout!)).toBe(3_600_000);
    expect(retry!.initialInterval).toBe(DEFAULT_DELIVERY_POLICY.initialBackoffMs);
    expect(retry!.maximumInterval).toBe(DEFAULT_DELIVERY_POLICY.maxBackoffMs);
    expect(retry!.nonRetryableErrorTypes).toEqual(Object.keys(DELIVERY_FAILURE_TYPES));
  });

  it('a merchant policy cannot set an attempt timeout past the bound: a named error, the bound itself accepted', () => {
    expect(() => resolveDeliveryPolicy('m_1', { attemptTimeoutMs: 600_000 })).toThrow(InvalidDeliveryPolicyError);
    expect(() => resolveDeliveryPolicy('m_1', { attemptTimeoutMs: MAX_ATTEMPT_TIMEOUT_MS + 1 })).toThrow(/up to 30000/);
    expect(resolveDeliveryPolicy('m_1', { attemptTimeoutMs: MAX_ATTEMPT_TIMEOUT_MS }).attemptTimeoutMs).toBe(
      MAX_ATTEMPT_TIMEOUT_MS,
    );
  });
});

describe("a merchant's own cap on requests in flight", () => {
  it('maxInFlight is a whole number from 1 to 1000 in the policy; unset, the workers’ default applies', () => {
    expect(resolveDeliveryPolicy('m_1', { maxInFlight: 20 }).maxInFlight).toBe(20);
    expect(resolveDeliveryPolicy('m_1', {}).maxInFlight).toBeUndefined();
    for (const bad of [0, 2.5, 1001, '4', -1]) {
      expect(() => resolveDeliveryPolicy('m_1', { maxInFlight: bad })).toThrow(
        /maxInFlight=.* is invalid; expected a whole number of requests from 1 to 1000/,
      );
    }
  });
});
