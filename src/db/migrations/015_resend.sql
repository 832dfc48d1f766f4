-- Resend: a webhook that reached an end (delivered, discarded, abandoned) may be sent again, with its original id and
-- payload and a fresh signature (a merchant lost it; nobody decided its quarantine in time). Each resend is a new
-- policy run of the same row, delivered by a workflow of its own (`resendWebhook`, id hold-resend-<region>-<resend id>):
-- its first activity records the resend here and moves the row back to pending, in one statement
-- (src/sql/deliveries.ts, `reopenForResend`), so a resend exists if and only if its row was reopened.
CREATE TABLE webhook_resends (
  id             text PRIMARY KEY,
  webhook_id     text NOT NULL REFERENCES webhook_deliveries (webhook_id),
  -- The policy run this resend starts (1 + replays + resends before it): the replay lane, its own attempts.
  policy_run     integer NOT NULL CHECK (policy_run > 1),
  -- Where the webhook stood when it was reopened, and when it had been delivered (a reopened row forgets it).
  from_status    text NOT NULL CHECK (from_status IN ('delivered', 'discarded', 'abandoned')),
  from_delivered_at timestamptz,
  requested_by   text NOT NULL CHECK (btrim(requested_by) <> ''),
  reason         text NOT NULL CHECK (btrim(reason) <> ''),
  ticket         text,
  -- A bulk resend (and every resend where four eyes rule) carries out an approved request (replay_requests, kind
  -- 'resend'), approved by another person than its requester.
  request_id     text REFERENCES replay_requests (id),
  approved_by    text,
  -- The workflow that delivers this run (and any replay of it): approvals, discards and the outbox reconciler find it here.
  workflow_id    text NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  UNIQUE (webhook_id, policy_run),
  CHECK ((request_id IS NULL) = (approved_by IS NULL)),
  CHECK (approved_by IS NULL OR identity_key(approved_by) <> identity_key(requested_by))
);
CREATE INDEX webhook_resends_request ON webhook_resends (request_id, webhook_id) WHERE request_id IS NOT NULL;

-- Bulk resends go through the same preview -> second-person approval as bulk replays: a request of kind 'resend'
-- freezes the webhooks (and each one's policy run) that had reached an end; its approval resends exactly those.
ALTER TABLE replay_requests ADD COLUMN kind text NOT NULL DEFAULT 'replay' CHECK (kind IN ('replay', 'resend'));
