/**
 * The delivery rulebook (src/workflows/delivery-rules.ts) as a table: for each state and each thing that can happen,
 * what comes next and what the delivery says of itself. No server, no clock but the one each row gives.
 */
import { describe, expect, it } from 'vitest';
import { ABANDONED_BY, HELD_LONG_RECHECK_MS, IN_FLIGHT_WAIT_MAX_MS } from '../../src/contracts/delivery.js';
import type { DeliveryFacts } from '../../src/contracts/domain.js';
import {
  firstFacts,
  HELD_RECHECK_FIRST_MS,
  HELD_RECHECK_MAX_MS,
  next as nextOfPair,
  type Happened,
  type HumanDecision,
  type Next,
} from '../../src/workflows/delivery-rules.js';

/** The rulebook over any facts and event: the table holds pairs of each kind (delivery-rules-types.test.ts: the pairs). */
const next = nextOfPair as (known: DeliveryFacts, e: Happened, now: number) => Next;

const T = Date.parse('2026-12-03T12:00:00Z');
const HOUR = 3_600_000;
const start = firstFacts(1, 72 * HOUR, T);
const held = (
  f: DeliveryFacts,
  by: 'paused' | 'disabled' | 'sends_paused',
  heldMs = 0,
  recheckMs = HELD_RECHECK_FIRST_MS,
): DeliveryFacts => ({ ...f, held: { by, heldMs, recheckMs } });
const quarantined = (f: DeliveryFacts, fourEyes = false): DeliveryFacts => ({
  ...f,
  quarantine: {
    reason: 'rejected',
    detail: 'HTTP 400',
    since: '2026-12-03T12:00:00.000Z',
    fourEyes,
    abandonsAt: T + 14 * 24 * HOUR,
  },
});
const discard: HumanDecision = {
  decision: 'discard',
  by: 'bob',
  reason: 'duplicate',
  decisionId: `dc_${'b'.repeat(32)}`,
};
const replay: HumanDecision = { decision: 'replay', by: 'alice', reason: 'fixed', replayRequestId: 'rr_1' };

interface Row {
  what: string;
  facts: DeliveryFacts;
  happened: Happened;
  /** Milliseconds after the step began. */
  after?: number;
  step: Record<string, unknown>;
  stage?: Record<string, unknown>;
  status?: string;
}

const rows: Row[] = [
  // A run begins.
  {
    what: 'a first run attempts on the fast path',
    facts: start,
    happened: { was: 'start' },
    step: { do: 'attempt', local: true, attempt: 1, horizonMs: 72 * HOUR },
    stage: { stage: 'delivering' },
    status: 'pending',
  },
  {
    what: 'a run continued in quarantine waits for a human again',
    facts: quarantined(start),
    happened: { was: 'start' },
    step: { do: 'await_human', untilMs: T + 14 * 24 * HOUR },
    stage: { stage: 'quarantined', reason: 'rejected' },
    status: 'quarantined',
  },
  {
    what: 'a run continued while held re-checks, still held',
    facts: held(start, 'paused'),
    happened: { was: 'start' },
    step: { do: 'attempt' },
    stage: { stage: 'held', merchantStatus: 'paused' },
    status: 'held',
  },
  // An attempt answers.
  {
    what: 'delivered: the end',
    facts: start,
    happened: { was: 'answered', result: { status: 'delivered', attempts: 1, statusCode: 200 } },
    step: { do: 'end', end: { status: 'delivered', attempts: 1, policyRuns: 1 } },
    stage: { stage: 'delivered', attempts: 1 },
    status: 'delivered',
  },
  {
    what: 'already delivered elsewhere: delivered',
    facts: start,
    happened: { was: 'answered', result: { status: 'already_terminal', deliveryStatus: 'delivered', attempts: 3 } },
    step: { do: 'end', end: { status: 'delivered', attempts: 3, policyRuns: 1 } },
    status: 'delivered',
  },
  {
    what: 'already quarantined by another workflow: handled elsewhere, its status shown',
    facts: start,
    happened: { was: 'answered', result: { status: 'already_terminal', deliveryStatus: 'quarantined', attempts: 1 } },
    step: { do: 'end', end: { status: 'handled_elsewhere', deliveryStatus: 'quarantined' } },
    stage: { stage: 'not_released' },
    status: 'quarantined',
  },
  {
    what: 'held: the first re-check after 5 s, merchantResumed ends it',
    facts: start,
    happened: { was: 'answered', result: { status: 'held', merchantStatus: 'paused' } },
    step: { do: 'wait', ms: HELD_RECHECK_FIRST_MS, for: { kind: 'held', by: 'paused' } },
    stage: { stage: 'held' },
    status: 'held',
  },
  {
    what: 'held again after a wait: the next re-check doubles',
    facts: held(start, 'paused', 5_000, 5_000),
    happened: { was: 'woke', resumed: false, historyLong: false },
    after: 5_000,
    step: { do: 'attempt' },
    // While it re-checks, the status says when the next re-check is due should the merchant still be held.
    stage: { stage: 'held', until: new Date(T + 5_000 + 10_000).toISOString() },
    status: 'held',
  },
  {
    what: 'a budget wait: as long as the worker said, no queue place',
    facts: start,
    happened: { was: 'answered', result: { status: 'wait', why: 'budget', lane: 'first', waitMs: 4_000 } },
    step: { do: 'wait', ms: 4_000, for: { kind: 'budget', lane: 'first' } },
    stage: { stage: 'waiting_for_budget', reserved: false },
    status: 'pending',
  },
  {
    what: 'a reserved slot: waited for, then claimed by the next attempt',
    facts: start,
    happened: {
      was: 'answered',
      result: { status: 'wait', why: 'budget', lane: 'first', waitMs: 4_000, reservedSlotMs: 123 },
    },
    step: { do: 'wait', ms: 4_000 },
    stage: { stage: 'waiting_for_budget', reserved: true },
  },
  {
    what: 'an earlier webhook of the hold goes first',
    facts: start,
    happened: {
      was: 'answered',
      result: { status: 'wait', why: 'earlier', lane: 'first', waitMs: 1_000, after: 'wh_1' },
    },
    step: { do: 'wait', ms: 1_000, for: { kind: 'earlier', after: 'wh_1' } },
    stage: { stage: 'waiting_for_budget', why: 'earlier', after: 'wh_1' },
  },
  {
    what: 'every request in flight taken, the first time: the worker’s wait',
    facts: start,
    happened: { was: 'answered', result: { status: 'wait', why: 'in_flight', lane: 'first', waitMs: 1_500 } },
    step: { do: 'wait', ms: 1_500, for: { kind: 'in_flight' } },
    stage: { stage: 'waiting_for_budget', why: 'in_flight' },
  },
  {
    what: 'in flight taken the fourth time in a row: backed off x8',
    facts: { ...start, busy: 3 },
    happened: { was: 'answered', result: { status: 'wait', why: 'in_flight', lane: 'first', waitMs: 1_500 } },
    step: { do: 'wait', ms: 12_000 },
  },
  {
    what: 'in flight taken for the twentieth time: at most a minute',
    facts: { ...start, busy: 19 },
    happened: { was: 'answered', result: { status: 'wait', why: 'in_flight', lane: 'first', waitMs: 1_500 } },
    step: { do: 'wait', ms: IN_FLIGHT_WAIT_MAX_MS },
  },
  {
    what: 'the fast path full on this worker: the regular activity at once',
    facts: start,
    happened: { was: 'answered', result: { status: 'hand_over' } },
    step: { do: 'attempt', local: false, attempt: 1 },
  },
  // An attempt fails.
  {
    what: 'the fast path failed retryably: its delay waited out, then the regular activity',
    facts: start,
    happened: {
      was: 'failed',
      failure: { kind: 'retry', attemptNumber: 1, outcome: 'HTTP 503', reason: 'backoff attempt 1', delayMs: 5_000 },
    },
    step: { do: 'wait', ms: 5_000, for: { kind: 'retry', attempt: 1 } },
    stage: { stage: 'backing_off', attempt: 1 },
    status: 'pending',
  },
  {
    what: 'a 429 with Retry-After: honoured',
    facts: start,
    happened: {
      was: 'failed',
      failure: { kind: 'retry', attemptNumber: 1, outcome: 'HTTP 429', reason: 'Retry-After 120 s', delayMs: 120_000 },
    },
    step: { do: 'wait', ms: 120_000 },
    stage: { stage: 'honouring_retry_after' },
  },
  {
    what: 'a retry due at once: the regular activity, no timer',
    facts: start,
    happened: {
      was: 'failed',
      failure: { kind: 'retry', attemptNumber: 1, outcome: 'HTTP 503', reason: 'backoff', delayMs: 0 },
    },
    step: { do: 'attempt', local: false, attempt: 2 },
  },
  {
    what: 'a named failure: quarantine, still delivering until the ledger has it',
    facts: start,
    happened: {
      was: 'failed',
      failure: { kind: 'quarantine', reason: 'rejected', detail: 'HTTP 400', attemptNumber: 1 },
    },
    step: { do: 'quarantine', reason: 'rejected', detail: 'HTTP 400' },
    stage: { stage: 'delivering' },
    status: 'pending',
  },
  {
    what: 'anything unexpected on the fast path: handed over',
    facts: start,
    happened: { was: 'failed', failure: { kind: 'hand_over' } },
    step: { do: 'attempt', local: false },
  },
  // A wait ends.
  {
    what: 'woke with horizon left: attempt',
    facts: start,
    happened: { was: 'woke', resumed: false, historyLong: false },
    after: 60_000,
    step: { do: 'attempt', horizonMs: 72 * HOUR - 60_000 },
  },
  {
    what: 'woke past the horizon: quarantined as exhausted',
    facts: { ...start, leftMs: 30_000 },
    happened: { was: 'woke', resumed: false, historyLong: false },
    after: 60_000,
    step: { do: 'quarantine', reason: 'exhausted' },
  },
  {
    what: 'woke with the run’s history long: continue as new',
    facts: start,
    happened: { was: 'woke', resumed: false, historyLong: true },
    after: 1_000,
    step: { do: 'continue_as_new' },
  },
  {
    what: 'a held wait does not spend the horizon',
    facts: held({ ...start, leftMs: 1_000 }, 'disabled'),
    happened: { was: 'woke', resumed: false, historyLong: false },
    after: 5 * HOUR,
    step: { do: 'attempt', horizonMs: 1_000 },
  },
  // The quarantine and the wait for a human.
  {
    what: 'recorded as quarantined: wait for a human until the timeout',
    facts: quarantined(start),
    happened: { was: 'quarantined', fourEyes: true, timeoutMs: 14 * 24 * HOUR },
    step: { do: 'await_human', untilMs: T + 14 * 24 * HOUR },
    stage: { stage: 'quarantined', since: new Date(T).toISOString() },
    status: 'quarantined',
  },
  {
    what: 'a discard: record it',
    facts: quarantined(start),
    happened: { was: 'decided', decision: discard },
    step: { do: 'record', decision: discard },
    status: 'quarantined',
  },
  {
    what: 'an approval: record it (the ledger, not the rulebook, checks the request behind it)',
    facts: quarantined(start, true),
    happened: { was: 'decided', decision: replay },
    step: { do: 'record', decision: replay },
    status: 'quarantined',
  },
  {
    what: 'nobody in time: record the abandon',
    facts: quarantined(start),
    happened: { was: 'timed_out' },
    step: { do: 'record', decision: { decision: 'abandon', by: ABANDONED_BY, reason: 'no decision within 14 days' } },
  },
  {
    what: 'the wait’s history long: continue as new',
    facts: quarantined(start),
    happened: { was: 'history_long' },
    step: { do: 'continue_as_new' },
    status: 'quarantined',
  },
  // The ledger's answer.
  {
    what: 'a discard recorded: the end, as the ledger says',
    facts: quarantined(start),
    happened: { was: 'recorded', answer: { recorded: true, decision: 'discard', by: 'bob (verified)', reason: 'dup' } },
    step: { do: 'end', end: { status: 'discarded', policyRuns: 1 } },
    stage: { stage: 'discarded', by: 'bob (verified)', reason: 'dup' },
    status: 'discarded',
  },
  {
    what: 'a replay recorded: a new policy run, fresh horizon, the fast path',
    facts: quarantined({ ...start, leftMs: 0, local: false, attempt: 4 }),
    happened: { was: 'recorded', answer: { recorded: true, decision: 'replay', by: 'alice', reason: 'fixed' } },
    step: { do: 'attempt', local: true, attempt: 5, horizonMs: 72 * HOUR },
    stage: { stage: 'delivering', policyRun: 2 },
    status: 'pending',
  },
  {
    what: 'an abandon recorded: the end',
    facts: quarantined(start),
    happened: {
      was: 'recorded',
      answer: { recorded: true, decision: 'abandon', by: ABANDONED_BY, reason: 'x' },
    },
    step: { do: 'end', end: { status: 'abandoned', policyRuns: 1 } },
    status: 'abandoned',
  },
  {
    what: 'the abandon asked, a discard recorded first: the ledger’s decision stands',
    facts: quarantined(start),
    happened: { was: 'recorded', answer: { recorded: true, decision: 'discard', by: 'bob', reason: 'dup' } },
    step: { do: 'end', end: { status: 'discarded', policyRuns: 1 } },
    status: 'discarded',
  },
  {
    what: 'refused by the ledger: wait for a human again, same deadline',
    facts: quarantined(start),
    happened: {
      was: 'recorded',
      answer: { recorded: false, why: 'decision dc_… is for webhook wh_B, not wh_C' },
    },
    step: { do: 'await_human', untilMs: T + 14 * 24 * HOUR },
    status: 'quarantined',
  },
];

describe('the delivery rulebook', () => {
  it.each(rows)('$what', ({ facts, happened, after = 0, step, stage, status }) => {
    const decided = next(facts, happened, facts.stepAt + after);
    expect(decided.step).toMatchObject(step);
    if (stage) expect(decided.shown.stage).toMatchObject(stage);
    if (status) expect(decided.shown.status).toBe(status);
  });

  it('a held merchant’s re-checks: 5 s doubling to 5 minutes, every 30 minutes after an hour, at once after merchantResumed', () => {
    let f = held(start, 'paused');
    const waits: number[] = [];
    let now = T;
    // 5 + 10 + … + 160 s, then 5 minutes apart: the hour is reached at the 17th wait.
    for (let i = 0; i < 18; i++) {
      const asked = next(f, { was: 'answered', result: { status: 'held', merchantStatus: 'paused' } }, now);
      const step = asked.step as { ms: number };
      waits.push(step.ms);
      now += step.ms;
      f = next(asked.facts, { was: 'woke', resumed: false, historyLong: false }, now).facts;
    }
    expect(waits.slice(0, 8)).toEqual([
      5_000,
      10_000,
      20_000,
      40_000,
      80_000,
      160_000,
      HELD_RECHECK_MAX_MS,
      HELD_RECHECK_MAX_MS,
    ]);
    expect(waits.slice(16)).toEqual([HELD_RECHECK_MAX_MS, HELD_LONG_RECHECK_MS]);
    const resumed = next(f, { was: 'woke', resumed: true, historyLong: false }, now + 1);
    expect(resumed.facts.held?.recheckMs).toBe(HELD_RECHECK_FIRST_MS);
  });

  it('the horizon: attempts and waits spend it, a hold adds its time back; a replay starts it afresh', () => {
    const answered = next(
      start,
      { was: 'answered', result: { status: 'wait', why: 'budget', lane: 'first', waitMs: 10_000 } },
      T + 2_000,
    );
    expect(answered.facts.leftMs).toBe(72 * HOUR - 2_000);
    const woke = next(answered.facts, { was: 'woke', resumed: false, historyLong: false }, T + 12_000);
    expect(woke.facts.leftMs).toBe(72 * HOUR - 12_000);
    const pausing = next(
      woke.facts,
      { was: 'answered', result: { status: 'held', merchantStatus: 'paused' } },
      T + 12_000,
    );
    const afterPause = next(pausing.facts, { was: 'woke', resumed: true, historyLong: false }, T + 5 * HOUR);
    expect(afterPause.facts.leftMs).toBe(72 * HOUR - 12_000);
  });

  it('every wait names what it waits for, in the duration the worker said (never a timestamp of another clock)', () => {
    for (const row of rows.filter((r) => (r.step as { do: string }).do === 'wait')) {
      const decided = next(row.facts, row.happened, row.facts.stepAt + (row.after ?? 0));
      if (decided.step.do !== 'wait') throw new Error(row.what);
      expect(decided.step.until).toBe(new Date(row.facts.stepAt + (row.after ?? 0) + decided.step.ms).toISOString());
      expect(decided.step.for.kind).toBeDefined();
    }
  });
});
