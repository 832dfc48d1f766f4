-- 001_ledger: merchants, accounts, card-authorization holds, the append-only ledger, and sweep records.
--
-- Amounts are integer minor units (cents). auth_holds is written by the upstream authorisation system, so it
-- deliberately has no foreign keys or amount check: this service must survive whatever lands there. A row
-- that cannot be released is marked 'rejected' with a reason at sweep time instead of blocking the sweep.

CREATE TABLE merchants (
  id                      text PRIMARY KEY,
  name                    text NOT NULL,
  endpoint_url            text NOT NULL,
  -- Signing secrets are read only inside activities (never passed through Temporal); see invariant 7 in docs/invariants.md.
  signing_secret          text,
  previous_signing_secret text,
  rate_per_second         numeric NOT NULL DEFAULT 5 CHECK (rate_per_second > 0),
  burst                   integer NOT NULL DEFAULT 1 CHECK (burst >= 0),
  status                  text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'disabled')),
  created_at              timestamptz NOT NULL DEFAULT now(),
  updated_at              timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE accounts (
  id              text PRIMARY KEY,
  currency        char(3) NOT NULL,
  available_minor bigint NOT NULL,
  held_minor      bigint NOT NULL CHECK (held_minor >= 0),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE auth_holds (
  id              text PRIMARY KEY,
  account_id      text NOT NULL,
  merchant_id     text NOT NULL,
  amount_minor    bigint NOT NULL,
  currency        text NOT NULL,
  state           text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'released', 'rejected')),
  expires_at      timestamptz NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  released_at     timestamptz,
  ledger_entry_id bigint,
  reject_code     text,
  rejected_at     timestamptz,
  CHECK ((state = 'released') = (released_at IS NOT NULL AND ledger_entry_id IS NOT NULL)),
  CHECK ((state = 'rejected') = (reject_code IS NOT NULL))
);

-- The sweep's keyset pagination and the "oldest expired but unreleased hold" age both read this index.
CREATE INDEX auth_holds_active_by_expiry ON auth_holds (expires_at, id) WHERE state = 'active';

CREATE TABLE ledger_entries (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- 'hold-release:<hold id>': the database, not the workflow, is the last word on "released once".
  idempotency_key text NOT NULL UNIQUE,
  kind            text NOT NULL CHECK (kind IN ('hold_release')),
  account_id      text NOT NULL REFERENCES accounts (id),
  hold_id         text NOT NULL REFERENCES auth_holds (id),
  amount_minor    bigint NOT NULL CHECK (amount_minor > 0),
  currency        char(3) NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION ledger_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger_entries is append-only: % is not allowed', TG_OP;
END;
$$;

CREATE TRIGGER ledger_entries_append_only
  BEFORE UPDATE OR DELETE ON ledger_entries
  FOR EACH ROW EXECUTE FUNCTION ledger_entries_append_only();

-- One row per sweep (its workflow id): what it found and did, kept for operators and for the no-loss check.
CREATE TABLE sweep_runs (
  sweep_id          text PRIMARY KEY,
  cutoff            timestamptz NOT NULL,
  pages             integer NOT NULL,
  found             integer NOT NULL,
  started           integer NOT NULL,
  already_started   integer NOT NULL,
  rejected          integer NOT NULL,
  unreleased_at_end integer NOT NULL,
  finished_at       timestamptz NOT NULL DEFAULT now()
);
