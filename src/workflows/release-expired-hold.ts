import {
  ActivityFailure,
  ApplicationFailure,
  condition,
  log,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { RetryState, TemporalFailure } from '@temporalio/common';
import type { Activities } from '../activities/index.js';
import { DELIVERY_FAILURE_TYPES, type QuarantineReason } from '../contracts/failures.js';
import type { ReleaseExpiredHoldInput, ReleaseExpiredHoldResult } from '../contracts/domain.js';
import type { QuarantineDecision } from '../contracts/delivery.js';
import { DeliveryStatusKey, type DeliveryStatusValue } from '../contracts/search-attributes.js';
import { ledgerActivity, ledgerLocalActivity, webhookActivity, webhookLocalActivity } from './activity-profiles.js';
import {
  approveReplaySignal,
  deliveryAttemptFailedSignal,
  discardSignal,
  statusQuery,
  type ApproveReplay,
  type DeliveryAttemptFailed,
  type Discard,
  type HoldStage,
  type HoldStatus,
  type IgnoredSignal,
} from '../contracts/messages.js';

/** Two weeks: long enough to span a holiday on the operator side, short enough that alerts keep meaning. */
export const DEFAULT_QUARANTINE_TIMEOUT_MS = 14 * 86_400_000;

/** While a merchant is paused or disabled, ask again after this long, doubling up to the cap. */
const HELD_RECHECK_FIRST_MS = 5_000;
/** Five minutes: a re-enabled merchant's backlog starts draining within that, at a few events per check. */
const HELD_RECHECK_MAX_MS = 5 * 60_000;

const { quarantineDelivery, decideQuarantine } = proxyActivities<Activities>(ledgerActivity);
const { releaseHold } = proxyLocalActivities<Activities>(ledgerLocalActivity);
const deliverLocally = proxyLocalActivities<Activities>(webhookLocalActivity);

function quarantineReasonOf(err: ActivityFailure): QuarantineReason {
  if (err.retryState === RetryState.TIMEOUT || err.retryState === RetryState.MAXIMUM_ATTEMPTS_REACHED) return 'exhausted';
  const type = err.cause instanceof ApplicationFailure ? err.cause.type : undefined;
  if (type && type in DELIVERY_FAILURE_TYPES) return DELIVERY_FAILURE_TYPES[type as keyof typeof DELIVERY_FAILURE_TYPES];
  // A failure the policy does not name (e.g. an unexpected bug) still stops and waits for a human.
  return 'exhausted';
}

/**
 * One expired hold, from ledger release to a terminal delivery.
 *
 * Durable and replay-safe: every side effect is an activity; the release is idempotent in Postgres, and the
 * webhook it fixes keeps one id across every attempt and replay, so a retried activity, a replayed history or a
 * duplicate workflow for the same hold can never release twice or produce two terminal deliveries. The input
 * carries ids only; amounts and secrets are read by activities from the region's ledger.
 *
 * A delivery the policy gives up on is quarantined and the workflow waits here, in stage `quarantined`, for a
 * human: `approveReplay` starts a new policy run with the same webhook id, `discard` ends it.
 */
export async function releaseExpiredHold(input: ReleaseExpiredHoldInput): Promise<ReleaseExpiredHoldResult> {
  const hold = trackHold(input.holdId);
  const ctx = { region: input.region, holdId: input.holdId };
  const quarantineTimeoutMs = input.quarantineTimeoutMs ?? DEFAULT_QUARANTINE_TIMEOUT_MS;

  const release = await releaseHold({ holdId: input.holdId });
  log.info('hold release', { ...ctx, status: release.status });
  if (release.status !== 'released' && release.status !== 'already_released') {
    hold.enter({ stage: 'not_released', status: release.status }, 'none');
    return { release };
  }

  // DeliveryStatus starts as 'pending' (set by the sweep when it starts this workflow).
  const { webhookId } = release;
  for (let policyRun = 1; ; policyRun++) {
    const outcome = await runDeliveryPolicy(webhookId, policyRun, release.retryHorizonMs, hold);
    if (outcome.status === 'delivered') {
      hold.noteAttempt({ attemptNumber: outcome.attempts, outcome: 'delivered' });
      log.info('webhook delivered', { ...ctx, webhookId, attempts: outcome.attempts, policyRun });
      hold.enter({ stage: 'delivered', attempts: outcome.attempts }, 'delivered');
      return { release, delivery: { status: 'delivered', attempts: outcome.attempts, policyRuns: policyRun } };
    }
    if (outcome.status === 'handled_elsewhere') {
      hold.enter({ stage: 'not_released', status: `delivery ${outcome.deliveryStatus} by another workflow` });
      return { release, delivery: outcome };
    }

    const { reason, detail } = outcome;
    // Exhausted: the last retryable failure was reported during the run; rejected and gone carry their own number.
    hold.noteAttempt({ attemptNumber: outcome.attemptNumber ?? hold.lastAttemptNumber() ?? 0, outcome: detail });
    await quarantineDelivery({ webhookId, reason, detail });
    log.warn('webhook quarantined: waiting for a human', { ...ctx, webhookId, reason, policyRun });
    const since = new Date().toISOString();
    hold.enter({ stage: 'quarantined', policyRun, reason, since, detail }, 'quarantined');

    const decision = await hold.awaitHumanDecision(quarantineTimeoutMs);
    await decideQuarantine({ webhookId, policyRun, ...decision });
    switch (decision.decision) {
      case 'abandon':
        hold.enter({ stage: 'abandoned', reason, since }, 'abandoned');
        log.warn('quarantine abandoned: nobody decided in time', { ...ctx, webhookId, reason });
        return { release, delivery: { status: 'abandoned', policyRuns: policyRun } };
      case 'discard':
        hold.enter({ stage: 'discarded', by: decision.by, reason: decision.reason }, 'discarded');
        log.info('webhook discarded', { ...ctx, webhookId, by: decision.by });
        return { release, delivery: { status: 'discarded', policyRuns: policyRun } };
      case 'replay':
        log.info('webhook replay approved', { ...ctx, webhookId, by: decision.by, policyRun: policyRun + 1 });
        hold.enter({ stage: 'delivering', policyRun: policyRun + 1 }, 'pending');
    }
  }
}

/** What the workflow learns of one HTTP attempt, by whichever route it arrives (see `noteAttempt`). */
interface AttemptReport {
  attemptNumber: number;
  /** "delivered", "HTTP 503", "AttemptTimeout", a quarantine's detail. */
  outcome: string;
  /** Set when the attempt failed and will be retried: when, and why then. */
  retry?: { at: string; reason: string };
}

/** The human decision on a quarantined delivery, as `decideQuarantine` records it. */
type HumanDecision = Pick<QuarantineDecision, 'decision' | 'by' | 'reason' | 'ticket'>;

type HoldTracker = ReturnType<typeof trackHold>;

/**
 * The hold workflow's own account of itself: its stage and `DeliveryStatus` (changed together, through `enter`),
 * the last attempt, and the signals that did not apply; the `status` query answers from it. It also owns the
 * operator signals and the wait for a human.
 */
function trackHold(holdId: string) {
  let stage: HoldStage = { stage: 'releasing' };
  let lastAttempt: HoldStatus['lastAttempt'];
  const ignoredSignals: IgnoredSignal[] = [];
  // The human decision on a quarantined delivery, set by the signals below.
  let decision: { approval?: ApproveReplay; discard?: Discard } = {};
  const undecidedQuarantine = () => stage.stage === 'quarantined' && !decision.approval && !decision.discard;
  const ignore = (signal: IgnoredSignal['signal'], by: string, reason: string) => {
    ignoredSignals.push({ signal, by, reason, at: new Date().toISOString(), stage: stage.stage });
    log.warn('signal ignored: the delivery is not waiting for a decision', { signal, by, stage: stage.stage, holdId });
  };

  /**
   * Every attempt's outcome enters here: a delivered or given-up run from its result, a failed attempt on the fast
   * path from the local activity's result, and a failed attempt of the regular activity from the
   * `deliveryAttemptFailed` signal (Temporal's own retries are invisible to the workflow otherwise).
   */
  const noteAttempt = (report: AttemptReport) => {
    lastAttempt = { attemptNumber: report.attemptNumber, outcome: report.outcome, at: new Date().toISOString() };
    if (!report.retry) return;
    if (stage.stage !== 'delivering' && stage.stage !== 'honouring_retry_after' && stage.stage !== 'backing_off') return;
    stage = {
      stage: report.retry.reason.startsWith('Retry-After') ? 'honouring_retry_after' : 'backing_off',
      policyRun: stage.policyRun,
      attempt: report.attemptNumber,
      until: report.retry.at,
      reason: report.retry.reason,
    };
  };

  setHandler(statusQuery, () => ({ ...stage, lastAttempt, ignoredSignals }));
  setHandler(approveReplaySignal, (approval) => {
    if (undecidedQuarantine()) decision.approval = approval;
    else ignore('approveReplay', approval.approvedBy, approval.reason);
  });
  setHandler(discardSignal, (discard) => {
    if (undecidedQuarantine()) decision.discard = discard;
    else ignore('discard', discard.by, discard.reason);
  });
  setHandler(deliveryAttemptFailedSignal, (failed) => noteAttempt(attemptReportOf(failed)));

  return {
    /** Moves to `next`; with a `deliveryStatus`, the search attribute operators filter on changes with it. */
    enter(next: HoldStage, deliveryStatus?: DeliveryStatusValue) {
      stage = next;
      if (deliveryStatus) upsertSearchAttributes([{ key: DeliveryStatusKey, value: deliveryStatus }]);
    },
    noteAttempt,
    lastAttemptNumber: () => lastAttempt?.attemptNumber,
    /**
     * The wait for a human on a quarantined delivery: `approveReplay` or `discard`, whichever comes first, or
     * `abandon` when nobody decides within `timeoutMs`.
     */
    async awaitHumanDecision(timeoutMs: number): Promise<HumanDecision> {
      decision = {};
      const decided = await condition(() => decision.approval !== undefined || decision.discard !== undefined, timeoutMs);
      const { approval, discard } = decision;
      if (!decided) return { decision: 'abandon', by: 'hold-sweeper', reason: `no decision within ${Math.round(timeoutMs / 86_400_000)} day(s)` };
      if (discard) return { decision: 'discard', by: discard.by, reason: discard.reason };
      return { decision: 'replay', by: approval!.approvedBy, reason: approval!.reason, ticket: approval!.ticket };
    },
  };
}

const attemptReportOf = (failed: DeliveryAttemptFailed): AttemptReport => ({
  attemptNumber: failed.attemptNumber,
  outcome: failed.outcome,
  retry: { at: failed.nextAttemptAt, reason: failed.reason },
});

type PolicyRunOutcome =
  | { status: 'delivered'; attempts: number }
  | { status: 'handled_elsewhere'; deliveryStatus: string }
  | { status: 'gave_up'; reason: QuarantineReason; detail: string; attemptNumber?: number };

/**
 * A failure the delivery policy named (rejected, gone, bad URL, …), as opposed to an unexpected one. A local
 * activity's failure reaches the workflow as the ApplicationFailure itself, a regular one's as its cause.
 */
function policyFailureOf(err: unknown): ApplicationFailure | undefined {
  const failure = err instanceof ActivityFailure ? err.cause : err;
  return failure instanceof ApplicationFailure && failure.type != null && failure.type in DELIVERY_FAILURE_TYPES ? failure : undefined;
}

/** The attempt a delivery failure names in its details (set by the delivery activity), if any. */
function attemptNumberOf(failure: Error | undefined): number | undefined {
  return failure instanceof ApplicationFailure ? (failure.details?.[0] as { attemptNumber?: number } | undefined)?.attemptNumber : undefined;
}

/**
 * One run of the delivery policy, until delivered or given up. Waiting for the merchant's budget and for a
 * paused merchant are durable timers here, not failed attempts; the retry horizon runs from the start of the
 * run, so each activity call gets what is left of it as its schedule-to-close timeout.
 *
 * Calls start on the local fast path (webhookLocalActivity: one attempt, in the workflow task). After a failed
 * attempt, or anything unexpected on the fast path, the regular activity and Temporal's retry policy take over.
 */
async function runDeliveryPolicy(webhookId: string, policyRun: number, retryHorizonMs: number, hold: HoldTracker): Promise<PolicyRunOutcome> {
  // Time the merchant spends paused or disabled is added back: a pause is the merchant's decision, not a failure.
  let deadline = Date.now() + retryHorizonMs;
  let reservedSlotMs: number | undefined;
  let heldRecheckMs = HELD_RECHECK_FIRST_MS;
  let local = true;
  for (;;) {
    const remainingMs = deadline - Date.now();
    if (remainingMs <= 0) return { status: 'gave_up', reason: 'exhausted', detail: 'retry horizon ran out while waiting for the merchant' };
    hold.enter({ stage: 'delivering', policyRun });
    const { deliverWebhook } = local ? deliverLocally : proxyActivities<Activities>(webhookActivity(remainingMs));
    let result;
    try {
      result = await deliverWebhook({ webhookId, policyRun, reservedSlotMs });
    } catch (err) {
      if (local) {
        const failure = policyFailureOf(err);
        if (failure) {
          return {
            status: 'gave_up',
            reason: DELIVERY_FAILURE_TYPES[failure.type as keyof typeof DELIVERY_FAILURE_TYPES],
            detail: failure.message,
            attemptNumber: attemptNumberOf(failure),
          };
        }
        if (!(err instanceof TemporalFailure)) throw err;
        log.warn('delivery fast path failed unexpectedly: retrying as a regular activity', { webhookId, error: err.message });
        local = false;
        continue;
      }
      if (!(err instanceof ActivityFailure)) throw err;
      return {
        status: 'gave_up',
        reason: quarantineReasonOf(err),
        detail: err.cause?.message ?? err.message,
        attemptNumber: attemptNumberOf(err.cause),
      };
    }
    reservedSlotMs = undefined;
    switch (result.status) {
      case 'failed_attempt':
        // The fast path's attempt failed: wait out its backoff here, then retry under Temporal's retry policy.
        hold.noteAttempt(attemptReportOf(result.failed));
        await sleep(Math.max(1, Date.parse(result.failed.nextAttemptAt) - Date.now()));
        local = false;
        break;
      case 'delivered':
        return { status: 'delivered', attempts: result.attempts };
      case 'already_terminal':
        if (result.deliveryStatus === 'delivered') return { status: 'delivered', attempts: result.attempts };
        return { status: 'handled_elsewhere', deliveryStatus: result.deliveryStatus };
      case 'scheduled':
      case 'throttled': {
        const until = result.status === 'scheduled' ? result.sendAt : result.retryAt;
        hold.enter({
          stage: 'waiting_for_budget',
          policyRun,
          lane: result.lane,
          until: new Date(until).toISOString(),
          reserved: result.status === 'scheduled',
        });
        await sleep(Math.max(1, until - Date.now()));
        if (result.status === 'scheduled') reservedSlotMs = result.sendAt;
        break;
      }
      case 'held':
        hold.enter(
          { stage: 'held', policyRun, merchantStatus: result.merchantStatus, until: new Date(Date.now() + heldRecheckMs).toISOString() },
          'held',
        );
        await sleep(heldRecheckMs);
        deadline += heldRecheckMs;
        heldRecheckMs = Math.min(heldRecheckMs * 2, HELD_RECHECK_MAX_MS);
        hold.enter({ stage: 'delivering', policyRun }, 'pending');
        break;
    }
  }
}
