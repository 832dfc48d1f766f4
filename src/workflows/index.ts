export { startHoldBatch, sweepExpiredHolds } from './sweep-expired-holds.js';
export { releaseExpiredHold } from './release-expired-hold.js';
export { applyHoldEvents, deliverHoldEvent } from './hold-events.js';
export { pruneLedger } from './prune-ledger.js';
export { reconcileOutbox } from './reconcile-outbox.js';
export { resendWebhook } from './resend-webhook.js';
