-- 005_pace_sends_evenly: sends go one emission interval apart, never in a burst; the merchant's burst is
-- left as headroom for the jitter between our admission and the merchant's receive.
--
-- Why: with b + 1 sends at once from idle, the (rate + burst + 1)-th send of any run came only `margin`
-- seconds (100 ms at margin 0.1) after the first one had a full second behind it, so a send that reached the
-- merchant 100 ms later than its neighbours put rate + burst + 1 requests into one receiver-side second. The
-- chaos run measured up to 134 ms between admission and receive when a sweep starts 200 children at once on a
-- 2-core machine, and failed invariant 4 in 3 of 25 runs. Evenly paced, rate + burst + 1 sends span
-- (rate + burst) × (1 + margin) / rate seconds: 320 ms of headroom at 5 req/s burst 1, 1.2 s at 1 req/s burst 1,
-- 122 ms at 50 req/s burst 1. The long-run rate is unchanged (rate / (1 + margin)); an idle merchant loses its
-- b extra sends at the start, b / rate seconds of a night.
--
-- Same signature and outcomes as 003; `burst` is no longer read here.
CREATE OR REPLACE FUNCTION acquire_send_slot(merchant text, lane_horizon_ms double precision, margin double precision, reserved boolean)
RETURNS TABLE (outcome text, at timestamptz, db_now timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
  rate      numeric;
  emission  interval;
  limits    merchant_rate_limits%ROWTYPE;
  slot      timestamptz;
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

  IF NOT reserved THEN
    slot := greatest(limits.tat, limits.paused_until, now_ts);
    IF slot - now_ts > make_interval(secs => lane_horizon_ms / 1000) THEN
      RETURN QUERY SELECT 'denied'::text, slot, now_ts;
      RETURN;
    END IF;
    UPDATE merchant_rate_limits r SET tat = slot + emission WHERE r.merchant_id = merchant;
    IF slot > now_ts THEN
      RETURN QUERY SELECT 'wait'::text, slot, now_ts;
      RETURN;
    END IF;
  END IF;

  slot := greatest(limits.gate_tat, limits.paused_until, now_ts);
  IF slot > now_ts THEN
    RETURN QUERY SELECT 'wait'::text, slot, now_ts;
    RETURN;
  END IF;
  UPDATE merchant_rate_limits r SET gate_tat = now_ts + emission WHERE r.merchant_id = merchant;
  RETURN QUERY SELECT 'send'::text, now_ts, now_ts;
END;
$$;
