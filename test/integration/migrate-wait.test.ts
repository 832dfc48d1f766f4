/**
 * `npm run migrate` started beside its database (compose's ledger-migrate) meets a server that is not listening yet, or
 * that restarts once its initialisation is done: it waits for the ledger to accept connections, within a bound, and
 * says so when the bound passes.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, expect, it } from 'vitest';
import { freePort, startEmbeddedPostgres, type RunningPostgres } from '../../dev/embedded-postgres.js';
import { SERVICE_ROLES } from '../../src/db/roles.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
let postgres: RunningPostgres | undefined;
let dataDir: string | undefined;

afterAll(async () => {
  await postgres?.stop();
  if (dataDir) await fs.rm(dataDir, { recursive: true, force: true });
});

/** `npm run migrate` for the us region on `url`, its output gathered, `onOutput` told of each chunk. */
function runMigrate(url: string, args: string[], onOutput: (all: string) => void = () => {}) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/bin/migrate.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, HOLD_SWEEPER_MODE: 'dev', HOLD_SWEEPER_REGIONS: 'us', DATABASE_URL_US: url },
  });
  let output = '';
  const gather = (chunk: Buffer) => {
    output += chunk.toString();
    onOutput(output);
  };
  child.stdout.on('data', gather);
  child.stderr.on('data', gather);
  return new Promise<{ code: number | null; output: string }>((resolve) =>
    child.on('exit', (code) => resolve({ code, output })),
  );
}

it('waits for a ledger whose port starts listening only after it started, then migrates it', async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'hs-migrate-wait-'));
  const port = await freePort();
  // The cluster and the roles the migration grants to, made first and stopped: the ledger is down when migrate starts.
  const options = { dataDir, port, databases: ['ledger'], durable: false };
  postgres = await startEmbeddedPostgres(options);
  const admin = new pg.Client({ connectionString: postgres.urlFor('postgres') });
  await admin.connect();
  for (const role of Object.values(SERVICE_ROLES)) await admin.query(`CREATE ROLE ${role} LOGIN`);
  await admin.end();
  const url = postgres.urlFor('ledger');
  await postgres.stop();
  postgres = undefined;

  let started: Promise<void> | undefined;
  const result = await runMigrate(url, [], (output) => {
    // Started once migrate has said it waits: it met a port nobody listens on.
    if (!started && output.includes('the us ledger not reachable yet; retrying'))
      started = startEmbeddedPostgres(options).then((running) => {
        postgres = running;
      });
  });
  await started;
  expect(result.output).toContain('the us ledger not reachable yet; retrying');
  expect(result.output).toContain('ledger migrated');
  expect(result.code).toBe(0);
}, 180_000);

it('gives up after --wait-for-database, saying which ledger and how long it waited', async () => {
  const port = await freePort();
  const result = await runMigrate(`postgres://postgres:x@127.0.0.1:${port}/ledger`, ['--wait-for-database', '2s']);
  expect(result.output).toMatch(/the us ledger not reachable within 2 s/);
  expect(result.code).toBe(1);
}, 60_000);
