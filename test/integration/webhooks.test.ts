/**
 * Webhook delivery end to end: real workflows on the real dev server, real Postgres, real HTTP to the fake
 * merchants, which verify every request with the Standard Webhooks reference verifier.
 */
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SweepResult } from '../../src/contracts/domain.js';
import type { MerchantScript } from '../../dev/fake-merchants.js';
import { checkLedgerInvariants } from '../../bench/invariants.js';
import { localKeyRing } from '../../src/delivery/secret-box.js';
import { generateSigningSecret } from '../../src/delivery/standard-webhooks.js';
import { statusQuery } from '../../src/contracts/messages.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { catalogMismatches } from '../support/event-types.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { holdWorkflowIdOf, ledgerEntryCount, loggedAttempts, seedNight, type Night } from '../support/ledger.js';

let harness: Harness;
let us: TestRegion;
let sweeps = 0;
let prefixes = 0;

beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
  await harness.startWorker(us);
});
afterAll(async () => {
  const bodies = harness?.merchants.requests().map((r) => r.body) ?? [];
  await harness?.close();
  // Every body the merchants received in this file is what the event-type catalog says of its type.
  expect(bodies.length).toBeGreaterThan(0);
  expect(catalogMismatches(bodies)).toEqual([]);
});

interface DeliveryRow {
  webhook_id: string;
  hold_id: string;
  status: string;
  attempt_count: number;
  quarantine_reason: string | null;
  last_status_code: number | null;
  payload: string;
}

interface AttemptRow {
  attempt_number: number;
  status_code: number | null;
  error_class: string | null;
  response_excerpt: string | null;
  outcome: string;
  next_retry_delay_ms: string | null;
  retry_reason: string | null;
  started_at: Date;
}

/** Seeds one merchant with `holds` expired holds, scripts it, and applies policy overrides. */
async function merchantNight(
  holds: number,
  script: MerchantScript,
  policy: Record<string, number> = {},
): Promise<Night> {
  const night = await seedNight(
    us.pool,
    'us',
    `${harness.id}w${++prefixes}`,
    { expired: holds, merchants: 1 },
    harness.merchants,
  );
  const merchantId = night.merchantIds[0]!;
  harness.merchants.script(merchantId, { secrets: [night.secrets.get(merchantId)!], ...script });
  await us.pool.query('UPDATE merchants SET delivery_policy = $2::jsonb WHERE id = $1', [
    merchantId,
    JSON.stringify(policy),
  ]);
  return night;
}

function sweep(): Promise<SweepResult> {
  return us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: us.config.taskQueue,
    workflowId: `sweep-us-${harness.id}-wh-${++sweeps}`,
    args: [{ region: 'us', releaseWaitMs: 60_000 }],
  });
}

async function deliveries(night: Night): Promise<DeliveryRow[]> {
  const { rows } = await us.pool.query<DeliveryRow>(
    'SELECT webhook_id, hold_id, status, attempt_count, quarantine_reason, last_status_code, payload FROM webhook_deliveries WHERE hold_id = ANY($1) ORDER BY hold_id',
    [night.expired.map((h) => h.id)],
  );
  return rows;
}

async function attempts(webhookId: string): Promise<AttemptRow[]> {
  const { rows } = await us.pool.query<AttemptRow>(
    `SELECT attempt_number, status_code, error_class, response_excerpt, outcome, next_retry_delay_ms, retry_reason, started_at
       FROM delivery_attempts WHERE webhook_id = $1 ORDER BY attempt_number`,
    [webhookId],
  );
  return rows;
}

/** Waits until every delivery of the night has left `pending`. */
async function settled(night: Night, timeout = 60_000): Promise<DeliveryRow[]> {
  await expect
    .poll(async () => (await deliveries(night)).filter((d) => d.status === 'pending').length, {
      timeout,
      interval: 200,
    })
    .toBe(0);
  return deliveries(night);
}

describe('webhook delivery', () => {
  it('delivers a signed webhook once, with the payload fixed at release', async () => {
    const night = await merchantNight(3, {});
    await sweep();
    const rows = await settled(night);
    expect(rows.map((r) => [r.status, r.attempt_count])).toEqual([
      ['delivered', 1],
      ['delivered', 1],
      ['delivered', 1],
    ]);
    const requests = harness.merchants.requests(night.merchantIds[0]);
    expect(requests).toHaveLength(3);
    expect(requests.every((r) => r.verified)).toBe(true);
    for (const row of rows) {
      const request = requests.find((r) => r.webhookId === row.webhook_id)!;
      expect(request.idempotencyKey).toBe(row.webhook_id);
      expect(request.body).toBe(row.payload);
      const hold = night.expired.find((h) => h.id === row.hold_id)!;
      expect(JSON.parse(request.body)).toMatchObject({
        type: 'hold.released',
        data: { hold_id: hold.id, amount_minor: hold.amountMinor, currency: 'USD', merchant_id: hold.merchantId },
      });
    }
    const result = await us.client.workflow
      .getHandle(await holdWorkflowIdOf(us.pool, 'us', night.expired[0]!.id))
      .result();
    expect(result.delivery).toEqual({ status: 'delivered', attempts: 1, policyRuns: 1 });
  });

  it('429 with Retry-After: 2 twice, then 200: delivered on attempt 3, gaps honour the header, one webhook id', async () => {
    // Backoff steps shorter than the header, so the header is what binds.
    const night = await merchantNight(
      1,
      { responses: [{ status: 429, retryAfter: '2' }, { status: 429, retryAfter: '2' }, { status: 200 }] },
      { initialBackoffMs: 200 },
    );
    await sweep();
    const [row] = await settled(night);
    expect(row).toMatchObject({ status: 'delivered', attempt_count: 3 });
    const requests = harness.merchants.requests(night.merchantIds[0]);
    expect(requests.map((r) => r.answer)).toEqual([429, 429, 200]);
    expect(new Set(requests.map((r) => r.webhookId))).toEqual(new Set([row!.webhook_id]));
    expect(new Set(requests.map((r) => r.signature)).size).toBe(3);
    expect(requests.every((r) => r.verified)).toBe(true);
    // Each retry admitted at least the header's 2 s after the attempt before it (the gate's times, in the attempt log):
    // its timer or its retry starts only once that attempt's answer is in.
    const admitted = (await loggedAttempts(us.pool, night.merchantIds)).map((a) => a.admittedAt);
    expect(admitted).toHaveLength(3);
    expect(admitted[1]! - admitted[0]!).toBeGreaterThanOrEqual(2000);
    expect(admitted[2]! - admitted[1]!).toBeGreaterThanOrEqual(2000);
    const log = await attempts(row!.webhook_id);
    expect(log.map((a) => [a.status_code, a.outcome, a.retry_reason])).toEqual([
      [429, 'retry', 'Retry-After 2 s'],
      [429, 'retry', 'Retry-After 2 s'],
      [200, 'delivered', null],
    ]);
  });

  it('500 forever: attempts follow the jittered schedule, then quarantine as exhausted', async () => {
    // A short horizon for the test; the full default horizon runs in test/integration/time-skipping.test.ts.
    const night = await merchantNight(
      1,
      { responses: [{ status: 500, body: 'boom' }] },
      { initialBackoffMs: 400, retryHorizonMs: 5000 },
    );
    await sweep();
    const [row] = await settled(night);
    expect(row).toMatchObject({ status: 'quarantined', quarantine_reason: 'exhausted', last_status_code: 500 });
    const log = await attempts(row!.webhook_id);
    expect(log.length).toBeGreaterThanOrEqual(3);
    log.forEach((a, i) => {
      const step = 400 * 2 ** i;
      expect(a.retry_reason).toBe(`backoff attempt ${i + 1}`);
      expect(Number(a.next_retry_delay_ms)).toBeGreaterThanOrEqual(step / 2);
      expect(Number(a.next_retry_delay_ms)).toBeLessThanOrEqual(step);
    });
    expect(harness.merchants.requests(night.merchantIds[0])).toHaveLength(log.length);
    // The server waits the delay the activity chose, never sooner: each attempt admitted at least that long after the
    // one before (the gate's times, in the attempt log).
    const admitted = (await loggedAttempts(us.pool, night.merchantIds)).map((a) => a.admittedAt);
    expect(admitted).toHaveLength(log.length);
    for (let i = 1; i < admitted.length; i++)
      expect(admitted[i]! - admitted[i - 1]!).toBeGreaterThanOrEqual(Number(log[i - 1]!.next_retry_delay_ms));
    const stage = await us.client.workflow
      .getHandle(await holdWorkflowIdOf(us.pool, 'us', row!.hold_id))
      .query(statusQuery);
    expect(stage).toMatchObject({ stage: 'quarantined', reason: 'exhausted' });
  });

  it.each([400, 403])(
    '%i: exactly one request, quarantined as rejected with status and body excerpt',
    async (status) => {
      const night = await merchantNight(1, { responses: [{ status, body: `{"error":"refused with ${status}"}` }] });
      await sweep();
      const [row] = await settled(night);
      expect(row).toMatchObject({ status: 'quarantined', quarantine_reason: 'rejected', last_status_code: status });
      expect(harness.merchants.requests(night.merchantIds[0])).toHaveLength(1);
      expect(await attempts(row!.webhook_id)).toMatchObject([
        { status_code: status, outcome: 'quarantine', response_excerpt: `{"error":"refused with ${status}"}` },
      ]);
    },
  );

  it('410: the merchant endpoint is disabled and its other deliveries are held, not dropped', async () => {
    const night = await merchantNight(1, { responses: [{ status: 410 }, { status: 200 }] });
    await sweep();
    const [first] = await settled(night);
    expect(first).toMatchObject({ status: 'quarantined', quarantine_reason: 'endpoint_gone' });
    const merchantId = night.merchantIds[0]!;
    const merchant = await us.pool.query('SELECT status, disabled_reason FROM merchants WHERE id = $1', [merchantId]);
    expect(merchant.rows[0]).toEqual({
      status: 'disabled',
      disabled_reason: `410 Gone on webhook ${first!.webhook_id}`,
    });

    // Two more holds of the same merchant are released and their webhooks fixed, but nothing is sent.
    await us.pool.query(
      `INSERT INTO auth_holds (id, account_id, merchant_id, amount_minor, currency, expires_at)
       SELECT $1 || i, account_id, merchant_id, amount_minor, currency, expires_at FROM auth_holds, generate_series(1, 2) i WHERE id = $2`,
      [`${night.expired[0]!.id}_more`, night.expired[0]!.id],
    );
    await us.pool.query(`UPDATE accounts SET held_minor = held_minor + 2 * $2 WHERE id = $1`, [
      night.expired[0]!.accountId,
      night.expired[0]!.amountMinor,
    ]);
    await sweep();
    const moreIds = [1, 2].map((i) => `${night.expired[0]!.id}_more${i}`);
    for (const holdId of moreIds) {
      const handle = us.client.workflow.getHandle(await holdWorkflowIdOf(us.pool, 'us', holdId));
      await expect
        .poll(() => handle.query(statusQuery), { timeout: 30_000 })
        .toMatchObject({ stage: 'held', merchantStatus: 'disabled' });
    }
    const held = await us.pool.query('SELECT status, attempt_count FROM webhook_deliveries WHERE hold_id = ANY($1)', [
      moreIds,
    ]);
    expect(held.rows).toEqual([
      { status: 'pending', attempt_count: 0 },
      { status: 'pending', attempt_count: 0 },
    ]);
    expect(harness.merchants.requests(merchantId)).toHaveLength(1);
  });

  it.each([
    ['a hang past the attempt timeout', { hang: true } as const, 'AttemptTimeout'],
    ['a connection closed after the request was read', { close: true } as const, 'ConnectionError'],
  ])('%s is retried with the same webhook id, without touching the ledger again', async (_, fault, errorClass) => {
    const night = await merchantNight(
      1,
      { responses: [fault, { status: 200 }] },
      { attemptTimeoutMs: 1000, initialBackoffMs: 200 },
    );
    await sweep();
    const entriesAfterRelease = await ledgerEntryCount(us.pool);
    const [row] = await settled(night);
    expect(row).toMatchObject({ status: 'delivered', attempt_count: 2 });
    const requests = harness.merchants.requests(night.merchantIds[0]);
    expect(requests.map((r) => r.webhookId)).toEqual([row!.webhook_id, row!.webhook_id]);
    expect((await attempts(row!.webhook_id)).map((a) => [a.error_class, a.outcome])).toEqual([
      [errorClass, 'retry'],
      [null, 'delivered'],
    ]);
    expect(await ledgerEntryCount(us.pool)).toBe(entriesAfterRelease);
    expect(await checkLedgerInvariants(us.pool)).toEqual([]);
  });

  it('no signing secret appears in any workflow history of this file', async () => {
    // Sealed in the ledger: opened with the region's ring to know what to look for.
    const sealer = localKeyRing(us.config.secretKeys);
    const { rows } = await us.pool.query<{ id: string; signing_secret: string }>(
      'SELECT id, signing_secret FROM merchants WHERE signing_secret IS NOT NULL',
    );
    const allSecrets = await Promise.all(
      rows.map((r) => sealer.open(r.signing_secret, { region: 'us', merchantId: r.id })),
    );
    expect(allSecrets.length).toBeGreaterThan(5);
    let histories = 0;
    for await (const { history } of us.client.workflow
      .list({ query: `TaskQueue = '${us.config.taskQueue}'` })
      .intoHistories()) {
      const text = historyToJSON(history as Parameters<typeof historyToJSON>[0]);
      for (const secret of allSecrets) {
        expect(text).not.toContain(secret);
        expect(text).not.toContain(secret.replace(/^whsec_/, ''));
      }
      histories++;
    }
    expect(histories).toBeGreaterThan(10);
  });
});

describe('bad merchant configuration (production endpoint rules)', () => {
  let prod: TestRegion;
  beforeAll(async () => {
    prod = await harness.region('us');
    await harness.startWorker(prod, undefined, {
      allowInsecureHttp: false,
      allowPrivateAddresses: false,
      trustedNetworks: [],
      allowedPorts: [443],
    });
  });

  /** Sealed as `merchant add` seals, with `keys` (the region's ring unless said), for `merchantId`. */
  const sealed = (secret: string, merchantId: string, keys = prod.config.secretKeys) =>
    localKeyRing(keys).seal(secret, { region: 'us', merchantId });
  type Columns = Record<string, unknown> | ((merchantId: string) => Promise<Record<string, unknown>>);

  it.each<[string, Columns, string, RegExp]>([
    ['a malformed URL', { endpoint_url: 'not a url' }, 'bad_url', /not a valid URL/],
    ['a non-https URL', { endpoint_url: 'http://merchant.example/hook' }, 'bad_url', /scheme http:/],
    ['a loopback address', { endpoint_url: 'https://127.0.0.1:9/hook' }, 'bad_url', /private/],
    [
      'a 6to4 address embedding the metadata service',
      { endpoint_url: 'https://[2002:a9fe:a9fe::1]/hook' },
      'bad_url',
      /not global unicast/,
    ],
    ['a port not allowed', { endpoint_url: 'https://merchant.example:22/hook' }, 'bad_url', /port 22 is not allowed/],
    [
      'a missing secret',
      { endpoint_url: 'https://merchant.example/hook', signing_secret: null },
      'missing_secret',
      /no signing secret/,
    ],
    [
      'an undecodable secret (sealed, opening to something that is not whsec_<base64>)',
      async (id) => ({ endpoint_url: 'https://merchant.example/hook', signing_secret: await sealed('whsec_%%%', id) }),
      'missing_secret',
      /does not decode/,
    ],
    [
      "a secret sealed for another merchant (copied from that merchant's row)",
      async () => ({
        endpoint_url: 'https://merchant.example/hook',
        signing_secret: await sealed(generateSigningSecret(), 'm_someone_else'),
      }),
      'missing_secret',
      /does not open under key "test": it was altered, or sealed for another merchant.*handled as a missing one: missing_secret/,
    ],
    [
      'a secret sealed under a key the region no longer has',
      async (id) => ({
        endpoint_url: 'https://merchant.example/hook',
        signing_secret: await sealed(generateSigningSecret(), id, [{ id: 'retired', key: randomBytes(32) }]),
      }),
      'missing_secret',
      /sealed under key "retired", which is not in this region's MERCHANT_SECRET_KEYS/,
    ],
    [
      'a secret in clear text (written around the table constraint): never used as it is',
      async () => {
        await prod.pool.query('ALTER TABLE merchants DROP CONSTRAINT IF EXISTS merchants_signing_secrets_sealed');
        return { endpoint_url: 'https://merchant.example/hook', signing_secret: generateSigningSecret() };
      },
      'missing_secret',
      /stored in clear text, not sealed/,
    ],
    [
      'an unusable policy override',
      { endpoint_url: 'https://merchant.example/hook', delivery_policy: '{"retryHorizonMs": "soon"}' },
      'invalid_policy',
      /retryHorizonMs/,
    ],
  ])('%s: quarantined with a named reason, no request, no crash', async (_, columns, reason, detail) => {
    const night = await seedNight(
      prod.pool,
      'us',
      `${harness.id}bad${++prefixes}`,
      { expired: 1, merchants: 1 },
      harness.merchants,
    );
    const merchantId = night.merchantIds[0]!;
    const merchant = typeof columns === 'function' ? await columns(merchantId) : columns;
    const sets = Object.keys(merchant).map(
      (column, i) => `${column} = $${i + 2}${column === 'delivery_policy' ? '::jsonb' : ''}`,
    );
    await prod.pool.query(`UPDATE merchants SET ${sets.join(', ')} WHERE id = $1`, [
      merchantId,
      ...Object.values(merchant),
    ]);
    await prod.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: prod.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-bad-${prefixes}`,
      args: [{ region: 'us', releaseWaitMs: 60_000 }],
    });
    await expect
      .poll(
        async () =>
          (
            await prod.pool.query(
              'SELECT status, quarantine_reason, last_error FROM webhook_deliveries WHERE hold_id = $1',
              [night.expired[0]!.id],
            )
          ).rows[0],
        { timeout: 30_000 },
      )
      .toMatchObject({ status: 'quarantined', quarantine_reason: reason, last_error: expect.stringMatching(detail) });
    expect(harness.merchants.requests(merchantId)).toHaveLength(0);
  });
});
