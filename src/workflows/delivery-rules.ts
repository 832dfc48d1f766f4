/**
 * The delivery rulebook: what a webhook's delivery does next, as a pure function of what it knows, what just happened
 * and the time. The workflow (./webhook-delivery.ts) is a short loop that carries each answer out (an attempt, a wait,
 * a quarantine, the wait for a human, a decision recorded, continue-as-new, the end) and feeds back what came of it;
 * nothing here touches Temporal or the ledger, so every state and every event is a row of a table test
 * (test/unit/delivery-rules.test.ts).
 *
 *   doing                  what happened                       next
 *   (a run starts)         start                               attempt (the fast path), or the open quarantine's wait
 *   attempt                delivered                           end: delivered
 *                          already terminal                    end: delivered, or handled by another workflow
 *                          held (merchant paused, sends)       wait and re-check: 5 s doubling to 5 min, every 30 min
 *                                                              after an hour; `merchantResumed`, sent during the
 *                                                              attempt or the wait, ends the wait at once
 *                          wait (budget, an earlier webhook)   wait as long as the worker said
 *                          wait (every request in flight)      wait the worker's time, doubled per such answer in a
 *                                                              row, at most a minute
 *                          handed over (fast path full)        attempt again, at once, as the regular activity
 *                          failed, retryable (fast path)       wait its delay, then the regular activity
 *                          failed, named; horizon spent        quarantine
 *   wait                   woke                                continue as new if the run's history is long;
 *                                                              quarantine if the horizon is spent; else attempt
 *   quarantine             recorded                            wait for a human, until it is abandoned
 *   wait for a human       a decision                          record it
 *                          nobody in time                      record the abandon
 *                          the run's history is long           continue as new (the next run waits on)
 *   record                 recorded: replay                    a new policy run, on the fast path
 *                          recorded: discard, abandon          end
 *                          refused by the ledger               wait for a human again
 *
 * Time is the workflow's clock (`now`, ms) or what the worker said: each wait it asks for is a duration, never a
 * timestamp of another clock. The retry horizon runs from a policy run's first attempt; time held by a paused merchant
 * is added back.
 */
import { ABANDONED_BY, HELD_LONG_RECHECK_MS, IN_FLIGHT_WAIT_MAX_MS } from '../contracts/delivery.js';
import type { DeliverWebhookResult, QuarantineDecision, QuarantineDecisionAnswer } from '../contracts/delivery.js';
export type { DeliveringFacts, QuarantinedFacts } from '../contracts/domain.js';
import type {
  DeliveringFacts,
  DeliveryEnd,
  DeliveryFacts,
  OpenQuarantine,
  QuarantinedFacts,
} from '../contracts/domain.js';
import type { QuarantineReason } from '../contracts/failures.js';
import type { HoldStage } from '../contracts/messages.js';
import { DELIVERY_STATUS_VALUES, type DeliveryStatusValue } from '../contracts/search-attributes.js';
import type { WaitFor } from '../contracts/story.js';

/** While held, ask again after this long, doubling up to the cap. */
export const HELD_RECHECK_FIRST_MS = 5_000;
/** Five minutes: a re-enabled merchant's backlog starts draining within that, at a few events per check. */
export const HELD_RECHECK_MAX_MS = 5 * 60_000;
/** After an hour held, the hold is no blip: re-check every 30 minutes (`merchantResumed` drains it at once). */
export const HELD_LONG_AFTER_MS = 60 * 60_000;

/** A human's decision on a quarantine, or the workflow's own abandon, as the ledger is asked to record it. */
export type HumanDecision = Omit<QuarantineDecision, 'webhookId' | 'policyRun'>;

/** How a failed call ended, as the workflow read it. */
export type AttemptFailure =
  /** The fast path's attempt failed and may be tried again after `delayMs`, by the regular activity. */
  | { kind: 'retry'; attemptNumber: number; outcome: string; reason: string; delayMs: number }
  /** A named failure, or the horizon spent: quarantine. */
  | { kind: 'quarantine'; reason: QuarantineReason; detail: string; attemptNumber?: number }
  /** Anything else on the fast path (the ledger down, a crash): the regular activity takes it from here. */
  | { kind: 'hand_over' };

/** A run's start, delivering or quarantined. */
type Start = { was: 'start' };
/** What comes of an attempt or a wait: while delivering. */
export type WhileDelivering =
  | { was: 'answered'; result: DeliverWebhookResult }
  | { was: 'failed'; failure: AttemptFailure }
  | { was: 'woke'; resumed: boolean; historyLong: boolean };
/** What comes of recording a quarantine, waiting for a human and recording a decision: while quarantined. */
type WhileQuarantined =
  | { was: 'quarantined'; fourEyes: boolean; timeoutMs: number }
  | { was: 'decided'; decision: HumanDecision }
  | { was: 'timed_out' }
  | { was: 'history_long' }
  | { was: 'recorded'; answer: QuarantineDecisionAnswer };
export type Happened = Start | WhileDelivering | WhileQuarantined;

/**
 * What the delivery does next. A step that something comes of carries the facts it was decided by, of the state that
 * what comes of it is decided in (`next` takes the two together).
 */
export type Step =
  | {
      do: 'attempt';
      facts: DeliveringFacts;
      policyRun: number;
      local: boolean;
      attempt: number;
      horizonMs: number;
      reservedSlotMs?: number;
    }
  | { do: 'wait'; facts: DeliveringFacts; ms: number; until: string; for: WaitFor }
  | { do: 'quarantine'; facts: QuarantinedFacts; reason: QuarantineReason; detail: string }
  | { do: 'await_human'; facts: QuarantinedFacts; untilMs: number }
  | { do: 'record'; facts: QuarantinedFacts; decision: HumanDecision }
  | { do: 'continue_as_new' }
  | { do: 'end'; end: DeliveryEnd };

/** What the delivery says of itself once a step is chosen: the status query's stage and the DeliveryStatus. */
export interface Shown {
  stage: HoldStage;
  status: DeliveryStatusValue;
  /** The outcome of the attempt that just ended, when one did. */
  attempt?: { attemptNumber: number; outcome: string };
}

export interface Next {
  facts: DeliveryFacts;
  step: Step;
  shown: Shown;
}

/** What the rulebook decides; what the delivery shows of it follows from it (`shown`). */
type Decided = Omit<Next, 'shown'>;

/** A delivery's first run: policy run `policyRun`, nothing tried yet. */
export function firstFacts(policyRun: number, horizonMs: number, now: number, attempt = 0): DeliveringFacts {
  return { policyRun, horizonMs, leftMs: horizonMs, local: true, busy: 0, attempt, stepAt: now };
}

const WHILE_QUARANTINED: ReadonlySet<Happened['was']> = new Set<WhileQuarantined['was']>([
  'quarantined',
  'decided',
  'timed_out',
  'history_long',
  'recorded',
]);
const isWhileQuarantined = (e: WhileDelivering | WhileQuarantined): e is WhileQuarantined =>
  WHILE_QUARANTINED.has(e.was);

/**
 * What the delivery does next, given what it knows, what just happened and the time: at a run's start, delivering or
 * quarantined; what came of an attempt or a wait, delivering; what came of a quarantine's step, quarantined.
 */
export function next(known: DeliveryFacts, e: Start, now: number): Next;
export function next(known: DeliveringFacts, e: WhileDelivering, now: number): Next;
export function next(known: QuarantinedFacts, e: WhileQuarantined, now: number): Next;
export function next(known: DeliveryFacts, e: Happened, now: number): Next {
  const decided = decide(known, e, now);
  return { ...decided, shown: shown(decided, e) };
}

function decide(known: DeliveryFacts, e: Happened, now: number): Decided {
  if (e.was === 'start') {
    const f = { ...known, stepAt: now };
    return f.quarantine ? awaitHuman(f) : attempt(f);
  }
  if (known.quarantine && isWhileQuarantined(e)) return whileQuarantined({ ...known, stepAt: now }, e, now);
  if (!known.quarantine && !isWhileQuarantined(e)) {
    const elapsedMs = Math.max(0, now - known.stepAt);
    return whileDelivering({ ...known, stepAt: now }, e, elapsedMs, now);
  }
  // The signatures above take no such pair: what comes of a step is paired with the facts the step carries.
  throw new Error(`no rule for ${e.was} while ${known.quarantine ? 'quarantined' : 'delivering'}`);
}

function whileDelivering(f: DeliveringFacts, e: WhileDelivering, elapsedMs: number, now: number): Decided {
  switch (e.was) {
    case 'answered':
      return answered({ ...f, leftMs: f.leftMs - elapsedMs }, e.result, now);
    case 'failed':
      return failed({ ...f, leftMs: f.leftMs - elapsedMs }, e.failure, now);
    case 'woke': {
      const woken = f.held
        ? { ...f, held: heldAgain(f.held, e.resumed, elapsedMs) }
        : { ...f, leftMs: f.leftMs - elapsedMs };
      if (e.historyLong) return { facts: woken, step: { do: 'continue_as_new' } };
      if (woken.leftMs <= 0)
        return quarantine(woken, 'exhausted', 'retry horizon ran out while waiting for the merchant');
      return attempt(woken);
    }
  }
}

function whileQuarantined(f: QuarantinedFacts, e: WhileQuarantined, now: number): Decided {
  switch (e.was) {
    case 'quarantined': {
      const q = f.quarantine;
      const since = new Date(now).toISOString();
      return awaitHuman({ ...f, quarantine: { ...q, since, fourEyes: e.fourEyes, abandonsAt: now + e.timeoutMs } });
    }
    case 'decided':
      return { facts: f, step: { do: 'record', facts: f, decision: e.decision } };
    case 'timed_out': {
      const { since, abandonsAt } = f.quarantine;
      const reason = `no decision within ${durationText(abandonsAt - Date.parse(since))}`;
      return {
        facts: f,
        step: { do: 'record', facts: f, decision: { decision: 'abandon', by: ABANDONED_BY, reason } },
      };
    }
    case 'history_long':
      return { facts: f, step: { do: 'continue_as_new' } };
    case 'recorded':
      return recorded(f, e.answer, now);
  }
}

function attempt(f: DeliveringFacts): Decided {
  return {
    facts: f,
    step: {
      do: 'attempt',
      facts: f,
      policyRun: f.policyRun,
      local: f.local,
      attempt: f.attempt + 1,
      horizonMs: f.leftMs,
      ...(f.reservedSlotMs === undefined ? {} : { reservedSlotMs: f.reservedSlotMs }),
    },
  };
}

function answered(known: DeliveringFacts, r: DeliverWebhookResult, now: number): Decided {
  const f: DeliveringFacts = { ...known, reservedSlotMs: undefined };
  switch (r.status) {
    case 'delivered':
      return end(f, { status: 'delivered', attempts: r.attempts, policyRuns: f.policyRun });
    case 'already_terminal':
      return r.deliveryStatus === 'delivered'
        ? end(f, { status: 'delivered', attempts: r.attempts, policyRuns: f.policyRun })
        : end(f, { status: 'handled_elsewhere', deliveryStatus: r.deliveryStatus });
    case 'hand_over':
      return attempt({ ...f, local: false });
    case 'held': {
      const held =
        f.held?.by === r.merchantStatus
          ? f.held
          : { by: r.merchantStatus, heldMs: 0, recheckMs: HELD_RECHECK_FIRST_MS };
      const until = iso(now + held.recheckMs);
      const facts = { ...f, busy: 0, held };
      return { facts, step: { do: 'wait', facts, ms: held.recheckMs, until, for: { kind: 'held', by: held.by } } };
    }
    case 'wait': {
      const busy = r.why === 'in_flight' ? f.busy + 1 : 0;
      const ms = Math.max(
        1,
        r.why === 'in_flight' ? Math.min(r.waitMs * 2 ** Math.min(busy - 1, 16), IN_FLIGHT_WAIT_MAX_MS) : r.waitMs,
      );
      const until = iso(now + ms);
      const facts: DeliveringFacts = {
        ...f,
        held: undefined,
        busy,
        ...(r.reservedSlotMs === undefined ? {} : { reservedSlotMs: r.reservedSlotMs }),
      };
      return {
        facts,
        step: {
          do: 'wait',
          facts,
          ms,
          until,
          for: r.why === 'earlier' ? { kind: 'earlier', after: r.after!, lane: r.lane } : { kind: r.why, lane: r.lane },
        },
      };
    }
  }
}

function failed(known: DeliveringFacts, failure: AttemptFailure, now: number): Decided {
  const f: DeliveringFacts = { ...known, reservedSlotMs: undefined, held: undefined, busy: 0 };
  switch (failure.kind) {
    case 'hand_over':
      return attempt({ ...f, local: false });
    case 'quarantine':
      return quarantine({ ...f, attempt: failure.attemptNumber ?? f.attempt }, failure.reason, failure.detail);
    case 'retry': {
      const { reason, outcome, attemptNumber, delayMs } = failure;
      if (delayMs <= 0) return attempt({ ...f, local: false, attempt: attemptNumber });
      const until = iso(now + delayMs);
      const facts = { ...f, local: false, attempt: attemptNumber };
      return {
        facts,
        step: {
          do: 'wait',
          facts,
          ms: Math.max(1, delayMs),
          until,
          for: { kind: 'retry', reason, outcome, attempt: attemptNumber },
        },
      };
    }
  }
}

function quarantine(f: DeliveringFacts, reason: QuarantineReason, detail: string): Decided {
  // Its `since`, rule and deadline are set once the ledger has it (`quarantined`).
  const open: OpenQuarantine = { reason, detail, since: '', fourEyes: false, abandonsAt: 0 };
  const facts: QuarantinedFacts = { ...f, held: undefined, reservedSlotMs: undefined, quarantine: open };
  return { facts, step: { do: 'quarantine', facts, reason, detail } };
}

function awaitHuman(f: QuarantinedFacts): Decided {
  return { facts: f, step: { do: 'await_human', facts: f, untilMs: f.quarantine.abandonsAt } };
}

function recorded(f: QuarantinedFacts, answer: QuarantineDecisionAnswer, now: number): Decided {
  if (!answer.recorded) return awaitHuman(f);
  const { policyRun } = f;
  // The ledger's decision stands, even where another was recorded for the run first.
  switch (answer.decision) {
    case 'replay':
      return attempt(firstFacts(policyRun + 1, f.horizonMs, now, f.attempt));
    case 'discard':
      return end(f, { status: 'discarded', policyRuns: policyRun });
    case 'abandon':
      return end(f, { status: 'abandoned', policyRuns: policyRun });
  }
}

const end = (f: DeliveryFacts, ended: DeliveryEnd): Decided => ({ facts: f, step: { do: 'end', end: ended } });

/** The next re-check of a hold: at once after `merchantResumed`, else doubling, every 30 minutes after an hour. */
function heldAgain(held: NonNullable<DeliveryFacts['held']>, resumed: boolean, elapsedMs: number) {
  const heldMs = held.heldMs + elapsedMs;
  const recheckMs = resumed
    ? HELD_RECHECK_FIRST_MS
    : heldMs >= HELD_LONG_AFTER_MS
      ? HELD_LONG_RECHECK_MS
      : Math.min(held.recheckMs * 2, HELD_RECHECK_MAX_MS);
  return { ...held, heldMs, recheckMs };
}

/**
 * What the delivery says of itself once a step is chosen, the one place it is built: the stage and status follow from
 * what it knows and the step; the attempt that just ended, and who discarded it, from what happened.
 */
function shown({ facts: f, step }: Decided, e: Happened): Shown {
  const attempt =
    step.do === 'quarantine'
      ? { attemptNumber: f.attempt, outcome: step.detail }
      : e.was === 'answered' && e.result.status === 'delivered'
        ? { attemptNumber: e.result.attempts, outcome: 'delivered' }
        : e.was === 'failed' && e.failure.kind === 'retry'
          ? { attemptNumber: e.failure.attemptNumber, outcome: e.failure.outcome }
          : undefined;
  return { ...stageOf(f, step, e), ...(attempt ? { attempt } : {}) };
}

function stageOf(f: DeliveryFacts, step: Step, e: Happened): Omit<Shown, 'attempt'> {
  const { policyRun } = f;
  switch (step.do) {
    case 'wait': {
      const { for: w, until } = step;
      if (w.kind === 'held') return attempting(f);
      if (w.kind === 'retry') {
        const stage = w.reason.startsWith('Retry-After') ? 'honouring_retry_after' : 'backing_off';
        return { stage: { stage, policyRun, attempt: w.attempt, until, reason: w.reason }, status: 'pending' };
      }
      const reserved = f.reservedSlotMs !== undefined;
      const not = w.kind === 'budget' ? {} : { why: w.kind, ...(w.kind === 'earlier' ? { after: w.after } : {}) };
      return {
        stage: { stage: 'waiting_for_budget', policyRun, lane: w.lane, until, reserved, ...not },
        status: 'pending',
      };
    }
    case 'await_human':
    case 'record':
      return quarantined(step.facts);
    case 'continue_as_new':
      return f.quarantine ? quarantined(f) : attempting(f);
    case 'end':
      return ended(f, step.end, e);
    // Quarantined once the ledger says so (the next step): until then it is still delivering, and takes no decision.
    case 'quarantine':
    case 'attempt':
      return attempting(f);
  }
}

/** Delivering, or held with a re-check under way: if it finds the merchant still held, the next is due after it. */
function attempting({ policyRun, held, stepAt }: DeliveryFacts): Omit<Shown, 'attempt'> {
  if (!held) return { stage: { stage: 'delivering', policyRun }, status: 'pending' };
  return {
    stage: { stage: 'held', policyRun, merchantStatus: held.by, until: iso(stepAt + held.recheckMs) },
    status: 'held',
  };
}

function quarantined({ policyRun, quarantine: q }: QuarantinedFacts): Omit<Shown, 'attempt'> {
  return {
    stage: { stage: 'quarantined', policyRun, reason: q.reason, since: q.since, detail: q.detail },
    status: 'quarantined',
  };
}

function ended(f: DeliveryFacts, end: DeliveryEnd, e: Happened): Omit<Shown, 'attempt'> {
  switch (end.status) {
    case 'delivered':
      return { stage: { stage: 'delivered', attempts: end.attempts ?? 0 }, status: 'delivered' };
    case 'handled_elsewhere': {
      const { deliveryStatus: s } = end;
      const status = (DELIVERY_STATUS_VALUES as readonly string[]).includes(s) ? (s as DeliveryStatusValue) : 'none';
      return { stage: { stage: 'not_released', status: `delivery ${s} by another workflow` }, status };
    }
    case 'discarded': {
      // Only the ledger's recorded discard ends a delivery discarded.
      if (e.was !== 'recorded' || !e.answer.recorded) throw new Error(`discarded by ${e.was}`);
      return { stage: { stage: 'discarded', by: e.answer.by, reason: e.answer.reason }, status: 'discarded' };
    }
    case 'abandoned': {
      const { reason, since } = f.quarantine!;
      return { stage: { stage: 'abandoned', reason, since }, status: 'abandoned' };
    }
  }
}

const iso = (ms: number) => new Date(ms).toISOString();

/** 14 days, 12 hours, 30 minutes, 2 seconds: the largest whole unit. */
function durationText(ms: number): string {
  const units: [string, number][] = [
    ['day', 86_400_000],
    ['hour', 3_600_000],
    ['minute', 60_000],
    ['second', 1_000],
  ];
  const [unit, size] = units.find(([, s]) => ms >= s) ?? units[units.length - 1]!;
  const n = Math.round(ms / size);
  return `${n} ${unit}${n === 1 ? '' : 's'}`;
}
