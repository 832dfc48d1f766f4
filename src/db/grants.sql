-- What each service's database role may do, applied by `migrate` after every migration (npm run migrate, as the
-- schema's owner): revoked, then granted, in one transaction, so a new table is never reachable by a role that was
-- not given it and a privilege dropped here is gone at the next migrate. A role that does not exist is skipped (a
-- development database, where everything connects as one superuser). docs/security.md#one-role-per-service.
--
-- None of them owns a table or may create one: DDL is the migrator's (hold_sweeper_migrator, the owner). None may
-- DELETE or TRUNCATE ledger rows; the receiver deletes only its own refusals (their retention), and the worker's
-- retention job deletes only through prune_expired and prune_api_audit, which fix the retention themselves.
DO $grants$
DECLARE
  product_tables text := 'accounts, auth_holds, ledger_entries, merchants, webhook_deliveries, '
    'delivery_attempts, delivery_decisions, replay_requests, replay_request_items, operator_decisions, sweep_runs, '
    'processor_events, processor_requests_refused, processor_sequence_skips, processor_skip_requests, ledger_reviews, '
    'merchant_requests_in_flight, send_pauses, outbox_reconciliations, webhook_resends, send_budgets, destinations, '
    'api_audit, '
    'merchant_api_keys, merchant_resend_requests, schema_migrations';
BEGIN
  -- The worker: releases holds, writes and sends webhooks (it opens merchant secrets to sign), applies processor
  -- events, records sweeps, reads what its gauges export, erases previous secrets past their overlap, disables a
  -- merchant on 410 Gone. It never reads the receiver's refusals.
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hold_sweeper_worker') THEN
    EXECUTE format('REVOKE ALL ON %s FROM hold_sweeper_worker', product_tables);
    GRANT SELECT ON accounts, auth_holds, ledger_entries, merchants, destinations, webhook_deliveries,
      delivery_attempts, delivery_decisions, replay_requests, replay_request_items, operator_decisions, sweep_runs,
      processor_events, processor_sequence_skips, processor_skip_requests, ledger_reviews, schema_migrations
      TO hold_sweeper_worker;
    GRANT UPDATE ON accounts, auth_holds, merchants, webhook_deliveries, sweep_runs, processor_events
      TO hold_sweeper_worker;
    GRANT INSERT ON ledger_entries, webhook_deliveries, delivery_attempts, delivery_decisions, sweep_runs,
      processor_sequence_skips, ledger_reviews TO hold_sweeper_worker;
    -- Its leases on a merchant's requests in flight: taken at admission, given back when the attempt is recorded.
    GRANT SELECT, INSERT, UPDATE, DELETE ON merchant_requests_in_flight TO hold_sweeper_worker;
    -- Whether the region's sends are paused (every admission reads it; operators write it).
    GRANT SELECT ON send_pauses TO hold_sweeper_worker;
    -- The outbox reconciler's account of each run (and the gauges read the newest).
    GRANT SELECT, INSERT ON outbox_reconciliations TO hold_sweeper_worker;
    -- A resend is recorded by its workflow's first activity, with the row it reopens.
    GRANT SELECT, INSERT ON webhook_resends TO hold_sweeper_worker;
    -- Each merchant's (or shared destination's) budget: made by the first admission, written by every one.
    GRANT SELECT, INSERT, UPDATE ON send_budgets TO hold_sweeper_worker;
    -- Merchants' resend requests (merchant_resend_requests): the reconciler starts them; a resend's first step checks
    -- the request and whether its key was live. Never a key's secret hash.
    GRANT SELECT, UPDATE (started_at) ON merchant_resend_requests TO hold_sweeper_worker;
    GRANT SELECT (id, merchant_id, revoked_at) ON merchant_api_keys TO hold_sweeper_worker;
    -- The retention job (docs/data-retention.md).
    GRANT EXECUTE ON FUNCTION prune_expired(text, integer), prune_api_audit(timestamptz, text) TO hold_sweeper_worker;
  END IF;

  -- The receiver: faces the internet. Records events and hands them over, writes and prunes its signed refusals,
  -- reads which merchant a hold is for. Nothing of merchants (their secrets), accounts or the ledger.
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hold_sweeper_receiver') THEN
    EXECUTE format('REVOKE ALL ON %s FROM hold_sweeper_receiver', product_tables);
    GRANT SELECT (event_id, hold_id, sequence, body_sha256, dispatched_at, received_at), INSERT ON processor_events
      TO hold_sweeper_receiver;
    GRANT UPDATE (dispatched_at) ON processor_events TO hold_sweeper_receiver;
    GRANT SELECT (id, received_at), INSERT, DELETE ON processor_requests_refused TO hold_sweeper_receiver;
    GRANT SELECT (id, merchant_id) ON auth_holds TO hold_sweeper_receiver;
    GRANT SELECT ON schema_migrations TO hold_sweeper_receiver;
  END IF;

  -- The operators' CLI: reads everything it reports, manages merchants (their secrets included: add, rotate, ping),
  -- records replay and skip requests and their approvals, resolves ledger reviews. Decisions on a hold go through its
  -- workflow, so the CLI writes no delivery, hold or ledger row itself.
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hold_sweeper_ops') THEN
    EXECUTE format('REVOKE ALL ON %s FROM hold_sweeper_ops', product_tables);
    EXECUTE format('GRANT SELECT ON %s TO hold_sweeper_ops', product_tables);
    GRANT INSERT, UPDATE ON merchants, destinations, replay_requests, replay_request_items, processor_skip_requests,
      send_pauses TO hold_sweeper_ops;
    -- A decision is recorded before it is sent, and keeps what the workflow answered; what it decides never changes.
    GRANT INSERT, UPDATE (outcome, detail) ON operator_decisions TO hold_sweeper_ops;
    -- `merchant ping` takes a turn in the merchant's budget like a delivery (and a 429 pushes it back).
    GRANT INSERT, UPDATE ON send_budgets TO hold_sweeper_ops;
    GRANT UPDATE ON ledger_reviews TO hold_sweeper_ops;
    -- The admin API (src/api/, the operators' CLI behind it) runs as this role: it appends its audit and reads it back;
    -- a call acting outside the ledger fills in the outcome of the row it wrote first (`started`), and rows past
    -- the audit's retention leave only through prune_api_audit, which records itself.
    GRANT INSERT, UPDATE (outcome, status, detail) ON api_audit TO hold_sweeper_ops;
    GRANT EXECUTE ON FUNCTION prune_api_audit(timestamptz, text) TO hold_sweeper_ops;
    -- Merchants' API keys: made and revoked by merchant admins (their secret's hash is written once, never read back).
    GRANT INSERT, UPDATE (revoked_at, revoked_by) ON merchant_api_keys TO hold_sweeper_ops;
  END IF;

  -- The merchant API: faces the internet, on behalf of merchants. Reads a merchant's own webhooks and their attempts
  -- (every query names the merchant its key belongs to), records resends they ask for, appends its audit. Nothing of
  -- merchant secrets, accounts, holds or the ledger; no Temporal access and no key.
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hold_sweeper_merchant_api') THEN
    EXECUTE format('REVOKE ALL ON %s FROM hold_sweeper_merchant_api', product_tables);
    GRANT SELECT (id, merchant_id, secret_sha256, rate_per_second, burst, revoked_at, last_used_at), UPDATE (last_used_at)
      ON merchant_api_keys TO hold_sweeper_merchant_api;
    GRANT SELECT (id, status) ON merchants TO hold_sweeper_merchant_api;
    GRANT SELECT (webhook_id, hold_id, merchant_id, event_type, payload, status, quarantine_reason, attempt_count,
      created_at, updated_at, delivered_at) ON webhook_deliveries TO hold_sweeper_merchant_api;
    GRANT SELECT ON delivery_attempts, webhook_resends TO hold_sweeper_merchant_api;
    GRANT SELECT, INSERT ON merchant_resend_requests TO hold_sweeper_merchant_api;
    GRANT INSERT ON api_audit TO hold_sweeper_merchant_api;
    GRANT SELECT ON schema_migrations TO hold_sweeper_merchant_api;
  END IF;
END
$grants$;
