/**
 * SQL fragments that statements of more than one table module read with: here, below every module that uses them, so
 * that no table module imports another for a piece of text. Reads only: a write stays with its table's one writer
 * (test/unit/table-writers.test.ts). Each says what it needs in scope.
 */

/**
 * The merchant's previous signing secret while its rotation's overlap runs (`previous_signing_secret_until`), NULL
 * after: a webhook is signed with both keys only then. Needs `m` (merchants) in scope.
 */
export const PREVIOUS_SECRET_IN_OVERLAP_SQL = `CASE WHEN m.previous_signing_secret_until IS NULL OR m.previous_signing_secret_until > now()
                 THEN m.previous_signing_secret END`;

/** Whether the region's sends are paused now (send_pauses): a boolean expression, for a statement's select list. */
export const SENDS_PAUSED_SQL = `EXISTS (SELECT 1 FROM send_pauses WHERE resumed_at IS NULL)`;
