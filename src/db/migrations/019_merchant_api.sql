-- The merchant API (src/api/merchant-server.ts): each merchant's API keys, and the resends merchants ask for.
--
-- A key is `hsk_<id>_<secret>`: the id is public (it names the key in logs and the audit), the secret is 32 random
-- bytes shown once when the key is made and stored here only as its SHA-256 (a key is high-entropy: a fast hash is
-- enough, and no stored value opens the API). A revoked key is kept, with who revoked it and when.
CREATE TABLE merchant_api_keys (
  id             text PRIMARY KEY CHECK (id ~ '^mk_[0-9a-f]{16}$'),
  merchant_id    text NOT NULL REFERENCES merchants (id),
  secret_sha256  bytea NOT NULL CHECK (octet_length(secret_sha256) = 32),
  label          text,
  -- Requests per second this key may make (its own budget, enforced by the API), and at once above it.
  rate_per_second numeric NOT NULL DEFAULT 5 CHECK (rate_per_second > 0),
  burst          integer NOT NULL DEFAULT 10 CHECK (burst >= 1),
  created_at     timestamptz NOT NULL DEFAULT now(),
  created_by     text NOT NULL CHECK (btrim(created_by) <> ''),
  revoked_at     timestamptz,
  revoked_by     text,
  last_used_at   timestamptz,
  CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
);
CREATE INDEX merchant_api_keys_merchant ON merchant_api_keys (merchant_id);

-- A resend a merchant asked for, of one of its own webhooks at an end. The merchant API records it and nothing else
-- (it holds no Temporal access and no key); the worker's outbox reconciler starts its resend workflow (the replay
-- lane), whose first step checks this row (the webhook is this merchant's, the key was live when it asked).
CREATE TABLE merchant_resend_requests (
  id             text PRIMARY KEY CHECK (id ~ '^mr_[0-9a-f]{20}$'),
  merchant_id    text NOT NULL REFERENCES merchants (id),
  webhook_id     text NOT NULL REFERENCES webhook_deliveries (webhook_id),
  key_id         text NOT NULL REFERENCES merchant_api_keys (id),
  -- The resend it becomes (webhook_resends.id once the worker reopened the webhook).
  resend_id      text NOT NULL UNIQUE CHECK (resend_id ~ '^rs_[0-9a-f]{20}$'),
  requested_at   timestamptz NOT NULL DEFAULT now(),
  -- When the reconciler started its workflow (NULL: not yet).
  started_at     timestamptz
);
CREATE INDEX merchant_resend_requests_unstarted ON merchant_resend_requests (requested_at) WHERE started_at IS NULL;
CREATE INDEX merchant_resend_requests_merchant ON merchant_resend_requests (merchant_id, requested_at);
