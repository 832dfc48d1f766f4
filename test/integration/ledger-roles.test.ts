/**
 * One database role per service, least privilege (docs/security.md; src/db/grants.sql, src/db/roles.ts): a night run by
 * a worker, a receiver and the operators' CLI each connected as its own role proves the grants are enough; each role is
 * refused what it must not do; `npm run migrate` runs as the schema's owner, no superuser; and a production service
 * refuses a connection that could do more than its role (a superuser, the owner) or a schema older than its code.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { checkInvariants } from '../../bench/invariants.js';
import { FakeProcessor } from '../../dev/fake-processor.js';
import { startReceiverProcess, type ReceiverProcess } from '../../dev/receiver-process.js';
import {
  keyRingVariable,
  startWorkerProcesses,
  workerEnvironment,
  type WorkerProcesses,
} from '../../dev/worker-processes.js';
import { latestMigrationVersion } from '../../src/db/migrate.js';
import { checkServiceConnection, SchemaBehind, SERVICE_ROLES } from '../../src/db/roles.js';
import { generateSigningSecret } from '../../src/delivery/standard-webhooks.js';
import { ConfigError } from '../../src/errors.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { holdStates, holdWorkflowIdOf, seedNight } from '../support/ledger.js';
import { withOps } from '../support/ops.js';
import { waitUntil } from '../support/wait.js';

const run = promisify(execFile);
const REPO = path.resolve(import.meta.dirname, '../..');
const roleUrl = (service: keyof typeof SERVICE_ROLES, database: string) =>
  `${inject('ledgerRoleUrls')[service]}${database}`;

let harness: Harness;
let us: TestRegion;
let database: string;
const pools: pg.Pool[] = [];
/** A pool on this file's ledger as `service`'s role. */
const as = (service: keyof typeof SERVICE_ROLES, db = database) => {
  const pool = new pg.Pool({ connectionString: roleUrl(service, db), max: 2 });
  pools.push(pool);
  return pool;
};
/** What `sql` as `service` came to: 'ok', or the start of PostgreSQL's refusal. */
const attempt = (service: keyof typeof SERVICE_ROLES, sql: string) =>
  as(service)
    .query(sql)
    .then(
      () => 'ok',
      (err: Error) => err.message.replace(/ (table|relation|column|schema) .*/, ''),
    );

beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
  database = new URL(us.databaseUrl).pathname.slice(1);
});
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await harness?.close();
});

describe('each role is refused what it must not do', () => {
  it.each([
    ['receiver', 'SELECT signing_secret FROM merchants', 'permission denied for'],
    ['receiver', 'SELECT * FROM merchants', 'permission denied for'],
    ['receiver', 'SELECT amount_minor FROM auth_holds', 'permission denied for'],
    ['receiver', 'SELECT * FROM ledger_entries', 'permission denied for'],
    ['receiver', `UPDATE auth_holds SET state = 'released'`, 'permission denied for'],
    ['receiver', 'UPDATE processor_events SET applied_at = now()', 'permission denied for'],
    ['worker', 'CREATE TABLE evil (id int)', 'permission denied for'],
    ['worker', 'ALTER TABLE auth_holds ADD COLUMN evil int', 'must be owner of'],
    ['worker', 'DROP TABLE ledger_entries', 'must be owner of'],
    ['worker', 'DELETE FROM ledger_entries', 'permission denied for'],
    ['worker', 'TRUNCATE webhook_deliveries', 'permission denied for'],
    ['worker', 'SELECT * FROM processor_requests_refused', 'permission denied for'],
    ['ops', 'CREATE TABLE evil (id int)', 'permission denied for'],
    ['ops', `UPDATE auth_holds SET state = 'released'`, 'permission denied for'],
    ['ops', 'DELETE FROM merchants', 'permission denied for'],
    ['ops', `INSERT INTO ledger_entries (hold_id) VALUES ('x')`, 'permission denied for'],
    // The admin API's audit (it runs as ops): appended, never changed; no other service reads it.
    ['ops', `UPDATE api_audit SET subject = 'someone else'`, 'permission denied for'],
    ['ops', 'DELETE FROM api_audit', 'permission denied for'],
    ['ops', 'TRUNCATE api_audit', 'permission denied for'],
    ['worker', 'SELECT * FROM api_audit', 'permission denied for'],
    ['receiver', 'SELECT * FROM api_audit', 'permission denied for'],
    // The merchant API faces the internet: a merchant's webhooks and its own keys' budget, nothing else.
    ['merchantApi', 'SELECT signing_secret FROM merchants', 'permission denied for'],
    ['merchantApi', 'SELECT endpoint_url FROM merchants', 'permission denied for'],
    ['merchantApi', 'SELECT * FROM accounts', 'permission denied for'],
    ['merchantApi', 'SELECT * FROM auth_holds', 'permission denied for'],
    ['merchantApi', `UPDATE webhook_deliveries SET status = 'pending'`, 'permission denied for'],
    ['merchantApi', `UPDATE merchant_api_keys SET revoked_at = NULL`, 'permission denied for'],
    ['merchantApi', 'SELECT created_by FROM merchant_api_keys', 'permission denied for'],
    ['merchantApi', 'SELECT * FROM api_audit', 'permission denied for'],
    ['merchantApi', 'DELETE FROM merchant_resend_requests', 'permission denied for'],
  ] as const)('%s: %s', async (service, sql, refusal) => {
    expect(await attempt(service, sql)).toBe(refusal);
  });

  it('and allowed what it does (the receiver records an event; the worker reads a merchant’s secret to sign)', async () => {
    expect(await attempt('receiver', 'SELECT event_id, dispatched_at FROM processor_events LIMIT 1')).toBe('ok');
    expect(await attempt('receiver', 'SELECT id, merchant_id FROM auth_holds LIMIT 1')).toBe('ok');
    expect(await attempt('worker', 'SELECT signing_secret FROM merchants LIMIT 1')).toBe('ok');
    expect(await attempt('ops', 'SELECT signing_secret FROM merchants LIMIT 1')).toBe('ok');
    expect(
      await attempt(
        'ops',
        `INSERT INTO api_audit (request_id, verb, method, path, outcome, status) VALUES ('r1', 'sends.status', 'GET', '/v1/sends', 'ok', 200)`,
      ),
    ).toBe('ok');
    expect(await attempt('ops', `SELECT subject, verb FROM api_audit WHERE request_id = 'r1'`)).toBe('ok');
  });

  it('nobody edits the audit, not even a superuser: a trigger refuses UPDATE, DELETE and TRUNCATE', async () => {
    await us.pool.query(
      `INSERT INTO api_audit (request_id, verb, method, path, outcome, status) VALUES ('r2', 'sends.status', 'GET', '/v1/sends', 'ok', 200)`,
    );
    for (const sql of [`UPDATE api_audit SET subject = 'someone else'`, 'DELETE FROM api_audit', 'TRUNCATE api_audit'])
      await expect(us.pool.query(sql), sql).rejects.toThrow(
        /api_audit is append-only: (UPDATE|DELETE|TRUNCATE) refused/,
      );
    expect(
      (await us.pool.query(`SELECT count(*)::int AS n FROM api_audit WHERE request_id = 'r2' AND subject IS NULL`))
        .rows[0].n,
    ).toBe(1);
  });
});

describe('connections a production service refuses', () => {
  it('a superuser, the schema’s owner, a schema older than the code; its own role on a current schema passes', async () => {
    const expected = await latestMigrationVersion();
    const superuser = new pg.Pool({ connectionString: us.databaseUrl, max: 1 });
    pools.push(superuser);
    await expect(checkServiceConnection(superuser, 'worker', 'DATABASE_URL_US', expected)).rejects.toThrow(ConfigError);
    await expect(checkServiceConnection(superuser, 'worker', 'DATABASE_URL_US', expected)).rejects.toThrow(
      /a superuser/,
    );
    await expect(checkServiceConnection(as('worker'), 'worker', 'DATABASE_URL_US', expected)).resolves.toBeUndefined();

    // A ledger the migrator owns, as production's: before `npm run migrate`, a service finds its schema behind; after,
    // the owner itself is refused as a service's connection, and the worker's role passes.
    const admin = new pg.Client({ connectionString: us.databaseUrl });
    await admin.connect();
    const owned = `${database}_owned`;
    await admin.query(`CREATE DATABASE ${owned} OWNER ${SERVICE_ROLES.migrator}`);
    await admin.end();
    await expect(checkServiceConnection(as('worker', owned), 'worker', 'DATABASE_URL_US', expected)).rejects.toThrow(
      SchemaBehind,
    );
    const migrateAs = (url: string) =>
      run(process.execPath, ['--import', 'tsx', path.join(REPO, 'src/bin/migrate.ts')], {
        env: {
          ...process.env,
          HOLD_SWEEPER_MODE: 'production',
          HOLD_SWEEPER_REGIONS: 'us',
          // Production reaches its ledger over TLS only, as the embedded PostgreSQL serves it.
          DATABASE_URL_US: `${url}${inject('postgresTlsQuery')}`,
          MERCHANT_SECRET_KEYS_US: keyRingVariable(us.config.secretKeys),
        },
      }).then(
        ({ stdout }) => ({ code: 0, out: stdout }),
        (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, out: err.stdout + err.stderr }),
      );
    const refused = await migrateAs(us.databaseUrl.replace(/\/[^/]*$/, `/${owned}`));
    expect(refused).toMatchObject({ code: 2 });
    expect(refused.out).toContain('a superuser');
    const migrated = await migrateAs(roleUrl('migrator', owned));
    expect(migrated, migrated.out).toMatchObject({ code: 0 });
    expect(migrated.out).toContain('"msg":"ledger migrated"');
    await expect(checkServiceConnection(as('migrator', owned), 'worker', 'DATABASE_URL_US', expected)).rejects.toThrow(
      /owns the schema/,
    );
    await expect(
      checkServiceConnection(as('worker', owned), 'worker', 'DATABASE_URL_US', expected),
    ).resolves.toBeUndefined();
    // The grants came with the migration, and nothing of the owner's reaches the receiver.
    expect(
      await as('receiver', owned)
        .query('SELECT signing_secret FROM merchants')
        .then(
          () => 'ok',
          (err: Error) => err.message,
        ),
    ).toMatch(/^permission denied/);
  });
});

describe('a night with every service on its own role', () => {
  let workers: WorkerProcesses | undefined;
  let receiver: ReceiverProcess | undefined;
  afterAll(async () => {
    await receiver?.stop();
    await workers?.stop();
  });

  it('holds released, webhooks delivered or quarantined, a merchant disabled by 410, a processor capture applied, and the CLI’s replay, merchant and report commands', async () => {
    const night = await seedNight(
      us.pool,
      'us',
      `${harness.id}rl`,
      { expired: 12, future: 2, merchants: 4 },
      harness.merchants,
    );
    const [, rejecting, gone] = night.merchantIds as [string, string, string, string];
    const secretOf = (m: string) => night.secrets.get(m)!;
    harness.merchants.script(rejecting, { secrets: [secretOf(rejecting)], responses: [{ status: 400 }] });
    harness.merchants.script(gone, { secrets: [secretOf(gone)], responses: [{ status: 410 }] });

    const env = {
      ...workerEnvironment([us.config], harness.address, inject('workflowBundlePath')),
      DATABASE_URL_US: roleUrl('worker', database),
    };
    workers = await startWorkerProcesses(1, env);
    await us.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId: `sweep-${harness.id}-roles`,
      args: [{ region: 'us', pageSize: 5, releaseWaitMs: 30_000 }],
    });
    // The disabled merchant's webhooks wait, held, until it is resumed: every other one is delivered or quarantined.
    await waitUntil(
      async () =>
        (
          await us.pool.query(
            `SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'pending' AND merchant_id LIKE $1 AND merchant_id <> $2`,
            [`m_${harness.id}rl_%`, gone],
          )
        ).rows[0].n === 0,
      'every webhook of the night is delivered or quarantined',
    );
    const states = await holdStates(us.pool);
    expect(night.expired.map((h) => states.get(h.id)?.state)).toEqual(night.expired.map(() => 'released'));
    expect((await us.pool.query('SELECT status FROM merchants WHERE id = $1', [gone])).rows[0].status).toBe('disabled');

    // The processor's capture of a hold still active, through the receiver's role, applied by the worker's.
    const secret = generateSigningSecret();
    receiver = await startReceiverProcess({
      region: us.config,
      databaseUrl: roleUrl('receiver', database),
      temporalAddress: harness.address,
      secret,
    });
    const captured = night.future[0]!;
    const capture = {
      eventId: `evt_${captured.id}_1`,
      holdId: captured.id,
      sequence: 1,
      type: 'hold.captured' as const,
      amountMinor: 50,
      currency: 'USD',
    };
    expect((await new FakeProcessor(receiver.url, secret).send(capture)).status).toBe(202);
    await waitUntil(
      async () =>
        (await us.pool.query('SELECT applied_at FROM processor_events WHERE event_id = $1', [capture.eventId])).rows[0]
          ?.applied_at != null,
      'the capture is applied',
    );
    expect(receiver.output()).not.toMatch(/permission denied/);

    // The CLI as the ops role: the rejected merchant is fixed and its quarantined webhooks replayed; a merchant added,
    // its secret rotated, paused and resumed; the reports.
    harness.merchants.script(rejecting, { secrets: [secretOf(rejecting)], responses: [{ status: 200 }] });
    await withOps(
      us,
      'dev',
      async (ops, lines) => {
        expect(await ops('quarantine', 'list', '--merchant', rejecting, '--json')).toBe(0);
        const quarantined = JSON.parse(lines.pop()!) as unknown[];
        expect(quarantined.length).toBeGreaterThan(0);
        expect(await ops('replay', 'preview', '--merchant', rejecting, '--requested-by', 'hana')).toBe(0);
        const requestId = /replay request (rr_\w+)/.exec(lines.pop()!)![1]!;
        expect(await ops('replay', 'approve', requestId, '--by', 'ivo', '--rate', '50')).toBe(0);
        const added = `m_${harness.id}rl_new`;
        expect(
          await ops('merchant', 'add', added, '--name', 'New', '--url', harness.merchants.endpointFor(added), '--json'),
        ).toBe(0);
        expect(await ops('merchant', 'rotate-secret', added, '--overlap', '1h')).toBe(0);
        expect(await ops('merchant', 'pause', added, '--reason', 'maintenance')).toBe(0);
        expect(await ops('merchant', 'resume', added)).toBe(0);
        expect(await ops('status', night.expired[0]!.id)).toBe(0);
        expect(await ops('events', 'show', captured.id)).toBe(0);
        expect(await ops('reviews', 'list')).toBe(0);
        expect(await ops('events', 'refused')).toBe(0);
      },
      undefined,
      roleUrl('ops', database),
    );
    await waitUntil(
      async () =>
        (
          await us.pool.query(
            `SELECT count(*)::int AS n FROM webhook_deliveries WHERE merchant_id = $1 AND status <> 'delivered'`,
            [rejecting],
          )
        ).rows[0].n === 0,
      "the rejecting merchant's replayed webhooks are delivered",
    );
    const holdWorkflow = await holdWorkflowIdOf(us.pool, 'us', night.expired[0]!.id);
    expect(holdWorkflow).toBeTruthy();
    expect(workers.output().join('\n')).not.toMatch(/permission denied/);
    expect(
      await checkInvariants({
        regions: [{ region: 'us', pool: us.pool, secretKeys: us.config.secretKeys }],
        requests: harness.merchants.requests(),
        texts: [],
      }),
    ).toEqual([]);
  }, 240_000);
});
