-- One call admits an attempt. 011 asked twice per admission (merchant_request_room, then acquire_send_slot: two
-- function calls, the merchant's budget row locked twice) and a send wrote the budget row twice (its place in the queue,
-- then the gate). admit_attempt locks the row once, checks the room for a request in flight, takes the place and the
-- gate in one update, and takes the lease, in one call; the worker composes it with the attempt's count
-- (src/sql/merchant-budget.ts). Same decisions as before, in the same order: room first (busy: nothing reserved),
-- then the queue (denied / wait) and the gate (wait / send).
--
-- webhook, cap and lease_ms NULL: no lease, no room check (acquire_send_slot, kept for its callers and for workers of
-- the previous build during a deploy, now calls this). merchant_request_room (011) stays for those workers too; nothing
-- of this build calls it.
CREATE FUNCTION admit_attempt(merchant text, lane_horizon_ms double precision, margin double precision, reserved boolean,
                              webhook text, cap integer, lease_ms double precision)
RETURNS TABLE (outcome text, at timestamptz, db_now timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
  rate      numeric;
  emission  interval;
  limits    merchant_rate_limits%ROWTYPE;
  slot      timestamptz;
  tat_after timestamptz;
  now_ts    timestamptz;
BEGIN
  SELECT m.rate_per_second INTO rate FROM merchants m WHERE m.id = merchant;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'merchant % does not exist', merchant;
  END IF;
  emission := make_interval(secs => (1 + margin) / rate);
  SELECT * INTO limits FROM merchant_rate_limits r WHERE r.merchant_id = merchant FOR UPDATE;
  -- Read the clock after the lock: time spent queueing behind other acquirers must not count as waited.
  now_ts := clock_timestamp();

  -- Room for one more request in flight: fewer than `cap` unexpired leases of the merchant, and none of this webhook's.
  -- An expired lease no longer counts; it is replaced (its webhook's next attempt) or deleted (its attempt's record).
  IF cap IS NOT NULL AND (
       (SELECT count(*) FROM merchant_requests_in_flight f WHERE f.merchant_id = merchant AND f.expires_at > now_ts) >= cap
       OR EXISTS (SELECT 1 FROM merchant_requests_in_flight f WHERE f.webhook_id = webhook AND f.expires_at > now_ts)) THEN
    RETURN QUERY SELECT 'busy'::text, now_ts, now_ts;
    RETURN;
  END IF;

  tat_after := limits.tat;
  IF NOT reserved THEN
    slot := greatest(limits.tat, limits.paused_until, now_ts);
    IF slot - now_ts > make_interval(secs => lane_horizon_ms / 1000) THEN
      RETURN QUERY SELECT 'denied'::text, slot, now_ts;
      RETURN;
    END IF;
    tat_after := slot + emission;
    IF slot > now_ts THEN
      UPDATE merchant_rate_limits r SET tat = tat_after WHERE r.merchant_id = merchant;
      RETURN QUERY SELECT 'wait'::text, slot, now_ts;
      RETURN;
    END IF;
  END IF;

  slot := greatest(limits.gate_tat, limits.paused_until, now_ts);
  IF slot > now_ts THEN
    IF NOT reserved THEN
      UPDATE merchant_rate_limits r SET tat = tat_after WHERE r.merchant_id = merchant;
    END IF;
    RETURN QUERY SELECT 'wait'::text, slot, now_ts;
    RETURN;
  END IF;
  UPDATE merchant_rate_limits r SET tat = tat_after, gate_tat = now_ts + emission WHERE r.merchant_id = merchant;
  IF cap IS NOT NULL THEN
    INSERT INTO merchant_requests_in_flight (webhook_id, merchant_id, expires_at)
    VALUES (webhook, merchant, now_ts + make_interval(secs => lease_ms / 1000))
    ON CONFLICT (webhook_id) DO UPDATE SET expires_at = excluded.expires_at;
  END IF;
  RETURN QUERY SELECT 'send'::text, now_ts, now_ts;
END;
$$;

CREATE OR REPLACE FUNCTION acquire_send_slot(merchant text, lane_horizon_ms double precision, margin double precision, reserved boolean)
RETURNS TABLE (outcome text, at timestamptz, db_now timestamptz)
LANGUAGE sql AS $$
  SELECT * FROM admit_attempt(merchant, lane_horizon_ms, margin, reserved, NULL, NULL, NULL);
$$;
