-- Requests in flight per merchant, across every worker. The rate limit bounds how often requests start, not how many
-- are open: against a merchant that hangs, every admitted attempt stays open until its timeout. An attempt holds a lease
-- from its admission at the gate (in acquire_send_slot's statement, src/sql/merchant-budget.ts) until its attempt is
-- recorded; no more than the worker's cap (WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT) are held at once for one merchant, and
-- never two for one webhook. A lease ends on its own at `expires_at` (the longest its attempt can run): a worker killed
-- mid-request never gives it back.
CREATE TABLE merchant_requests_in_flight (
  webhook_id  text PRIMARY KEY,
  merchant_id text NOT NULL REFERENCES merchants (id),
  expires_at  timestamptz NOT NULL
);
CREATE INDEX merchant_requests_in_flight_merchant ON merchant_requests_in_flight (merchant_id, expires_at);

-- Whether one more of the merchant's webhooks may be sent now: fewer than `cap` leases of the merchant unexpired, and
-- none of this webhook's. Takes the merchant's budget row lock first, as acquire_send_slot does, so that the check and
-- the lease taken after it in the same statement are one merchant's decision at a time. Reads only: an expired lease
-- no longer counts, and is replaced (its webhook's next attempt) or deleted (its attempt's record) like any other.
CREATE FUNCTION merchant_request_room(merchant text, webhook text, cap integer)
RETURNS TABLE (has_room boolean, in_flight integer, db_now timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
  now_ts timestamptz;
BEGIN
  PERFORM 1 FROM merchant_rate_limits r WHERE r.merchant_id = merchant FOR UPDATE;
  now_ts := clock_timestamp();
  SELECT count(*)::integer INTO in_flight FROM merchant_requests_in_flight f
   WHERE f.merchant_id = merchant AND f.expires_at > now_ts;
  has_room := in_flight < cap
    AND NOT EXISTS (SELECT 1 FROM merchant_requests_in_flight f WHERE f.webhook_id = webhook AND f.expires_at > now_ts);
  db_now := now_ts;
  RETURN NEXT;
END;
$$;
