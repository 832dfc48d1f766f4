/**
 * One database role per service, least privilege (docs/security.md; src/db/rights.ts, src/db/roles.ts): a night run by
 * a worker, a receiver and the operators' CLI each connected as its own role proves the grants are enough; each role,
 * trying every verb on every column and every function, is allowed exactly what src/db/rights.ts says, and no role can
 * make a row look old enough for retention to take it, or stand a temporary table in for a ledger table; `npm run
 * migrate` runs as the schema's owner, no superuser; and a production service refuses a connection that could do more
 * than its role (a superuser, the owner) or a schema older than its code.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
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
import { latestMigrationVersion, migrate } from '../../src/db/migrate.js';
import { allows, LEDGER_RIGHTS } from '../../src/db/rights.js';
import { checkServiceConnection, SchemaBehind, SERVICE_ROLES, type Service } from '../../src/db/roles.js';
import { erasePreviousSecretsPastOverlap } from '../../src/db/secrets-at-rest.js';
import { localKeyRing } from '../../src/delivery/secret-box.js';
import { finishAudit, insertAuditAhead } from '../../src/sql/audit.js';
import { reopenForResend } from '../../src/sql/deliveries.js';
import { insertApiKey, markMerchantResendStarted, revokeApiKey } from '../../src/sql/merchant-api.js';
import { upsertDestination } from '../../src/sql/merchants.js';
import {
  insertSkipRequest,
  markSkipRequestApproved,
  recordDecisionOutcome,
  recordOperatorDecision,
} from '../../src/sql/operator-records.js';
import { recordReconciliation } from '../../src/sql/outbox.js';
import { openReview, recordSkip, resolveReview } from '../../src/sql/processor-events.js';
import { RETENTION_KINDS } from '../../src/sql/retention.js';
import { closeSendPause, openSendPause } from '../../src/sql/send-pauses.js';
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

describe('what no role may do beside its rights: DDL', () => {
  it.each([
    ['worker', 'CREATE TABLE evil (id int)', 'permission denied for'],
    ['worker', 'ALTER TABLE auth_holds ADD COLUMN evil int', 'must be owner of'],
    ['worker', 'DROP TABLE ledger_entries', 'must be owner of'],
    ['ops', 'CREATE TABLE evil (id int)', 'permission denied for'],
    ['receiver', 'CREATE TABLE evil (id int)', 'permission denied for'],
    ['merchantApi', 'CREATE TABLE evil (id int)', 'permission denied for'],
  ] as const)('%s: %s', async (service, sql, refusal) => {
    expect(await attempt(service, sql)).toBe(refusal);
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

/** A ledger of their own for the tests of the rights: their rows stay out of the night's. */
let ledger: TestRegion;
let ledgerDatabase: string;
/** The four services, as src/db/rights.ts lists them. */
const SERVICES = Object.keys(LEDGER_RIGHTS) as Service[];
/**
 * Whether PostgreSQL refused a probe of `object` (`table x` or `function f`) for want of a privilege on it; any other
 * error (a constraint, a trigger, a function refusing its NULL arguments, a right the function's own body lacks) came
 * after the check.
 */
const refused = (err: { code?: string; message: string }, object: string) =>
  err.code === '42501' && err.message === `permission denied for ${object}`;

/** One connection as `service`'s role, for a test's probes (closed with the file). */
async function clientAs(service: Service): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: roleUrl(service, ledgerDatabase) });
  await client.connect();
  clients.push(client);
  return client;
}
const clients: pg.Client[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.end()));
});

/** The ledger's tables and their columns, and its functions (with what a call passes: a NULL of each argument). */
async function catalog() {
  const { rows: columns } = await ledger.pool.query<{ table: string; column: string; type: string }>(
    `SELECT c.relname AS table, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type
       FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
      WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
      ORDER BY c.relname, a.attnum`,
  );
  const tables = new Map<string, string[]>();
  for (const c of columns) tables.set(c.table, [...(tables.get(c.table) ?? []), c.column]);
  const { rows: functions } = await ledger.pool.query<{
    name: string;
    signature: string;
    call: string;
    definer: boolean;
  }>(
    `SELECT p.proname AS name, p.oid::regprocedure::text AS signature, p.prosecdef AS definer,
            format('SELECT %I(%s)', p.proname,
                   (SELECT string_agg('NULL::' || format_type(t, NULL), ', ' ORDER BY i)
                      FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, i))) AS call
       FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace ORDER BY 1`,
  );
  return { tables, columns, functions };
}

/** `service`'s rights as one line per table (`verb(columns)`, `verb` for every column), functions last. */
type Matrix = Record<string, string>;
const signatureOf = (fn: string) => fn.replace(/,\s*/g, ',');
function matrixLine(verbs: Record<string, string[]>, columns: readonly string[]): string {
  return Object.entries(verbs)
    .filter(([, allowed]) => allowed.length > 0)
    .map(([verb, allowed]) =>
      ['DELETE', 'TRUNCATE'].includes(verb) || allowed.length === columns.length
        ? verb
        : `${verb}(${allowed.join(', ')})`,
    )
    .join(' ');
}

describe('the ledger’s rights (src/db/rights.ts), tried', () => {
  beforeAll(async () => {
    ledger = await harness.region('us');
    ledgerDatabase = new URL(ledger.databaseUrl).pathname.slice(1);
  });
  it('every role tries every verb on every column of every table, and every function: PostgreSQL allows exactly what the table says', async () => {
    const { tables, functions } = await catalog();
    const observed: Matrix = {};
    const expected: Matrix = {};
    const granted: Matrix = {};
    for (const service of SERVICES) {
      const client = await clientAs(service);
      const probe = async (sql: string, object: string) => {
        try {
          await client.query(`SAVEPOINT probe; ${sql}; RELEASE probe`);
          return true;
        } catch (err) {
          await client.query('ROLLBACK TO probe; RELEASE probe');
          return !refused(err as pg.DatabaseError, object);
        }
      };
      // Nothing a probe does stays: each acts on no row (WHERE false), and the whole is rolled back (a TRUNCATE).
      await client.query('BEGIN');
      for (const [table, columns] of tables) {
        const tried: Record<string, string[]> = { SELECT: [], INSERT: [], UPDATE: [], DELETE: [], TRUNCATE: [] };
        const wanted: Record<string, string[]> = { SELECT: [], INSERT: [], UPDATE: [], DELETE: [], TRUNCATE: [] };
        for (const column of columns) {
          if (await probe(`SELECT ${column} FROM ${table} WHERE false`, `table ${table}`)) tried.SELECT!.push(column);
          if (
            await probe(
              `INSERT INTO ${table} (${column}) OVERRIDING SYSTEM VALUE SELECT NULL WHERE false`,
              `table ${table}`,
            )
          )
            tried.INSERT!.push(column);
          if (await probe(`UPDATE ${table} SET ${column} = DEFAULT WHERE false`, `table ${table}`))
            tried.UPDATE!.push(column);
          for (const verb of ['SELECT', 'INSERT', 'UPDATE'] as const)
            if (allows(service, table, verb, column)) wanted[verb]!.push(column);
        }
        if (await probe(`DELETE FROM ${table} WHERE false`, `table ${table}`)) tried.DELETE!.push('*');
        if (await probe(`TRUNCATE ${table}`, `table ${table}`)) tried.TRUNCATE!.push('*');
        if (allows(service, table, 'DELETE', '*')) wanted.DELETE!.push('*');
        observed[`${service} ${table}`] = matrixLine(tried, columns);
        expected[`${service} ${table}`] = matrixLine(wanted, columns);
      }
      const calls = { tried: [] as string[], wanted: [] as string[] };
      for (const fn of functions) {
        if (await probe(fn.call, `function ${fn.name}`)) calls.tried.push(fn.signature);
        if (!fn.definer || LEDGER_RIGHTS[service].execute.map(signatureOf).includes(fn.signature))
          calls.wanted.push(fn.signature);
      }
      observed[`${service} EXECUTE`] = calls.tried.join(' ');
      expected[`${service} EXECUTE`] = calls.wanted.join(' ');
      await client.query('ROLLBACK');

      // PostgreSQL's own account of the role's privileges says the same.
      const role = SERVICE_ROLES[service];
      const { rows: privileges } = await ledger.pool.query<{ table: string; column: string; verb: string }>(
        `SELECT c.relname AS table, a.attname AS column, v AS verb
           FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
          CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE']) AS v
          WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
            AND has_column_privilege($1, c.oid, a.attnum, v)
         UNION ALL
         SELECT c.relname, '*', v
           FROM pg_class c CROSS JOIN unnest(ARRAY['DELETE', 'TRUNCATE']) AS v
          WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND has_table_privilege($1, c.oid, v)`,
        [role],
      );
      for (const [table, columns] of tables) {
        const verbs: Record<string, string[]> = { SELECT: [], INSERT: [], UPDATE: [], DELETE: [], TRUNCATE: [] };
        for (const p of privileges.filter((p) => p.table === table)) verbs[p.verb]!.push(p.column);
        // In the table's column order, as the probes went.
        for (const verb of ['SELECT', 'INSERT', 'UPDATE'])
          verbs[verb]!.sort((x, y) => columns.indexOf(x) - columns.indexOf(y));
        granted[`${service} ${table}`] = matrixLine(verbs, columns);
      }
    }
    console.log(
      `the ledger's rights, as each role tried them:\n${Object.entries(observed)
        .filter(([, line]) => line)
        .map(([key, line]) => `  ${key}: ${line}`)
        .join('\n')}`,
    );
    expect(observed).toEqual(expected);
    expect(Object.fromEntries(Object.keys(granted).map((k) => [k, observed[k]]))).toEqual(granted);
  });

  /** A webhook at an end and one quarantined, with what names them, an applied and a reviewed event, two runs of each. */
  async function seedEveryKind(tag: string) {
    const q = (sql: string) => ledger.pool.query(sql.replaceAll('$tag', tag));
    await q(`INSERT INTO merchants (id, name, endpoint_url) VALUES ('m_$tag', 'M', 'https://m.invalid/')`);
    await q(`INSERT INTO accounts (id, currency, available_minor, held_minor) VALUES ('a_$tag', 'USD', 0, 0)`);
    await q(`INSERT INTO auth_holds (id, account_id, merchant_id, amount_minor, currency, expires_at)
             VALUES ('h_$tag', 'a_$tag', 'm_$tag', 100, 'USD', now())`);
    await q(`INSERT INTO webhook_deliveries (webhook_id, hold_id, merchant_id, event_type, payload, status, quarantine_reason,
                                            delivered_at, hold_ordinal)
             VALUES ('wh_$tag_ended', 'h_$tag', 'm_$tag', 'hold.released', '{}', 'discarded', 'rejected', NULL, 1),
                    ('wh_$tag_held', 'h_$tag', 'm_$tag', 'hold.captured', '{}', 'quarantined', 'rejected', NULL, 2)`);
    await q(`INSERT INTO delivery_attempts (webhook_id, attempt_number, policy_run, scheduled_at, started_at, duration_ms,
                                           status_code, outcome)
             SELECT w, 1, 1, now(), now(), 5, 400, 'quarantine' FROM unnest(ARRAY['wh_$tag_ended', 'wh_$tag_held']) AS w`);
    await q(`INSERT INTO delivery_decisions (webhook_id, policy_run, decision, decided_by, reason)
             VALUES ('wh_$tag_ended', 1, 'discard', 'alice', 'the merchant asked')`);
    await q(`INSERT INTO operator_decisions (webhook_id, signal, sent_by, reason, outcome)
             SELECT w, 'discard', 'alice', 'the merchant asked', 'applied'
               FROM unnest(ARRAY['wh_$tag_ended', 'wh_$tag_held']) AS w`);
    await q(`INSERT INTO processor_events (event_id, hold_id, sequence, event_type, occurred_at, body, body_sha256,
                                          dispatched_at, applied_at, outcome)
             VALUES ('ev_$tag_1', 'h_$tag', 1, 'hold.reversed', now(), '{}', 'x', now(), now(), 'ignored'),
                    ('ev_$tag_2', 'h_$tag', 2, 'hold.reversed', now(), '{}', 'x', now(), now(), 'ignored')`);
    await q(`INSERT INTO ledger_reviews (event_id, hold_id, reason, resolved_by, resolved_at)
             VALUES ('ev_$tag_2', 'h_$tag', 'late capture', 'bob', now())`);
    // Two of each run, one after the other: the older is not the newest that always stays.
    for (const run of [1, 2]) {
      await q(`INSERT INTO sweep_runs (sweep_id, cutoff, pages, found, started, already_started, rejected, unreleased_at_end)
               VALUES ('s_$tag_${run}', now(), 1, 0, 0, 0, 0, 0)`);
      await q(`INSERT INTO outbox_reconciliations (grace_ms, checked, running, restarted, unfixable, details)
               VALUES (0, 0, 0, 0, 0, '{}')`);
    }
    await q(`INSERT INTO api_audit (request_id, verb, method, path, outcome, status)
             VALUES ('r_$tag', 'sends.status', 'GET', '/v1/sends', 'ok', 200)`);
  }

  /** Every table's rows (the audit's own records of a prune aside). */
  async function rowCounts(tables: Iterable<string>): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (const table of tables) {
      const audit = table === 'api_audit' ? ` WHERE verb <> 'audit.prune'` : '';
      counts[table] = (await ledger.pool.query(`SELECT count(*)::int AS n FROM ${table}${audit}`)).rows[0].n;
    }
    return counts;
  }

  it('every role makes every row it can reach look 900 days old and runs every function it may: nothing leaves', async () => {
    await seedEveryKind(`${harness.id}old`);
    const { tables, columns } = await catalog();
    const before = await rowCounts(tables.keys());
    const times = columns.filter((c) => c.type === 'timestamp with time zone');
    const clients = await Promise.all(SERVICES.map(clientAs));
    const tryAs = (client: pg.Client, sql: string) =>
      client.query(sql).then(
        () => true,
        () => false,
      );
    const aged: string[] = [];
    for (const [i, client] of clients.entries())
      for (const table of new Set(times.map((t) => t.table))) {
        const own = times.filter((t) => t.table === table).map((t) => `${t.column} = now() - interval '900 days'`);
        // All of a row's times at once (a check may tie two together), then each alone.
        for (const set of [own.join(', '), ...own])
          if (await tryAs(client, `UPDATE ${table} SET ${set}`)) aged.push(`${SERVICES[i]}: ${table} SET ${set}`);
      }
    const calls = [
      ...RETENTION_KINDS.map((kind) => `SELECT prune_expired('${kind}', 10000)`),
      `SELECT prune_api_audit(now() - api_audit_min_retention(), 'someone')`,
    ];
    for (const client of clients) for (const call of calls) await tryAs(client, call);
    const after = await rowCounts(tables.keys());
    const deleted = Object.entries(before).reduce((n, [table, rows]) => n + rows - after[table]!, 0);
    expect({ deleted, after }, `rows deleted: ${deleted}; aged by the roles: ${aged.join('; ')}`).toEqual({
      deleted: 0,
      after: before,
    });
  });

  it('the writes the night does not make, each by its own code on its own role, and the clock keeps what it wrote', async () => {
    const tag = `${harness.id}w`;
    await seedEveryKind(tag);
    await ledger.pool.query(
      `INSERT INTO processor_events (event_id, hold_id, sequence, event_type, occurred_at, body, body_sha256)
       VALUES ($1, $2, 3, 'hold.reversed', now(), '{}', 'x')`,
      [`ev_${tag}_3`, `h_${tag}`],
    );
    await ledger.pool.query(`INSERT INTO ledger_reviews (event_id, hold_id, reason) VALUES ($1, $2, 'late capture')`, [
      `ev_${tag}_3`,
      `h_${tag}`,
    ]);
    const ops = as('ops', ledgerDatabase);
    const worker = as('worker', ledgerDatabase);

    // The operators': a review resolved once (and by whom stays), a skip asked and approved, a send pause opened and
    // closed, a destination declared and changed, a merchant's key made and revoked, decisions and their outcomes,
    // the admin API's audit row ahead of its call and its outcome after.
    expect(await resolveReview(ops, `ev_${tag}_3`, 'carol')).toBe(true);
    await ops.query(`UPDATE ledger_reviews SET resolved_by = 'mallory' WHERE event_id = $1`, [`ev_${tag}_3`]);
    expect(
      (
        await ledger.pool.query(
          `SELECT resolved_by, resolved_at > now() - interval '1 minute' AS now FROM ledger_reviews WHERE event_id = $1`,
          [`ev_${tag}_3`],
        )
      ).rows,
    ).toEqual([{ resolved_by: 'carol', now: true }]);
    await insertSkipRequest(ops, {
      id: `sk_${tag}`,
      holdId: `h_${tag}`,
      sequence: 4,
      requestedBy: 'carol',
      reason: 'r',
    });
    expect(await markSkipRequestApproved(ops, `sk_${tag}`, 'dave')).toBe(true);
    expect(await openSendPause(ops, 'carol', 'incident')).toBeDefined();
    expect(await closeSendPause(ops, 'carol', 'resolved')).toBeDefined();
    await upsertDestination(ops, { id: `d_${tag}`, ratePerSecond: 5 });
    await upsertDestination(ops, { id: `d_${tag}`, ratePerSecond: 2, maxInFlight: 3, note: 'shared' });
    const keyId = `mk_${randomBytes(8).toString('hex')}`;
    const key = {
      id: keyId,
      merchantId: `m_${tag}`,
      secretSha256: randomBytes(32),
      label: undefined,
      createdBy: 'carol',
    };
    expect(await insertApiKey(ops, { ...key, ratePerSecond: 5, burst: 10, ttlMs: 60_000 })).toMatchObject({
      expiresAt: expect.any(String),
    });
    expect(await revokeApiKey(ops, keyId, 'carol')).toBe(true);
    const decision = { webhookId: `wh_${tag}_held`, signal: 'discard' as const, by: 'carol', reason: 'asked' };
    const decisionId = await recordOperatorDecision(ops, { ...decision, policyRun: 1 });
    await recordDecisionOutcome(ops, { decisionId }, { outcome: 'applied', detail: 'discarded' });
    await recordDecisionOutcome(ops, decision, { outcome: 'ignored', detail: 'no longer waiting' });
    const call = { requestId: `r_${tag}`, subject: 'carol', roles: ['operator'], verb: 'sends.pause', method: 'POST' };
    const auditId = await insertAuditAhead(ops, {
      ...call,
      path: '/v1/sends/pause',
      target: undefined,
      outcome: 'started',
      status: 0,
      detail: undefined,
    });
    await finishAudit(ops, auditId, { outcome: 'ok', status: 200, detail: undefined });

    // The worker's: a skip and a review recorded, a webhook at an end reopened for a resend, a reconcile's account, a
    // merchant's resend started, a previous secret past its overlap erased.
    const tx = await worker.connect();
    try {
      await recordSkip(tx, `h_${tag}`, 4, 'dave', 'approved');
      await openReview(tx, `ev_${tag}_1`, `h_${tag}`, 'late capture');
    } finally {
      tx.release();
    }
    const resend = { resendId: `rs_${tag}`, webhookId: `wh_${tag}_ended`, requestedBy: 'carol', reason: 'lost' };
    expect(await reopenForResend(worker, { ...resend, workflowId: `hold-resend-${tag}` })).toMatchObject({
      fromStatus: 'discarded',
      policyRun: 2,
    });
    const details = { restarted: [], unfixable: [], truncated: false };
    await recordReconciliation(worker, { graceMs: 0, checked: 0, running: 0, restarted: 0, unfixable: 0, details });
    const requestId = `mr_${randomBytes(10).toString('hex')}`;
    await ledger.pool.query(
      `INSERT INTO merchant_resend_requests (id, merchant_id, webhook_id, key_id, resend_id)
       VALUES ($1, $2, $3, $4, $5)`,
      [requestId, `m_${tag}`, `wh_${tag}_held`, keyId, `rs_${randomBytes(10).toString('hex')}`],
    );
    await markMerchantResendStarted(worker, requestId);
    await ledger.pool.query(
      `UPDATE merchants SET previous_signing_secret = 'sealed:v1:k:x', previous_signing_secret_until = now() WHERE id = $1`,
      [`m_${tag}`],
    );
    expect(await erasePreviousSecretsPastOverlap(worker)).toBeGreaterThanOrEqual(1);
  });

  it('a temporary table named like a ledger table: the worker may not make one, and the retention functions never read one', async () => {
    const tag = `${harness.id}tmp`;
    await seedEveryKind(tag);
    // As `npm run migrate` leaves the ledger: no temporary tables for PUBLIC.
    await migrate(ledger.pool, { region: 'us', sealer: localKeyRing(ledger.config.secretKeys) });
    const worker = await clientAs('worker');
    const shadow = `CREATE TEMP TABLE webhook_deliveries AS
                      SELECT 'wh_${tag}_held'::text AS webhook_id, 'abandoned'::text AS status,
                             now() - interval '900 days' AS updated_at;
                    GRANT ALL ON pg_temp.webhook_deliveries TO PUBLIC`;
    await expect(worker.query(shadow)).rejects.toThrow(/permission denied to create temporary tables/);

    // Where TEMPORARY is granted (PostgreSQL's default for a database), the shadow is made and changes nothing.
    await ledger.pool.query(
      `GRANT TEMPORARY ON DATABASE ${pg.escapeIdentifier(ledgerDatabase)} TO ${SERVICE_ROLES.worker}`,
    );
    try {
      const shadowed = await clientAs('worker');
      await shadowed.query(shadow);
      const named = `(SELECT count(*)::int FROM delivery_attempts WHERE webhook_id = 'wh_${tag}_held')
                   + (SELECT count(*)::int FROM operator_decisions WHERE webhook_id = 'wh_${tag}_held') AS n`;
      const before = (await ledger.pool.query(`SELECT ${named}`)).rows[0].n;
      expect(before).toBe(2);
      await shadowed.query(`SELECT prune_expired('webhook_deliveries', 10000)`);
      const after = (await ledger.pool.query(`SELECT ${named}`)).rows[0].n;
      expect(after, `rows of the quarantined webhook deleted: ${before - after}`).toBe(before);
    } finally {
      await ledger.pool.query(
        `REVOKE TEMPORARY ON DATABASE ${pg.escapeIdentifier(ledgerDatabase)} FROM ${SERVICE_ROLES.worker}`,
      );
    }
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
