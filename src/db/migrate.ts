/**
 * Applies the numbered `.sql` files in ./migrations in order, each in its own transaction (or statement by statement,
 * for what only runs outside one: `NO_TRANSACTION`), under a
 * session-level advisory lock so that concurrent workers starting together apply each file exactly once.
 * Applied files are recorded in `schema_migrations` and never edited after release.
 *
 * Then, under the same lock, the step no SQL file can do: merchant secrets sealed with the region's key ring
 * (src/db/secrets-at-rest.ts), at every run, since the ring can change between two runs; and last, each service
 * role's privileges (./rights.ts), so that what a role may do always matches the schema just migrated.
 *
 * Who runs it: `npm run migrate` as the schema's owner, before a release's services start (production), or every
 * service at its start on a development database (`readyLedger`).
 */
import fs from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import type { SecretsAtRest } from '../delivery/secret-box.js';
import type { Mode } from '../config.js';
import { log } from '../observability/logger.js';
import { applyGrants } from './rights.js';
import { checkServiceConnection, type Service } from './roles.js';
import { sealMerchantSecrets } from './secrets-at-rest.js';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));
/** An arbitrary constant: the advisory-lock key that serialises migrations for this service. */
const MIGRATION_LOCK_KEY = 7_042_017_001;

interface Migration {
  version: number;
  name: string;
  sql: string;
}

export async function readMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await fs.readdir(dir)).filter((f) => /^\d+_[\w-]+\.sql$/.test(f)).sort();
  return Promise.all(
    files.map(async (file) => ({
      version: Number(file.split('_')[0]),
      name: file.replace(/\.sql$/, ''),
      sql: await fs.readFile(`${dir}${file}`, 'utf8'),
    })),
  );
}

/**
 * Returns the names of the migrations this call applied (empty when the schema was already current). `secrets`: the
 * ledger's region and its sealer (MERCHANT_SECRET_KEYS_<R>), for the sealing step.
 */
export async function migrate(pool: pg.Pool, secrets: SecretsAtRest): Promise<string[]> {
  const migrations = await readMigrations();
  const client = await pool.connect();
  try {
    await takeMigrationLock(client);
    await client.query(`
      CREATE TABLE IF NOT EXISTS schema_migrations (
        version    integer PRIMARY KEY,
        name       text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`);
    const { rows } = await client.query<{ version: number }>('SELECT version FROM schema_migrations');
    const applied = new Set(rows.map((r) => r.version));
    const done: string[] = [];
    for (const migration of migrations) {
      if (applied.has(migration.version)) continue;
      if (NO_TRANSACTION.test(migration.sql)) await applyStatementByStatement(client, migration);
      else await applyInTransaction(client, migration);
      done.push(migration.name);
    }
    const sealing = await sealMerchantSecrets(client, secrets);
    const region = secrets.region;
    if (sealing.sealed + sealing.resealed + sealing.erased > 0) {
      const { sealed, resealed, erased } = sealing;
      log.info({ region, sealed, resealed, erased }, 'merchant secrets sealed with the current key');
    }
    if (sealing.unopenable.length > 0) {
      // Their deliveries quarantine as missing_secret until the key is back in the ring or the secret is rotated.
      const [count, merchants] = [sealing.unopenable.length, sealing.unopenable.slice(0, 20)];
      log.warn({ region, count, merchants }, 'merchant secrets that do not open with this key ring');
    }
    await applyGrants(client);
    return done;
  } finally {
    await client.query('SELECT pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]).catch(() => undefined);
    client.release();
  }
}

/**
 * The migration lock, asked for again and again rather than waited for in one statement: a session blocked in
 * `pg_advisory_lock` holds a snapshot the whole time, and `CREATE INDEX CONCURRENTLY` in the session holding the lock
 * waits for every such snapshot to end, so two workers starting together would deadlock on a concurrent build.
 */
async function takeMigrationLock(client: pg.PoolClient): Promise<void> {
  for (;;) {
    const { rows } = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS locked', [
      MIGRATION_LOCK_KEY,
    ]);
    if (rows[0]!.locked) return;
    await new Promise((resolve) => setTimeout(resolve, MIGRATION_LOCK_POLL_MS));
  }
}
/** How often a migrator waiting for another's turn asks again. */
const MIGRATION_LOCK_POLL_MS = 100;

async function applyInTransaction(client: pg.PoolClient, migration: Migration): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query(migration.sql);
    await recordApplied(client, migration);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK');
    throw new Error(`migration ${migration.name} failed: ${(err as Error).message}`, { cause: err });
  }
}

const recordApplied = (client: pg.PoolClient, { version, name }: Migration) =>
  client.query('INSERT INTO schema_migrations (version, name) VALUES ($1::integer, $2::text)', [version, name]);

/**
 * A file that starts with this line runs statement by statement, each committing on its own: what PostgreSQL runs
 * only outside a transaction, `CREATE INDEX CONCURRENTLY` on a table that keeps taking writes. Such a file holds plain
 * statements, one per `;` at a line's end, each safe to run again (`IF NOT EXISTS`): a run stopped halfway is
 * finished by the next.
 */
const NO_TRANSACTION = /^-- migrate: no transaction$/m;
/** How long a statement of such a file waits for a lock before it gives up, rather than queue every writer behind it. */
const MIGRATION_LOCK_TIMEOUT = '5s';

async function applyStatementByStatement(client: pg.PoolClient, migration: Migration): Promise<void> {
  const statements = migration.sql
    .split(/;\s*$/m)
    .map((s) => s.replace(/^\s*--.*$/gm, '').trim())
    .filter(Boolean);
  try {
    await client.query(`SET lock_timeout = '${MIGRATION_LOCK_TIMEOUT}'`);
    for (const statement of statements) {
      // A concurrent build that failed leaves its index invalid, and IF NOT EXISTS would keep it so: build it again.
      const index = /^CREATE (?:UNIQUE )?INDEX CONCURRENTLY IF NOT EXISTS (\w+)/i.exec(statement)?.[1];
      if (index) {
        const { rows } = await client.query<{ invalid: boolean }>(
          'SELECT NOT indisvalid AS invalid FROM pg_index WHERE indexrelid = to_regclass($1::text)',
          [index],
        );
        if (rows[0]?.invalid) await client.query(`DROP INDEX CONCURRENTLY IF EXISTS ${index}`);
      }
      await client.query(statement);
    }
    await recordApplied(client, migration);
  } catch (err) {
    throw new Error(`migration ${migration.name} failed (run it again to finish it): ${(err as Error).message}`, {
      cause: err,
    });
  } finally {
    await client.query('RESET lock_timeout').catch(() => undefined);
  }
}

/** The newest migration this code ships: the schema version it needs. */
export async function latestMigrationVersion(): Promise<number> {
  return Math.max(0, ...(await readMigrations()).map((m) => m.version));
}

/**
 * A service's ledger, ready for it. In production checked, never migrated (its role may not): not a superuser, not
 * the owner, the schema current (`checkServiceConnection`). In dev mode migrated by the service itself when its
 * connection may (a superuser or the owner: a development database, one user for everything), and checked like
 * production's, superusers aside, when it connects with a service role. Returns the migrations applied.
 */
export async function readyLedger(
  pool: pg.Pool,
  /** `secrets`: what migrating needs (asked only when it migrates: a production receiver holds no key ring). */
  options: { mode: Mode; service: Service; variable: string; secrets: () => SecretsAtRest },
): Promise<string[]> {
  if (options.mode === 'dev' && (await mayMigrate(pool))) return migrate(pool, options.secrets());
  await checkServiceConnection(pool, options.service, options.variable, await latestMigrationVersion());
  return [];
}

/** A superuser, or the owner of the schema's tables (or of a database with none yet). */
async function mayMigrate(pool: pg.Pool): Promise<boolean> {
  const { rows } = await pool.query<{ may: boolean }>(
    `SELECT r.rolsuper
         OR EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = 'public' AND tableowner = current_user)
         OR (NOT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = 'public')
             AND has_schema_privilege(current_user, 'public', 'CREATE')) AS may
       FROM pg_roles r WHERE r.rolname = current_user`,
  );
  return rows[0]!.may;
}
