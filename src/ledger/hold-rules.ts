/**
 * The hold rulebook: every decision about what happens to a hold's money, as pure functions of the hold as locked
 * and what asks to move it. The SQL layer (src/sql/holds.ts, src/sql/processor-events.ts) reads and writes; the
 * activities (src/activities/ledger.ts, src/activities/processor-events.ts) lock the row, ask here, and carry the
 * answer out in the same transaction. Nothing here touches a database, so every combination is a unit test
 * (test/unit/hold-rules.test.ts).
 *
 * What "expired" and "defective" mean is decided by the database, by the ledger's clock (`BOUNDED_CUTOFF` and
 * `HOLD_DEFECT_SQL` in src/sql/holds.ts: one expression for the sweep's page and the release, so the two cannot
 * disagree); the rulebook takes both as facts of the locked hold.
 *
 * The release (`decideRelease`), in order: no row -> not found; released -> already released (nothing written);
 * rejected -> rejected with its code; captured or reversed by the processor first -> settled; a defect -> mark it
 * rejected; not expired by the clock that decides -> nothing; else release. A release the held balance does not cover
 * -> mark it rejected (`RELEASE_SHORT_BALANCE`).
 *
 * A processor event (`decideEvent`), by hold state:
 *
 *   hold state      hold.captured                 hold.reversed             hold.incremented
 *   active          capture (held -> out)         reversal (like release)   increment (available -> held)
 *   released        late capture, reviewed        ignored (already free)    ignored, reviewed
 *   reversed        late capture, reviewed        ignored                   ignored, reviewed
 *   captured        ignored, reviewed             ignored                   ignored, reviewed
 *   rejected        ignored, reviewed             ignored                   ignored, reviewed
 *
 * An event applies only as the hold's next sequence; one ahead of it waits (nothing is written), one behind it was
 * skipped over by a human and is recorded, not applied. An entry the account's held balance does not cover moves
 * nothing and is reviewed (`eventShortBalance`).
 */
import type { ProcessorEventOutcome, ProcessorEventType } from '../contracts/processor.js';
import { HOLD_EVENT_WEBHOOK_TYPES } from '../contracts/processor.js';

import type { InvalidHoldCode } from '../contracts/failures.js';

type HoldState = 'active' | 'released' | 'rejected' | 'captured' | 'reversed';

/** A hold as the release finds it under its row lock. */
export interface HoldAtRelease {
  state: HoldState;
  rejectCode: InvalidHoldCode | null;
  /** Why the row cannot move money at all (HOLD_DEFECT_SQL), or null. */
  defect: InvalidHoldCode | null;
  /** By the clock that decides (the sweep's cutoff bounded by the ledger's, or the ledger's). */
  expired: boolean;
  expiresAt: string;
}

export type ReleaseDecision =
  | { action: 'not_found' }
  /** Released before: nothing is written, the release's own entry and webhook are reported again. */
  | { action: 'already_released' }
  | { action: 'rejected'; code: InvalidHoldCode }
  | { action: 'settled'; state: 'captured' | 'reversed' }
  /** Marked rejected (still active, locked), so it leaves the active set for good. */
  | { action: 'reject'; code: InvalidHoldCode }
  | { action: 'not_expired'; expiresAt: string }
  | { action: 'release' };

/** What the release does to `hold` (undefined: the row is gone). */
export function decideRelease(hold: HoldAtRelease | undefined): ReleaseDecision {
  if (!hold) return { action: 'not_found' };
  switch (hold.state) {
    case 'released':
      return { action: 'already_released' };
    case 'rejected':
      return { action: 'rejected', code: hold.rejectCode! };
    case 'captured':
    case 'reversed':
      return { action: 'settled', state: hold.state };
    case 'active':
      if (hold.defect) return { action: 'reject', code: hold.defect };
      if (!hold.expired) return { action: 'not_expired', expiresAt: hold.expiresAt };
      return { action: 'release' };
  }
}

/** The release found the account's held balance short of the hold: it can never be released as written. */
export const RELEASE_SHORT_BALANCE = {
  action: 'reject',
  code: 'InsufficientHeldBalance',
} as const satisfies ReleaseDecision;

type LedgerEntryKind = 'hold_capture' | 'hold_reversal' | 'hold_increment' | 'late_capture';

export interface LockedHold {
  state: HoldState;
  /** The last sequence applied (0: none). */
  eventSeq: number;
  amountMinor: bigint;
  currency: string;
  /** Why the row cannot move money at all (HOLD_DEFECT_SQL), or null. */
  defect: string | null;
}

export interface RecordedEvent {
  eventType: ProcessorEventType;
  sequence: number;
  /** Captured amount or increment; null for a reversal. */
  amountMinor: bigint | null;
  currency: string | null;
}

type EventDecision =
  | { action: 'wait'; expected: number }
  | {
      action: 'apply';
      outcome: ProcessorEventOutcome;
      detail?: string;
      /** Whether the hold's sequence moves to this event's (false only for one already skipped over). */
      advances: boolean;
      entry?: { kind: LedgerEntryKind; amountMinor: bigint; heldDelta: bigint; availableDelta: bigint };
      /** The hold's new final state, if it gets one. */
      state?: 'captured' | 'reversed';
      /** Added to the hold's amount (an increment). */
      amountDelta?: bigint;
      webhookType?: (typeof HOLD_EVENT_WEBHOOK_TYPES)[keyof typeof HOLD_EVENT_WEBHOOK_TYPES];
      /** Why a human should look at it (ledger_reviews). */
      review?: string;
    };

/** A decision to apply the event (everything but waiting for its predecessor). */
export type EventApplication = Extract<EventDecision, { action: 'apply' }>;

const MONEY_EVENTS: readonly ProcessorEventType[] = ['hold.captured', 'hold.incremented'];

/** An event that changes nothing in the ledger; money-carrying ones are flagged, since money moved at the processor. */
function ignored(event: RecordedEvent, detail: string): EventDecision {
  const review = MONEY_EVENTS.includes(event.eventType) ? `${event.eventType} not applied: ${detail}` : undefined;
  return { action: 'apply', outcome: 'ignored', detail, advances: true, ...(review ? { review } : {}) };
}

/**
 * The decision for `event` on `hold` (undefined: the ledger has no such hold). `skipped`: a human skipped this
 * event's sequence on this hold.
 */
export function decideEvent(hold: LockedHold | undefined, event: RecordedEvent, skipped: boolean): EventDecision {
  if (!hold) {
    return {
      action: 'apply',
      outcome: 'ignored',
      detail: 'no such hold in the ledger',
      advances: false,
      review: `${event.eventType} for an unknown hold`,
    };
  }
  if (event.sequence <= hold.eventSeq) {
    const detail = skipped
      ? `sequence ${event.sequence} was skipped by an operator`
      : `sequence ${event.sequence} is behind the hold's ${hold.eventSeq}`;
    return {
      action: 'apply',
      outcome: 'skipped_over',
      detail,
      advances: false,
      review: `${event.eventType} arrived after ${detail}`,
    };
  }
  if (event.sequence > hold.eventSeq + 1) return { action: 'wait', expected: hold.eventSeq + 1 };

  if (event.eventType !== 'hold.reversed' && event.currency !== hold.currency) {
    return ignored(event, `currency ${event.currency} is not the hold's ${hold.currency}`);
  }
  const amount = event.amountMinor ?? 0n;
  switch (hold.state) {
    case 'active': {
      if (hold.defect) return ignored(event, `the hold cannot move money (${hold.defect})`);
      const held = hold.amountMinor;
      switch (event.eventType) {
        case 'hold.captured':
          return {
            action: 'apply',
            outcome: 'captured',
            advances: true,
            entry: { kind: 'hold_capture', amountMinor: amount, heldDelta: -held, availableDelta: held - amount },
            state: 'captured',
            webhookType: HOLD_EVENT_WEBHOOK_TYPES.captured,
            ...(amount > held ? { review: `captured ${amount} over the hold's ${held}` } : {}),
          };
        case 'hold.reversed':
          return {
            action: 'apply',
            outcome: 'reversed',
            advances: true,
            entry: { kind: 'hold_reversal', amountMinor: held, heldDelta: -held, availableDelta: held },
            state: 'reversed',
            webhookType: HOLD_EVENT_WEBHOOK_TYPES.reversed,
          };
        case 'hold.incremented':
          return {
            action: 'apply',
            outcome: 'incremented',
            advances: true,
            entry: { kind: 'hold_increment', amountMinor: amount, heldDelta: amount, availableDelta: -amount },
            amountDelta: amount,
            webhookType: HOLD_EVENT_WEBHOOK_TYPES.incremented,
          };
      }
      break;
    }
    case 'released':
    case 'reversed':
      if (event.eventType === 'hold.captured') {
        return {
          action: 'apply',
          outcome: 'late_captured',
          detail: `captured after the hold was ${hold.state}`,
          advances: true,
          entry: { kind: 'late_capture', amountMinor: amount, heldDelta: 0n, availableDelta: -amount },
          webhookType: HOLD_EVENT_WEBHOOK_TYPES.late_captured,
          review: `late capture of ${amount} ${hold.currency}: the hold was already ${hold.state}`,
        };
      }
      return ignored(event, `the hold was already ${hold.state}`);
    case 'captured':
    case 'rejected':
      return ignored(event, `the hold is ${hold.state}`);
  }
  throw new Error(`unreachable: ${hold.state} / ${event.eventType}`);
}

/**
 * The decision for an event whose entry the account's held balance does not cover (the ledger refused to move it):
 * nothing moved, the sequence advances, and a human looks at why.
 */
export function eventShortBalance(event: Pick<RecordedEvent, 'eventType'>, accountId: string): EventApplication {
  return {
    action: 'apply',
    outcome: 'ignored',
    detail: `account ${accountId} held balance does not cover the hold`,
    advances: true,
    review: `${event.eventType} not applied: the account's held balance does not cover the hold`,
  };
}
