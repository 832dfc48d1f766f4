/**
 * The card processor's events about a hold, as the receiver accepts them and the hold's event workflow applies them
 * (docs/processor-events.md). Workflow-safe: types, constants and message definitions only.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';

/** What the processor tells us about a hold. */
export const PROCESSOR_EVENT_TYPES = ['hold.captured', 'hold.reversed', 'hold.incremented'] as const;
export type ProcessorEventType = (typeof PROCESSOR_EVENT_TYPES)[number];

/** The webhooks a hold's events send to its merchant, besides `hold.released` (same signing, policy and budget). */
export const HOLD_EVENT_WEBHOOK_TYPES = {
  captured: 'hold.captured',
  reversed: 'hold.reversed',
  incremented: 'hold.incremented',
  late_captured: 'hold.late_captured',
} as const;

/** What applying an event did (processor_events.outcome). */
export type ProcessorEventOutcome =
  'captured' | 'reversed' | 'incremented' | 'late_captured' | 'ignored' | 'skipped_over';

/** The signal that hands an event to its hold's workflow: ids only, the ledger has the rest. */
export interface ProcessorEventRef {
  eventId: string;
  sequence: number;
}

/** The webhook an applied event wrote to tell the merchant (its outbox row). */
export interface EventWebhook {
  webhookId: string;
  eventType: string;
  merchantId: string;
}

export type ApplyProcessorEventResult =
  /** Applied now (by this call) or before (a retry, a duplicate signal): what it did, and the webhook it wrote. */
  | {
      status: 'applied' | 'already_applied';
      eventId: string;
      sequence: number;
      outcome: ProcessorEventOutcome;
      /** The webhook telling the merchant, when the outcome has one; with its delivery policy's retry horizon. */
      webhook?: EventWebhook & { retryHorizonMs: number };
    }
  /** A predecessor in the hold's sequence has not been applied: nothing written; `expected` is the one missing. */
  | { status: 'waiting'; eventId: string; sequence: number; expected: number }
  /** No such event recorded (a signal that names an event the ledger does not have): nothing to apply. */
  | { status: 'unknown_event'; eventId: string };

export interface HoldEventsInput {
  region: string;
  holdId: string;
  /** How long a gap in the sequence is waited for before the workflow stops for a human. */
  gapWaitMs?: number;
  /** How long the workflow stays open with nothing to apply before it completes (the next event starts a new run). */
  idleMs?: number;
  /** Carried by continue-as-new: events signalled but not yet applied. */
  pending?: ProcessorEventRef[];
}

/** A human's answer to a gap: apply what follows it without the missing event, which is then skipped over. */
export interface SkipMissingEvent {
  /** The missing sequence being skipped; must be the one the workflow waits for. */
  sequence: number;
  by: string;
  reason: string;
  /**
   * The approved skip request this carries out (`npm run ops -- events approve-skip` sets it). Production workers
   * (four eyes) skip only as its approver, checked against the ledger; without it the skip does not apply.
   */
  requestId?: string;
}

export type HoldEventsStage =
  | { stage: 'applying'; sequence: number }
  | { stage: 'idle'; applied: number }
  | { stage: 'waiting_for_predecessor'; expected: number; until: string; pending: number[] }
  | { stage: 'stopped_for_human'; expected: number; since: string; pending: number[] };

export interface HoldEventsStatus {
  holdId: string;
  stage: HoldEventsStage;
  /** Applied by this run, in order, with what each did. */
  applied: { sequence: number; eventId: string; outcome: ProcessorEventOutcome }[];
  skipped: { sequence: number; by: string; reason: string }[];
}

export interface HoldEventsResult {
  holdId: string;
  applied: number;
}

/** The receiver (and its relay) hands each recorded event to its hold's workflow with this, by signal-with-start. */
export const processorEventSignal = defineSignal<[ProcessorEventRef]>('processorEvent');
/**
 * An operator closes a gap: `{ sequence, by, reason }` (validated by the workflow; a bad one is logged and ignored).
 */
export const skipMissingEventSignal = defineSignal<[unknown]>('skipMissingEvent');

/** The workflow's answer to an accepted `skipMissingEvent` Update, once the skip was tried in the ledger. */
export interface SkipAnswer {
  sequence: number;
  /**
   * Recorded in the ledger; false when the ledger refused it (four eyes: no approved request for it; or filled
   * meanwhile).
   */
  skipped: boolean;
}

/**
 * The same as an Update (what `npm run ops -- events skip` sends): its validator refuses a skip the workflow is not
 * waiting for (nothing enters history, the caller gets why), and it answers once the skip was tried in the ledger. Its
 * id is derived from the hold, the sequence and the request, so a retried call gets the first call's answer.
 */
export const skipMissingEventUpdate = defineUpdate<SkipAnswer, [SkipMissingEvent]>('skipMissingEvent');
export const holdEventsStatusQuery = defineQuery<HoldEventsStatus>('status');
