/**
 * Processor-event activities: apply one recorded event to its hold (`applyRecordedEvent`: the rulebook decides,
 * src/sql/processor-events.ts writes, under the hold's row lock, in one transaction), and record a human's skip of a
 * missing one. Called by each hold's event workflow
 * (src/workflows/hold-events.ts) in the hold's sequence.
 */
import { log } from '@temporalio/activity';
import { noopMetricMeter } from '@temporalio/common';
import type pg from 'pg';
import type { ApplyProcessorEventResult, EventWebhook, ProcessorEventOutcome } from '../contracts/processor.js';
import { decideEvent, eventShortBalance, type EventApplication } from '../ledger/hold-rules.js';
import { inTransaction } from '../db/pool.js';
import * as events from '../sql/processor-events.js';
import * as holds from '../sql/holds.js';
import { samePerson } from '../contracts/identity.js';
import * as records from '../sql/operator-records.js';
import type { DeliveryDeps } from './delivery.js';
import { withRetryHorizon } from '../delivery/policy.js';
import type { LedgerDeps } from './ledger.js';

interface SkipProcessorSequenceInput {
  holdId: string;
  sequence: number;
  by: string;
  reason: string;
  /** The approved skip request this carries out (four eyes); absent from histories written before it. */
  requestId?: string;
}

/** Why a skip may not be carried out under four eyes, or undefined when its request allows it. */
async function skipRequestRefusal(
  db: LedgerDeps['pool'],
  { holdId, sequence, by, requestId }: Omit<SkipProcessorSequenceInput, 'reason'>,
): Promise<string | undefined> {
  if (requestId === undefined)
    return 'a skip needs a skip request approved by a second person (npm run ops -- events skip, then events approve-skip)';
  const request = await records.skipRequest(db, requestId);
  if (!request) return `skip request ${requestId} does not exist`;
  if (request.holdId !== holdId || request.sequence !== sequence)
    return `skip request ${requestId} is for hold ${request.holdId} sequence ${request.sequence}, not hold ${holdId} sequence ${sequence}`;
  if (request.status !== 'approved' || !request.approvedBy) return `skip request ${requestId} is not approved`;
  if (samePerson(request.approvedBy, request.requestedBy))
    return `skip request ${requestId} was approved by its own requester`;
  if (!samePerson(request.approvedBy, by))
    return `skip request ${requestId} was approved by ${request.approvedBy}, not ${by}`;
  return undefined;
}

type AppliedEvent =
  | {
      status: 'applied' | 'already_applied';
      holdId: string;
      sequence: number;
      outcome: ProcessorEventOutcome;
      /** With its merchant's raw policy overrides, from which the activity's answer takes the retry horizon. */
      webhook?: EventWebhook & { deliveryPolicy: unknown };
    }
  | { status: 'waiting'; holdId: string; sequence: number; expected: number }
  | { status: 'unknown_event' };

/**
 * Applies one recorded event, in the caller's transaction: locks its hold (as the release does), asks the rulebook
 * (`decideEvent`) and writes what it decided: the account's balances and one ledger entry (keyed by the event id),
 * the hold's state, amount and sequence, the webhook telling the merchant (the outbox row), a review flag, and the
 * event's outcome. An entry the held balance does not cover is the rulebook's `eventShortBalance` instead. An event
 * already applied changes nothing.
 */
async function applyRecordedEvent(tx: pg.PoolClient, eventId: string): Promise<AppliedEvent> {
  const found = await events.lockEventToApply(tx, eventId);
  if (!found) return { status: 'unknown_event' };
  const { holdId, event, hold } = found;
  if (event.outcome !== null) {
    return {
      status: 'already_applied',
      holdId,
      sequence: event.sequence,
      outcome: event.outcome,
      ...(await events.webhookOf(tx, event.webhookId)),
    };
  }
  const decided = decideEvent(hold, event, event.skipped);
  if (decided.action === 'wait')
    return { status: 'waiting', holdId, sequence: event.sequence, expected: decided.expected };
  let decision: EventApplication = decided;

  let ledgerEntryId: string | null = null;
  if (decision.entry && hold) {
    ledgerEntryId = await holds.writeEventEntry(
      tx,
      eventId,
      { holdId, accountId: hold.accountId, currency: hold.currency },
      decision.entry,
    );
    if (ledgerEntryId === null) decision = eventShortBalance(event, hold.accountId);
  }
  if (hold) await holds.updateHoldForEvent(tx, holdId, event.sequence, decision);
  const webhookId =
    decision.webhookType && hold
      ? await events.enqueueEventWebhook(tx, eventId, decision.webhookType, ledgerEntryId, decision.outcome)
      : null;
  if (decision.review) await events.openReview(tx, eventId, holdId, decision.review);
  await events.recordEventOutcome(tx, eventId, decision, ledgerEntryId, webhookId);
  return {
    status: 'applied',
    holdId,
    sequence: event.sequence,
    outcome: decision.outcome,
    ...(await events.webhookOf(tx, webhookId)),
  };
}

export function createProcessorEventActivities({
  region,
  pool,
  meter = noopMetricMeter,
  fourEyes = false,
}: LedgerDeps & Pick<DeliveryDeps, 'fourEyes'>) {
  const applied = meter.createCounter(
    'hold_sweeper_processor_events_applied',
    '1',
    'processor events applied, by outcome',
  );
  const applyLag = meter.createHistogram(
    'hold_sweeper_processor_event_apply_lag_seconds',
    'float',
    '',
    'from an event recorded by the receiver to applied in the ledger',
  );
  return {
    /** Applies the event if it is its hold's next; see `applyRecordedEvent`. Idempotent: a retry finds it applied. */
    async applyProcessorEvent({ eventId }: { eventId: string }): Promise<ApplyProcessorEventResult> {
      const result = await inTransaction(pool, (tx) => applyRecordedEvent(tx, eventId));
      if (result.status === 'unknown_event') {
        log.warn('processor event not recorded: nothing to apply', { region, eventId });
        return { status: 'unknown_event', eventId };
      }
      if (result.status === 'waiting') {
        log.info('processor event waits for its predecessor', {
          region,
          eventId,
          holdId: result.holdId,
          sequence: result.sequence,
          expected: result.expected,
        });
        return { status: 'waiting', eventId, sequence: result.sequence, expected: result.expected };
      }
      if (result.status === 'applied') {
        applied.add(1, { outcome: result.outcome });
        const lag = await events.applyLagSeconds(pool, eventId);
        if (lag !== undefined) applyLag.record(lag, { region });
        log.info('processor event applied', {
          region,
          eventId,
          holdId: result.holdId,
          sequence: result.sequence,
          outcome: result.outcome,
        });
      }
      const webhook = result.webhook && withRetryHorizon(result.webhook);
      return {
        status: result.status,
        eventId,
        sequence: result.sequence,
        outcome: result.outcome,
        ...(webhook ? { webhook } : {}),
      };
    },

    /**
     * A human closed a gap: true when `sequence` was the hold's missing one and is now skipped (recorded). With four
     * eyes, only as the approver of a skip request for exactly this hold and sequence, approved by someone other than
     * its requester (the ledger's record, not what the signal says); otherwise false, nothing written, and why logged.
     */
    async skipProcessorSequence({
      holdId,
      sequence,
      by,
      reason,
      requestId,
    }: SkipProcessorSequenceInput): Promise<boolean> {
      if (fourEyes) {
        const refused = await skipRequestRefusal(pool, { holdId, sequence, by, requestId });
        if (refused) {
          log.warn('processor sequence skip refused: four eyes', {
            region,
            holdId,
            sequence,
            by,
            requestId,
            why: refused,
          });
          return false;
        }
      }
      const skipped = await inTransaction(pool, async (tx) => {
        if (!(await holds.skipHoldSequence(tx, holdId, sequence))) return false;
        await events.recordSkip(tx, holdId, sequence, by, reason);
        return true;
      });
      log.warn(skipped ? 'processor sequence skipped by an operator' : 'processor sequence skip did not apply', {
        region,
        holdId,
        sequence,
        by,
      });
      return skipped;
    },
  };
}
