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
import { retryHorizonFor, type LedgerDeps } from './ledger.js';

export function createProcessorEventActivities({ region, pool, meter = noopMetricMeter }: LedgerDeps) {
  const applied = meter.createCounter('hold_sweeper_processor_events_applied', '1', 'processor events applied, by outcome');
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

    /** A human closed a gap: true when `sequence` was the hold's missing one and is now skipped (recorded). */
    async skipProcessorSequence({
      holdId,
      sequence,
      by,
      reason,
    }: {
      holdId: string;
      sequence: number;
      by: string;
      reason: string;
    }): Promise<boolean> {
      const skipped = await inTransaction(pool, (tx) => events.skipSequence(tx, holdId, sequence, by, reason));
      log.warn(skipped ? 'processor sequence skipped by an operator' : 'processor sequence skip did not apply', { region, holdId, sequence, by });
      return skipped;
    },
  };
}
