-- Each signing secret named and dated (docs/merchant-guide.md#6-rotate-your-signing-secret): a merchant lists its
-- secrets by id, creation and end, never their values, and ends the previous one early. A rotation moves the current
-- secret's name to the previous with the secret (src/sql/merchants.ts); any other writer of a secret (adding a
-- merchant, erasing a previous secret past its overlap) gets its name from the trigger below, so no secret is
-- unnamed and no name outlives its secret. Secrets already there are named now, created "now".
ALTER TABLE merchants
  ADD COLUMN signing_secret_id text,
  ADD COLUMN signing_secret_created_at timestamptz,
  ADD COLUMN previous_signing_secret_id text,
  ADD COLUMN previous_signing_secret_created_at timestamptz;

CREATE FUNCTION name_signing_secrets() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.signing_secret IS NULL THEN
    NEW.signing_secret_id := NULL;
    NEW.signing_secret_created_at := NULL;
  ELSIF NEW.signing_secret_id IS NULL THEN
    NEW.signing_secret_id := 'whs_' || left(replace(gen_random_uuid()::text, '-', ''), 16);
    NEW.signing_secret_created_at := now();
  END IF;
  IF NEW.previous_signing_secret IS NULL THEN
    NEW.previous_signing_secret_id := NULL;
    NEW.previous_signing_secret_created_at := NULL;
  ELSIF NEW.previous_signing_secret_id IS NULL THEN
    NEW.previous_signing_secret_id := 'whs_' || left(replace(gen_random_uuid()::text, '-', ''), 16);
    NEW.previous_signing_secret_created_at := now();
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER merchants_signing_secrets_named BEFORE INSERT OR UPDATE OF signing_secret, previous_signing_secret
  ON merchants FOR EACH ROW EXECUTE FUNCTION name_signing_secrets();
UPDATE merchants SET signing_secret = signing_secret, previous_signing_secret = previous_signing_secret
 WHERE signing_secret IS NOT NULL OR previous_signing_secret IS NOT NULL;

-- A rotation the merchant asks for through the merchant API, which holds no key ring: a worker generates the secret,
-- seals it into the merchant's row and writes it back encrypted to `reply_key`, a public key the API made for this
-- one call and keeps in memory only, so the secret is in clear nowhere but in the answer to the merchant.
ALTER TABLE endpoint_checks DROP CONSTRAINT endpoint_checks_kind_check;
ALTER TABLE endpoint_checks ADD CONSTRAINT endpoint_checks_kind_check
  CHECK (kind IN ('test', 'verify', 'rotate')) NOT VALID;
ALTER TABLE endpoint_checks VALIDATE CONSTRAINT endpoint_checks_kind_check;
ALTER TABLE endpoint_checks
  ADD COLUMN reply_key text,
  ADD COLUMN overlap_ms bigint CHECK (overlap_ms >= 0),
  ADD CONSTRAINT endpoint_checks_rotate_check CHECK ((kind = 'rotate') = (reply_key IS NOT NULL AND overlap_ms IS NOT NULL));
