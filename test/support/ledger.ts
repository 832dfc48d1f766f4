/** Ledger fixtures and read-backs for tests. */
import type pg from 'pg';
import { expect } from 'vitest';
import type { TestRegion } from './harness.js';
import { isoUtc } from '../../src/db/sql.js';
import { generateSigningSecret } from '../../src/delivery/standard-webhooks.js';
import type { FakeMerchants } from '../../dev/fake-merchants.js';
import { insertAccounts, insertHolds, insertMerchants, type HoldSeed } from '../../dev/seed.js';
import type { Region } from '../../src/contracts/regions.js';
import { holdWorkflowId } from '../../src/contracts/ids.js';
import type { EncryptionKey } from '../../src/crypto/key-ring.js';
import { localKeyRing } from '../../src/delivery/secret-box.js';
import { TEST_SECRET_KEYS } from './secrets.js';
import type { ApproveReplay, Discard } from '../../src/contracts/messages.js';
import { decisionTargetOfHold } from '../../src/sql/deliveries.js';
import { recordOperatorDecision } from '../../src/sql/operator-records.js';

export interface Night {
  merchantIds: string[];
  /** Each merchant's signing secret (the fake merchant verifies with it). */
  secrets: Map<string, string>;
  expired: HoldSeed[];
  future: HoldSeed[];
  defective: HoldSeed[];
}

/**
 * `expired` releasable holds (expired 1–120 minutes ago) over a few merchants and accounts, `future` holds
 * expiring in an hour, and optional defective rows of each kind. Merchants point at the fake merchants,
 * which answer 200 and verify signatures unless a test scripts them otherwise. Their secrets are sealed with
 * `secretKeys`: the region's ring (a test region's `config.secretKeys`, TEST_SECRET_KEYS unless it was given one).
 */
export async function seedNight(
  pool: pg.Pool,
  region: Region,
  prefix: string,
  counts: { expired: number; future?: number; defective?: boolean; merchants?: number },
  fake: FakeMerchants,
  secretKeys: readonly EncryptionKey[] = TEST_SECRET_KEYS,
): Promise<Night> {
  const currency = region === 'eu' ? 'EUR' : 'USD';
  const merchantIds = Array.from({ length: counts.merchants ?? 4 }, (_, i) => `m_${prefix}_${i}`);
  const accountIds = Array.from({ length: 10 }, (_, i) => `a_${prefix}_${i}`);
  const secrets = new Map(merchantIds.map((id) => [id, generateSigningSecret()]));
  for (const id of merchantIds) fake.script(id, { secrets: [secrets.get(id)!] });
  await insertMerchants(
    pool,
    { region, sealer: localKeyRing(secretKeys) },
    merchantIds.map((id) => ({ id, endpointUrl: fake.endpointFor(id), signingSecret: secrets.get(id)! })),
  );
  await insertAccounts(
    pool,
    accountIds.map((id, i) => ({ id, currency, availableMinor: 1_000_000 + i })),
  );
  const hold = (kind: string, i: number, expiresInSeconds: number): HoldSeed => ({
    id: `h_${prefix}_${kind}_${String(i).padStart(4, '0')}`,
    accountId: accountIds[i % accountIds.length]!,
    merchantId: merchantIds[i % merchantIds.length]!,
    amountMinor: 101 + ((i * 7919) % 99_000),
    currency,
    expiresInSeconds,
  });
  const expired = Array.from({ length: counts.expired }, (_, i) => hold('x', i, -60 * (1 + (i % 120))));
  const future = Array.from({ length: counts.future ?? 0 }, (_, i) => hold('f', i, 3600));
  const defective: HoldSeed[] = counts.defective
    ? [
        { ...hold('bad', 0, -300), amountMinor: -250 },
        { ...hold('bad', 1, -300), accountId: 'a_missing' },
        { ...hold('bad', 2, -300), merchantId: 'm_missing' },
        { ...hold('bad', 3, -300), currency: currency === 'USD' ? 'EUR' : 'USD' },
      ]
    : [];
  await insertHolds(pool, [...expired, ...future, ...defective]);
  return { merchantIds, secrets, expired, future, defective };
}

export interface AccountBalance {
  available: bigint;
  held: bigint;
}

export async function balances(pool: pg.Pool): Promise<Map<string, AccountBalance>> {
  const { rows } = await pool.query<{ id: string; available_minor: string; held_minor: string }>(
    'SELECT id, available_minor, held_minor FROM accounts',
  );
  return new Map(rows.map((r) => [r.id, { available: BigInt(r.available_minor), held: BigInt(r.held_minor) }]));
}

export async function holdStates(pool: pg.Pool): Promise<Map<string, { state: string; rejectCode: string | null }>> {
  const { rows } = await pool.query<{ id: string; state: string; reject_code: string | null }>(
    'SELECT id, state, reject_code FROM auth_holds',
  );
  return new Map(rows.map((r) => [r.id, { state: r.state, rejectCode: r.reject_code }]));
}

export async function ledgerEntryCount(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ n: number }>('SELECT count(*)::integer AS n FROM ledger_entries');
  return rows[0]!.n;
}

/** The rows of every table of the ledger, counted one by one (the statistics' counts lag and miss aborted ones). */
export async function rowsPerTable(pool: pg.Pool): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`,
  );
  const counts: Record<string, number> = {};
  for (const { table_name } of rows) {
    const { rows: n } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${table_name.replace(/[^a-z_]/g, '')}`,
    );
    counts[table_name] = n[0]!.n;
  }
  return counts;
}

/** The workflow id the sweep gives a hold: derived from its id and exact (microsecond) expiry. */
export async function holdWorkflowIdOf(pool: pg.Pool, region: Region, holdId: string): Promise<string> {
  const { rows } = await pool.query<{ e: string }>(
    `SELECT ${isoUtc('expires_at')} AS e FROM auth_holds WHERE id = $1`,
    [holdId],
  );
  return holdWorkflowId(region, holdId, rows[0]!.e);
}

/**
 * A decision on a hold's release webhook as an operator makes it: recorded in the ledger for the webhook's current
 * policy run (what `npm run ops` does before it sends), returned as the payload a signal or an Update carries.
 */
export async function recordedDecision<K extends 'approveReplay' | 'discard'>(
  pool: pg.Pool,
  holdId: string,
  kind: K,
  by: string,
  reason: string,
): Promise<K extends 'discard' ? Discard : ApproveReplay> {
  const target = await decisionTargetOfHold(pool, holdId);
  const decisionId = await recordOperatorDecision(pool, {
    webhookId: target!.webhookId,
    policyRun: target!.policyRun,
    signal: kind,
    by,
    reason,
  });
  return (kind === 'discard' ? { by, reason, decisionId } : { approvedBy: by, reason, decisionId }) as never;
}

/** One attempt in the attempt log. */
export interface LoggedAttempt {
  webhookId: string;
  attemptNumber: number;
  /** When the merchant's budget admitted it: ms since the epoch, on the ledger's clock (the gate's own time). */
  admittedAt: number;
  /** As the sender measured it, from its request to its answer or its own timeout. */
  durationMs: number;
  statusCode: number | null;
  errorClass: string | null;
  outcome: 'delivered' | 'retry' | 'quarantine';
  /** The delay the policy chose before the next attempt (a retry's), ms. */
  nextRetryDelayMs: number | null;
}

/**
 * The attempt log of these merchants' webhooks, in the order their budgets admitted them: what the pacing guarantees
 * is read here, where the gate's time is kept, not at a receiver whose clock a busy machine moves.
 */
export async function loggedAttempts(pool: pg.Pool, merchantIds: readonly string[]): Promise<LoggedAttempt[]> {
  const { rows } = await pool.query<LoggedAttempt>(
    `SELECT a.webhook_id AS "webhookId", a.attempt_number AS "attemptNumber",
            (extract(epoch FROM a.started_at) * 1000)::float8 AS "admittedAt", a.duration_ms AS "durationMs",
            a.status_code AS "statusCode",
            a.error_class AS "errorClass", a.outcome, a.next_retry_delay_ms::float8 AS "nextRetryDelayMs"
       FROM delivery_attempts a JOIN webhook_deliveries d USING (webhook_id)
      WHERE d.merchant_id = ANY($1::text[])
      ORDER BY a.started_at, a.webhook_id, a.attempt_number`,
    [merchantIds],
  );
  return rows;
}

/**
 * Runs `sql` on the ledger (as its superuser) with its triggers off, `session_replication_role = replica`: a
 * fixture that backdates what the ledger's clock writes (migration 005: a webhook's `updated_at`, a sweep's
 * `finished_at`), as no service role can.
 */
export async function backdate(pool: pg.Pool, sql: string, params: unknown[] = []): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SET LOCAL session_replication_role = replica');
    await client.query(sql, params);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  } finally {
    client.release();
  }
}

/**
 * Every request the merchant received was admitted and counted by the gate, and every admission is in the attempt
 * log, or its fast path's local activity timed out before its attempt was written (the regular activity then sends it
 * again, same webhook id: each is in its hold's history). A webhook's attempts end in one delivered; those before it
 * failed with one of the statuses the merchant was scripted to answer (`refusedWith`, exactly those), or with no answer
 * at all: a request a busy machine cut on the wire, sent again. A second delivered is the local activity's
 * at-least-once, and only that: a workflow task lost (timed out or failed, in the hold's history) while its fast-path
 * attempt was in flight, whose next task ran the attempt again beside it. Throttling is never a failed attempt.
 */
export async function expectEveryRequestAccounted(
  us: TestRegion,
  merchants: FakeMerchants,
  merchantId: string,
  refusedWith: number[] = [],
): Promise<LoggedAttempt[]> {
  const requests = merchants.requests(merchantId);
  const attempts = await loggedAttempts(us.pool, [merchantId]);
  const failed = attempts.filter((a) => a.outcome !== 'delivered');
  expect(failed.filter((a) => a.statusCode !== null).map((a) => a.statusCode)).toEqual(refusedWith);
  expect(failed.filter((a) => a.outcome !== 'retry')).toEqual([]);
  const { rows: admissions } = await us.pool.query<{ webhook_id: string; admitted: number }>(
    'SELECT webhook_id, attempt_count AS admitted FROM webhook_deliveries WHERE merchant_id = $1',
    [merchantId],
  );
  const unexplained: unknown[] = [];
  for (const { webhook_id: webhookId, admitted } of admissions) {
    const log = attempts.filter((a) => a.webhookId === webhookId);
    const delivered = log.filter((a) => a.outcome === 'delivered').length;
    expect(delivered, webhookId).toBeGreaterThanOrEqual(1);
    expect(
      log.map((a) => a.outcome),
      webhookId,
    ).toEqual([...log.slice(delivered).map(() => 'retry'), ...log.slice(-delivered).map(() => 'delivered')]);
    const received = requests.filter((r) => r.webhookId === webhookId).length;
    if (received > admitted) unexplained.push({ webhookId, received, admitted });
    if (admitted === log.length && delivered === 1) continue;
    const { rows } = await us.pool.query<{ hold_id: string }>(
      'SELECT hold_id FROM webhook_deliveries WHERE webhook_id = $1',
      [webhookId],
    );
    const workflowId = await holdWorkflowIdOf(us.pool, us.config.region, rows[0]!.hold_id);
    const events = (await us.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
    const timedOut = events.filter((e) => e.markerRecordedEventAttributes?.failure?.timeoutFailureInfo);
    if (admitted - log.length > timedOut.length)
      unexplained.push({ webhookId, workflowId, admitted, logged: log.length, timedOut: timedOut.length });
    const lostTasks = events.filter(
      (e) => e.workflowTaskTimedOutEventAttributes || e.workflowTaskFailedEventAttributes,
    );
    if (delivered - 1 > lostTasks.length)
      unexplained.push({ webhookId, workflowId, delivered, lostTasks: lostTasks.length });
  }
  expect(unexplained).toEqual([]);
  return attempts;
}
