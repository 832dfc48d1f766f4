-- migrate: no transaction
--
-- The retention job's index of webhooks at an end, with the ones not subscribed to (006): built beside the one it
-- replaces, without blocking the outbox's writes, then the old one dropped.
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_deliveries_settled_by_age ON webhook_deliveries (updated_at)
  WHERE status IN ('delivered', 'discarded', 'abandoned', 'not_subscribed');
DROP INDEX CONCURRENTLY IF EXISTS webhook_deliveries_ended_by_age;
