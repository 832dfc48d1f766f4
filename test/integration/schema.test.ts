/**
 * src/db/schema.sql is what the migrations come to: a brand-new database migrated by the project's migrator dumps
 * (dev/schema-dump.ts) to that file byte for byte. A migration committed without `npm run db:schema` fails here,
 * and so does a hand edit of the file. And the comparison bites: one column more than the migrations make is a
 * difference, and the difference names it.
 *
 * Brand-new databases, not clones of the shared template: the template is migrated once by global-setup, and this
 * is about what the migrations themselves do. No Temporal: only the shared PostgreSQL.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { dumpSchema, SCHEMA_FILE } from '../../dev/schema-dump.js';
import { DEV_SECRET_KEYS, localKeyRing } from '../../src/delivery/secret-box.js';

const id = randomUUID().slice(0, 8);
const PROBE_COLUMN = `schema_probe_${id}`;
const pools: pg.Pool[] = [];
let admin: pg.Client;
let committed: string;
/** The dumps of the two databases: as migrated, and migrated then changed by one more statement. */
let current: string;
let drifted: string;

/** A brand-new database on the shared server, every migration applied. */
async function migratedDatabase(name: string): Promise<pg.Pool> {
  const database = `schema_${id}_${name}`;
  await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}`);
  const pool = new pg.Pool({ connectionString: `${inject('postgresUrlBase')}${database}`, max: 2 });
  pools.push(pool);
  // No merchant to seal: any region and ring will do.
  await migrate(pool, { region: 'us', sealer: localKeyRing(DEV_SECRET_KEYS) });
  return pool;
}

/** The assertion the guard makes, so that the proof it bites runs the same one. */
function expectCommitted(dump: string): void {
  expect(dump, 'src/db/schema.sql is not what the migrations make: run `npm run db:schema` and commit the file').toBe(
    committed,
  );
}

/** Lines of `after` that `before` lacks, and the other way round (as sets of lines): enough to name what changed. */
function lineDiff(before: string, after: string): { added: string[]; removed: string[] } {
  const [was, is] = [new Set(before.split('\n')), new Set(after.split('\n'))];
  return { added: [...is].filter((l) => !was.has(l)), removed: [...was].filter((l) => !is.has(l)) };
}

beforeAll(async () => {
  admin = new pg.Client({ connectionString: `${inject('postgresUrlBase')}postgres` });
  await admin.connect();
  committed = await fs.readFile(SCHEMA_FILE, 'utf8');
  const [plain, changed] = await Promise.all([migratedDatabase('current'), migratedDatabase('drifted')]);
  // What a migration written without regenerating the file would do.
  await changed.query(`ALTER TABLE merchants ADD COLUMN ${PROBE_COLUMN} text`);
  [current, drifted] = await Promise.all([dumpSchema(plain), dumpSchema(changed)]);
});
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await admin?.end();
});

describe('src/db/schema.sql', () => {
  it('is what every migration makes of a brand-new database, byte for byte', () => {
    expectCommitted(current);
  });

  it('is no longer current once a migration changes the schema, and the difference names the change', () => {
    const column = `  ${PROBE_COLUMN} text,`;
    expect(() => expectCommitted(drifted)).toThrow(/run `npm run db:schema`/);
    expect(lineDiff(committed, drifted).added).toContain(column);
    // Exactly that, against the same migrations' dump: the file being stale as well is the first test's to report.
    expect(lineDiff(current, drifted)).toEqual({ added: [column], removed: [] });
  });
});
