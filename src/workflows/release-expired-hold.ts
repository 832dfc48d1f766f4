/**
 * One expired hold: released in the ledger, its webhook delivered to the merchant, and a human's decision when the
 * delivery policy gives up. The delivery itself, shared with the processor events' webhooks, is ./webhook-delivery.ts.
 *
 * Durable and replay-safe: every side effect is an activity; the release is idempotent in Postgres, and the webhook it
 * fixes keeps one id across every attempt and replay, so a retried activity, a replayed history or a duplicate workflow
 * for the same hold can never release twice or produce two terminal deliveries. The input carries ids only; amounts
 * and secrets are read by activities from the region's ledger.
 *
 * A deploy meets it mid-wait: it is AUTO_UPGRADE (the workers' default), so its next task runs on the deployment's
 * current build, replaying its history there; the golden-history gate (test/integration/golden-histories.test.ts)
 * replays every supported release's histories on the current code.
 */
import { continueAsNew, log, proxyLocalActivities } from '@temporalio/workflow';
import { TemporalFailure } from '@temporalio/common';
import type { Activities } from '../activities/index.js';
import type { ReleaseExpiredHoldInput, ReleaseExpiredHoldResult, ReleaseOutcome } from '../contracts/domain.js';
import { holdLabels } from '../contracts/story.js';
import { ledgerLocalActivity, releaseAndDeliverLocalActivity } from './activity-profiles.js';
import { deliverUntilDecided, DeliveryState, triedFirst } from './webhook-delivery.js';
import type { WhileDelivering } from './delivery-rules.js';

export async function releaseExpiredHold(input: ReleaseExpiredHoldInput): Promise<ReleaseExpiredHoldResult> {
  const { resume, holdId } = input;
  const state = new DeliveryState(holdId, { stage: 'releasing' }, resume?.delivery).registerHandlers();
  const ctx = { region: input.region, holdId };

  // 1. Release. A continued run was released by its first run: it carries the outcome instead of asking the ledger
  //    again.
  const { release, first } = resume ? { release: resume.release, first: undefined } : await releaseOf(input);
  if (release.status !== 'released' && release.status !== 'already_released') {
    state.show({ stage: { stage: 'not_released', status: release.status }, status: 'none' });
    return { release };
  }

  // 2. Deliver, and 3. decide: until the webhook is delivered, discarded or abandoned. DeliveryStatus starts as
  // 'pending' (set by the sweep's batch when it starts this workflow).
  const delivery = await deliverUntilDecided(
    {
      webhookId: release.webhookId,
      policyRun: 1,
      retryHorizonMs: release.retryHorizonMs,
      ctx,
      first,
      continueAs: (carry) =>
        continueAsNew<typeof releaseExpiredHold>({ ...input, resume: { release, delivery: carry } }),
    },
    state,
  );
  return { release, delivery };
}

/**
 * The hold's release, and with it (`releaseDelivers`) what came of its webhook's first attempt. Should that local
 * activity fail (the ledger's failure: the attempt's is its answer) or time out, the release runs on its own, retried
 * as long as the ledger needs, and the delivery makes its first attempt itself.
 */
async function releaseOf({ holdId, expiresAt, cutoff, releaseDelivers }: ReleaseExpiredHoldInput): Promise<{
  release: ReleaseOutcome;
  first?: WhileDelivering;
}> {
  const input = { holdId, expiresAt, cutoff };
  if (releaseDelivers) {
    const { releaseAndDeliver } = proxyLocalActivities<Activities>({
      ...releaseAndDeliverLocalActivity,
      summary: holdLabels.releaseAndDeliver(holdId),
    });
    try {
      const { firstAttempt, ...release } = await releaseAndDeliver(input);
      return { release, first: firstAttempt && triedFirst(firstAttempt) };
    } catch (err) {
      if (!(err instanceof TemporalFailure)) throw err;
      log.warn('release with its first attempt failed: releasing on its own', { holdId, error: err.message });
    }
  }
  const { releaseHold } = proxyLocalActivities<Activities>({
    ...ledgerLocalActivity,
    summary: holdLabels.release(holdId),
  });
  return { release: await releaseHold(input) };
}
