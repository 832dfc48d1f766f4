-- The region's big red button: while a pause is open (resumed_at NULL), no webhook of the region is admitted to its
-- merchant's budget (src/sql/merchant-budget.ts checks in the admission's own statement), so nothing is sent;
-- every delivery waits, held, durable, no attempt spent, and releases go on. `npm run ops -- sends pause|resume`
-- writes it (src/ops/send-pauses.ts); each row is one pause, who opened and closed it, and why.
CREATE TABLE send_pauses (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  paused_at     timestamptz NOT NULL DEFAULT now(),
  paused_by     text NOT NULL CHECK (btrim(paused_by) <> ''),
  reason        text NOT NULL CHECK (btrim(reason) <> ''),
  resumed_at    timestamptz,
  resumed_by    text,
  resume_reason text,
  CHECK ((resumed_at IS NULL) = (resumed_by IS NULL)),
  CHECK (resumed_by IS NULL OR (btrim(resumed_by) <> '' AND btrim(resume_reason) <> ''))
);
-- At most one pause open at a time.
CREATE UNIQUE INDEX send_pauses_one_open ON send_pauses ((true)) WHERE resumed_at IS NULL;
