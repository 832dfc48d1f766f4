-- 007: a rotated-out signing secret has an end.
--
-- `npm run ops -- merchant rotate-secret` moves the current secret to previous_signing_secret and sets this to when
-- the overlap ends: until then every webhook is signed with both (the merchant verifies with whichever it has),
-- after it with the new one only. NULL (a secret set by hand before this column): signs until replaced, as before.
ALTER TABLE merchants ADD COLUMN previous_signing_secret_until timestamptz;
