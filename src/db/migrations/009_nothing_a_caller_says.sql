-- 009: nothing a caller says moves money, and four eyes means two different people.
--
-- A sweep's recorded cutoff is bounded by the ledger's clock (src/sql/holds.ts writes least(cutoff, now())); the
-- table now refuses one after the sweep finished, and rows written before the bound are clamped, since a later
-- sweep's `left_active` reads max(cutoff).
UPDATE sweep_runs SET cutoff = finished_at WHERE cutoff > finished_at;
ALTER TABLE sweep_runs ADD CONSTRAINT sweep_runs_cutoff_not_after_finish CHECK (cutoff <= finished_at);

-- The one comparison key of an operator identity: Unicode NFKC, surrounding whitespace removed, lower case (ICU's
-- root locale, whatever the database's own collation: `lower()` under a C collation leaves "Ä" alone). `alice`,
-- ` Alice ` and `ａｌｉｃｅ` (full width) are one person. src/contracts/identity.ts computes the same key for the
-- CLI and the activities (a test compares the two on tricky input).
CREATE FUNCTION identity_key(who text) RETURNS text
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  RETURN lower(btrim(normalize(who, NFKC),
                     ' ' || chr(9) || chr(10) || chr(11) || chr(12) || chr(13) || chr(133) || chr(5760) || chr(8232) || chr(8233) || chr(65279))
               COLLATE "und-x-icu");

-- A replay request's approver must be another person than its requester by that key, not by exact text (004 compared
-- the text: `alice` could approve `Alice`'s request). NOT VALID: a request approved before this migration is
-- history, not re-judged; every row written from now on is checked.
DO $$
DECLARE
  old_check text;
BEGIN
  SELECT conname INTO old_check FROM pg_constraint
   WHERE conrelid = 'replay_requests'::regclass AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%approved_by <> requested_by%';
  IF old_check IS NOT NULL THEN
    EXECUTE format('ALTER TABLE replay_requests DROP CONSTRAINT %I', old_check);
  END IF;
END $$;
ALTER TABLE replay_requests ADD CONSTRAINT replay_requests_four_eyes
  CHECK (approved_by IS NULL OR identity_key(approved_by) <> identity_key(requested_by)) NOT VALID;

-- A skip of a missing processor sequence in production: requested by one person, approved by another, then carried
-- out by the hold's event workflow (its activity checks the request here before it records the skip).
CREATE TABLE processor_skip_requests (
  id           text PRIMARY KEY,
  hold_id      text NOT NULL,
  sequence     integer NOT NULL CHECK (sequence >= 1),
  requested_by text NOT NULL,
  reason       text NOT NULL,
  status       text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved')),
  approved_by  text,
  approved_at  timestamptz,
  created_at   timestamptz NOT NULL DEFAULT now(),
  CHECK ((status = 'approved') = (approved_by IS NOT NULL)),
  CONSTRAINT processor_skip_requests_four_eyes CHECK (approved_by IS NULL OR identity_key(approved_by) <> identity_key(requested_by))
);
CREATE INDEX processor_skip_requests_hold ON processor_skip_requests (hold_id, sequence);
