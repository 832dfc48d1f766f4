-- 002_webhook_deliveries: the webhook each release must send, every HTTP attempt at sending it, and the
-- merchant-side switches the delivery policy needs (endpoint disabled by a 410, per-merchant overrides).
--
-- A delivery row is written in the same transaction as the release it announces (an outbox): no webhook can
-- exist for a release that did not commit, and the payload, fixed then, never changes across attempts.

ALTER TABLE merchants
  ADD COLUMN disabled_reason text,
  ADD COLUMN disabled_at     timestamptz,
  -- Overrides of the default delivery policy, e.g. {"initialBackoffMs": 1000, "retryHorizonMs": 86400000};
  -- validated by src/delivery/policy.ts, which names the bad key if one is wrong.
  ADD COLUMN delivery_policy jsonb NOT NULL DEFAULT '{}'::jsonb;

CREATE TABLE webhook_deliveries (
  webhook_id        text PRIMARY KEY,
  hold_id           text NOT NULL UNIQUE REFERENCES auth_holds (id),
  merchant_id       text NOT NULL,
  event_type        text NOT NULL,
  -- The exact bytes that are signed and sent on every attempt and replay.
  payload           text NOT NULL,
  status            text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'delivered', 'quarantined', 'discarded', 'abandoned')),
  attempt_count     integer NOT NULL DEFAULT 0,
  last_status_code  integer,
  last_error        text,
  quarantine_reason text CHECK (quarantine_reason IN ('rejected', 'exhausted', 'endpoint_gone', 'bad_url', 'missing_secret', 'invalid_policy')),
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  delivered_at      timestamptz,
  quarantined_at    timestamptz,
  -- A quarantined row says why; the reason is kept when a human discards it or nobody decides (abandoned).
  CHECK (status <> 'quarantined' OR quarantine_reason IS NOT NULL),
  CHECK ((status = 'delivered') = (delivered_at IS NOT NULL))
);

-- "Oldest undelivered webhook" and the per-merchant backlog both read pending rows by age.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (merchant_id, created_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_quarantined ON webhook_deliveries (merchant_id, quarantined_at) WHERE status = 'quarantined';

CREATE TABLE delivery_attempts (
  id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  webhook_id         text NOT NULL REFERENCES webhook_deliveries (webhook_id),
  -- 1, 2, 3... across the whole life of the webhook, replays included.
  attempt_number     integer NOT NULL,
  -- 1 for the first policy run; each approved replay starts a new one.
  policy_run         integer NOT NULL,
  -- When Temporal scheduled this attempt (after the previous one's retry delay), by the server's clock.
  scheduled_at       timestamptz NOT NULL,
  started_at         timestamptz NOT NULL,
  duration_ms        integer NOT NULL,
  status_code        integer,
  -- For attempts without an HTTP status: ConnectionError, AttemptTimeout, ...
  error_class        text,
  response_excerpt   text,
  -- delivered | retry | quarantine
  outcome            text NOT NULL CHECK (outcome IN ('delivered', 'retry', 'quarantine')),
  next_retry_delay_ms bigint,
  -- Why that delay: "backoff attempt 3", "Retry-After 120 s (floor)", ...
  retry_reason       text,
  UNIQUE (webhook_id, attempt_number)
);

-- Every human (or timeout) decision on a quarantined delivery: who, why, under which ticket.
CREATE TABLE delivery_decisions (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  webhook_id  text NOT NULL REFERENCES webhook_deliveries (webhook_id),
  -- The policy run that ended in the quarantine being decided.
  policy_run  integer NOT NULL,
  decision    text NOT NULL CHECK (decision IN ('replay', 'discard', 'abandon')),
  decided_by  text NOT NULL,
  reason      text NOT NULL,
  ticket      text,
  decided_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (webhook_id, policy_run)
);
