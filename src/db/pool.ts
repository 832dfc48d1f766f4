import pg from 'pg';

/** How long a query waits for a connection when its caller says nothing: pg's own default is forever. */
export const DEFAULT_CONNECTION_TIMEOUT_MS = 10_000;

/**
 * A pool whose idle-connection errors (a database restart, an admin terminating backends during shutdown)
 * are logged instead of crashing the process; queries in flight still fail and are retried by their activity. Waiting
 * for a connection is bounded (`connectionTimeoutMillis`, DEFAULT_CONNECTION_TIMEOUT_MS unless given): an exhausted
 * pool fails its callers, it never parks them for ever.
 */
export function createPool(connectionString: string, options: Omit<pg.PoolConfig, 'connectionString'> = {}): pg.Pool {
  const pool = new pg.Pool({ connectionString, connectionTimeoutMillis: DEFAULT_CONNECTION_TIMEOUT_MS, ...options });
  pool.on('error', (err) => console.error(JSON.stringify({ level: 'warn', msg: 'idle database connection lost', error: err.message })));
  return pool;
}

/** What a query function runs on: the pool (one statement, its own transaction) or one transaction's client. */
export type Queryable = pg.Pool | pg.PoolClient;

/** Runs `work` in one transaction on one connection: COMMIT if it resolves, ROLLBACK if it throws. */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
