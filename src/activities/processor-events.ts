/**
 * Processor-event activities: apply one recorded event to its hold (src/sql/processor-events.ts, under the hold's
 * row lock, in one transaction), and record a human's skip of a missing one. Called by each hold's event workflow
 * (src/workflows/hold-events.ts) in the hold's sequence.
 */
import { log } from '@temporalio/activity';
import { noopMetricMeter } from '@temporalio/common';
import type { ApplyProcessorEventResult } from '../contracts/processor.js';
import { inTransaction } from '../db/pool.js';
import * as events from '../sql/processor-events.js';
import { samePerson } from '../contracts/identity.js';
import * as records from '../sql/operator-records.js';
import type { DeliveryDeps } from './delivery.js';
import { retryHorizonFor } from '../delivery/policy.js';
import type { LedgerDeps } from './ledger.js';

export interface SkipProcessorSequenceInput {
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
  if (samePerson(request.approvedBy, request.requestedBy)) return `skip request ${requestId} was approved by its own requester`;
  if (!samePerson(request.approvedBy, by)) return `skip request ${requestId} was approved by ${request.approvedBy}, not ${by}`;
  return undefined;
}

export function createProcessorEventActivities({
  region,
  pool,
  meter = noopMetricMeter,
  fourEyes = false,
}: LedgerDeps & Pick<DeliveryDeps, 'fourEyes'>) {
  const applied = meter.createCounter('hold_sweeper_processor_events_applied', '1', 'processor events applied, by outcome');
  const applyLag = meter.createHistogram(
    'hold_sweeper_processor_event_apply_lag_seconds',
    'float',
    '',
    'from an event recorded by the receiver to applied in the ledger',
  );
  return {
    /** Applies the event if it is its hold's next; see `applyRecordedEvent`. Idempotent: a retry finds it applied. */
    async applyProcessorEvent({ eventId }: { eventId: string }): Promise<ApplyProcessorEventResult> {
      const result = await inTransaction(pool, (tx) => events.applyRecordedEvent(tx, eventId));
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
        log.info('processor event applied', { region, eventId, holdId: result.holdId, sequence: result.sequence, outcome: result.outcome });
      }
      const webhook = result.webhook && {
        webhookId: result.webhook.webhookId,
        eventType: result.webhook.eventType,
        merchantId: result.webhook.merchantId,
        retryHorizonMs: retryHorizonFor(result.webhook.merchantId, result.webhook.deliveryPolicy),
      };
      return { status: result.status, eventId, sequence: result.sequence, outcome: result.outcome, ...(webhook ? { webhook } : {}) };
    },

    /**
     * A human closed a gap: true when `sequence` was the hold's missing one and is now skipped (recorded). With four
     * eyes, only as the approver of a skip request for exactly this hold and sequence, approved by someone other than
     * its requester (the ledger's record, not what the signal says); otherwise false, nothing written, and why logged.
     */
    async skipProcessorSequence({ holdId, sequence, by, reason, requestId }: SkipProcessorSequenceInput): Promise<boolean> {
      if (fourEyes) {
        const refused = await skipRequestRefusal(pool, { holdId, sequence, by, requestId });
        if (refused) {
          log.warn('processor sequence skip refused: four eyes', { region, holdId, sequence, by, requestId, why: refused });
          return false;
        }
      }
      const skipped = await inTransaction(pool, (tx) => events.skipSequence(tx, holdId, sequence, by, reason));
      log.warn(skipped ? 'processor sequence skipped by an operator' : 'processor sequence skip did not apply', { region, holdId, sequence, by });
      return skipped;
    },
  };
}
