-- A decision on a quarantined webhook is made in the ledger before it is sent: a row here names the webhook, the
-- quarantined policy run, the decision and who made it (the admin API writes the verified subject; the break-glass CLI
-- the name typed), and the payload sent to the hold's workflow carries its id. The worker records a decision only
-- when such a row (or, for a replay, an approved replay request covering the run) names the same webhook, run,
-- decision and person, and records it as the row says (src/sql/deliveries.ts, decideQuarantine): a payload lifted
-- from another workflow's history, or minted without a row, moves nothing. The row then keeps what the workflow
-- answered: the log of operator signals it was before.
ALTER TABLE operator_signals RENAME TO operator_decisions;
ALTER TABLE operator_decisions RENAME CONSTRAINT operator_signals_pkey TO operator_decisions_pkey;
ALTER TABLE operator_decisions RENAME CONSTRAINT operator_signals_outcome_check TO operator_decisions_outcome_check;
ALTER TABLE operator_decisions RENAME CONSTRAINT operator_signals_signal_check TO operator_decisions_signal_check;
ALTER TABLE operator_decisions RENAME CONSTRAINT operator_signals_webhook_id_fkey TO operator_decisions_webhook_id_fkey;
ALTER TABLE operator_decisions
  ADD COLUMN decision_id text UNIQUE CHECK (decision_id ~ '^dc_[0-9a-f]{32}$'),
  ADD COLUMN policy_run integer CHECK (policy_run >= 1),
  ADD COLUMN ticket text,
  -- Rows from before this migration are a send log only: they decide nothing.
  ADD CONSTRAINT operator_decisions_bound CHECK ((decision_id IS NULL) = (policy_run IS NULL));
