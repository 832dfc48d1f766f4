import type pg from 'pg';

/**
 * A timestamp column as microsecond ISO-8601 in UTC: Postgres precision survives the trip through Temporal and
 * back, so keyset cursors and workflow ids built from an expiry are exact.
 */
export const isoUtc = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/**
 * Runs `work` under a savepoint of the transaction `tx`: if it throws, what it wrote is undone (and only that), the
 * transaction stays usable and keeps the row locks taken before, and the error is rethrown for the caller to decide.
 */
export async function underSavepoint<T>(tx: pg.PoolClient, work: () => Promise<T>): Promise<T> {
  await tx.query('SAVEPOINT under_savepoint');
  try {
    const result = await work();
    await tx.query('RELEASE SAVEPOINT under_savepoint');
    return result;
  } catch (err) {
    await tx.query('ROLLBACK TO SAVEPOINT under_savepoint');
    throw err;
  }
}
