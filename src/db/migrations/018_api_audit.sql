-- The admin API's audit (src/api/admin-server.ts): every call it answers, allowed or refused, with the verified subject
-- that made it. Append-only: the API's role may insert and read, nobody but the schema's owner may change a row, and
-- a trigger refuses even that (an audit an owner can quietly edit is not one).
CREATE TABLE api_audit (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT now(),
  request_id text NOT NULL,
  -- The token's `sub`, verified; NULL when no token was verified (the call was refused as unauthenticated).
  subject text,
  roles text[] NOT NULL DEFAULT '{}',
  -- The verb, e.g. `replay.approve`, or `unknown` for a route the API does not have.
  verb text NOT NULL,
  method text NOT NULL,
  path text NOT NULL,
  -- What it acted on (a hold, webhook, merchant or request id), when the verb names one.
  target text,
  -- ok (2xx), refused (401, 403), rejected (other 4xx: the input or the ledger said no), failed (5xx).
  outcome text NOT NULL CHECK (outcome IN ('ok', 'refused', 'rejected', 'failed')),
  status integer NOT NULL,
  -- The error's name and message when it did not succeed.
  detail text
);

CREATE INDEX api_audit_at ON api_audit (at);
CREATE INDEX api_audit_subject ON api_audit (subject, at);

CREATE FUNCTION api_audit_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'api_audit is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER api_audit_append_only BEFORE UPDATE OR DELETE ON api_audit
  FOR EACH ROW EXECUTE FUNCTION api_audit_is_append_only();
CREATE TRIGGER api_audit_no_truncate BEFORE TRUNCATE ON api_audit
  FOR EACH STATEMENT EXECUTE FUNCTION api_audit_is_append_only();
