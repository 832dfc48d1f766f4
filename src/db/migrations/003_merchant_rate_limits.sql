-- 003_merchant_rate_limits: one shared sending budget per merchant (GCRA), used by every worker process.
--
-- GCRA keeps a timestamp per merchant, the theoretical arrival time (tat). A caller takes its slot with one
-- locked call; rate and burst are read from the merchants row on every call, so a change takes effect on the
-- next acquire. `paused_until` is how a 429 (or a 503 with Retry-After) pushes the whole
-- merchant back: no slot is handed out, and no reserved slot is used, before it.

CREATE TABLE merchant_rate_limits (
  merchant_id  text PRIMARY KEY REFERENCES merchants (id),
  tat          timestamptz NOT NULL DEFAULT '-infinity',
  gate_tat     timestamptz NOT NULL DEFAULT '-infinity',
  paused_until timestamptz NOT NULL DEFAULT '-infinity',
  pause_reason text
);

INSERT INTO merchant_rate_limits (merchant_id) SELECT id FROM merchants;

CREATE FUNCTION merchants_create_rate_limit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO merchant_rate_limits (merchant_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
  RETURN NEW;
END;
$$;

CREATE TRIGGER merchants_create_rate_limit
  AFTER INSERT ON merchants
  FOR EACH ROW EXECUTE FUNCTION merchants_create_rate_limit();

-- Two GCRA clocks per merchant:
--   * the queue (`tat`) orders waiting deliveries: a caller reserves its place and sleeps to it (a durable timer
--     when far off) instead of polling; lanes decide how far ahead each kind of caller may reserve;
--   * the gate (`gate_tat`) admits actual sends, now or never: a caller woken late by its timer is spaced out
--     again here, so lateness can never bunch sends into one receiver-side second, and a 429 pause is checked
--     in the same locked step as the send is admitted.
-- `margin` stretches the emission interval (0.1 = 10 % slower than the published rate) so that network jitter
-- between our send and the merchant's receive cannot bunch them either. Burst b lets b + 1 sends go at once
-- from idle, then one per emission interval. Nothing is admitted before `paused_until`.
--
-- outcome: 'send' (admitted now), 'wait' (come back at `at` holding the queue place: reserved = true), or
-- 'denied' (nothing reserved; this lane's place in the queue would be `at`).
CREATE FUNCTION acquire_send_slot(merchant text, lane_horizon_ms double precision, margin double precision, reserved boolean)
RETURNS TABLE (outcome text, at timestamptz, db_now timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
  rate      numeric;
  bursts    integer;
  emission  interval;
  allowance interval;
  limits    merchant_rate_limits%ROWTYPE;
  base      timestamptz;
  slot      timestamptz;
  now_ts    timestamptz;
BEGIN
  SELECT m.rate_per_second, m.burst INTO rate, bursts FROM merchants m WHERE m.id = merchant;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'merchant % does not exist', merchant;
  END IF;
  emission := make_interval(secs => (1 + margin) / rate);
  allowance := emission * (bursts + 1);
  SELECT * INTO limits FROM merchant_rate_limits r WHERE r.merchant_id = merchant FOR UPDATE;
  -- Read the clock after the lock: time spent queueing behind other acquirers must not count as waited.
  now_ts := clock_timestamp();

  IF NOT reserved THEN
    base := greatest(limits.tat, limits.paused_until, now_ts);
    slot := greatest(base + emission - allowance, limits.paused_until, now_ts);
    IF slot - now_ts > make_interval(secs => lane_horizon_ms / 1000) THEN
      RETURN QUERY SELECT 'denied'::text, slot, now_ts;
      RETURN;
    END IF;
    UPDATE merchant_rate_limits r SET tat = base + emission WHERE r.merchant_id = merchant;
    IF slot > now_ts THEN
      RETURN QUERY SELECT 'wait'::text, slot, now_ts;
      RETURN;
    END IF;
  END IF;

  base := greatest(limits.gate_tat, limits.paused_until, now_ts);
  slot := greatest(base + emission - allowance, limits.paused_until, now_ts);
  IF slot > now_ts THEN
    RETURN QUERY SELECT 'wait'::text, slot, now_ts;
    RETURN;
  END IF;
  UPDATE merchant_rate_limits r SET gate_tat = base + emission WHERE r.merchant_id = merchant;
  RETURN QUERY SELECT 'send'::text, now_ts, now_ts;
END;
$$;
