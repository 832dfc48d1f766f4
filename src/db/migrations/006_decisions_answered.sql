-- 006: operator decisions are Workflow Updates, answered by the workflow.
--
-- Until now the ops CLI sent decisions as signals and logged them 'sent' the moment the server took them, even
-- when the workflow then ignored them (its stage was a moment behind the ledger). Decisions now go as Updates:
-- the workflow validates each one and answers once the decision is recorded. 'applied' means exactly that, and
-- its detail holds the answer. Rows logged 'sent' before this migration keep their value.
ALTER TABLE operator_signals DROP CONSTRAINT operator_signals_outcome_check;
ALTER TABLE operator_signals ADD CONSTRAINT operator_signals_outcome_check CHECK (outcome IN ('sent', 'applied', 'ignored'));
