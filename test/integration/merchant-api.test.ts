/**
 * The merchant API on a real stack, on its own database role (hold_sweeper_merchant_api, exactly its grants): a
 * merchant's key lists its webhooks with each attempt and fetches one's exact payload; another merchant's webhooks are
 * "not found" to it, to read and to resend; a resend it asks for is started by the workers' outbox reconciler (the
 * merchant API holds no Temporal access) and arrives under the original webhook id, verified by the Standard Webhooks
 * reference library; a range too. Keys: shown once, stored hashed, revocable; a wrong, malformed or revoked key is
 * 401; each key's rate budget answers 429 with Retry-After; both are counted, never stored, and every call of a key
 * that verifies is audited; a revocation is final; 50 resends of one webhook at once make one. And the worker refuses a resend
 * claiming a merchant request it does not match.
 */
import { createHash, randomBytes } from 'node:crypto';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildMerchantServer } from '../../src/api/merchant-server.js';
import { EVENT_TYPES } from '../../src/delivery/event-types.js';
import { createApiKey, revokeApiKey } from '../../src/operations/merchant-keys.js';
import { resendStart } from '../../src/contracts/starts.js';
import { startFromOutside } from '../../src/delivery/starts.js';
import { localKeyRing } from '../../src/delivery/secret-box.js';
import { disableMerchant } from '../../src/sql/merchants.js';
import { startEndpointChecks } from '../../src/workers/endpoint-checks.js';
import { unstartedMerchantResends } from '../../src/sql/merchant-api.js';
import { Registry } from 'prom-client';
import { ensureOutboxSchedule, outboxScheduleId } from '../../src/schedules.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { backdate, holdWorkflowIdOf, loggedAttempts, seedNight, type Night } from '../support/ledger.js';
import { openApiValidator, type OpenApiDocument } from '../support/openapi.js';
import { capturedLogger } from '../support/logs.js';
import { waitUntil } from '../support/wait.js';

let harness: Harness;
let us: TestRegion;
let night: Night;
let rolePool: pg.Pool;
let workerPool: pg.Pool;
let checks: { stop(): void };
const DEV_RULES = { allowInsecureHttp: true, allowPrivateAddresses: true, trustedNetworks: [] };
let app: FastifyInstance;
let api: string;
let keyA: string;
let keyB: string;
let openapi: ReturnType<typeof openApiValidator>;
/** What the in-process merchant API logs. */
const merchantLog = capturedLogger('merchant-api');
/** What the API counts: its refusals of keys that do not verify, and of keys past their budget. */
const metrics = new Registry();
const [A, B] = [0, 1];
const merchant = (i: number) => night.merchantIds[i]!;

beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
  await harness.startWorker(us, undefined, undefined, { fourEyes: true });
  night = await seedNight(us.pool, 'us', `${harness.id}m`, { expired: 6, merchants: 2 }, harness.merchants);
  await us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: us.config.taskQueue,
    workflowId: `sweep-us-${harness.id}-merchant-api`,
    args: [{ region: 'us', releaseWaitMs: 60_000 }],
  });
  await waitUntil(
    async () =>
      (await us.pool.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'delivered'`)).rows[0]
        .n === 6,
    'every webhook delivered',
    30_000,
  );
  // The outbox reconciler as production runs it (its schedule), quick: it starts the resends merchants ask for.
  await ensureOutboxSchedule(us.client, us.config, { intervalMs: 1_000, graceMs: 60_000 });
  const database = new URL(us.databaseUrl).pathname.slice(1);
  rolePool = new pg.Pool({ connectionString: `${inject('ledgerRoleUrls').merchantApi}${database}`, max: 4 });
  app = await buildMerchantServer({
    region: 'us',
    pool: rolePool,
    metrics,
    resendsStartWithinMs: 1_000,
    endpointRules: DEV_RULES,
    logger: merchantLog.logger,
  });
  // The workers' side of a merchant's endpoint checks, as src/bin/worker.ts runs it, on the worker's own role.
  workerPool = new pg.Pool({ connectionString: `${inject('ledgerRoleUrls').worker}${database}`, max: 4 });
  checks = startEndpointChecks({
    region: 'us',
    pool: workerPool,
    rules: DEV_RULES,
    secrets: { region: 'us', sealer: localKeyRing(us.config.secretKeys) },
    client: us.client,
    intervalMs: 200,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  api = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  openapi = openApiValidator((await (await fetch(`${api}/openapi.json`)).json()) as OpenApiDocument);
  keyA = (await createApiKey(us.pool, merchant(A), 'mia', { label: 'A support tooling' })).apiKey;
  keyB = (await createApiKey(us.pool, merchant(B), 'mia')).apiKey;
}, 120_000);

afterAll(async () => {
  // Every response the tests read was checked against the published document (call() below).
  expect(openapi.checked).toBeGreaterThan(0);
  await app?.close();
  checks?.stop();
  await rolePool?.end();
  await workerPool?.end();
  await harness?.close();
});

async function call(key: string | undefined, route: string, init: RequestInit = {}) {
  const response = await fetch(`${api}${route}`, {
    ...init,
    headers: {
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      ...(init.body ? { 'content-type': 'application/json' } : {}),
    },
  });
  const body = (await response.json()) as Record<string, unknown> & { items?: Record<string, unknown>[] };
  // What the server answered is what its OpenAPI document says it answers.
  expect(openapi.check(init.method ?? 'GET', route, response.status, body), `${init.method ?? 'GET'} ${route}`).toEqual(
    [],
  );
  return { status: response.status, headers: response.headers, body };
}

/** A key of the merchant's whose budget many calls at once do not reach. */
const roomyKey = async (i: number) =>
  (await createApiKey(us.pool, merchant(i), 'mia', { ratePerSecond: 100, burst: 100 })).apiKey;

const webhooksOf = async (i: number) =>
  (
    await us.pool.query<{ webhook_id: string }>(
      'SELECT webhook_id FROM webhook_deliveries WHERE merchant_id = $1 ORDER BY webhook_id',
      [merchant(i)],
    )
  ).rows.map((r) => r.webhook_id);

describe('the merchant API', () => {
  it('lists a merchant’s own webhooks with every attempt, and fetches one’s exact payload; another merchant’s are not found', async () => {
    const listed = await call(keyA, '/v1/webhooks?status=delivered&limit=50');
    expect(listed.status).toBe(200);
    expect(listed.body.items!.map((w) => w.webhookId).sort()).toEqual(await webhooksOf(A));
    for (const w of listed.body.items!) {
      expect(w).toMatchObject({ status: 'delivered', eventType: 'hold.released', attemptCount: 1 });
      expect(w.attempts).toEqual([
        expect.objectContaining({
          attempt: 1,
          policyRun: 1,
          statusCode: 200,
          errorClass: null,
          durationMs: expect.any(Number),
        }),
      ]);
    }
    const [mine] = await webhooksOf(A);
    const one = await call(keyA, `/v1/webhooks/${mine}`);
    expect(one.status).toBe(200);
    const received = harness.merchants.requests(merchant(A)).find((r) => r.webhookId === mine)!;
    // Byte for byte what the merchant received (and verified).
    expect(one.body.payload).toBe(received.body);
    expect(received.verified).toBe(true);

    const [theirs] = await webhooksOf(B);
    expect(await call(keyA, `/v1/webhooks/${theirs}`)).toMatchObject({ status: 404, body: { error: 'NotFound' } });
    expect(await call(keyA, `/v1/webhooks/${theirs}/resend`, { method: 'POST' })).toMatchObject({
      status: 404,
      body: { error: 'NotFound' },
    });
    expect((await call(keyB, '/v1/webhooks')).body.items!.map((w) => w.webhookId).sort()).toEqual(await webhooksOf(B));
    // The document's check bites: a body unlike the schema, or a status it does not list, is named.
    expect(openapi.check('GET', '/v1/webhooks', 200, { items: [{ webhookId: 7, status: 'lost' }] })).toHaveLength(2);
    expect(openapi.check('GET', '/v1/webhooks/wh_1', 409, {})).toEqual([
      'GET /v1/webhooks/{webhookId} does not document status 409',
    ]);
  });

  it('serves the event-type catalog to a key: each type’s JSON Schema accepts its example and what was sent', async () => {
    expect(await call(undefined, '/v1/event-types')).toMatchObject({ status: 401, body: { error: 'Unauthenticated' } });
    const answered = await call(keyA, '/v1/event-types');
    expect(answered.status).toBe(200);
    const items = answered.body.items as { type: string; schema: object; example: unknown }[];
    expect(items.map((i) => i.type)).toEqual(EVENT_TYPES.map((e) => e.type));
    const ajv = new Ajv2020({ strict: false });
    addFormats.default(ajv);
    const validators = new Map(items.map((i) => [i.type, ajv.compile(i.schema)]));
    for (const item of items) expect(validators.get(item.type)!(item.example), item.type).toBe(true);
    const received = harness.merchants.requests(merchant(A)).map((r) => JSON.parse(r.body) as { type: string });
    expect(received.length).toBeGreaterThan(0);
    for (const body of received) expect(validators.get(body.type)?.(body), JSON.stringify(body)).toBe(true);
    expect(openapi.check('GET', '/v1/event-types', 200, { items: [{ type: 7 }] })).toHaveLength(1);
  });

  it('the endpoint: its URL, pace and status; event types chosen by the merchant, a webhook of another type not sent', async () => {
    // A key of A's own for these calls: keyA's budget stays for the tests after.
    const roomy = await roomyKey(A);
    const shown = await call(roomy, '/v1/endpoint');
    expect(shown).toMatchObject({
      status: 200,
      body: {
        url: harness.merchants.endpointFor(merchant(A)),
        ratePerSecond: 5,
        burst: 1,
        eventTypes: null,
        status: 'active',
        statusReason: null,
        statusSince: null,
      },
    });
    // Only types of the catalog a ledger change writes, at least one, in a body of nothing else.
    for (const body of [{ eventTypes: ['hold.exploded'] }, { eventTypes: [] }, { eventTypes: ['merchant.ping'] }, {}])
      expect(
        await call(roomy, '/v1/endpoint/event-types', { method: 'PUT', body: JSON.stringify(body) }),
        JSON.stringify(body),
      ).toMatchObject({ status: 400, body: { error: 'InvalidRequest' } });

    // A merchant of its own, so that what it is sent is only this test's.
    const solo = await seedNight(us.pool, 'us', `${harness.id}s`, { expired: 3, merchants: 1 }, harness.merchants);
    const soloId = solo.merchantIds[0]!;
    const soloKey = (await createApiKey(us.pool, soloId, 'mia')).apiKey;
    const chosen = await call(soloKey, '/v1/endpoint/event-types', {
      method: 'PUT',
      body: JSON.stringify({ eventTypes: ['hold.reversed', 'hold.captured', 'hold.captured'] }),
    });
    expect(chosen).toMatchObject({ status: 200, body: { eventTypes: ['hold.captured', 'hold.reversed'] } });
    // Its own endpoint only: the others' are as they were.
    expect((await call(roomy, '/v1/endpoint')).body.eventTypes).toBeNull();
    expect((await call(keyB, '/v1/endpoint')).body.eventTypes).toBeNull();
    const { rows: audited } = await us.pool.query(
      `SELECT detail FROM api_audit WHERE verb = 'merchant-api.endpoint.eventTypes' AND subject = $1`,
      [`merchant:${soloId}`],
    );
    expect(audited).toEqual([{ detail: 'event types: hold.captured hold.reversed' }]);

    await us.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-not-subscribed`,
      args: [{ region: 'us', releaseWaitMs: 60_000 }],
    });
    // Each hold's workflow ran to its end: released, its webhook written as not subscribed, nothing sent.
    for (const hold of solo.expired) {
      const handle = us.client.workflow.getHandle(await holdWorkflowIdOf(us.pool, 'us', hold.id));
      expect(await handle.result()).toMatchObject({
        release: { status: 'released' },
        delivery: { status: 'handled_elsewhere', deliveryStatus: 'not_subscribed' },
      });
    }
    expect(harness.merchants.requests(soloId)).toEqual([]);
    const listed = await call(soloKey, '/v1/webhooks?status=not_subscribed');
    expect(listed.body.items!.map((w) => [w.eventType, w.attemptCount])).toEqual(
      solo.expired.map(() => ['hold.released', 0]),
    );
    // Every type again, from now on.
    expect(
      await call(soloKey, '/v1/endpoint/event-types', { method: 'PUT', body: JSON.stringify({ eventTypes: null }) }),
    ).toMatchObject({ status: 200, body: { eventTypes: null } });
  }, 90_000);

  it('a test send: one signed merchant.ping through the workers, its answer answered; another merchant’s check not found', async () => {
    const roomy = await roomyKey(A);
    const sent = await call(roomy, '/v1/endpoint/test', { method: 'POST' });
    expect(sent).toMatchObject({
      status: 200,
      body: {
        kind: 'test',
        url: harness.merchants.endpointFor(merchant(A)),
        finishedAt: expect.any(String),
        applied: false,
        result: { statusCode: 200, errorClass: null, signatures: 1, policyAction: 'delivered', refused: null },
      },
    });
    const pings = harness.merchants
      .requests(merchant(A))
      .filter((r) => (JSON.parse(r.body) as { type: string }).type === 'merchant.ping');
    expect(pings).toHaveLength(1);
    // Signed with the merchant's secret: the reference verifier accepted it.
    expect(pings[0]!.verified).toBe(true);
    const id = sent.body.id as string;
    expect((await call(roomy, `/v1/endpoint/checks/${id}`)).body).toEqual(sent.body);
    expect(await call(keyB, `/v1/endpoint/checks/${id}`)).toMatchObject({ status: 404, body: { error: 'NotFound' } });
  }, 60_000);

  it('a new URL is the endpoint only once it answered 2xx; verifying it enables an endpoint a 410 disabled', async () => {
    const solo = await seedNight(us.pool, 'us', `${harness.id}u`, { expired: 0, merchants: 1 }, harness.merchants);
    const soloId = solo.merchantIds[0]!;
    const soloKey = (await createApiKey(us.pool, soloId, 'mia')).apiKey;
    const before = harness.merchants.endpointFor(soloId);
    const moved = harness.merchants.endpointFor(`${soloId}-moved`);
    harness.merchants.script(`${soloId}-moved`, {
      secrets: [solo.secrets.get(soloId)!],
      responses: [{ status: 503 }, { status: 204 }],
    });
    const endpoint = async () => (await call(soloKey, '/v1/endpoint')).body;

    // Refused by the endpoint guard before anything is recorded.
    expect(
      await call(soloKey, '/v1/endpoint/url', { method: 'PUT', body: JSON.stringify({ url: 'ftp://example.com/x' }) }),
    ).toMatchObject({ status: 400, body: { error: 'InvalidEndpointUrl' } });
    const put = () => call(soloKey, '/v1/endpoint/url', { method: 'PUT', body: JSON.stringify({ url: moved }) });
    expect(await put()).toMatchObject({
      status: 200,
      body: { kind: 'verify', applied: false, result: { statusCode: 503 } },
    });
    expect((await endpoint()).url).toBe(before);
    expect(await put()).toMatchObject({ status: 200, body: { applied: true, result: { statusCode: 204 } } });
    expect((await endpoint()).url).toBe(moved);
    expect(harness.merchants.requests(`${soloId}-moved`).map((r) => r.verified)).toEqual([true, true]);

    // What a 410 does: disabled, and the merchant is told why and since when.
    await disableMerchant(us.pool, soloId, '410 Gone on webhook wh_x');
    expect(await endpoint()).toMatchObject({
      status: 'disabled',
      statusReason: '410 Gone on webhook wh_x',
      statusSince: expect.any(String),
    });
    expect(await put()).toMatchObject({ status: 200, body: { applied: true } });
    expect(await endpoint()).toMatchObject({ url: moved, status: 'active', statusReason: null, statusSince: null });
    // The key's other merchant untouched.
    expect((await call(await roomyKey(A), '/v1/endpoint')).body.url).toBe(harness.merchants.endpointFor(merchant(A)));
  }, 60_000);

  it('a merchant declares its pace within its ceiling; the limiter paces at it; another merchant untouched', async () => {
    const paced = await seedNight(us.pool, 'us', `${harness.id}p`, { expired: 4, merchants: 1 }, harness.merchants);
    const pacedId = paced.merchantIds[0]!;
    const key = (await createApiKey(us.pool, pacedId, 'mia', { ratePerSecond: 100, burst: 100 })).apiKey;
    const declare = (k: string, body: unknown) =>
      call(k, '/v1/endpoint/rate', { method: 'PUT', body: JSON.stringify(body) });
    expect((await call(key, '/v1/endpoint')).body).toMatchObject({ rateCeiling: 50, burstCeiling: 50 });
    for (const bad of [{ ratePerSecond: 0, burst: 1 }, { ratePerSecond: 1, burst: 0 }, { ratePerSecond: 1 }, {}])
      expect((await declare(key, bad)).status, JSON.stringify(bad)).toBe(400);
    expect(await declare(key, { ratePerSecond: 51, burst: 1 })).toMatchObject({
      status: 400,
      body: { error: 'AboveCeiling' },
    });
    expect(await declare(key, { ratePerSecond: 2, burst: 1 })).toMatchObject({
      status: 200,
      body: { ratePerSecond: 2, burst: 1 },
    });
    const audited = await us.pool.query(
      `SELECT detail, roles FROM api_audit WHERE verb = 'merchant-api.endpoint.rate'`,
    );
    expect(audited.rows).toContainEqual({ detail: 'rate 2/s burst 1', roles: [expect.stringMatching(/^key:mk_/)] });
    // The other merchants keep their pace.
    expect((await call(await roomyKey(A), '/v1/endpoint')).body).toMatchObject({ ratePerSecond: 5, burst: 1 });

    // Its webhooks go out at the declared pace: admitted by the ledger's own clock at least ~1/2 s apart.
    await us.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-paced`,
      args: [{ region: 'us', releaseWaitMs: 60_000 }],
    });
    let attempts: Awaited<ReturnType<typeof loggedAttempts>> = [];
    await waitUntil(
      async () => (attempts = await loggedAttempts(us.pool, [pacedId])).length === 4,
      'four first attempts',
      60_000,
    );
    const gaps = attempts.slice(1).map((a, i) => a.admittedAt - attempts[i]!.admittedAt);
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(450);
  }, 90_000);

  it('a merchant rotates its secret: shown once, both sign through the overlap, listed by name only, the old one ended early', async () => {
    const solo = await seedNight(us.pool, 'us', `${harness.id}r`, { expired: 0, merchants: 1 }, harness.merchants);
    const soloId = solo.merchantIds[0]!;
    const oldSecret = solo.secrets.get(soloId)!;
    const key = (await createApiKey(us.pool, soloId, 'mia', { ratePerSecond: 100, burst: 100 })).apiKey;
    const [first] = (await call(key, '/v1/endpoint/secrets')).body.items!;
    expect(first).toMatchObject({ id: expect.stringMatching(/^whs_/), current: true, expiresAt: null });

    const rotated = await call(key, '/v1/endpoint/secrets', {
      method: 'POST',
      body: JSON.stringify({ overlapSeconds: 3600 }),
    });
    expect(rotated).toMatchObject({
      status: 201,
      body: {
        id: expect.stringMatching(/^whs_/),
        secret: expect.stringMatching(/^whsec_/),
        previousSecret: { id: first!.id, expiresAt: expect.any(String) },
      },
    });
    const newSecret = rotated.body.secret as string;
    // In clear nowhere but in that answer: not in the check's row, the merchant's row, the audit or the log.
    const stored = await us.pool.query(
      `SELECT (SELECT json_agg(c) FROM endpoint_checks c WHERE merchant_id = $1) AS checks,
              (SELECT json_agg(m) FROM merchants m WHERE id = $1) AS merchant,
              (SELECT json_agg(a) FROM api_audit a WHERE subject = 'merchant:' || $1) AS audit`,
      [soloId],
    );
    const everything = JSON.stringify(stored.rows) + JSON.stringify(merchantLog.lines);
    expect(everything).not.toContain(newSecret.slice(6));
    expect(everything).not.toContain('secretForCaller');
    expect(everything).toContain('merchant-api.secrets.rotate');

    // Listed by name and date; each secret alone verifies a test send through the overlap.
    const listed = (await call(key, '/v1/endpoint/secrets')).body.items!;
    expect(listed).toEqual([
      { id: rotated.body.id, createdAt: expect.any(String), expiresAt: null, current: true },
      { id: first!.id, createdAt: first!.createdAt, expiresAt: expect.any(String), current: false },
    ]);
    const testSend = async (secret: string) => {
      harness.merchants.script(soloId, { secrets: [secret] });
      const sent = await call(key, '/v1/endpoint/test', { method: 'POST' });
      expect(sent.status).toBe(200);
      return {
        signatures: (sent.body.result as { signatures: number }).signatures,
        verified: harness.merchants.requests(soloId).at(-1)!.verified,
      };
    };
    expect(await testSend(newSecret)).toEqual({ signatures: 2, verified: true });
    expect(await testSend(oldSecret)).toEqual({ signatures: 2, verified: true });

    // Another merchant's key neither sees nor ends it; the current one ends only by a rotation.
    const expire = (k: string, id: string) =>
      call(k, `/v1/endpoint/secrets/${id}/expire`, { method: 'POST', body: JSON.stringify({}) });
    expect(await expire(keyB, first!.id as string)).toMatchObject({ status: 404, body: { error: 'NotFound' } });
    expect(await expire(key, rotated.body.id as string)).toMatchObject({
      status: 409,
      body: { error: 'CurrentSecret' },
    });
    const theirs = (await call(keyB, '/v1/endpoint/secrets')).body.items!.map((s) => s.id);
    expect(theirs).not.toContain(first!.id);
    // Another merchant's rotation is its own: this merchant's secrets stay as they are.
    expect((await call(keyB, '/v1/endpoint/secrets', { method: 'POST', body: '{}' })).status).toBe(201);
    expect((await call(key, '/v1/endpoint/secrets')).body.items!.map((s) => s.id)).toEqual([
      rotated.body.id,
      first!.id,
    ]);
    expect(await expire(key, first!.id as string)).toMatchObject({
      status: 200,
      body: { items: [{ id: rotated.body.id, current: true }] },
    });
    expect(await testSend(oldSecret)).toEqual({ signatures: 1, verified: false });
    expect(await testSend(newSecret)).toEqual({ signatures: 1, verified: true });

    // A rotation no worker answers while the call waits changes nothing, and no worker takes it up later.
    checks.stop();
    const impatient = await buildMerchantServer({
      region: 'us',
      pool: rolePool,
      checkAnswerWaitMs: 0,
      logger: merchantLog.logger,
    });
    try {
      const refused = await impatient.inject({
        method: 'POST',
        url: '/v1/endpoint/secrets',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        payload: {},
      });
      expect(refused.statusCode).toBe(503);
      expect(refused.json()).toMatchObject({ error: 'RotationNotAnswered' });
      expect(refused.headers['retry-after']).toBe('5');
    } finally {
      await impatient.close();
      checks = startEndpointChecks({
        region: 'us',
        pool: workerPool,
        rules: DEV_RULES,
        secrets: { region: 'us', sealer: localKeyRing(us.config.secretKeys) },
        client: us.client,
        intervalMs: 200,
      });
    }
    await waitUntil(
      async () => (await call(key, '/v1/endpoint/test', { method: 'POST' })).status === 200,
      'the checks loop back',
      30_000,
    );
    expect((await call(key, '/v1/endpoint/secrets')).body.items!.map((s) => s.id)).toEqual([rotated.body.id]);
  }, 90_000);

  it('an endpoint enabled again by its verification has its held backlog told at once', async () => {
    const held = await seedNight(us.pool, 'us', `${harness.id}h`, { expired: 1, merchants: 1 }, harness.merchants);
    const heldId = held.merchantIds[0]!;
    await disableMerchant(us.pool, heldId, '410 Gone on webhook wh_y');
    await us.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-held`,
      args: [{ region: 'us', releaseWaitMs: 60_000 }],
    });
    const heldQuery = `DeliveryStatus = "held" AND MerchantId = "${heldId}" AND ExecutionStatus = "Running"`;
    let workflowId: string | undefined;
    await waitUntil(
      async () => {
        for await (const w of us.client.workflow.list({ query: heldQuery })) workflowId = w.workflowId;
        return workflowId !== undefined;
      },
      'the delivery held by its disabled endpoint',
      30_000,
    );
    const key = (await createApiKey(us.pool, heldId, 'mia')).apiKey;
    const url = harness.merchants.endpointFor(heldId);
    const verified = await call(key, '/v1/endpoint/url', { method: 'PUT', body: JSON.stringify({ url }) });
    expect(verified).toMatchObject({ status: 200, body: { applied: true } });
    await waitUntil(
      async () =>
        (await us.pool.query(`SELECT status FROM webhook_deliveries WHERE merchant_id = $1`, [heldId])).rows[0]
          ?.status === 'delivered',
      'the held webhook delivered',
      30_000,
    );
    const { events } = await us.client.workflow.getHandle(workflowId!).fetchHistory();
    const signals = events!.flatMap((e) => e.workflowExecutionSignaledEventAttributes?.signalName ?? []);
    expect(signals).toContain('merchantResumed');
  }, 90_000);

  it('a resend asked for by the merchant is started by the reconciler and arrives under the original id, signed afresh', async () => {
    const [webhookId] = await webhooksOf(A);
    const before = harness.merchants.requests(merchant(A)).filter((r) => r.webhookId === webhookId);
    const asked = await call(keyA, `/v1/webhooks/${webhookId}/resend`, { method: 'POST' });
    expect(asked.status).toBe(202);
    expect(asked.body).toMatchObject({ webhookId, state: 'waiting', startsWithinSeconds: 1 });
    // Asked again while it waits: one resend, not two.
    expect(await call(keyA, `/v1/webhooks/${webhookId}/resend`, { method: 'POST' })).toMatchObject({
      status: 409,
      body: { error: 'ResendWaiting' },
    });
    const requestId = asked.body.requestId as string;
    await waitUntil(
      async () => (await call(keyA, `/v1/resends/${requestId}`)).body.state === 'delivered',
      'the resend delivered',
      30_000,
    );
    const status = await call(keyA, `/v1/resends/${requestId}`);
    expect(status.body).toMatchObject({
      webhookId,
      resendId: asked.body.resendId,
      policyRun: 2,
      webhookStatus: 'delivered',
    });
    const after = harness.merchants.requests(merchant(A)).filter((r) => r.webhookId === webhookId);
    expect(after).toHaveLength(before.length + 1);
    const resent = after.at(-1)!;
    // The reference verifier (standardwebhooks) accepted it with the merchant's secret; same id and body, new
    // signature.
    expect(resent.verified).toBe(true);
    expect(resent.body).toBe(before[0]!.body);
    expect(resent.signature).not.toBe(before[0]!.signature);
    // The ledger says who asked: the merchant, by its key.
    const { rows } = await us.pool.query('SELECT requested_by FROM webhook_resends WHERE id = $1', [
      asked.body.resendId,
    ]);
    expect(rows[0].requested_by).toMatch(new RegExp(`^merchant ${merchant(A)} \\(API key mk_[0-9a-f]{16}\\)$`));
    // Its attempt is listed like any other, in the replay lane's run.
    const one = await call(keyA, `/v1/webhooks/${webhookId}`);
    expect((one.body.attempts as { policyRun: number }[]).map((a) => a.policyRun)).toEqual([1, 2]);
  }, 60_000);

  it('50 resends of one webhook at once: one request recorded, one resend sent', async () => {
    const [, , webhookId] = await webhooksOf(A);
    // A key whose budget lets all 50 through at once: what stops the other 49 is the ledger, not the rate limit.
    const roomy = await roomyKey(A);
    const before = harness.merchants.requests(merchant(A)).filter((r) => r.webhookId === webhookId).length;
    // The reconciler, which starts what merchants ask for (and so lets the next request of the webhook wait), held
    // still while the 50 come in: they are at once for the ledger, however long a busy machine takes to send them.
    const reconciler = us.client.schedule.getHandle(outboxScheduleId(us.config));
    await reconciler.pause('50 resends at once');
    let answers: { status: number; body: { requestId?: string; error?: string } }[];
    try {
      await waitUntil(
        async () => (await reconciler.describe()).info.runningActions.length === 0,
        'no reconcile running',
        30_000,
      );
      answers = await Promise.all(
        Array.from({ length: 50 }, () =>
          fetch(`${api}/v1/webhooks/${webhookId}/resend`, {
            method: 'POST',
            headers: { authorization: `Bearer ${roomy}` },
          }).then(async (r) => ({
            status: r.status,
            body: (await r.json()) as { requestId?: string; error?: string },
          })),
        ),
      );
    } finally {
      await reconciler.unpause('50 resends sent');
    }
    const statuses = answers.reduce<Record<string, number>>(
      (n, a) => ({ ...n, [a.status]: (n[a.status] ?? 0) + 1 }),
      {},
    );
    expect(statuses).toEqual({ 202: 1, 409: 49 });
    expect(new Set(answers.filter((a) => a.status === 409).map((a) => a.body.error))).toEqual(
      new Set(['ResendWaiting']),
    );
    const { requestId } = answers.find((a) => a.status === 202)!.body;
    await waitUntil(
      async () => (await call(keyA, `/v1/resends/${requestId}`)).body.state === 'delivered',
      'the one resend delivered',
      30_000,
    );
    const waiting = await us.pool.query(
      'SELECT count(*)::int AS n FROM merchant_resend_requests WHERE webhook_id = $1',
      [webhookId],
    );
    expect(waiting.rows[0].n).toBe(1);
    const resends = await us.pool.query('SELECT count(*)::int AS n FROM webhook_resends WHERE webhook_id = $1', [
      webhookId,
    ]);
    expect(resends.rows[0].n).toBe(1);
    expect(harness.merchants.requests(merchant(A)).filter((r) => r.webhookId === webhookId)).toHaveLength(before + 1);
  }, 60_000);

  it('the reconciler starts merchants’ resends in turns, at most a few of one merchant per run', async () => {
    const client = await us.pool.connect();
    try {
      // In a transaction the running reconciler cannot see, rolled back after: B asks once, A three times before it.
      await client.query('BEGIN');
      const keyIdOf = async (i: number) =>
        (await client.query('SELECT id FROM merchant_api_keys WHERE merchant_id = $1 LIMIT 1', [merchant(i)])).rows[0]
          .id as string;
      const ask = async (i: number, webhookId: string, secondsAgo: number) => {
        const hex = randomBytes(10).toString('hex');
        await client.query(
          `INSERT INTO merchant_resend_requests (id, merchant_id, webhook_id, key_id, resend_id, requested_at)
           VALUES ($1, $2, $3, $4, $5, now() - make_interval(secs => $6))`,
          [`mr_${hex}`, merchant(i), webhookId, await keyIdOf(i), `rs_${hex}`, secondsAgo],
        );
      };
      const [a1, a2, a3] = await webhooksOf(A);
      const [b1] = await webhooksOf(B);
      await client.query('UPDATE merchant_resend_requests SET started_at = now() WHERE started_at IS NULL');
      await ask(A, a1!, 40);
      await ask(A, a2!, 30);
      await ask(A, a3!, 20);
      await ask(B, b1!, 10);
      const order = (await unstartedMerchantResends(client, 10, 2)).map((r) => r.webhookId);
      expect(order).toEqual([a1, b1, a2]);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });

  it('a range: every webhook at an end in [since, until), each resent once', async () => {
    const since = new Date(Date.now() - 3_600_000).toISOString();
    const until = new Date(Date.now() + 60_000).toISOString();
    const asked = await call(keyB, '/v1/resends', { method: 'POST', body: JSON.stringify({ since, until }) });
    expect(asked.status).toBe(202);
    const requested = asked.body.requested as { requestId: string; webhookId: string }[];
    expect(requested.map((r) => r.webhookId).sort()).toEqual(await webhooksOf(B));
    expect(asked.body).toMatchObject({ skipped: [], more: false });
    for (const r of requested) {
      await waitUntil(
        async () => (await call(keyB, `/v1/resends/${r.requestId}`)).body.state === 'delivered',
        `${r.webhookId} resent`,
        30_000,
      );
    }
    const counts = new Map<string, number>();
    for (const r of harness.merchants.requests(merchant(B)))
      counts.set(r.webhookId!, (counts.get(r.webhookId!) ?? 0) + 1);
    expect([...counts.values()]).toEqual(requested.map(() => 2));
  }, 90_000);

  it('keys: stored hashed; a wrong, malformed, revoked, expired or missing key is 401; each key has its own rate budget', async () => {
    const made = await createApiKey(us.pool, merchant(A), 'mia', { ratePerSecond: 1, burst: 2 });
    const { rows } = await us.pool.query('SELECT secret_sha256 FROM merchant_api_keys WHERE id = $1', [made.id]);
    const secret = made.apiKey.split('_').slice(3).join('_');
    expect(rows[0].secret_sha256).toEqual(createHash('sha256').update(secret).digest());
    expect(JSON.stringify(rows)).not.toContain(secret);

    expect((await call(made.apiKey, '/v1/webhooks')).status).toBe(200);
    expect((await call(made.apiKey, '/v1/webhooks')).status).toBe(200);
    const limited = await call(made.apiKey, '/v1/webhooks');
    expect(limited).toMatchObject({ status: 429, body: { error: 'RateLimited' } });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // Another key of the same merchant has its own budget.
    expect((await call(keyA, '/v1/webhooks')).status).toBe(200);

    const wrongSecret = made.apiKey.slice(0, -4) + (made.apiKey.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    for (const bad of [undefined, 'hsk_nonsense', wrongSecret, `hsk_mk_0000000000000000_${'A'.repeat(43)}`]) {
      expect(await call(bad, '/v1/webhooks'), String(bad)).toMatchObject({
        status: 401,
        body: { error: 'Unauthenticated' },
      });
    }
    // A key that ends by itself (a portal link's) works until its end, then is refused like a revoked one.
    const ending = await createApiKey(us.pool, merchant(A), 'mia', { ttlMs: 60_000 });
    expect((await call(ending.apiKey, '/v1/endpoint')).status).toBe(200);
    await backdate(
      us.pool,
      `UPDATE merchant_api_keys SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 hour' WHERE id = $1`,
      [ending.id],
    );
    expect(await call(ending.apiKey, '/v1/endpoint')).toMatchObject({
      status: 401,
      body: { error: 'Unauthenticated' },
    });
    await revokeApiKey(us.pool, made.id, 'mia');
    await new Promise((resolve) => setTimeout(resolve, 1_100)); // its budget refills: the 401 is the revocation's
    expect(await call(made.apiKey, '/v1/webhooks')).toMatchObject({ status: 401, body: { error: 'Unauthenticated' } });
    // A revocation is final: neither the operators' role (which revokes keys) nor the owner brings the key back.
    const opsPool = new pg.Pool({
      connectionString: `${inject('ledgerRoleUrls').ops}${new URL(us.databaseUrl).pathname.slice(1)}`,
      max: 1,
    });
    try {
      for (const db of [opsPool, us.pool]) {
        await expect(
          db.query('UPDATE merchant_api_keys SET revoked_at = NULL, revoked_by = NULL WHERE id = $1', [made.id]),
        ).rejects.toThrow(/a revocation is final/);
      }
    } finally {
      await opsPool.end();
    }
    expect(await call(made.apiKey, '/v1/webhooks')).toMatchObject({ status: 401 });
  });

  it('audits every call of a key that verifies, with the merchant and its key; refusals are counted, not stored', async () => {
    const [webhookId] = await webhooksOf(A);
    const asked = await fetch(`${api}/v1/webhooks/${webhookId}`, { headers: { authorization: `Bearer ${keyA}` } });
    const requestId = asked.headers.get('x-request-id')!;
    const { rows } = await us.pool.query(
      'SELECT subject, roles, verb, target, outcome, status FROM api_audit WHERE request_id = $1',
      [requestId],
    );
    expect(rows[0]).toMatchObject({
      subject: `merchant:${merchant(A)}`,
      verb: 'merchant-api.webhooks.get',
      target: webhookId,
      outcome: 'ok',
      status: 200,
    });
    expect(rows[0].roles[0]).toMatch(/^key:mk_[0-9a-f]{16}$/);
    // Its access log line, by the same request id: never its key.
    await expect
      .poll(() => merchantLog.lines.find((l) => l.requestId === requestId && l.msg === 'request completed'), {
        timeout: 30_000,
      })
      .toMatchObject({
        level: 'info',
        service: 'merchant-api',
        method: 'GET',
        path: `/v1/webhooks/${webhookId}`,
        status: 200,
      });
    expect(JSON.stringify(merchantLog.lines)).not.toContain(keyA.slice(-43));
    const stored = await us.pool.query(
      `SELECT count(*)::int AS n FROM api_audit WHERE verb LIKE 'merchant-api.%' AND (status IN (401, 429) OR subject IS NULL)`,
    );
    expect(stored.rows[0].n).toBe(0);
    const text = await metrics.metrics();
    const counted = (status: number) =>
      Number(
        new RegExp(
          `^hold_sweeper_api_requests_refused_total\\{api="merchant",region="us",status="${status}",error="\\w+"\\} (\\d+)$`,
          'm',
        ).exec(text)?.[1] ?? 0,
      );
    expect(counted(401)).toBeGreaterThanOrEqual(4);
    expect(counted(429)).toBeGreaterThanOrEqual(1);
  });

  it('the worker refuses a resend whose merchant request does not match it: nothing is sent', async () => {
    const [webhookId, other] = await webhooksOf(A);
    const asked = await call(keyA, `/v1/webhooks/${webhookId}/resend`, { method: 'POST' });
    const requestId = asked.body.requestId as string;
    // A caller with Temporal access claims that request for another webhook, before the reconciler starts it.
    const forged = await startFromOutside(
      us.client,
      us.config.taskQueue,
      'resendWebhook',
      resendStart('us', {
        webhookId: other!,
        holdId: (await us.pool.query('SELECT hold_id FROM webhook_deliveries WHERE webhook_id = $1', [other])).rows[0]
          .hold_id,
        merchantId: merchant(A),
        claim: {
          resendId: asked.body.resendId as string,
          requestedBy: 'forger',
          reason: 'forged',
          merchantRequestId: requestId,
        },
      }),
    );
    const result = (await us.client.workflow.getHandle(forged.workflowId).result()) as { status: string; why?: string };
    expect(result).toMatchObject({ status: 'refused', why: expect.stringMatching(/not this one/) });
    expect(harness.merchants.requests(merchant(A)).filter((r) => r.webhookId === other)).toHaveLength(1);
  }, 60_000);
});
