-- When a request in flight was admitted (its lease taken, or taken again by a later attempt, in admit_attempt): the
-- workers' gauge of the oldest one, hold_sweeper_oldest_in_flight_attempt_age_seconds, a request hanging on a
-- merchant. now() is taken once for the leases already there: no rewrite of the table.
ALTER TABLE merchant_requests_in_flight ADD COLUMN leased_at timestamptz NOT NULL DEFAULT now();

CREATE FUNCTION merchant_requests_in_flight_leased_now() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.leased_at := now();
  RETURN NEW;
END
$$;

CREATE TRIGGER merchant_requests_in_flight_leased_at BEFORE INSERT OR UPDATE OF expires_at ON merchant_requests_in_flight
  FOR EACH ROW EXECUTE FUNCTION merchant_requests_in_flight_leased_now();
