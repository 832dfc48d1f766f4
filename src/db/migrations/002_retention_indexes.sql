-- migrate: no transaction
--
-- What the retention job (003_retention.sql, prune_expired) finds its oldest rows by, and what lets a webhook's rows
-- leave with it without reading whole tables. Built CONCURRENTLY, outside a transaction: these are the ledger's
-- biggest tables and keep taking writes while an index builds; the migrator bounds each statement's wait for a lock
-- (lock_timeout) and builds again an index a failed run left invalid (src/db/migrate.ts).
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_deliveries_ended_by_age ON webhook_deliveries (updated_at) WHERE status IN ('delivered', 'discarded', 'abandoned');
CREATE INDEX CONCURRENTLY IF NOT EXISTS processor_events_applied_by_age ON processor_events (applied_at) WHERE applied_at IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS operator_decisions_webhook ON operator_decisions (webhook_id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS replay_request_items_webhook ON replay_request_items (webhook_id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS merchant_resend_requests_webhook ON merchant_resend_requests (webhook_id);
