import {
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { RetryState, TemporalFailure } from '@temporalio/common';
import type { Activities } from '../activities/index.js';
import { DELIVERY_FAILURE_TYPES, type QuarantineReason } from '../contracts/failures.js';
import type { HoldResume, ReleaseExpiredHoldInput, ReleaseExpiredHoldResult } from '../contracts/domain.js';
import type { QuarantineDecision } from '../contracts/delivery.js';
import { DeliveryStatusKey, type DeliveryStatusValue } from '../contracts/search-attributes.js';
import { ledgerActivity, ledgerLocalActivity, webhookActivity, webhookLocalActivity } from './activity-profiles.js';
import {
  approveReplaySignal,
  deliveryAttemptFailedSignal,
  discardSignal,
  statusQuery,
  approveReplayUpdate,
  discardUpdate,
  merchantResumedSignal,
  parseDecision,
  type DecisionAnswer,
  type DecisionKind,
  type DeliveryAttemptFailed,
  type HoldStage,
  type HoldStatus,
  type IgnoredSignal,
} from '../contracts/messages.js';
import { holdCurrentDetails, holdLabels } from '../contracts/story.js';

/** Two weeks: long enough to span a holiday on the operator side, short enough that alerts keep meaning. */
export const DEFAULT_QUARANTINE_TIMEOUT_MS = 14 * 86_400_000;

/** While a merchant is paused or disabled, ask again after this long, doubling up to the cap. */
const HELD_RECHECK_FIRST_MS = 5_000;
/** Five minutes: a re-enabled merchant's backlog starts draining within that, at a few events per check. */
const HELD_RECHECK_MAX_MS = 5 * 60_000;

/**
 * A held delivery re-checks without touching DeliveryStatus (it stays `held` until the merchant is back) and
 * continues as new when its run's history reaches HELD_HISTORY_BUDGET, so a merchant paused for months never
 * brings a workflow near Temporal's 51,200-event limit. Histories written before this patch keep their old path.
 */
const HELD_QUIETLY_PATCH = 'held-quietly-continue-as-new';
/** ~6 events per re-check: a run continues as new every 333 re-checks, far below the 51,200-event limit. */
const HELD_HISTORY_BUDGET = 2_000;
/**
 * After an hour held, the merchant's pause is no blip: re-check every 30 minutes (48 a day), and count on the
 * `merchantResumed` signal (sent when the merchant is re-enabled) for a prompt drain.
 */
const HELD_LONG_AFTER_MS = 60 * 60_000;
const HELD_LONG_RECHECK_MS = 30 * 60_000;
/** Ignored signals carried into the next run: the newest few, so the run's input stays small. */
const CARRIED_IGNORED_SIGNALS = 20;

const { verifyReplayApproval } = proxyActivities<Activities>(ledgerActivity);
/** Activities with their label on the timeline (user metadata: a summary per call). */
const ledgerWith = (summary: string) => proxyActivities<Activities>({ ...ledgerActivity, summary });
const releaseWith = (summary: string) => proxyLocalActivities<Activities>({ ...ledgerLocalActivity, summary });
const deliverLocallyWith = (summary: string) => proxyLocalActivities<Activities>({ ...webhookLocalActivity, summary });

/** Why an approval without a replay request is refused where four eyes rule (production). */
const FOUR_EYES_WHY =
  'four eyes: an approval needs a replay request approved by a second person ' +
  '(npm run ops -- replay preview --webhook <id> --requested-by <you>, then replay approve <request id> --by <someone else>)';

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
 *
 * A deploy meets it mid-wait: it is AUTO_UPGRADE (the workers' default), so its next task runs on the deployment's
 * current build, replaying its history there. Any change to its command sequence goes behind `patched()`; the
 * golden-history gate (test/integration/golden-histories.test.ts) replays every supported release's histories.
 */
export async function releaseExpiredHold(input: ReleaseExpiredHoldInput): Promise<ReleaseExpiredHoldResult> {
  const { resume } = input;
  const hold = trackHold(input.holdId, resume);
  const ctx = { region: input.region, holdId: input.holdId };
  const quarantineTimeoutMs = input.quarantineTimeoutMs ?? DEFAULT_QUARANTINE_TIMEOUT_MS;

  // A continued run was released by its first run: it carries the outcome instead of asking the ledger again.
  const release =
    resume?.release ??
    (await releaseWith(holdLabels.release(input.holdId)).releaseHold({ holdId: input.holdId, expiresAt: input.expiresAt, cutoff: input.cutoff }));
  if (!resume) log.info('hold release', { ...ctx, status: release.status });
  if (release.status !== 'released' && release.status !== 'already_released') {
    hold.enter({ stage: 'not_released', status: release.status }, 'none');
    return { release };
  }

  // DeliveryStatus starts as 'pending' (set by the sweep when it starts this workflow).
  const delivery = await deliverUntilDecided({
    webhookId: release.webhookId,
    retryHorizonMs: release.retryHorizonMs,
    hold,
    resume,
    ctx,
    quarantineTimeoutMs,
    continueAs: (carry) => continueAsNew<typeof releaseExpiredHold>({ ...input, resume: { release, ...carry } }),
  });
  return { release, delivery };
}

/** Where a delivery's story goes on in its next run (continue-as-new): the policy run and what it carries. */
export type DeliveryResume = Omit<HoldResume, 'release'>;

type DeliveryResult = NonNullable<ReleaseExpiredHoldResult['delivery']>;

/**
 * One webhook, from its first attempt to a terminal state: policy runs under the delivery policy, a quarantine and
 * the wait for a human between them, continue-as-new (through `continueAs`) while a merchant holds it for long.
 * The hold's release workflow and each processor event's delivery workflow run it the same way.
 */
export async function deliverUntilDecided({
  webhookId,
  retryHorizonMs,
  hold,
  resume,
  ctx,
  quarantineTimeoutMs,
  continueAs,
}: {
  webhookId: string;
  retryHorizonMs: number;
  hold: HoldTracker;
  resume: DeliveryResume | undefined;
  ctx: Record<string, string>;
  quarantineTimeoutMs: number;
  continueAs: (carry: DeliveryResume) => Promise<never>;
}): Promise<DeliveryResult> {
  for (let policyRun = resume?.policyRun ?? 1; ; policyRun++) {
    const carried = policyRun === resume?.policyRun ? resume : undefined;
    const outcome = await runDeliveryPolicy(webhookId, policyRun, carried?.remainingHorizonMs ?? retryHorizonMs, hold, carried);
    if (outcome.status === 'continue_as_new') {
      await condition(allHandlersFinished);
      return continueAs({ policyRun, ...outcome.carry, ...hold.carry() });
    }
    if (outcome.status === 'delivered') {
      hold.noteAttempt({ attemptNumber: outcome.attempts, outcome: 'delivered' });
      log.info('webhook delivered', { ...ctx, webhookId, attempts: outcome.attempts, policyRun });
      hold.enter({ stage: 'delivered', attempts: outcome.attempts }, 'delivered');
      return { status: 'delivered', attempts: outcome.attempts, policyRuns: policyRun };
    }
    if (outcome.status === 'handled_elsewhere') {
      hold.enter({ stage: 'not_released', status: `delivery ${outcome.deliveryStatus} by another workflow` });
      return outcome;
    }

    const { reason, detail } = outcome;
    // Exhausted: the last retryable failure was reported during the run; rejected and gone carry their own number.
    hold.noteAttempt({ attemptNumber: outcome.attemptNumber ?? hold.lastAttemptNumber() ?? 0, outcome: detail });
    // The worker's answer says what a decision needs (four eyes); a history from before it answered nothing.
    const recorded = await ledgerWith(holdLabels.quarantine(webhookId, reason)).quarantineDelivery({ webhookId, reason, detail });
    log.warn('webhook quarantined: waiting for a human', { ...ctx, webhookId, reason, policyRun });
    const since = new Date().toISOString();
    hold.enter({ stage: 'quarantined', policyRun, reason, since, detail }, 'quarantined');

    const decision = await hold.awaitHumanDecision(quarantineTimeoutMs, { fourEyes: recorded?.fourEyes === true });
    await ledgerWith(holdLabels.decision(webhookId, decision.decision)).decideQuarantine({ webhookId, policyRun, ...decision });
    hold.decisionRecorded(policyRun);
    switch (decision.decision) {
      case 'abandon':
        hold.enter({ stage: 'abandoned', reason, since }, 'abandoned');
        log.warn('quarantine abandoned: nobody decided in time', { ...ctx, webhookId, reason });
        return { status: 'abandoned', policyRuns: policyRun };
      case 'discard':
        hold.enter({ stage: 'discarded', by: decision.by, reason: decision.reason }, 'discarded');
        log.info('webhook discarded', { ...ctx, webhookId, by: decision.by });
        // An update that decided this waits for its answer: let it have it before the workflow closes.
        await condition(allHandlersFinished);
        return { status: 'discarded', policyRuns: policyRun };
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

type Verdict = { ok: true; decision: HumanDecision; policyRun: number; replayRequestId?: string } | { ok: false; why: string };

type HoldTracker = ReturnType<typeof trackHold>;

/**
 * The hold workflow's own account of itself: its stage and `DeliveryStatus` (changed together, through `enter`),
 * the last attempt, and the signals that did not apply; the `status` query answers from it. It also owns the
 * operator signals and the wait for a human.
 */
export function trackHold(
  holdId: string,
  resume:
    | (Pick<HoldResume, 'lastAttempt' | 'ignoredSignals' | 'deliveryStatus'> & Partial<Pick<HoldResume, 'policyRun' | 'heldMerchantStatus'>>)
    | undefined,
) {
  // A run continued while the merchant held it is still held, from its first moment (a query may come before its
  // first task has run).
  let stage: HoldStage =
    resume?.deliveryStatus === 'held' && resume.heldMerchantStatus && resume.policyRun
      ? { stage: 'held', policyRun: resume.policyRun, merchantStatus: resume.heldMerchantStatus, until: new Date().toISOString() }
      : { stage: 'releasing' };
  let lastAttempt: HoldStatus['lastAttempt'] = resume?.lastAttempt;
  const ignoredSignals: IgnoredSignal[] = [...(resume?.ignoredSignals ?? [])];
  // The DeliveryStatus search attribute as last set ('pending' from the sweep, or carried by continue-as-new).
  let deliveryStatus: DeliveryStatusValue = resume?.deliveryStatus ?? 'pending';
  let merchantResumed = false;
  // The human decision on the current quarantine, from a signal or an update; and the run whose decision the
  // ledger has recorded (an update answers once it has).
  let decision: HumanDecision | undefined;
  // Whether the current quarantine's approvals need a reviewed replay request (the worker's rule, see awaitHumanDecision).
  let fourEyes = false;
  let recordedRun = 0;
  /** The Web UI's current details: the status query's facts, republished on every change. */
  const publish = () => setCurrentDetails(holdCurrentDetails({ ...stage, lastAttempt, ignoredSignals }));
  publish();

  /** The one rule for decisions, whether they come as signals or updates: does this one apply now? */
  const judge = (kind: DecisionKind, payload: unknown): Verdict => {
    const parsed = parseDecision(kind, payload);
    if (!parsed.ok) return parsed;
    if (stage.stage !== 'quarantined') return { ok: false, why: `not waiting for a decision (stage ${stage.stage})` };
    if (decision) return { ok: false, why: `already decided: ${decision.decision} by ${decision.by}` };
    const { value } = parsed;
    if (value.policyRun !== undefined && value.policyRun !== stage.policyRun) {
      return { ok: false, why: `stale: for policy run ${value.policyRun}, but the quarantine is policy run ${stage.policyRun}` };
    }
    if ('approvedBy' in value && fourEyes && value.replayRequestId === undefined) return { ok: false, why: FOUR_EYES_WHY };
    if ('approvedBy' in value) {
      const replay: HumanDecision = { decision: 'replay', by: value.approvedBy, reason: value.reason, ticket: value.ticket };
      return { ok: true, policyRun: stage.policyRun, decision: replay, replayRequestId: value.replayRequestId };
    }
    return { ok: true, policyRun: stage.policyRun, decision: { decision: 'discard', by: value.by, reason: value.reason } };
  };
  /**
   * `judge`, and for an approval that names a replay request, the four-eyes check against the ledger (an
   * activity), then `judge` again: the workflow may have moved on while the ledger answered.
   */
  const decide = async (kind: DecisionKind, payload: unknown): Promise<Verdict> => {
    const verdict = judge(kind, payload);
    if (!verdict.ok || verdict.replayRequestId === undefined) return verdict;
    const claim = { holdId, policyRun: verdict.policyRun, replayRequestId: verdict.replayRequestId, approvedBy: verdict.decision.by };
    const check = await verifyReplayApproval(claim);
    if (!check.ok) return check;
    // The check was for this quarantine's run: if another run is quarantined by now, the approval is stale.
    const again = judge(kind, payload);
    return again.ok && again.policyRun !== verdict.policyRun
      ? { ok: false, why: `stale: checked for policy run ${verdict.policyRun}, but the quarantine is policy run ${again.policyRun}` }
      : again;
  };
  const ignore = (signal: DecisionKind, payload: unknown, why: string) => {
    const p = typeof payload === 'object' && payload !== null ? (payload as Record<string, unknown>) : {};
    const text = (value: unknown) => (typeof value === 'string' ? value.slice(0, 200) : undefined);
    const by = text(signal === 'approveReplay' ? p.approvedBy : p.by);
    ignoredSignals.push({ signal, by, reason: text(p.reason), at: new Date().toISOString(), stage: stage.stage, why });
    publish();
    log.warn('signal ignored', { signal, by, stage: stage.stage, why, holdId });
  };
  const decideBySignal = (kind: DecisionKind) => async (payload: unknown) => {
    const verdict = await decide(kind, payload);
    if (verdict.ok) decision = verdict.decision;
    else ignore(kind, payload, verdict.why);
  };
  /** An update's validator refuses what does not apply (nothing enters history); its handler answers once recorded. */
  const decideByUpdate = (kind: DecisionKind) =>
    [
      async (payload: unknown): Promise<DecisionAnswer> => {
        const verdict = await decide(kind, payload);
        if (!verdict.ok) throw ApplicationFailure.create({ type: 'DecisionRefused', message: verdict.why, nonRetryable: true });
        decision = verdict.decision;
        await condition(() => recordedRun >= verdict.policyRun);
        return { decision: verdict.decision.decision as DecisionAnswer['decision'], policyRun: verdict.policyRun, stage: stage.stage };
      },
      {
        validator: (payload: unknown) => {
          const verdict = judge(kind, payload);
          if (!verdict.ok) throw new Error(verdict.why);
        },
      },
    ] as const;

  /**
   * Every attempt's outcome enters here: a delivered or given-up run from its result, a failed attempt on the fast
   * path from the local activity's result, and a failed attempt of the regular activity from the
   * `deliveryAttemptFailed` signal (Temporal's own retries are invisible to the workflow otherwise).
   */
  const noteAttempt = (report: AttemptReport) => {
    lastAttempt = { attemptNumber: report.attemptNumber, outcome: report.outcome, at: new Date().toISOString() };
    if (report.retry && (stage.stage === 'delivering' || stage.stage === 'honouring_retry_after' || stage.stage === 'backing_off')) {
      stage = {
        stage: report.retry.reason.startsWith('Retry-After') ? 'honouring_retry_after' : 'backing_off',
        policyRun: stage.policyRun,
        attempt: report.attemptNumber,
        until: report.retry.at,
        reason: report.retry.reason,
      };
    }
    publish();
  };

  setHandler(statusQuery, () => ({ ...stage, lastAttempt, ignoredSignals }));
  setHandler(approveReplaySignal, decideBySignal('approveReplay'));
  setHandler(discardSignal, decideBySignal('discard'));
  setHandler(approveReplayUpdate, ...decideByUpdate('approveReplay'));
  setHandler(discardUpdate, ...decideByUpdate('discard'));
  setHandler(deliveryAttemptFailedSignal, (failed) => {
    // Sent by this workflow's own delivery activity; anything else (a client's malformed or unencrypted signal) is dropped.
    if (typeof failed?.attemptNumber !== 'number' || typeof failed.nextAttemptAt !== 'string') {
      log.warn('deliveryAttemptFailed signal ignored: not an attempt report', { holdId });
      return;
    }
    noteAttempt(attemptReportOf(failed));
  });
  setHandler(merchantResumedSignal, () => void (merchantResumed = true));

  return {
    /** Moves to `next`; with a `deliveryStatus`, the search attribute operators filter on changes with it. */
    enter(next: HoldStage, status?: DeliveryStatusValue) {
      stage = next;
      publish();
      if (status) {
        deliveryStatus = status;
        upsertSearchAttributes([{ key: DeliveryStatusKey, value: status }]);
      }
    },
    deliveryStatus: () => deliveryStatus,
    /** Waits up to `ms` for the merchant to be reported active again (merchantResumed); true when it was. */
    async awaitMerchantResumed(ms: number, summary: string): Promise<boolean> {
      const resumed = await condition(() => merchantResumed, ms, { summary });
      merchantResumed = false;
      return resumed;
    },
    /** What the next run needs to go on telling the same story. */
    carry: (): Pick<HoldResume, 'deliveryStatus' | 'lastAttempt' | 'ignoredSignals'> => ({
      deliveryStatus: deliveryStatus === 'held' ? 'held' : 'pending',
      lastAttempt,
      ignoredSignals: ignoredSignals.slice(-CARRIED_IGNORED_SIGNALS),
    }),
    noteAttempt,
    lastAttemptNumber: () => lastAttempt?.attemptNumber,
    /**
     * The wait for a human on a quarantined delivery: `approveReplay` or `discard`, whichever comes first, or
     * `abandon` when nobody decides within `timeoutMs`. With `fourEyes` (the worker's rule, from its answer to
     * `quarantineDelivery`: never from a caller), an approval without a replay request is refused.
     */
    async awaitHumanDecision(timeoutMs: number, rules: { fourEyes: boolean }): Promise<HumanDecision> {
      decision = undefined;
      fourEyes = rules.fourEyes;
      const abandonsAt = new Date(Date.now() + timeoutMs).toISOString();
      const decided = await condition(() => decision !== undefined, timeoutMs, { summary: holdLabels.human(abandonsAt) });
      if (!decided) return { decision: 'abandon', by: 'hold-sweeper', reason: `no decision within ${Math.round(timeoutMs / 86_400_000)} day(s)` };
      return decision!;
    },
    /** The ledger has recorded the decision on `policyRun`'s quarantine: updates waiting for it answer. */
    decisionRecorded(policyRun: number) {
      recordedRun = policyRun;
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
  /** Held long enough that this run's history should end: the next run picks up from `carry`. */
  | { status: 'continue_as_new'; carry: Pick<HoldResume, 'remainingHorizonMs' | 'heldRecheckMs' | 'heldSince' | 'heldMerchantStatus'> }
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
async function runDeliveryPolicy(
  webhookId: string,
  policyRun: number,
  retryHorizonMs: number,
  hold: HoldTracker,
  carried?: Pick<HoldResume, 'heldRecheckMs' | 'heldSince' | 'heldMerchantStatus'>,
): Promise<PolicyRunOutcome> {
  // Time the merchant spends paused or disabled is added back: a pause is the merchant's decision, not a failure.
  let deadline = Date.now() + retryHorizonMs;
  let reservedSlotMs: number | undefined;
  let heldRecheckMs = carried?.heldRecheckMs ?? HELD_RECHECK_FIRST_MS;
  // When the current hold began (the quiet path's long re-checks start an hour after it); reset once sending.
  let heldSince = carried?.heldSince;
  // Why the merchant holds it, while it does: a re-check is still `held` to whoever asks, not `delivering`.
  let heldBy = carried?.heldMerchantStatus;
  let local = true;
  for (;;) {
    const remainingMs = deadline - Date.now();
    if (remainingMs <= 0) return { status: 'gave_up', reason: 'exhausted', detail: 'retry horizon ran out while waiting for the merchant' };
    if (heldBy && hold.deliveryStatus() === 'held') {
      hold.enter({ stage: 'held', policyRun, merchantStatus: heldBy, until: new Date().toISOString() });
    } else {
      hold.enter({ stage: 'delivering', policyRun });
    }
    const attempt = (hold.lastAttemptNumber() ?? 0) + 1;
    const { deliverWebhook } = local
      ? deliverLocallyWith(holdLabels.deliver(webhookId, attempt))
      : proxyActivities<Activities>({ ...webhookActivity(remainingMs), summary: holdLabels.deliverWithRetries(webhookId, attempt) });
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
    // Back from a hold (the quiet path keeps DeliveryStatus `held` while it re-checks): operators see it moving.
    if (result.status !== 'held') heldSince = heldBy = undefined;
    if (result.status !== 'held' && hold.deliveryStatus() === 'held') hold.enter({ stage: 'delivering', policyRun }, 'pending');
    switch (result.status) {
      case 'failed_attempt':
        // The fast path's attempt failed: wait out its backoff here, then retry under Temporal's retry policy.
        hold.noteAttempt(attemptReportOf(result.failed));
        await sleep(Math.max(1, Date.parse(result.failed.nextAttemptAt) - Date.now()), {
          summary: holdLabels.retryWait(result.failed.reason, result.failed.outcome, result.failed.attemptNumber),
        });
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
        const after = result.status === 'throttled' ? result.after : undefined;
        const untilIso = new Date(until).toISOString();
        hold.enter({
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
          until: new Date(Date.now() + heldRecheckMs).toISOString(),
        };
        if (!patched(HELD_QUIETLY_PATCH)) {
          hold.enter(stage, 'held');
          await sleep(heldRecheckMs, { summary: holdLabels.held(stage.merchantStatus, stage.until) });
          deadline += heldRecheckMs;
          heldRecheckMs = Math.min(heldRecheckMs * 2, HELD_RECHECK_MAX_MS);
          hold.enter({ stage: 'delivering', policyRun }, 'pending');
          break;
        }
        hold.enter(stage, hold.deliveryStatus() === 'held' ? undefined : 'held');
        heldBy = result.merchantStatus;
        const heldFrom = Date.now();
        heldSince ??= heldFrom;
        const resumed = await hold.awaitMerchantResumed(heldRecheckMs, holdLabels.held(stage.merchantStatus, stage.until));
        deadline += Date.now() - heldFrom;
        const longHeld = Date.now() - heldSince >= HELD_LONG_AFTER_MS;
        heldRecheckMs = resumed ? HELD_RECHECK_FIRST_MS : longHeld ? HELD_LONG_RECHECK_MS : Math.min(heldRecheckMs * 2, HELD_RECHECK_MAX_MS);
        const { historyLength, continueAsNewSuggested } = workflowInfo();
        if (historyLength >= HELD_HISTORY_BUDGET || continueAsNewSuggested) {
          return {
            status: 'continue_as_new',
            carry: { remainingHorizonMs: deadline - Date.now(), heldRecheckMs, heldSince, heldMerchantStatus: heldBy },
          };
        }
        break;
      }
    }
  }
}
