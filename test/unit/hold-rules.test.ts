/**
 * The hold rulebook as a table: the release in every state, and the one place the race between the processor and the
 * expiry release is decided, every state by every event.
 */
import { describe, expect, it } from 'vitest';
import {
  decideEvent,
  decideRelease,
  eventShortBalance,
  RELEASE_SHORT_BALANCE,
  type HoldAtRelease,
  type LockedHold,
  type RecordedEvent,
  type ReleaseDecision,
} from '../../src/ledger/hold-rules.js';

describe('the release', () => {
  const at = (state: HoldAtRelease['state'], over: Partial<HoldAtRelease> = {}): HoldAtRelease => ({
    state,
    rejectCode: null,
    defect: null,
    expired: true,
    expiresAt: '2026-01-01T00:00:00.000000Z',
    ...over,
  });
  it.each<[string, HoldAtRelease | undefined, ReleaseDecision]>([
    ['no row', undefined, { action: 'not_found' }],
    ['active and expired', at('active'), { action: 'release' }],
    [
      'active, not expired by the clock that decides',
      at('active', { expired: false }),
      { action: 'not_expired', expiresAt: '2026-01-01T00:00:00.000000Z' },
    ],
    [
      'active with a defect, expired or not',
      at('active', { defect: 'UnknownMerchant', expired: false }),
      { action: 'reject', code: 'UnknownMerchant' },
    ],
    ['released before', at('released', { defect: 'NonPositiveAmount' }), { action: 'already_released' }],
    [
      'rejected before',
      at('rejected', { rejectCode: 'CurrencyMismatch' }),
      { action: 'rejected', code: 'CurrencyMismatch' },
    ],
    ['captured by the processor first', at('captured'), { action: 'settled', state: 'captured' }],
    ['reversed by the processor first', at('reversed', { expired: false }), { action: 'settled', state: 'reversed' }],
  ])('%s', (_, hold, decision) => {
    expect(decideRelease(hold)).toEqual(decision);
  });

  it('a held balance short of the hold: marked rejected, with the name operators see', () => {
    expect(RELEASE_SHORT_BALANCE).toEqual({ action: 'reject', code: 'InsufficientHeldBalance' });
  });
});

describe('an event whose entry the held balance does not cover', () => {
  it('moves nothing, advances the sequence, and is reviewed', () => {
    expect(eventShortBalance({ eventType: 'hold.captured' }, 'acct_1')).toEqual({
      action: 'apply',
      outcome: 'ignored',
      detail: 'account acct_1 held balance does not cover the hold',
      advances: true,
      review: "hold.captured not applied: the account's held balance does not cover the hold",
    });
  });
});

const hold = (state: LockedHold['state'], eventSeq = 0, defect: string | null = null): LockedHold => ({
  state,
  eventSeq,
  amountMinor: 1_000n,
  currency: 'USD',
  defect,
});
const captured = (amount: bigint, sequence = 1): RecordedEvent => ({
  eventType: 'hold.captured',
  sequence,
  amountMinor: amount,
  currency: 'USD',
});
const reversed = (sequence = 1): RecordedEvent => ({
  eventType: 'hold.reversed',
  sequence,
  amountMinor: null,
  currency: null,
});
const incremented = (amount: bigint, sequence = 1): RecordedEvent => ({
  eventType: 'hold.incremented',
  sequence,
  amountMinor: amount,
  currency: 'USD',
});

describe('an active hold', () => {
  it('captured: the hold leaves held, the uncaptured rest returns to available, and it is settled for good', () => {
    expect(decideEvent(hold('active'), captured(600n), false)).toEqual({
      action: 'apply',
      outcome: 'captured',
      advances: true,
      entry: { kind: 'hold_capture', amountMinor: 600n, heldDelta: -1_000n, availableDelta: 400n },
      state: 'captured',
      webhookType: 'hold.captured',
    });
  });

  it('captured over its amount: applied, and flagged for review', () => {
    const decision = decideEvent(hold('active'), captured(1_200n), false);
    expect(decision).toMatchObject({
      outcome: 'captured',
      entry: { availableDelta: -200n },
      review: "captured 1200 over the hold's 1000",
    });
  });

  it('reversed: like a release, and settled', () => {
    expect(decideEvent(hold('active'), reversed(), false)).toMatchObject({
      outcome: 'reversed',
      entry: { kind: 'hold_reversal', amountMinor: 1_000n, heldDelta: -1_000n, availableDelta: 1_000n },
      state: 'reversed',
      webhookType: 'hold.reversed',
    });
  });

  it('incremented: available moves to held and the hold grows; it stays active', () => {
    const decision = decideEvent(hold('active'), incremented(250n), false);
    expect(decision).toMatchObject({
      outcome: 'incremented',
      entry: { kind: 'hold_increment', heldDelta: 250n, availableDelta: -250n },
      amountDelta: 250n,
    });
    expect(decision).not.toHaveProperty('state');
  });

  it('defective (cannot move money): ignored, and a money event flagged', () => {
    expect(decideEvent(hold('active', 0, 'UnknownAccount'), captured(10n), false)).toMatchObject({
      outcome: 'ignored',
      advances: true,
      review: expect.any(String),
    });
    expect(decideEvent(hold('active', 0, 'UnknownAccount'), reversed(), false)).not.toHaveProperty('review');
  });

  it('an event in another currency is ignored and flagged', () => {
    expect(decideEvent(hold('active'), { ...captured(10n), currency: 'EUR' }, false)).toMatchObject({
      outcome: 'ignored',
      review: expect.stringContaining('EUR'),
    });
  });
});

describe('after the release (the sweep won the row lock)', () => {
  it('a capture is a late capture against available, flagged for review, and the merchant is told', () => {
    expect(decideEvent(hold('released'), captured(700n), false)).toMatchObject({
      outcome: 'late_captured',
      entry: { kind: 'late_capture', amountMinor: 700n, heldDelta: 0n, availableDelta: -700n },
      webhookType: 'hold.late_captured',
      review: expect.stringContaining('late capture'),
    });
  });

  it('a capture after a reversal is a late capture too', () => {
    expect(decideEvent(hold('reversed'), captured(700n), false)).toMatchObject({ outcome: 'late_captured' });
  });

  it('a reversal changes nothing (the money is already available); an increment is ignored and flagged', () => {
    expect(decideEvent(hold('released'), reversed(), false)).toEqual({
      action: 'apply',
      outcome: 'ignored',
      detail: 'the hold was already released',
      advances: true,
    });
    expect(decideEvent(hold('released'), incremented(5n), false)).toMatchObject({
      outcome: 'ignored',
      review: expect.any(String),
    });
  });
});

describe('a settled or rejected hold', () => {
  it.each(['captured', 'rejected'] as const)('%s: nothing moves; money events are flagged', (state) => {
    expect(decideEvent(hold(state), captured(1n), false)).toMatchObject({
      outcome: 'ignored',
      review: expect.any(String),
    });
    expect(decideEvent(hold(state), reversed(), false)).not.toHaveProperty('entry');
  });
});

describe('sequence', () => {
  it('ahead of the next: waits, writing nothing', () => {
    expect(decideEvent(hold('active', 2), captured(1n, 4), false)).toEqual({ action: 'wait', expected: 3 });
  });

  it('behind the hold (skipped by an operator): recorded as skipped over, not applied, flagged, and the sequence stays', () => {
    expect(decideEvent(hold('active', 3), incremented(1n, 2), true)).toMatchObject({
      outcome: 'skipped_over',
      advances: false,
      review: expect.stringContaining('skipped by an operator'),
    });
    expect(decideEvent(hold('active', 3), incremented(1n, 2), true)).not.toHaveProperty('entry');
  });

  it('an unknown hold: ignored and flagged, nothing to advance', () => {
    expect(decideEvent(undefined, captured(1n), false)).toMatchObject({
      outcome: 'ignored',
      advances: false,
      review: expect.stringContaining('unknown hold'),
    });
  });
});
