import { SpanKind } from '@opentelemetry/api';
import pg from 'pg';
import { log, type Logger } from '../observability/logger.js';
import { inSpan } from '../observability/spans.js';

/** How long a query waits for a connection when its caller says nothing: pg's own default is forever. */
export const DEFAULT_CONNECTION_TIMEOUT_MS = 10_000;

/**
 * A pool whose lost connections (a database restart, an admin terminating backends during shutdown) are logged instead
 * of crashing the process: idle ones through the pool's 'error', and checked-out ones too. A connection a transaction
 * holds between two statements (`inTransaction`) has no query to fail when it drops, so node-postgres emits 'error' on
 * its client, and a client with no listener takes the process down (a worker died that way when the chaos run
 * restarted PostgreSQL). Its next statement fails instead, the activity retries, and the broken client is discarded
 * when released. Waiting for a connection is bounded (`connectionTimeoutMillis`, DEFAULT_CONNECTION_TIMEOUT_MS unless
 * given): an exhausted pool fails its callers, it never parks them for ever.
 */
export function createPool(
  connectionString: string,
  { logger = log, ...options }: Omit<pg.PoolConfig, 'connectionString'> & { logger?: Logger } = {},
): pg.Pool {
  const pool = new pg.Pool({ connectionString, connectionTimeoutMillis: DEFAULT_CONNECTION_TIMEOUT_MS, ...options });
  const lost = (what: string) => (err: Error) => logger.warn({ error: err }, `${what} database connection lost`);
  pool.on('error', lost('idle'));
  pool.on('connect', (client) =>
    client.on('error', (err) => {
      // An idle client's error reaches the pool's listener above too, and is logged there.
      if (checkedOut.has(client)) lost('checked-out')(err);
    }),
  );
  pool.on('acquire', (client) => checkedOut.add(client));
  pool.on('release', (_err: Error | undefined, client: pg.PoolClient) => checkedOut.delete(client));
  pool.on('connect', tracedStatements);
  return tracedStatements(pool);
}

/**
 * Each statement `db` runs for a recorded span (a sampled hold's activity) is a span of its own, timed from its call:
 * its text has placeholders, never values. A call with a callback is the pool's own (`pool.query` on the client it
 * checks out), already timed by the pool's span, and a submittable (a cursor) is left as it is; a statement with no
 * recorded span costs one look.
 */
function tracedStatements<T extends pg.Pool | pg.ClientBase>(db: T): T {
  const query = db.query.bind(db) as (...args: unknown[]) => Promise<unknown>;
  db.query = ((...args: unknown[]) => {
    const config = args[0] as { text?: unknown; submit?: unknown } | string | undefined;
    const text = typeof config === 'string' ? config : config?.submit === undefined ? config?.text : undefined;
    if (typeof args.at(-1) === 'function' || typeof text !== 'string') return query(...args);
    const operation = /\w+/.exec(text)?.[0] ?? 'statement';
    const attributes = { 'db.system.name': 'postgresql', 'db.query.text': text };
    return inSpan(`ledger ${operation}`, attributes, () => query(...args), SpanKind.CLIENT);
  }) as T['query'];
  return db;
}

/** The clients of every pool that are checked out right now. */
const checkedOut = new WeakSet<pg.PoolClient>();

/** What a query function runs on: the pool (one statement, its own transaction) or one transaction's client. */
export type Queryable = pg.Pool | pg.PoolClient;

interface TransactionLimits {
  /** `SET LOCAL statement_timeout`: no statement of the transaction runs longer. */
  statementTimeoutMs?: number;
  /** `SET LOCAL lock_timeout`: no statement waits longer for a lock (a row another transaction holds). */
  lockTimeoutMs?: number;
  /**
   * The caller gave up (an activity cancelled or timed out): the statement running then is cancelled on the server
   * (`pg_cancel_backend`), so the transaction ends and its locks and connection are free at once, instead of when the
   * statement would have finished. node-postgres has no abort signal of its own.
   */
  signal?: AbortSignal;
}

/** Whether `db` is a pool (one statement, its own transaction), not one transaction's client. */
export const isPool = (db: Queryable): db is pg.Pool => 'idleCount' in db;

/**
 * Runs `work` in one transaction on one connection: COMMIT if it resolves, ROLLBACK if it throws; within `limits`
 * (each below the calling activity's start-to-close), and cancelled on the server when `limits.signal` aborts. Given
 * a client, `work` runs inside that client's transaction, as a savepoint: the admin API runs a verb in the
 * transaction that also writes its audit row.
 */
export async function inTransaction<T>(
  db: Queryable,
  work: (client: pg.PoolClient) => Promise<T>,
  limits: TransactionLimits = {},
): Promise<T> {
  if (!isPool(db)) return inSavepoint(db, work);
  const pool = db;
  limits.signal?.throwIfAborted();
  const client = await pool.connect();
  const backend = (client as unknown as { processID?: number }).processID;
  const cancel = () => {
    if (backend !== undefined)
      void pool.query('SELECT pg_cancel_backend($1::integer)', [backend]).catch(() => undefined);
  };
  limits.signal?.addEventListener('abort', cancel, { once: true });
  try {
    // One round trip: BEGIN and the limits as one simple query.
    const begin = ['BEGIN'];
    if (limits.statementTimeoutMs !== undefined)
      begin.push(`SET LOCAL statement_timeout = ${Math.round(limits.statementTimeoutMs)}`);
    if (limits.lockTimeoutMs !== undefined) begin.push(`SET LOCAL lock_timeout = ${Math.round(limits.lockTimeoutMs)}`);
    await client.query(begin.join('; '));
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    limits.signal?.removeEventListener('abort', cancel);
    client.release();
  }
}

async function inSavepoint<T>(client: pg.PoolClient, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  await client.query('SAVEPOINT nested');
  try {
    const result = await work(client);
    await client.query('RELEASE SAVEPOINT nested');
    return result;
  } catch (err) {
    await client.query('ROLLBACK TO SAVEPOINT nested').catch(() => undefined);
    throw err;
  }
}
