/**
 * `npm run db:schema`: rewrites src/db/schema.sql, the schema every migration in src/db/migrations comes to
 * (dev/schema-dump.ts). Migrates a brand-new database on a throwaway embedded PostgreSQL, the server the tests
 * compare on, so the file matches what test/integration/schema.test.ts dumps byte for byte.
 */
import '../../src/node-version.js';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { migrate } from '../../src/db/migrate.js';
import { dumpSchema, SCHEMA_FILE } from '../schema-dump.js';
import { DEV_SECRET_KEYS, localKeyRing } from '../../src/delivery/secret-box.js';
import { startEmbeddedPostgres, type RunningPostgres } from '../embedded-postgres.js';

const DATABASE = 'hold_sweeper_schema';

const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-schema-'));
// As root the server runs as the `postgres` user, which must reach its data directory.
await fs.chmod(dataDir, 0o777);
let postgres: RunningPostgres | undefined;
try {
  postgres = await startEmbeddedPostgres({ dataDir: path.join(dataDir, 'pg'), databases: [DATABASE], durable: false });
  const pool = new pg.Pool({ connectionString: postgres.urlFor(DATABASE) });
  // pool.end() resolves before its last socket has closed: the server's shutdown just after can still end that
  // connection, an 'error' on an idle client that would otherwise crash the run after the file is written.
  pool.on('error', () => undefined);
  try {
    // No merchant to seal and no service role to grant to (src/db/rights.ts skips missing roles): the schema alone.
    const applied = await migrate(pool, { region: 'us', sealer: localKeyRing(DEV_SECRET_KEYS) });
    const schema = await dumpSchema(pool);
    await fs.writeFile(SCHEMA_FILE, schema);
    const lines = schema.split('\n').length - 1;
    console.log(
      `wrote ${path.relative(process.cwd(), SCHEMA_FILE)} (${lines} lines) after ${applied.length} migrations`,
    );
  } finally {
    await pool.end();
  }
} catch (err) {
  console.error((err as Error).message);
  process.exitCode = 1;
} finally {
  await postgres?.stop();
  await fs.rm(dataDir, { recursive: true, force: true });
}
