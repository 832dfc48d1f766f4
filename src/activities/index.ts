/**
 * All activities of one region's worker, built from that region's dependencies only: a regional worker
 * holds one ledger pool and so can never touch another region's ledger (invariant 6, docs/invariants.md).
 */
import { createDeliveryActivities, type DeliveryDeps } from './delivery.js';
import { createLedgerActivities, type LedgerDeps } from './ledger.js';
import { createOutboxActivities, type OutboxDeps } from './outbox.js';
import { createProcessorEventActivities } from './processor-events.js';
import { releaseAndDeliver } from './release-and-deliver.js';
import { createRetentionActivities } from './retention.js';

type ActivityDeps = LedgerDeps & DeliveryDeps & Pick<OutboxDeps, 'outboxBudget'>;

export function createActivities(deps: ActivityDeps) {
  const ledger = createLedgerActivities(deps);
  const delivery = createDeliveryActivities(deps);
  return {
    ...ledger,
    ...delivery,
    releaseAndDeliver: releaseAndDeliver(ledger.releaseHold, delivery.deliverWebhook),
    ...createProcessorEventActivities(deps),
    ...createOutboxActivities(deps),
    ...createRetentionActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
