/**
 * A hold's release and its webhook's first attempt as one local activity: one marker in the hold's history where a
 * release and an attempt of their own write two, and one trip from the workflow to the activity worker. Each part is
 * the activity it stands for, unchanged (the release exactly once in the ledger, the attempt at most one request).
 */
import { log } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { AttemptFailedDetails, DeliverWebhookInput, DeliverWebhookResult } from '../contracts/delivery.js';
import type { ReleasedAndTried, ReleaseOutcome } from '../contracts/domain.js';
import { inSpan } from '../observability/spans.js';
import type { ReleaseHoldInput } from './ledger.js';

export function releaseAndDeliver(
  releaseHold: (input: ReleaseHoldInput) => Promise<ReleaseOutcome>,
  deliverWebhook: (input: DeliverWebhookInput) => Promise<DeliverWebhookResult>,
) {
  return async (input: ReleaseHoldInput): Promise<ReleasedAndTried> => {
    // A failed release fails the activity: the workflow then releases on its own, retried as long as the ledger needs.
    // Each part in a span of its own, as each is an activity's span when apart.
    const release = await inSpan('hold release', {}, () => releaseHold(input));
    if (release.status !== 'released' && release.status !== 'already_released') return release;
    try {
      const { webhookId } = release;
      const answered = await inSpan('webhook attempt', {}, () => deliverWebhook({ webhookId, policyRun: 1 }));
      return { ...release, firstAttempt: { answered } };
    } catch (err) {
      // Logged as the worker logs a failed activity; its words never quote the merchant's answer.
      log.warn('webhook attempt failed', { holdId: input.holdId, webhookId: release.webhookId, error: err });
      // As Temporal would carry it to the workflow: an ApplicationFailure as thrown, anything else by its name.
      const failure = err instanceof ApplicationFailure ? err : undefined;
      const details = failure?.details?.[0] as AttemptFailedDetails | undefined;
      return {
        ...release,
        firstAttempt: {
          failed: {
            type: failure ? (failure.type ?? '') : err instanceof Error ? err.name : 'Error',
            message: err instanceof Error ? err.message : String(err),
            ...(details ? { details } : {}),
          },
        },
      };
    }
  };
}
