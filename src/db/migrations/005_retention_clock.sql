-- The timestamps retention reads (docs/data-retention.md) are the ledger's clock, never a caller's: set by a default
-- on insert and by these triggers on update, and no service role may write them (src/db/rights.ts leaves them out of
-- every column grant). A row made to look old is a row prune_expired deletes, with every row that names it.
--
-- The SECURITY DEFINER functions resolve every name in public before pg_temp: a caller's temporary table named like a
-- ledger table never stands in for it. `npm run migrate` also revokes TEMPORARY on the database and CREATE on the
-- schema from PUBLIC (src/db/rights.ts).

-- A webhook's last change, which its retention counts from once it is at an end.
CREATE FUNCTION webhook_deliveries_updated_now() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.updated_at := now();
  RETURN NEW;
END
$$;
CREATE TRIGGER webhook_deliveries_updated_at BEFORE UPDATE ON webhook_deliveries
  FOR EACH ROW EXECUTE FUNCTION webhook_deliveries_updated_now();

-- An event is applied once: when its outcome is first written, and never again after.
CREATE FUNCTION processor_events_applied_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.applied_at := CASE WHEN OLD.applied_at IS NOT NULL THEN OLD.applied_at
                         WHEN NEW.outcome IS NOT NULL THEN now() END;
  RETURN NEW;
END
$$;
CREATE TRIGGER processor_events_applied_at BEFORE UPDATE ON processor_events
  FOR EACH ROW EXECUTE FUNCTION processor_events_applied_once();

-- A re-run of a sweep records when it finished again.
CREATE FUNCTION sweep_runs_finished_now() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.finished_at := now();
  RETURN NEW;
END
$$;
CREATE TRIGGER sweep_runs_finished_at BEFORE UPDATE ON sweep_runs
  FOR EACH ROW EXECUTE FUNCTION sweep_runs_finished_now();

-- A review is resolved once, by whoever resolved it first, when they did.
CREATE FUNCTION ledger_reviews_resolved_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.resolved_at IS NOT NULL THEN
    NEW.resolved_at := OLD.resolved_at;
    NEW.resolved_by := OLD.resolved_by;
  ELSE
    NEW.resolved_at := CASE WHEN NEW.resolved_by IS NOT NULL THEN now() END;
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER ledger_reviews_resolved_at BEFORE UPDATE ON ledger_reviews
  FOR EACH ROW EXECUTE FUNCTION ledger_reviews_resolved_once();

ALTER FUNCTION prune_expired(text, integer) SET search_path = public, pg_temp;
ALTER FUNCTION prune_api_audit(timestamptz, text) SET search_path = public, pg_temp;
