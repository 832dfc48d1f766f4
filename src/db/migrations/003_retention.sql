-- Retention (docs/data-retention.md): how long each kind of row stays at least, fixed here where no service can
-- shorten it, and the one way those rows leave: prune_expired, one bounded batch at a time, called by the retention
-- job (the `pruneLedger` workflow on its schedule, src/activities/retention.ts). The services' roles delete nothing
-- themselves (grants.sql).
--
-- Money never leaves by this path: accounts, holds and ledger entries are the books, kept for the finance team's years
-- outside this job. api_audit leaves only by prune_api_audit, past its own 400 days.

CREATE FUNCTION retention_of(kind text) RETURNS interval LANGUAGE sql IMMUTABLE AS $$
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
  END
$$;

-- Deletes up to `batch` of `kind`'s oldest rows past retention_of(kind); returns how many went. Each call is one
-- statement in its caller's transaction: a batch takes its rows oldest first, skips rows another transaction holds
-- (a delivery moving them now), and a webhook leaves with every row that names it, so nothing is left pointing nowhere.
CREATE FUNCTION prune_expired(kind text, batch integer) RETURNS integer
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
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
       WHERE status IN ('delivered', 'discarded', 'abandoned') AND updated_at < keep_until
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
  END CASE;
  GET DIAGNOSTICS pruned = ROW_COUNT;
  RETURN pruned;
END
$$;
REVOKE ALL ON FUNCTION prune_expired(text, integer) FROM PUBLIC;
