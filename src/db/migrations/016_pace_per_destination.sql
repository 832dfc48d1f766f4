-- Pacing per destination. Until now the budget was one row per merchant (merchant_rate_limits): two merchant rows on one
-- endpoint (an aggregator, a merchant with two accounts) each got the full published rate, and the endpoint twice that.
-- The budget is now one row per destination, the endpoint's origin (scheme, host, port: what one server behind one
-- limiter answers), shared by every merchant row that points there, at the strictest rate any of them publishes.
-- A 429's push-back, and the cap on requests open at once, are the destination's too.
--
-- admit_attempt keeps its signature (workers of the previous build call it, through acquire_send_slot too): during a
-- deploy both builds admit through the destination's row, and a push-back an old worker writes on the merchant's row
-- (merchant_rate_limits.paused_until) is still honoured. merchant_rate_limits stays for them; nothing of this build
-- writes it.

-- The origin of an endpoint URL, as the delivery's URL parser sees it: scheme and host lower case, a trailing dot of
-- the host dropped, the scheme's default port written out. Userinfo is refused on write (src/delivery/endpoint.ts).
CREATE FUNCTION endpoint_origin(url text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  parts  text[];
  scheme text;
  host   text;
  port   text;
BEGIN
  parts := regexp_match(url, '^([A-Za-z][A-Za-z0-9+.-]*)://(?:[^@/?#]*@)?(\[[^]]*\]|[^:/?#]*)(?::([0-9]*))?');
  IF parts IS NULL THEN
    RETURN url;
  END IF;
  scheme := lower(parts[1]);
  host := rtrim(lower(parts[2]), '.');
  port := CASE
            WHEN coalesce(parts[3], '') <> '' THEN (parts[3]::integer)::text
            WHEN scheme = 'https' THEN '443'
            WHEN scheme = 'http' THEN '80'
            ELSE ''
          END;
  RETURN scheme || '://' || host || ':' || port;
END;
$$;

ALTER TABLE merchants ADD COLUMN endpoint_origin text GENERATED ALWAYS AS (endpoint_origin(endpoint_url)) STORED;
CREATE INDEX merchants_endpoint_origin ON merchants (endpoint_origin, rate_per_second);

-- One GCRA budget per destination, the same two clocks as 003's (the queue, `tat`; the gate, `gate_tat`) and the
-- push-back of a 429 (`paused_until`). A row is made by the first admission to a destination.
CREATE TABLE destination_budgets (
  origin       text PRIMARY KEY,
  tat          timestamptz NOT NULL DEFAULT '-infinity',
  gate_tat     timestamptz NOT NULL DEFAULT '-infinity',
  paused_until timestamptz NOT NULL DEFAULT '-infinity',
  pause_reason text
);
-- Carried over: where each destination's queue and gate stood, and any push-back still running.
INSERT INTO destination_budgets (origin, tat, gate_tat, paused_until, pause_reason)
SELECT DISTINCT ON (m.endpoint_origin) m.endpoint_origin, r.tat, r.gate_tat, r.paused_until, r.pause_reason
  FROM merchants m JOIN merchant_rate_limits r ON r.merchant_id = m.id
 ORDER BY m.endpoint_origin, r.paused_until DESC, r.tat DESC;

CREATE OR REPLACE FUNCTION admit_attempt(merchant text, lane_horizon_ms double precision, margin double precision, reserved boolean,
                                         webhook text, cap integer, lease_ms double precision)
RETURNS TABLE (outcome text, at timestamptz, db_now timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
  dest           text;
  rate           numeric;
  emission       interval;
  limits         destination_budgets%ROWTYPE;
  merchant_pause timestamptz;
  paused         timestamptz;
  slot           timestamptz;
  tat_after      timestamptz;
  now_ts         timestamptz;
BEGIN
  SELECT m.endpoint_origin INTO dest FROM merchants m WHERE m.id = merchant;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'merchant % does not exist', merchant;
  END IF;
  -- The strictest published rate of every merchant row pointing at this destination.
  SELECT min(o.rate_per_second) INTO rate FROM merchants o WHERE o.endpoint_origin = dest;
  emission := make_interval(secs => (1 + margin) / rate);
  SELECT * INTO limits FROM destination_budgets b WHERE b.origin = dest FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO destination_budgets (origin) VALUES (dest) ON CONFLICT DO NOTHING;
    SELECT * INTO limits FROM destination_budgets b WHERE b.origin = dest FOR UPDATE;
  END IF;
  -- A push-back written by a worker of the previous build, on the merchant's own row.
  SELECT r.paused_until INTO merchant_pause FROM merchant_rate_limits r WHERE r.merchant_id = merchant;
  -- Read the clock after the lock: time spent queueing behind other acquirers must not count as waited.
  now_ts := clock_timestamp();
  paused := greatest(limits.paused_until, coalesce(merchant_pause, '-infinity'));

  -- Room for one more request in flight at the destination: fewer than `cap` unexpired leases of every merchant
  -- pointing there, and none of this webhook's.
  IF cap IS NOT NULL AND (
       (SELECT count(*) FROM merchant_requests_in_flight f JOIN merchants o ON o.id = f.merchant_id
         WHERE o.endpoint_origin = dest AND f.expires_at > now_ts) >= cap
       OR EXISTS (SELECT 1 FROM merchant_requests_in_flight f WHERE f.webhook_id = webhook AND f.expires_at > now_ts)) THEN
    RETURN QUERY SELECT 'busy'::text, now_ts, now_ts;
    RETURN;
  END IF;

  tat_after := limits.tat;
  IF NOT reserved THEN
    slot := greatest(limits.tat, paused, now_ts);
    IF slot - now_ts > make_interval(secs => lane_horizon_ms / 1000) THEN
      RETURN QUERY SELECT 'denied'::text, slot, now_ts;
      RETURN;
    END IF;
    tat_after := slot + emission;
    IF slot > now_ts THEN
      UPDATE destination_budgets b SET tat = tat_after WHERE b.origin = dest;
      RETURN QUERY SELECT 'wait'::text, slot, now_ts;
      RETURN;
    END IF;
  END IF;

  slot := greatest(limits.gate_tat, paused, now_ts);
  IF slot > now_ts THEN
    IF NOT reserved THEN
      UPDATE destination_budgets b SET tat = tat_after WHERE b.origin = dest;
    END IF;
    RETURN QUERY SELECT 'wait'::text, slot, now_ts;
    RETURN;
  END IF;
  UPDATE destination_budgets b SET tat = tat_after, gate_tat = now_ts + emission WHERE b.origin = dest;
  IF cap IS NOT NULL THEN
    INSERT INTO merchant_requests_in_flight (webhook_id, merchant_id, expires_at)
    VALUES (webhook, merchant, now_ts + make_interval(secs => lease_ms / 1000))
    ON CONFLICT (webhook_id) DO UPDATE SET expires_at = excluded.expires_at;
  END IF;
  RETURN QUERY SELECT 'send'::text, now_ts, now_ts;
END;
$$;
