/**
 * One webhook, from its first attempt to an end (a hold's release, a processor event, a resend): a short loop that
 * carries out what the delivery rulebook (./delivery-rules.ts) says comes next and tells it what came of it, and the
 * state it holds between steps (`DeliveryState`: what it shows, and the decisions its message handlers take).
 *
 * The attempt contract: a call of `deliverWebhook` is one HTTP attempt at most and ends with an answer
 * (`DeliverWebhookResult`) or a typed failure, which Temporal's retry policy (./activity-profiles.ts) retries
 * (`WebhookAttemptFailed`, after the activity's `nextRetryDelay`) within the horizon or stops on (the named ones). A
 * policy run's first call is the fast path, a local activity; its retryable failure is waited out here.
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
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { TemporalFailure } from '@temporalio/common';
import type { Activities } from '../activities/index.js';
import type { AttemptFailedDetails } from '../contracts/delivery.js';
import type { DeliveryEnd, DeliveryFacts, DeliveryResume, ReleasedAndTried } from '../contracts/domain.js';
import { DELIVERY_FAILURE_TYPES, RETRYABLE_DELIVERY_FAILURE } from '../contracts/failures.js';
import {
  approveReplaySignal,
  approveReplayUpdate,
  discardSignal,
  discardUpdate,
  merchantResumedSignal,
  parseDecision,
  payloadShape,
  statusQuery,
  type DecisionAnswer,
  type DecisionKind,
  type HoldStage,
  type HoldStatus,
  type IgnoredSignal,
  type PayloadShape,
} from '../contracts/messages.js';
import { deliveryStatusUpdate, type DeliveryStatusValue } from '../contracts/search-attributes.js';
import { holdCurrentDetails, holdLabels } from '../contracts/story.js';
import { ledgerActivity, webhookActivity, webhookLocalActivity } from './activity-profiles.js';
import {
  firstFacts,
  next,
  type AttemptFailure,
  type HumanDecision,
  type Shown,
  type Step,
  type WhileDelivering,
} from './delivery-rules.js';
import { runHistoryIsLong } from './history-budget.js';

/** Ignored decisions kept and shown (more would only lengthen every answer), and carried into the next run. */
const KEPT_IGNORED = 50;
/** Characters of text an ignored decision keeps, all its fields together: its own words, never its caller's. */
export const IGNORED_ENTRY_TEXT = 200;
/**
 * Bytes of JSON a run carries into its next (the delivery part of its continue-as-new input), at most: the oldest
 * ignored decisions are dropped first. The server refuses an input past 2 MB and ends the run, leaving its quarantine
 * with no workflow to decide it.
 */
export const CARRIED_STATE_BYTES = 16 * 1024;
/** Bytes of JSON of the `status` answer, at most: the oldest ignored decisions are dropped first (gRPC stops at 4 MB). */
export const STATUS_ANSWER_BYTES = 64 * 1024;

interface Delivery {
  webhookId: string;
  /** The policy run a delivery's first run starts at (1; a resend's run), and the policy's retry horizon. */
  policyRun: number;
  retryHorizonMs: number;
  /** Fields every log line of this delivery carries. */
  ctx: Record<string, string>;
  continueAs: (resume: DeliveryResume) => Promise<never>;
  /**
   * What came of the first step's attempt, made before the loop as the run began (a hold's, with its release:
   * `triedFirst`): every `merchantResumed` counted by now was sent during it.
   */
  first?: WhileDelivering;
}

/** The webhook's policy runs and quarantines, until delivered, discarded, abandoned, or owned by another workflow. */
export async function deliverUntilDecided(d: Delivery, state: DeliveryState): Promise<DeliveryEnd> {
  const { webhookId, ctx } = d;
  let decided = next(
    state.resumed?.facts ?? firstFacts(d.policyRun, d.retryHorizonMs, Date.now()),
    { was: 'start' },
    Date.now(),
  );
  /** `merchantResumed` signals counted when the last attempt started: one sent during it ends the held wait after it. */
  let resumesAtAttempt = d.first ? 0 : state.resumes;
  let first = d.first;
  for (;;) {
    // What comes of a step is decided from the facts it carries: each case pairs them with what came of it.
    const { facts, step } = decided;
    state.show(decided.shown);
    switch (step.do) {
      case 'attempt':
        if (first) {
          decided = next(step.facts, first, Date.now());
          first = undefined;
          break;
        }
        resumesAtAttempt = state.resumes;
        decided = next(step.facts, await attempt(webhookId, step), Date.now());
        break;
      case 'wait': {
        // A history without the patch's marker (1.0.0's) counts only a resume sent during the wait: one sent during
        // the attempt leaves its wait to the timer, so it replays as it ran.
        const since =
          step.for.kind === 'held' && state.resumes > resumesAtAttempt && !patched(RESUME_DURING_ATTEMPT)
            ? state.resumes
            : resumesAtAttempt;
        const summary = holdLabels.wait(step.for, step.until);
        const resumed = await condition(() => step.for.kind === 'held' && state.resumes > since, step.ms, { summary });
        decided = next(step.facts, { was: 'woke', resumed, historyLong: runHistoryIsLong() }, Date.now());
        break;
      }
      case 'quarantine': {
        const { reason, detail } = step;
        const { fourEyes, decideWithinMs } = await ledger(holdLabels.quarantine(webhookId, reason)).quarantineDelivery({
          webhookId,
          reason,
          detail,
        });
        log.warn('webhook quarantined: waiting for a human', { ...ctx, webhookId, reason, policyRun: facts.policyRun });
        decided = next(step.facts, { was: 'quarantined', fourEyes, timeoutMs: decideWithinMs }, Date.now());
        break;
      }
      case 'await_human': {
        state.awaitDecision(facts.policyRun, step.facts.quarantine.fourEyes);
        const summary = holdLabels.human(new Date(step.untilMs).toISOString());
        const timeoutMs = Math.max(1, step.untilMs - Date.now());
        // A decision taken in the same task as the timeout wins over it.
        await condition(() => state.open !== undefined || runHistoryIsLong(), timeoutMs, { summary });
        decided = next(
          step.facts,
          state.open
            ? { was: 'decided', decision: state.open }
            : runHistoryIsLong()
              ? { was: 'history_long' }
              : { was: 'timed_out' },
          Date.now(),
        );
        break;
      }
      case 'record': {
        // The abandon too is taken before it is recorded: nothing decided meanwhile is taken, then dropped.
        const { decision } = step;
        state.take(decision);
        const answer = await ledger(holdLabels.decision(webhookId, decision.decision)).decideQuarantine({
          webhookId,
          policyRun: facts.policyRun,
          ...decision,
        });
        decided = next(step.facts, { was: 'recorded', answer }, Date.now());
        const why = !answer.recorded
          ? answer.why
          : answer.decision === decision.decision
            ? ''
            : `the ledger holds a ${answer.decision} by ${answer.by} for policy run ${facts.policyRun}`;
        state.answer(decision, why, decided.shown.stage.stage);
        log.info(why ? 'decision not recorded' : 'quarantine decided', { ...ctx, webhookId, ...decision, why });
        break;
      }
      case 'continue_as_new':
      case 'end':
        // Every handler's work is the loop's: none is left running when the run ends or continues.
        state.close();
        await condition(allHandlersFinished);
        if (step.do === 'continue_as_new') return d.continueAs(state.carry(facts));
        if (step.end.status === 'delivered') log.info('webhook delivered', { ...ctx, webhookId, ...step.end });
        return step.end;
    }
  }
}

/** The patch that ends a held wait for a `merchantResumed` sent during the attempt before it. */
const RESUME_DURING_ATTEMPT = 'resume-during-attempt';
/** The patch that takes a decision in the first task of a run continued from a quarantine. */
const DECIDED_AS_IT_CONTINUES = 'decided-as-it-continues';

/** Ledger activities with their label on the timeline (user metadata: a summary per call). */
const ledger = (summary: string) => proxyActivities<Activities>({ ...ledgerActivity, summary });

/** One call of `deliverWebhook`, on the fast path or as the regular activity, and how it ended. */
async function attempt(webhookId: string, step: Extract<Step, { do: 'attempt' }>): Promise<WhileDelivering> {
  const { local, policyRun, reservedSlotMs } = step;
  const summary = (local ? holdLabels.deliver : holdLabels.deliverWithRetries)(webhookId, step.attempt);
  try {
    const { deliverWebhook } = local
      ? proxyLocalActivities<Activities>({ ...webhookLocalActivity, summary })
      : proxyActivities<Activities>({ ...webhookActivity(step.horizonMs), summary });
    return { was: 'answered', result: await deliverWebhook({ webhookId, policyRun, reservedSlotMs }) };
  } catch (err) {
    return { was: 'failed', failure: attemptEndOf(err, local) };
  }
}

/**
 * What came of a hold's first attempt, made in its release's local activity (`ReleasedAndTried`): read as the fast
 * path's call is read.
 */
export function triedFirst(tried: NonNullable<ReleasedAndTried['firstAttempt']>): WhileDelivering {
  if ('answered' in tried) return { was: 'answered', result: tried.answered };
  return { was: 'failed', failure: failureOf(tried.failed, true) };
}

/** How a failed call ended, by the failure it reached the workflow as. */
function attemptEndOf(err: unknown, local: boolean): AttemptFailure {
  if (!(err instanceof (local ? TemporalFailure : ActivityFailure))) throw err;
  // A local activity's failure reaches the workflow as the ApplicationFailure itself, a regular one's as its cause.
  const failure = err instanceof ActivityFailure ? (err.cause ?? err) : (err as TemporalFailure);
  const app = failure instanceof ApplicationFailure ? failure : undefined;
  const details = app?.details?.[0] as AttemptFailedDetails | undefined;
  return failureOf({ type: app?.type ?? '', message: failure.message, details }, local);
}

/** The one mapping from a failed call to what the delivery does next. */
function failureOf(
  { type, message: detail, details }: { type: string; message: string; details?: AttemptFailedDetails },
  local: boolean,
): AttemptFailure {
  if (Object.hasOwn(DELIVERY_FAILURE_TYPES, type)) {
    const reason = DELIVERY_FAILURE_TYPES[type as keyof typeof DELIVERY_FAILURE_TYPES];
    return { kind: 'quarantine', reason, detail, attemptNumber: details?.attemptNumber };
  }
  // The horizon spent (retry state TIMEOUT), or a failure the policy does not name (a bug): wait for a human.
  if (!local) return { kind: 'quarantine', reason: 'exhausted', detail, attemptNumber: details?.attemptNumber };
  if (type === RETRYABLE_DELIVERY_FAILURE && details) return { kind: 'retry', ...details };
  log.warn('delivery fast path failed unexpectedly: retrying as a regular activity', { error: detail });
  return { kind: 'hand_over' };
}

/**
 * Everything a delivery workflow holds between its steps, and every way it changes: what it says of its webhook (the
 * stage the `status` query and the Web UI's current details answer with, the `DeliveryStatus` search attribute
 * operators filter on, the last attempt, the decisions that did not apply) and the inbox its message handlers leave
 * decisions in for the loop. It presents what the rulebook (./delivery-rules.ts) decided and decides nothing: one
 * synchronous rule (`judge`) takes a decision or refuses it; a refused Update never enters history, a refused signal is
 * kept with why and its payload's shape, never its text. A taken decision waits for the loop, which records it (the
 * ledger has the last word) and answers it: the handlers run nothing themselves, so no handler's work outlives the run.
 */
export class DeliveryState {
  private stage: HoldStage;
  private status: DeliveryStatusValue;
  private lastAttempt: HoldStatus['lastAttempt'];
  private readonly ignoredSignals: IgnoredSignal[];
  /** The quarantined run a decision is taken for now, and its rule; undefined: not waiting for a human. */
  private waitingFor: { policyRun: number; fourEyes: boolean } | undefined;
  /** A taken decision, until the loop has recorded or refused it. */
  open: HumanDecision | undefined;
  /** The loop is ending the run (or continuing it as new): nothing more is taken in it. */
  private closing = false;
  /** `merchantResumed` signals taken: a count, so one sent while an attempt runs is not lost when the wait begins. */
  resumes = 0;
  /**
   * Decisions taken by signal, with what their payload was: one the ledger refuses is kept in the status, since no
   * caller waits for the answer.
   */
  private readonly signalled = new WeakMap<HumanDecision, PayloadShape>();
  private readonly answers = new WeakMap<HumanDecision, { why: string; stage: string }>();

  /**
   * `initial`: the stage before the first step (`releasing` for a hold; a continued run: where it stood); `resumed`:
   * what a continued run carries in (`carry`), the facts its loop starts from and the story it goes on telling.
   */
  constructor(
    readonly subjectId: string,
    initial: HoldStage,
    readonly resumed?: DeliveryResume,
  ) {
    this.stage = initial;
    this.status = resumed?.deliveryStatus ?? 'pending';
    this.lastAttempt = resumed?.lastAttempt;
    this.ignoredSignals = (resumed?.ignoredSignals ?? []).slice(-KEPT_IGNORED).map(bounded);
    // A run continued from a quarantine waits for its decision from the moment its handlers are set: a signal sent as
    // the last run ended comes in this run's first task and is judged before the loop starts. A history without the
    // patch's marker (1.0.0's) refused it there.
    const quarantine = resumed?.facts.quarantine;
    if (quarantine && patched(DECIDED_AS_IT_CONTINUES)) {
      this.stage = next(resumed.facts, { was: 'start' }, Date.now()).shown.stage;
      this.awaitDecision(resumed.facts.policyRun, quarantine.fourEyes);
    }
    this.publish();
  }

  /**
   * The messages a delivery workflow answers: `status`, the decisions on a quarantine (`approveReplay`, `discard`, as
   * signals and as Updates) and `merchantResumed`. Registered before the first step (a hold's release runs before the
   * delivery).
   */
  registerHandlers(): this {
    setHandler(statusQuery, () => this.current);
    setHandler(approveReplaySignal, (payload) => this.bySignal('approveReplay', payload));
    setHandler(discardSignal, (payload) => this.bySignal('discard', payload));
    setHandler(approveReplayUpdate, (payload) => this.byUpdate('approveReplay', payload), {
      validator: (payload) => this.validate('approveReplay', payload),
    });
    setHandler(discardUpdate, (payload) => this.byUpdate('discard', payload), {
      validator: (payload) => this.validate('discard', payload),
    });
    setHandler(merchantResumedSignal, () => {
      this.resumes += 1;
    });
    return this;
  }

  /** The `status` query's answer. */
  get current(): HoldStatus {
    return newestWithin(STATUS_ANSWER_BYTES, this.ignoredSignals, (ignoredSignals) => ({
      ...this.stage,
      lastAttempt: this.lastAttempt,
      ignoredSignals,
    }));
  }

  /** Shows what the rulebook decided; the search attribute changes only when the status does. */
  show({ stage, status, attempt }: Shown): void {
    this.stage = stage;
    if (attempt) this.lastAttempt = { ...attempt, at: new Date().toISOString() };
    if (status !== this.status) {
      this.status = status;
      upsertSearchAttributes(deliveryStatusUpdate(status));
    }
    this.publish();
  }

  /** The loop takes `decision` (its own abandon too) before recording it: no other is taken meanwhile. */
  take(decision: HumanDecision): void {
    this.open = decision;
  }

  /** The loop waits for a human's decision on `policyRun`'s quarantine: from now one is taken. */
  awaitDecision(policyRun: number, fourEyes: boolean): void {
    this.waitingFor = { policyRun, fourEyes };
  }

  /**
   * The loop's word on the open decision once the ledger answered (why it did not apply, if it did not) and the stage
   * it moved to: the Update waiting for it answers, a refused signal is kept with why, and no decision is taken until
   * the loop waits for one again.
   */
  answer(decision: HumanDecision, why: string, stage: string): void {
    this.answers.set(decision, { why, stage });
    if (this.open === decision) this.open = undefined;
    const signal = decision.decision === 'replay' ? 'approveReplay' : 'discard';
    if (why && this.signalled.has(decision)) this.ignore({ signal, payload: this.signalled.get(decision), why });
    this.waitingFor = undefined;
  }

  /** The run is ending (or continuing as new): nothing more is taken in it. */
  close(): void {
    this.closing = true;
  }

  /** What the next run needs to go on deciding and telling the same story (the continue-as-new input's delivery). */
  carry(facts: DeliveryFacts): DeliveryResume {
    return newestWithin(CARRIED_STATE_BYTES, this.ignoredSignals, (ignoredSignals) => ({
      facts,
      deliveryStatus: this.status,
      lastAttempt: this.lastAttempt,
      ignoredSignals,
    }));
  }

  /** The one rule for a decision, by signal, Update or validator: taken for the quarantine waiting now, or why not. */
  private judge(
    kind: DecisionKind,
    payload: unknown,
  ): { ok: true; run: number; decision: HumanDecision } | { ok: false; why: string } {
    const parsed = parseDecision(kind, payload);
    if (!parsed.ok) return parsed;
    const { value } = parsed;
    const waiting = this.waitingFor;
    if (!waiting || this.closing) return { ok: false, why: `not waiting for a decision (stage ${this.stage.stage})` };
    if (this.open) return { ok: false, why: `already decided: ${this.open.decision} by ${this.open.by}` };
    if (value.policyRun !== undefined && value.policyRun !== waiting.policyRun) {
      const why = `stale: for policy run ${value.policyRun}, but the quarantine is policy run ${waiting.policyRun}`;
      return { ok: false, why };
    }
    const { reason, decisionId } = value;
    if (!('approvedBy' in value))
      return { ok: true, run: waiting.policyRun, decision: { decision: 'discard', by: value.by, reason, decisionId } };
    if (waiting.fourEyes && value.replayRequestId === undefined) return { ok: false, why: FOUR_EYES_WHY };
    const { approvedBy: by, ticket, replayRequestId } = value;
    return {
      ok: true,
      run: waiting.policyRun,
      decision: { decision: 'replay', by, reason, ticket, decisionId, replayRequestId },
    };
  }

  private bySignal(kind: DecisionKind, payload: unknown): void {
    const verdict = this.judge(kind, payload);
    const shape = payloadShape(payload);
    if (verdict.ok) {
      this.open = verdict.decision;
      this.signalled.set(verdict.decision, shape);
      return;
    }
    this.ignore({ signal: kind, payload: shape, why: verdict.why });
    log.warn('signal ignored', { signal: kind, payload: shape, why: verdict.why, holdId: this.subjectId });
  }

  private async byUpdate(kind: DecisionKind, payload: unknown): Promise<DecisionAnswer> {
    const verdict = this.judge(kind, payload);
    if (!verdict.ok) throw refused(verdict.why);
    this.open = verdict.decision;
    const decision = verdict.decision;
    await condition(() => this.answers.has(decision));
    const { why, stage } = this.answers.get(decision)!;
    if (why) throw refused(why);
    return {
      decision: decision.decision as DecisionAnswer['decision'],
      policyRun: verdict.run,
      stage: stage as DecisionAnswer['stage'],
    };
  }

  private validate(kind: DecisionKind, payload: unknown): void {
    const verdict = this.judge(kind, payload);
    if (!verdict.ok) throw new Error(verdict.why);
  }

  /** A decision that did not apply, kept with why. */
  private ignore(ignored: Omit<IgnoredSignal, 'at' | 'stage'>): void {
    this.ignoredSignals.push(bounded({ ...ignored, at: new Date().toISOString(), stage: this.stage.stage }));
    this.ignoredSignals.splice(0, Math.max(0, this.ignoredSignals.length - KEPT_IGNORED));
    this.publish();
  }

  private publish(): void {
    setCurrentDetails(holdCurrentDetails(this.current));
  }
}

const FOUR_EYES_WHY =
  'four eyes: an approval needs a replay request approved by a second person ' +
  '(npm run ops -- replay preview --webhook <id> --requested-by <you>, then replay approve <request id> --by <someone else>)';

const refused = (why: string) =>
  ApplicationFailure.create({ type: 'DecisionRefused', message: why, nonRetryable: true });

/**
 * An ignored decision as it is kept: its own fields only (an entry carried from a run that kept its caller's `by`,
 * `reason` or a quoted payload loses them), and `why` cut (ending in …) to what the text allowance leaves.
 */
function bounded({ signal, payload, at, stage, why }: IgnoredSignal): IgnoredSignal {
  const shape = payload ? { payload: { type: payload.type, bytes: payload.bytes } } : {};
  const left = IGNORED_ENTRY_TEXT - signal.length - at.length - stage.length - (payload?.type.length ?? 0);
  return { signal, ...shape, at, stage, why: why.length <= left ? why : `${why.slice(0, Math.max(0, left - 1))}…` };
}

/** `build` of the newest entries whose JSON fits in `bytes` (all of them if they fit; none if nothing else fits). */
function newestWithin<T>(bytes: number, entries: readonly IgnoredSignal[], build: (kept: IgnoredSignal[]) => T): T {
  const size = (value: unknown) => new TextEncoder().encode(JSON.stringify(value)).length;
  let kept = [...entries];
  let whole = build(kept);
  while (kept.length > 0 && size(whole) > bytes) {
    kept = kept.slice(1);
    whole = build(kept);
  }
  return whole;
}
