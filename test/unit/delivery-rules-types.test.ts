/**
 * The delivery rulebook is total by type (src/workflows/delivery-rules.ts): `next` takes a run's start with any facts,
 * what came of an attempt or a wait with delivering facts, and what came of a quarantine's step with quarantined
 * facts (their open quarantine required). Each `@ts-expect-error` below is an impossible pair that must not compile:
 * `npm run typecheck` fails if one does. At run time such a pair, forced past the types, is refused, never decided.
 */
import { describe, expect, it } from 'vitest';
import { firstFacts, next, type DeliveringFacts, type QuarantinedFacts } from '../../src/workflows/delivery-rules.js';

const T = Date.parse('2026-12-03T12:00:00Z');
const delivering: DeliveringFacts = firstFacts(1, 3_600_000, T);
const quarantined: QuarantinedFacts = {
  ...delivering,
  quarantine: {
    reason: 'rejected',
    detail: 'HTTP 400',
    since: '2026-12-03T12:00:00.000Z',
    fourEyes: false,
    abandonsAt: T,
  },
};

describe('the pairs next() takes', () => {
  it('a start with either facts; an attempt’s answer while delivering; a quarantine’s step while quarantined', () => {
    expect(next(delivering, { was: 'start' }, T).step.do).toBe('attempt');
    expect(next(quarantined, { was: 'start' }, T).step.do).toBe('await_human');
    const answer = { was: 'answered', result: { status: 'held', merchantStatus: 'paused' } } as const;
    expect(next(delivering, answer, T).step.do).toBe('wait');
    expect(next(quarantined, { was: 'timed_out' }, T).step.do).toBe('record');
  });

  it('an impossible pair does not compile, and is refused if forced', () => {
    // @ts-expect-error a quarantine's timeout with facts that have no quarantine
    expect(() => next(delivering, { was: 'timed_out' }, T)).toThrow(/no rule for timed_out while delivering/);
    // @ts-expect-error a decision recorded for a delivery that is not quarantined
    const recorded = () => next(delivering, { was: 'recorded', answer: { recorded: false, why: 'stale' } }, T);
    expect(recorded).toThrow(/no rule for recorded/);
    // @ts-expect-error an attempt's answer while quarantined
    expect(() => next(quarantined, { was: 'woke', resumed: false, historyLong: false }, T)).toThrow(
      /no rule for woke while quarantined/,
    );
    // @ts-expect-error quarantined facts without their quarantine
    const unquarantined: QuarantinedFacts = { ...delivering };
    expect(unquarantined.quarantine).toBeUndefined();
  });
});
