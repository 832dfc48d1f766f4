-- 010: merchants' signing secrets are sealed at rest; clear text is never written again.
--
-- Both columns hold `sealed:v<n>:<key id>:<ciphertext>` (src/delivery/secret-box.ts) or NULL. NOT VALID: every row
-- written from this commit on is checked at once (an earlier build's `merchant add` of clear text fails), while rows
-- written before are sealed by the code step that runs after the SQL migrations (sealMerchantSecrets in
-- src/db/secrets-at-rest.ts, with the region's MERCHANT_SECRET_KEYS), which then validates the constraint.
ALTER TABLE merchants ADD CONSTRAINT merchants_signing_secrets_sealed CHECK (
  (signing_secret IS NULL OR signing_secret ~ '^sealed:v[0-9]+:[A-Za-z0-9_.-]+:')
  AND (previous_signing_secret IS NULL OR previous_signing_secret ~ '^sealed:v[0-9]+:[A-Za-z0-9_.-]+:')
) NOT VALID;
