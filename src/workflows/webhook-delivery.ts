/**
 * One webhook, from its first attempt to a terminal state: policy runs under the delivery policy, a quarantine and the
 * wait for a human between them, continue-as-new while a merchant keeps it paused or a quarantine waits long. A hold's
 * release (./release-expired-hold.ts) and a processor event (./hold-events.ts, `deliverHoldEvent`) deliver this way.
 *
 * The attempt contract. One call of the `deliverWebhook` activity is one HTTP attempt, and every call ends one of two
 * ways: a result the workflow acts on (delivered; paused, throttled or scheduled: nothing sent, wait and call again),
 * or a typed failure. Temporal's retry policy (./activity-profiles.ts, derived from src/delivery/policy.ts) retries the
 * retryable one (`WebhookAttemptFailed`, its delay chosen by the activity as `nextRetryDelay`: jittered backoff,
 * Retry-After) and stops on the named ones, which `attemptEndOf` maps, with an exhausted horizon, to the one
 * quarantine reason each has. The first call of a run goes on the local fast path (one attempt inside the workflow
 * task, a few seconds at most); its retryable failure is waited out here, then the regular activity takes over.
 *
 * Every change to what this sends Temporal goes behind `patched()`; the golden-history gate replays every supported
 * release's histories through it (test/golden/SUPPORTED.md).
 */
import {
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  condition,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
  sleep,
} from '@temporalio/workflow';
import { TemporalFailure } from '@temporalio/common';
import type { Activities } from '../activities/index.js';
import type { HoldResume, OpenQuarantine, ReleaseExpiredHoldResult } from '../contracts/domain.js';
import type { AttemptFailedDetails, DeliverWebhookResult, QuarantineDecisionAnswer } from '../contracts/delivery.js';
import { DELIVERY_FAILURE_TYPES, RETRYABLE_DELIVERY_FAILURE, type QuarantineReason } from '../contracts/failures.js';
import type { DeliveryAttemptFailed, HoldStage } from '../contracts/messages.js';
import { DELIVERY_STATUS_VALUES, type DeliveryStatusValue } from '../contracts/search-attributes.js';
import { holdLabels } from '../contracts/story.js';
import { ledgerActivity, webhookActivity, webhookLocalActivity } from './activity-profiles.js';
import { runHistoryIsLong } from './history-budget.js';
import type { DeliveryTracker, HumanDecision } from './delivery-tracker.js';

/** Two weeks: long enough to span a holiday on the operator side, short enough that alerts keep meaning. */
export const DEFAULT_QUARANTINE_TIMEOUT_MS = 14 * 86_400_000;

/** While a merchant is paused or disabled, ask again after this long, doubling up to the cap. */
const PAUSED_RECHECK_FIRST_MS = 5_000;
/** Five minutes: a re-enabled merchant's backlog starts draining within that, at a few events per check. */
const PAUSED_RECHECK_MAX_MS = 5 * 60_000;
/**
 * After an hour paused, the pause is no blip: re-check every 30 minutes, and count on `merchantResumed` for a prompt
 * drain.
 */
const PAUSED_LONG_AFTER_MS = 60 * 60_000;
const PAUSED_LONG_RECHECK_MS = 30 * 60_000;

/**
 * A paused merchant's re-check keeps DeliveryStatus `held` and continues as new when the run's history reaches the
 * budget. Histories written before it re-check loudly (held, pending, held...) and never continue.
 */
const HELD_QUIETLY_PATCH = 'held-quietly-continue-as-new';
/** A quarantine's wait continues as new when the run's history reaches the budget (a flood of ignored signals). */
const QUARANTINE_CONTINUE_AS_NEW_PATCH = 'quarantine-continue-as-new';
/** A decision that arrives in the same activation as the quarantine's timeout wins; before, the abandon did. */
const DECISION_WINS_TIES_PATCH = 'decision-wins-ties-with-abandon';
/** A delivery another workflow finished sets DeliveryStatus to what it finished as; before, it stayed `pending`. */
const HANDLED_ELSEWHERE_STATUS_PATCH = 'handled-elsewhere-sets-status';

/** Activities with their label on the timeline (user metadata: a summary per call). */
const ledgerWith = (summary: string) => proxyActivities<Activities>({ ...ledgerActivity, summary });
const fastPathWith = (summary: string) => proxyLocalActivities<Activities>({ ...webhookLocalActivity, summary });
const withRetriesWith = (remainingMs: number, summary: string) =>
  proxyActivities<Activities>({ ...webhookActivity(remainingMs), summary });

/** Where a delivery's story goes on in its next run (continue-as-new): the policy run and what it carries. */
export type DeliveryResume = Omit<HoldResume, 'release'>;

export type DeliveryResult = NonNullable<ReleaseExpiredHoldResult['delivery']>;

export interface Delivery {
  webhookId: string;
  retryHorizonMs: number;
  tracker: DeliveryTracker;
  resume: DeliveryResume | undefined;
  /** Fields every log line of this delivery carries. */
  ctx: Record<string, string>;
  quarantineTimeoutMs: number;
  continueAs: (carry: DeliveryResume) => Promise<never>;
  /** The policy run a first run starts at when nothing is resumed: 1, or a resend's run (the ledger's answer). */
  firstPolicyRun?: number;
}

/** The webhook's policy runs and quarantines, until delivered, discarded, abandoned, or owned by another workflow. */
export async function deliverUntilDecided(d: Delivery): Promise<DeliveryResult> {
  const { webhookId, tracker, resume, ctx } = d;
  for (let policyRun = resume?.policyRun ?? d.firstPolicyRun ?? 1; ; policyRun++) {
    const carried = policyRun === resume?.policyRun ? resume : undefined;
    let quarantine = carried?.quarantine;
    if (quarantine) {
      const { reason, since, detail } = quarantine;
      tracker.enter({ stage: 'quarantined', policyRun, reason, since, detail });
    } else {
      const outcome = await runDeliveryPolicy(
        webhookId,
        policyRun,
        carried?.remainingHorizonMs ?? d.retryHorizonMs,
        tracker,
        carried,
      );
      if (outcome.status === 'continue_as_new') {
        await condition(allHandlersFinished);
        return d.continueAs({ policyRun, ...outcome.carry, ...tracker.carry() });
      }
      if (outcome.status === 'delivered') {
        tracker.noteAttempt({ attemptNumber: outcome.attempts, outcome: 'delivered' });
        log.info('webhook delivered', { ...ctx, webhookId, attempts: outcome.attempts, policyRun });
        tracker.enter({ stage: 'delivered', attempts: outcome.attempts }, 'delivered');
        return { status: 'delivered', attempts: outcome.attempts, policyRuns: policyRun };
      }
      if (outcome.status === 'handled_elsewhere') {
        const known = (DELIVERY_STATUS_VALUES as readonly string[]).includes(outcome.deliveryStatus);
        const finished = known ? (outcome.deliveryStatus as DeliveryStatusValue) : 'none';
        const status = patched(HANDLED_ELSEWHERE_STATUS_PATCH) ? finished : undefined;
        tracker.enter(
          { stage: 'not_released', status: `delivery ${outcome.deliveryStatus} by another workflow` },
          status,
        );
        return outcome;
      }
      quarantine = await quarantineDelivery(webhookId, policyRun, outcome, d);
    }

    const { reason, since } = quarantine;
    const leave = patched(QUARANTINE_CONTINUE_AS_NEW_PATCH) ? runHistoryIsLong : undefined;
    let decision: HumanDecision | undefined;
    let recorded: QuarantineDecisionAnswer | undefined;
    for (;;) {
      decision = await tracker.awaitHumanDecision(quarantine.abandonsAt, {
        fourEyes: quarantine.fourEyes,
        timeoutMs: d.quarantineTimeoutMs,
        decisionWinsTies: () => patched(DECISION_WINS_TIES_PATCH),
        leave,
      });
      if (!decision) break;
      // The ledger records it only if it holds the decision (the operator's row, an approved request): a decision
      // it refuses moves nothing, and the wait for a human goes on.
      recorded = await ledgerWith(holdLabels.decision(webhookId, decision.decision)).decideQuarantine({
        webhookId,
        policyRun,
        ...decision,
      });
      if (recorded?.recorded !== false) break;
      log.warn('decision refused by the ledger: still waiting for a human', {
        ...ctx,
        webhookId,
        decision: decision.decision,
        by: decision.by,
        why: recorded.why,
      });
      tracker.decisionRefused(decision, recorded.why);
    }
    if (!decision) {
      // A long wait's history ends here; the next run waits for the same decision until the same moment.
      await condition(allHandlersFinished);
      return d.continueAs({
        policyRun,
        remainingHorizonMs: d.retryHorizonMs,
        heldRecheckMs: PAUSED_RECHECK_FIRST_MS,
        quarantine,
        ...tracker.carry(),
      });
    }
    tracker.decisionRecorded(policyRun);
    // Who decided and why, as the ledger holds it (histories from before the ledger answered: as the decision said).
    const decidedBy = recorded?.recorded ? recorded.by : decision.by;
    const decidedWhy = recorded?.recorded ? recorded.reason : decision.reason;
    switch (decision.decision) {
      case 'abandon':
        tracker.enter({ stage: 'abandoned', reason, since }, 'abandoned');
        log.warn('quarantine abandoned: nobody decided in time', { ...ctx, webhookId, reason });
        return { status: 'abandoned', policyRuns: policyRun };
      case 'discard':
        tracker.enter({ stage: 'discarded', by: decidedBy, reason: decidedWhy }, 'discarded');
        log.info('webhook discarded', { ...ctx, webhookId, by: decidedBy });
        // An update that decided this waits for its answer: let it have it before the workflow closes.
        await condition(allHandlersFinished);
        return { status: 'discarded', policyRuns: policyRun };
      case 'replay':
        log.info('webhook replay approved', { ...ctx, webhookId, by: decidedBy, policyRun: policyRun + 1 });
        tracker.enter({ stage: 'delivering', policyRun: policyRun + 1 }, 'pending');
    }
  }
}

/**
 * The policy gave up: the delivery is marked quarantined (the worker's answer says what a decision needs: four eyes).
 */
async function quarantineDelivery(
  webhookId: string,
  policyRun: number,
  gaveUp: GaveUp,
  d: Delivery,
): Promise<OpenQuarantine> {
  const { reason, detail } = gaveUp;
  // Exhausted: the last retryable failure was reported during the run; rejected and gone carry their own number.
  d.tracker.noteAttempt({ attemptNumber: gaveUp.attemptNumber ?? d.tracker.lastAttemptNumber ?? 0, outcome: detail });
  const recorded = await ledgerWith(holdLabels.quarantine(webhookId, reason)).quarantineDelivery({
    webhookId,
    reason,
    detail,
  });
  log.warn('webhook quarantined: waiting for a human', { ...d.ctx, webhookId, reason, policyRun });
  const since = new Date().toISOString();
  d.tracker.enter({ stage: 'quarantined', policyRun, reason, since, detail }, 'quarantined');
  // A history from before the worker answered says nothing: no four eyes.
  return {
    reason,
    since,
    detail,
    fourEyes: recorded?.fourEyes === true,
    abandonsAt: Date.now() + d.quarantineTimeoutMs,
  };
}

type GaveUp = { status: 'gave_up'; reason: QuarantineReason; detail: string; attemptNumber?: number };

type PolicyRunOutcome =
  | { status: 'delivered'; attempts: number }
  /** Paused long enough that this run's history should end: the next run picks up from `carry`. */
  | {
      status: 'continue_as_new';
      carry: Pick<HoldResume, 'remainingHorizonMs' | 'heldRecheckMs' | 'heldSince' | 'heldMerchantStatus'>;
    }
  | { status: 'handled_elsewhere'; deliveryStatus: string }
  | GaveUp;

/** How one call of `deliverWebhook` ended, by the attempt contract (module comment). */
type AttemptEnd =
  | { end: 'result'; result: DeliverWebhookResult }
  /** A named failure, or the retry horizon spent: quarantine. */
  | { end: 'quarantine'; gaveUp: GaveUp }
  /** The fast path's attempt failed and may be tried again after `delayMs`, by the regular activity. */
  | { end: 'retry'; failed: DeliveryAttemptFailed; delayMs?: number }
  /**
   * Anything else on the fast path (the ledger down, a crash): the regular activity and its retries take it from here.
   */
  | { end: 'hand_over'; error: Error };

/** The one mapping from a failed call to what the delivery does next. */
function attemptEndOf(err: unknown, local: boolean): AttemptEnd {
  // A local activity's failure reaches the workflow as the ApplicationFailure itself, a regular one's as its cause.
  const failure = err instanceof ActivityFailure ? err.cause : err;
  const type = failure instanceof ApplicationFailure ? failure.type : undefined;
  const details =
    failure instanceof ApplicationFailure
      ? (failure.details?.[0] as Partial<AttemptFailedDetails> | undefined)
      : undefined;
  const gaveUp = (reason: QuarantineReason): AttemptEnd => ({
    end: 'quarantine',
    gaveUp: {
      status: 'gave_up',
      reason,
      detail: (failure as Error | undefined)?.message ?? (err as Error).message,
      attemptNumber: details?.attemptNumber,
    },
  });
  if (type != null && type in DELIVERY_FAILURE_TYPES)
    return gaveUp(DELIVERY_FAILURE_TYPES[type as keyof typeof DELIVERY_FAILURE_TYPES]);
  if (local) {
    if (
      type === RETRYABLE_DELIVERY_FAILURE &&
      details?.attemptNumber !== undefined &&
      details.nextAttemptAt !== undefined
    ) {
      const { attemptNumber, nextAttemptAt } = details;
      return {
        end: 'retry',
        failed: {
          attemptNumber,
          nextAttemptAt,
          outcome: details.outcome ?? (failure as ApplicationFailure).message,
          reason: details.reason ?? '',
        },
        ...(typeof details.delayMs === 'number' ? { delayMs: details.delayMs } : {}),
      };
    }
    if (!(err instanceof TemporalFailure)) throw err;
    return { end: 'hand_over', error: err };
  }
  if (!(err instanceof ActivityFailure)) throw err;
  // The horizon spent (retry state TIMEOUT), or a failure the policy does not name (e.g. an unexpected bug): stop and
  // wait for a human.
  return gaveUp('exhausted');
}

/**
 * One run of the delivery policy, until delivered or given up. Waiting for the merchant's budget and for a paused
 * merchant are durable timers here, not failed attempts; the retry horizon runs from the start of the run (time paused
 * added back), so each regular call gets what is left of it as its schedule-to-close timeout.
 */
async function runDeliveryPolicy(
  webhookId: string,
  policyRun: number,
  retryHorizonMs: number,
  tracker: DeliveryTracker,
  carried?: Pick<HoldResume, 'heldRecheckMs' | 'heldSince' | 'heldMerchantStatus'>,
): Promise<PolicyRunOutcome> {
  let deadline = Date.now() + retryHorizonMs;
  let reservedSlotMs: number | undefined;
  let pausedRecheckMs = carried?.heldRecheckMs ?? PAUSED_RECHECK_FIRST_MS;
  // When the merchant's current pause began (the long re-checks start an hour after it); reset once sending.
  let pausedSince = carried?.heldSince;
  // Why the merchant pauses it, while it does: a re-check is still `held` to whoever asks, not `delivering`.
  let pausedAs = carried?.heldMerchantStatus;
  let local = true;
  for (;;) {
    const remainingMs = deadline - Date.now();
    if (remainingMs <= 0)
      return { status: 'gave_up', reason: 'exhausted', detail: 'retry horizon ran out while waiting for the merchant' };
    if (pausedAs && tracker.deliveryStatus === 'held') {
      tracker.enter({ stage: 'held', policyRun, merchantStatus: pausedAs, until: new Date().toISOString() });
    } else {
      tracker.enter({ stage: 'delivering', policyRun });
    }
    const attempt = (tracker.lastAttemptNumber ?? 0) + 1;
    const { deliverWebhook } = local
      ? fastPathWith(holdLabels.deliver(webhookId, attempt))
      : withRetriesWith(remainingMs, holdLabels.deliverWithRetries(webhookId, attempt));
    let end: AttemptEnd;
    try {
      end = { end: 'result', result: await deliverWebhook({ webhookId, policyRun, reservedSlotMs }) };
    } catch (err) {
      end = attemptEndOf(err, local);
    }
    if (end.end === 'quarantine') return end.gaveUp;
    if (end.end === 'hand_over') {
      log.warn('delivery fast path failed unexpectedly: retrying as a regular activity', {
        webhookId,
        error: end.error.message,
      });
      local = false;
      continue;
    }
    const result: DeliverWebhookResult =
      end.end === 'retry' ? { status: 'failed_attempt', failed: end.failed } : end.result;
    reservedSlotMs = undefined;
    // Back from a pause (DeliveryStatus stays `held` while it re-checks): operators see it moving.
    if (result.status !== 'held') pausedSince = pausedAs = undefined;
    if (result.status !== 'held' && tracker.deliveryStatus === 'held')
      tracker.enter({ stage: 'delivering', policyRun }, 'pending');
    switch (result.status) {
      case 'failed_attempt': {
        // The fast path's attempt failed (thrown by this build, returned as a result by earlier ones): wait out its
        // delay here (none when it was only too slow for the fast path), then Temporal's retry policy takes over.
        const { failed } = result;
        tracker.noteAttempt({
          attemptNumber: failed.attemptNumber,
          outcome: failed.outcome,
          retry: { at: failed.nextAttemptAt, reason: failed.reason },
        });
        // The delay the activity chose; from its `nextAttemptAt` where a failure does not say (the workflow's clock
        // stood
        // still while the local activity ran, so that reads the attempt's own duration as a wait).
        const waitMs =
          end.end === 'retry' && end.delayMs !== undefined
            ? end.delayMs
            : Date.parse(failed.nextAttemptAt) - Date.now();
        if (end.end === 'result' || waitMs > 0) {
          await sleep(Math.max(1, waitMs), {
            summary: holdLabels.retryWait(failed.reason, failed.outcome, failed.attemptNumber),
          });
        }
        local = false;
        break;
      }
      case 'delivered':
        return { status: 'delivered', attempts: result.attempts };
      case 'already_terminal':
        if (result.deliveryStatus === 'delivered') return { status: 'delivered', attempts: result.attempts };
        return { status: 'handled_elsewhere', deliveryStatus: result.deliveryStatus };
      case 'scheduled':
      case 'throttled': {
        const until = result.status === 'scheduled' ? result.sendAt : result.retryAt;
        const after = result.status === 'throttled' ? result.after : undefined;
        const untilIso = new Date(until).toISOString();
        tracker.enter({
          stage: 'waiting_for_budget',
          policyRun,
          lane: result.lane,
          until: untilIso,
          reserved: result.status === 'scheduled',
          ...(after ? { after } : {}),
        });
        await sleep(Math.max(1, until - Date.now()), {
          summary: after ? holdLabels.afterEarlier(after, untilIso) : holdLabels.budget(result.lane, untilIso),
        });
        if (result.status === 'scheduled') reservedSlotMs = result.sendAt;
        break;
      }
      case 'held': {
        const stage: HoldStage = {
          stage: 'held',
          policyRun,
          merchantStatus: result.merchantStatus,
          until: new Date(Date.now() + pausedRecheckMs).toISOString(),
        };
        if (!patched(HELD_QUIETLY_PATCH)) {
          tracker.enter(stage, 'held');
          await sleep(pausedRecheckMs, { summary: holdLabels.held(stage.merchantStatus, stage.until) });
          deadline += pausedRecheckMs;
          pausedRecheckMs = Math.min(pausedRecheckMs * 2, PAUSED_RECHECK_MAX_MS);
          tracker.enter({ stage: 'delivering', policyRun }, 'pending');
          break;
        }
        tracker.enter(stage, tracker.deliveryStatus === 'held' ? undefined : 'held');
        pausedAs = result.merchantStatus;
        const pausedFrom = Date.now();
        pausedSince ??= pausedFrom;
        const resumed = await tracker.awaitMerchantResumed(
          pausedRecheckMs,
          holdLabels.held(stage.merchantStatus, stage.until),
        );
        // A pause is the merchant's decision, not a failure: its time is added back to the horizon.
        deadline += Date.now() - pausedFrom;
        const longPaused = Date.now() - pausedSince >= PAUSED_LONG_AFTER_MS;
        pausedRecheckMs = resumed
          ? PAUSED_RECHECK_FIRST_MS
          : longPaused
            ? PAUSED_LONG_RECHECK_MS
            : Math.min(pausedRecheckMs * 2, PAUSED_RECHECK_MAX_MS);
        if (runHistoryIsLong()) {
          return {
            status: 'continue_as_new',
            carry: {
              remainingHorizonMs: deadline - Date.now(),
              heldRecheckMs: pausedRecheckMs,
              heldSince: pausedSince,
              heldMerchantStatus: pausedAs,
            },
          };
        }
        break;
      }
    }
  }
}
