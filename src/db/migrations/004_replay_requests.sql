-- 004_replay_requests: approval-gated bulk replay, and a log of every operator signal.
--
-- A preview freezes the quarantined deliveries matching its filters into a request; an approval (by someone
-- other than the requester) replays exactly that frozen set, never what happens to match the filters later.

CREATE TABLE replay_requests (
  id           text PRIMARY KEY,
  requested_by text NOT NULL,
  filters      jsonb NOT NULL,
  item_count   integer NOT NULL,
  status       text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved')),
  approved_by  text,
  approved_at  timestamptz,
  created_at   timestamptz NOT NULL DEFAULT now(),
  CHECK ((status = 'approved') = (approved_by IS NOT NULL)),
  CHECK (approved_by IS NULL OR approved_by <> requested_by)
);

CREATE TABLE replay_request_items (
  request_id  text NOT NULL REFERENCES replay_requests (id),
  webhook_id  text NOT NULL REFERENCES webhook_deliveries (webhook_id),
  -- The policy run that was quarantined when the preview froze it: approving replays that run, no other.
  policy_run  integer NOT NULL,
  -- applied | ignored (no longer quarantined by the time of the approval) | failed
  outcome     text,
  signalled_at timestamptz,
  PRIMARY KEY (request_id, webhook_id)
);

-- Every approveReplay / discard sent by the operator tooling, applied or not: "recorded and ignored" is a row
-- here with the reason it did not apply.
CREATE TABLE operator_signals (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  webhook_id text NOT NULL REFERENCES webhook_deliveries (webhook_id),
  signal     text NOT NULL CHECK (signal IN ('approveReplay', 'discard')),
  sent_by    text NOT NULL,
  reason     text NOT NULL,
  outcome    text NOT NULL CHECK (outcome IN ('sent', 'ignored')),
  detail     text,
  sent_at    timestamptz NOT NULL DEFAULT now()
);
