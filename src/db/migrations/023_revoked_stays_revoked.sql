-- A revoked merchant API key stays revoked: its revocation (when, by whom) is written once and never changed or
-- cleared, whoever holds UPDATE on the table (the operators' role revokes keys; it must not be able to bring one
-- back). A key that should work again is a new key.
CREATE FUNCTION merchant_api_key_revocation_is_final() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.revoked_at IS NOT NULL
     AND (NEW.revoked_at, NEW.revoked_by) IS DISTINCT FROM (OLD.revoked_at, OLD.revoked_by) THEN
    RAISE EXCEPTION 'merchant API key % was revoked at % by %: a revocation is final (make a new key)',
      OLD.id, OLD.revoked_at, OLD.revoked_by USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER merchant_api_keys_revocation_final BEFORE UPDATE OF revoked_at, revoked_by ON merchant_api_keys
  FOR EACH ROW EXECUTE FUNCTION merchant_api_key_revocation_is_final();
