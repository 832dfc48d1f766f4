-- The audit of the admin and merchant APIs (migration 018), as a record of what was done and by whom, never of what
-- anyone may send: a refusal before any identity (401, and the merchant API's 429) is counted in metrics and logged by
-- sample, not written here (src/api/refusals.ts); an authenticated call is.
--
-- A call whose whole effect is ledger rows writes its row in the same transaction (the call fails if it cannot). A call
-- that acts outside the ledger (Temporal, a merchant's endpoint) writes its row first, `started`, and fails before it
-- acts if it cannot; the row's outcome is then filled in, the one change a row may take. A row still `started` says the
-- action may have happened and its answer was never recorded.
ALTER TABLE api_audit DROP CONSTRAINT api_audit_outcome_check;
ALTER TABLE api_audit ADD CONSTRAINT api_audit_outcome_check
  CHECK (outcome IN ('started', 'ok', 'refused', 'rejected', 'failed'));
-- What a caller sends is stored bounded (the API caps it; this is the guard).
ALTER TABLE api_audit ADD CONSTRAINT api_audit_path_bounded CHECK (length(path) <= 512) NOT VALID;
ALTER TABLE api_audit ADD CONSTRAINT api_audit_detail_bounded CHECK (length(detail) <= 2000) NOT VALID;

-- How long a row stays at least: 400 days, past the year (and the three months at hand) a payments team's audit rules
-- ask for (PCI DSS 10.5.1), so that a yearly review always finds its whole year. docs/security.md#the-audit.
CREATE FUNCTION api_audit_min_retention() RETURNS interval LANGUAGE sql IMMUTABLE AS $$ SELECT interval '400 days' $$;

CREATE OR REPLACE FUNCTION api_audit_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND OLD.outcome = 'started' AND NEW.outcome <> 'started'
     AND (NEW.id, NEW.at, NEW.request_id, NEW.subject, NEW.roles, NEW.verb, NEW.method, NEW.path, NEW.target)
         IS NOT DISTINCT FROM (OLD.id, OLD.at, OLD.request_id, OLD.subject, OLD.roles, OLD.verb, OLD.method, OLD.path, OLD.target)
  THEN
    RETURN NEW;
  END IF;
  IF TG_OP = 'DELETE' AND current_setting('hold_sweeper.audit_prune', true) = 'on'
     AND OLD.at < now() - api_audit_min_retention() THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'api_audit is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$;

-- The one way rows leave the audit: older than the retention, by a named person, and the pruning itself is a row.
CREATE FUNCTION prune_api_audit(older_than timestamptz, pruned_by text) RETURNS bigint
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  pruned bigint;
BEGIN
  IF older_than > now() - api_audit_min_retention() THEN
    RAISE EXCEPTION 'api_audit keeps % at least: % is too recent', api_audit_min_retention(), older_than
      USING ERRCODE = 'check_violation';
  END IF;
  IF btrim(coalesce(pruned_by, '')) = '' THEN
    RAISE EXCEPTION 'a prune of api_audit names who prunes' USING ERRCODE = 'check_violation';
  END IF;
  PERFORM set_config('hold_sweeper.audit_prune', 'on', true);
  DELETE FROM api_audit WHERE at < older_than;
  GET DIAGNOSTICS pruned = ROW_COUNT;
  PERFORM set_config('hold_sweeper.audit_prune', 'off', true);
  INSERT INTO api_audit (request_id, subject, verb, method, path, outcome, status, detail)
  VALUES (gen_random_uuid()::text, pruned_by, 'audit.prune', 'SQL', 'prune_api_audit', 'ok', 200,
          format('%s rows written before %s deleted', pruned, older_than));
  RETURN pruned;
END
$$;
REVOKE ALL ON FUNCTION prune_api_audit(timestamptz, text) FROM PUBLIC;
