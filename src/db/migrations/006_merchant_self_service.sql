-- The event types a merchant's endpoint subscribes to (docs/webhooks.md#choosing-events), chosen by the merchant
-- through the merchant API: NULL is every type, today's and any added later; a list is those types only. A webhook of
-- a type its merchant does not want is written `not_subscribed` by the outbox writer (src/sql/deliveries.ts): kept,
-- shown to the merchant and its operators, never sent, and not a failure.
ALTER TABLE merchants ADD COLUMN event_types text[]
  CONSTRAINT merchants_event_types_check CHECK (event_types IS NULL OR cardinality(event_types) BETWEEN 1 AND 64);

-- Checked for new rows at once; the existing ones (all of them already allowed) under a lighter lock than a scan that
-- blocks the outbox's writes.
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_status_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check
  CHECK (status IN ('pending', 'delivered', 'quarantined', 'discarded', 'abandoned', 'not_subscribed')) NOT VALID;
ALTER TABLE webhook_deliveries VALIDATE CONSTRAINT webhook_deliveries_status_check;

-- What a merchant asks of its endpoint through the merchant API (docs/api.md#the-endpoint-self-served), which holds
-- no signing secret: a worker, which does, claims the row, sends one signed `merchant.ping` to `url` under the
-- merchant's budget and policy, and records what came back in the same transaction as its effect. `test`: the
-- endpoint as it is. `verify`: a URL (new, or the same) that becomes the endpoint only if it answered 2xx, enabling
-- again an endpoint a 410 disabled.
CREATE TABLE endpoint_checks (
  id           text PRIMARY KEY,
  merchant_id  text NOT NULL REFERENCES merchants (id),
  key_id       text NOT NULL REFERENCES merchant_api_keys (id),
  kind         text NOT NULL CHECK (kind IN ('test', 'verify')),
  url          text NOT NULL,
  requested_at timestamptz NOT NULL DEFAULT now(),
  finished_at  timestamptz,
  -- The send as `merchant ping` reports it (status, error class, duration, excerpt, the policy's reading), or why
  -- nothing was sent (sends paused, the budget busy, the URL refused).
  result       jsonb,
  applied      boolean,
  CHECK ((finished_at IS NULL) = (result IS NULL) AND (finished_at IS NULL) = (applied IS NULL))
);
CREATE INDEX endpoint_checks_waiting ON endpoint_checks (requested_at) WHERE finished_at IS NULL;
CREATE INDEX endpoint_checks_merchant ON endpoint_checks (merchant_id, requested_at);

CREATE OR REPLACE FUNCTION retention_of(kind text) RETURNS interval LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE kind
    -- Every HTTP attempt with its response excerpt: a quarter, for disputes about one send ("did you call us at 02:14?").
    WHEN 'delivery_attempts' THEN interval '90 days'
    -- A webhook at an end (and every row that names it): its id answers a merchant's question and dedups a resend;
    -- the audit's year and its three months at hand, far past 72 h of retries + 14 days of quarantine.
    WHEN 'webhook_deliveries' THEN interval '400 days'
    -- A processor event applied: past the 30 days the processor may redeliver one (docs/processor-events.md).
    WHEN 'processor_events' THEN interval '35 days'
    -- A ledger review resolved: the audit's year.
    WHEN 'ledger_reviews' THEN interval '400 days'
    -- Operational accounts of runs: a quarter (the newest always stays: gauges and the next run read it).
    WHEN 'sweep_runs' THEN interval '90 days'
    WHEN 'outbox_reconciliations' THEN interval '90 days'
    -- A check of an endpoint a merchant asked for, like an attempt: a quarter.
    WHEN 'endpoint_checks' THEN interval '90 days'
  END
$$;

-- A webhook not subscribed to is at an end from the moment it is written: it leaves with the others at an end. An
-- endpoint check leaves after its quarter.
CREATE OR REPLACE FUNCTION prune_expired(kind text, batch integer) RETURNS integer
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
  keep_until timestamptz := now() - retention_of(kind);
  pruned integer;
BEGIN
  IF keep_until IS NULL THEN
    RAISE EXCEPTION 'no retention rule for %', kind USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF batch IS NULL OR batch < 1 OR batch > 10000 THEN
    RAISE EXCEPTION 'a batch is 1 to 10000 rows, not %', batch USING ERRCODE = 'invalid_parameter_value';
  END IF;
  CASE kind
  WHEN 'delivery_attempts' THEN
    DELETE FROM delivery_attempts WHERE id IN (
      SELECT id FROM delivery_attempts WHERE started_at < keep_until
       ORDER BY started_at LIMIT batch FOR UPDATE SKIP LOCKED);
  WHEN 'webhook_deliveries' THEN
    WITH ended AS (
      SELECT webhook_id FROM webhook_deliveries
       WHERE status IN ('delivered', 'discarded', 'abandoned', 'not_subscribed') AND updated_at < keep_until
       ORDER BY updated_at LIMIT batch FOR UPDATE SKIP LOCKED
    ), attempts AS (DELETE FROM delivery_attempts WHERE webhook_id IN (SELECT webhook_id FROM ended)),
    decisions AS (DELETE FROM delivery_decisions WHERE webhook_id IN (SELECT webhook_id FROM ended)),
    operator AS (DELETE FROM operator_decisions WHERE webhook_id IN (SELECT webhook_id FROM ended)),
    items AS (DELETE FROM replay_request_items WHERE webhook_id IN (SELECT webhook_id FROM ended)),
    resends AS (DELETE FROM webhook_resends WHERE webhook_id IN (SELECT webhook_id FROM ended)),
    asked AS (DELETE FROM merchant_resend_requests WHERE webhook_id IN (SELECT webhook_id FROM ended))
    DELETE FROM webhook_deliveries WHERE webhook_id IN (SELECT webhook_id FROM ended);
  WHEN 'processor_events' THEN
    -- An event a review names stays with its review.
    DELETE FROM processor_events WHERE event_id IN (
      SELECT e.event_id FROM processor_events e
       WHERE e.applied_at IS NOT NULL AND e.applied_at < keep_until
         AND NOT EXISTS (SELECT 1 FROM ledger_reviews r WHERE r.event_id = e.event_id)
       ORDER BY e.applied_at LIMIT batch FOR UPDATE OF e SKIP LOCKED);
  WHEN 'ledger_reviews' THEN
    DELETE FROM ledger_reviews WHERE event_id IN (
      SELECT event_id FROM ledger_reviews WHERE resolved_at < keep_until
       ORDER BY resolved_at LIMIT batch FOR UPDATE SKIP LOCKED);
  WHEN 'sweep_runs' THEN
    DELETE FROM sweep_runs WHERE sweep_id IN (
      SELECT sweep_id FROM sweep_runs WHERE finished_at < keep_until
         AND finished_at < (SELECT max(finished_at) FROM sweep_runs)
       ORDER BY finished_at LIMIT batch FOR UPDATE SKIP LOCKED);
  WHEN 'outbox_reconciliations' THEN
    DELETE FROM outbox_reconciliations WHERE id IN (
      SELECT id FROM outbox_reconciliations WHERE finished_at < keep_until
         AND id < (SELECT max(id) FROM outbox_reconciliations)
       ORDER BY id LIMIT batch FOR UPDATE SKIP LOCKED);
  WHEN 'endpoint_checks' THEN
    DELETE FROM endpoint_checks WHERE id IN (
      SELECT id FROM endpoint_checks WHERE requested_at < keep_until
       ORDER BY requested_at LIMIT batch FOR UPDATE SKIP LOCKED);
  END CASE;
  GET DIAGNOSTICS pruned = ROW_COUNT;
  RETURN pruned;
END
$$;
