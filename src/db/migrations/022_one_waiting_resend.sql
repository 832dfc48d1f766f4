-- One waiting resend per webhook, by the database: the merchant API's "none waiting" check and its insert are one
-- statement, but two such statements at once each saw none waiting (50 concurrent calls made up to 7 requests, and
-- the reconciler started each: a webhook resent three times). The second insert now conflicts instead.
-- Duplicates already waiting are left started-as-one: all but the oldest are marked started, so the reconciler starts
-- only that one.
UPDATE merchant_resend_requests q SET started_at = now()
 WHERE q.started_at IS NULL
   AND EXISTS (SELECT 1 FROM merchant_resend_requests o
                WHERE o.webhook_id = q.webhook_id AND o.started_at IS NULL
                  AND (o.requested_at, o.id) < (q.requested_at, q.id));
CREATE UNIQUE INDEX merchant_resend_requests_one_waiting ON merchant_resend_requests (webhook_id) WHERE started_at IS NULL;
