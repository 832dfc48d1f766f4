/**
 * The admin API (src/api/) on a real stack: a real OIDC provider on loopback (dev/oidc-provider.ts: discovery, JWKS,
 * client-credentials tokens), the API itself as its entry point runs it (Fastify over HTTP), the region's ledger and
 * Temporal, and a worker with four eyes on. Every endpoint: its roles pass, another role is 403, no token, an expired
 * one, one for another audience and one signed by a foreign key are 401, and each call is in the audit. Four eyes
 * compare verified subjects. The ops CLI, as a process holding a token and nothing else, takes a quarantined webhook
 * to delivered; and its output through the API is the output it prints running the verbs itself.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import https from 'node:https';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildAdminServer } from '../../src/api/admin-server.js';
import { buildMerchantServer } from '../../src/api/merchant-server.js';
import { startCodecServer } from '../../src/codec/codec-server.js';
import { EncryptionCodec } from '../../src/codec/encryption-codec.js';
import { ADMIN_VERBS, pathParams, type AdminVerb } from '../../src/operations/admin-verbs.js';
import { byNamespace, createTokenVerifier } from '../../src/api/identity.js';
import { ROLES, type Role } from '../../src/contracts/identity.js';
import { adminAudience, CODEC_AUDIENCE } from '../../src/contracts/identity.js';
import { localKeyRing } from '../../src/delivery/secret-box.js';
import { Registry } from 'prom-client';
import { SAMPLED_LOG_EVERY_MS } from '../../src/observability/sampled-log.js';
import { runOps } from '../../src/operations/cli.js';
import { ensureSweepSchedule } from '../../src/schedules.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { freePort } from '../../dev/embedded-postgres.js';
import { startDevOidcProvider, type DevOidcProvider } from '../../dev/oidc-provider.js';
import { createClusterPki } from '../../dev/pki.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { rowsPerTable, seedNight } from '../support/ledger.js';
import { capturedLogger } from '../support/logs.js';
import { requestFor, startApiProcess } from '../support/admin-api.js';
import { openApiValidator, type OpenApiDocument } from '../support/openapi.js';
import { TEST_SECRET_KEYS } from '../support/secrets.js';
import { flood } from '../support/wait.js';

const run = promisify(execFile);
const REPO = path.resolve(import.meta.dirname, '../..');

/** What the in-process admin API logs. */
const adminLog = capturedLogger('admin-api');
let harness: Harness;
let us: TestRegion;
let oidc: DevOidcProvider;
let app: FastifyInstance;
let api: string;
/** One client per role, and a second approver; `olga` operates and approves. */
const CLIENTS: { clientId: string; roles: Role[] }[] = [
  { clientId: 'vera', roles: ['viewer'] },
  { clientId: 'oscar', roles: ['operator'] },
  { clientId: 'april', roles: ['approver'] },
  { clientId: 'mia', roles: ['merchant-admin'] },
  { clientId: 'olga', roles: ['operator', 'approver'] },
];
/** Each client's token for the US admin API (its audience). */
const tokens = new Map<string, string>();
const US_API = adminAudience('us');
let openapi: ReturnType<typeof openApiValidator>;
/** What the API counts: its refusals before anyone is identified. */
const metrics = new Registry();
/**
 * Every answer of the API read in this file (the tests' requests and the in-process CLI's), checked against its
 * document.
 */
const violations: string[] = [];
const realFetch = globalThis.fetch;
const clientWith = (role: Role) => CLIENTS.find((c) => c.roles.length === 1 && c.roles[0] === role)!.clientId;

beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
  await harness.startWorker(us, undefined, undefined, { fourEyes: true });
  await ensureSweepSchedule(us.client, us.config, {
    intervalMs: 86_400_000,
    catchupWindowMs: 60_000,
    pageSize: 100,
    batchSize: 50,
    timeoutMs: 600_000,
  });
  oidc = await startDevOidcProvider(CLIENTS);
  for (const c of CLIENTS) tokens.set(c.clientId, await oidc.token(c.clientId, US_API));
  app = await buildAdminServer({
    metrics,
    context: {
      region: us.config,
      pool: us.pool,
      client: us.client,
      fourEyes: true,
      webhooks: { allowInsecureHttp: true, allowPrivateAddresses: true, trustedNetworks: [] },
      secrets: { region: 'us', sealer: localKeyRing(TEST_SECRET_KEYS) },
    },
    logger: adminLog.logger,
    verifier: await createTokenVerifier({
      issuer: oidc.issuer,
      audience: US_API,
      rolesClaim: 'roles',
      clockToleranceSeconds: 5,
      maxTokenAgeSeconds: 86_400,
    }),
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  api = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  openapi = openApiValidator((await (await fetch(`${api}/openapi.json`)).json()) as OpenApiDocument);
  globalThis.fetch = async (input, init) => {
    const response = await realFetch(input, init);
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (url.origin === api && url.pathname.startsWith('/v1/')) {
      violations.push(
        ...openapi.check(init?.method ?? 'GET', url.pathname, response.status, await response.clone().json()),
      );
    }
    return response;
  };
}, 120_000);

afterAll(async () => {
  globalThis.fetch = realFetch;
  await app?.close();
  await oidc?.stop();
  await harness?.close();
});

async function call(
  verb: AdminVerb,
  token: string | undefined,
): Promise<{ status: number; body: Record<string, unknown>; requestId: string }> {
  const { url, init } = requestFor(verb);
  const response = await fetch(`${api}${url}`, {
    ...init,
    headers: { ...(init.headers as Record<string, string>), ...(token ? { authorization: `Bearer ${token}` } : {}) },
  });
  return {
    status: response.status,
    body: (await response.json()) as Record<string, unknown>,
    requestId: response.headers.get('x-request-id')!,
  };
}

const auditOf = async (requestId: string) =>
  (await us.pool.query('SELECT subject, verb, outcome, status FROM api_audit WHERE request_id = $1', [requestId]))
    .rows[0];

describe('every endpoint of the admin API', () => {
  it('lets its roles through, refuses another role with 403, and audits and logs both', async () => {
    expect(ADMIN_VERBS.length).toBeGreaterThanOrEqual(28);
    const answered = new Map<string, number>();
    for (const verb of ADMIN_VERBS) {
      const allowed = await call(verb, tokens.get(clientWith(verb.roles[0]!)));
      answered.set(allowed.requestId, allowed.status);
      // Past authorization: done, or refused by the input, the ledger (a placeholder id) or four eyes, never a crash.
      const what = `${verb.id} as ${verb.roles[0]}: ${allowed.status} ${JSON.stringify(allowed.body)}`;
      expect(allowed.status, what).toBeLessThan(500);
      expect(['Forbidden', 'Unauthenticated'], what).not.toContain(allowed.body.error);
      expect(await auditOf(allowed.requestId), verb.id).toMatchObject({
        subject: clientWith(verb.roles[0]!),
        verb: verb.id,
        status: allowed.status,
      });
      const other = ROLES.find((r) => !verb.roles.includes(r));
      if (!other) continue;
      const refused = await call(verb, tokens.get(clientWith(other)));
      answered.set(refused.requestId, refused.status);
      expect(refused.status, `${verb.id} as ${other}`).toBe(403);
      expect(refused.body).toMatchObject({ error: 'Forbidden' });
      expect(await auditOf(refused.requestId)).toMatchObject({
        subject: clientWith(other),
        verb: verb.id,
        outcome: 'refused',
        status: 403,
      });
    }
    // The access log: a line per answered call, named by the request id its caller was given (after the answer).
    const completed = () =>
      new Map(adminLog.lines.filter((l) => l.msg === 'request completed').map((l) => [l.requestId, l.status]));
    await expect.poll(() => [...answered.keys()].filter((id) => !completed().has(id)), { timeout: 30_000 }).toEqual([]);
    for (const [requestId, status] of answered) expect(completed().get(requestId), requestId).toBe(status);
    expect(adminLog.lines.find((l) => l.requestId === [...answered.keys()][0])).toMatchObject({
      level: 'info',
      service: 'admin-api',
      ts: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      method: expect.any(String),
      path: expect.stringMatching(/^\/v1\//),
      ms: expect.any(Number),
    });
    // Never a token: the lines hold none of the bearer tokens the calls carried.
    const logged = JSON.stringify(adminLog.lines);
    for (const token of tokens.values()) expect(logged).not.toContain(token.split('.')[2]);
    // sends.pause ran (as an operator), and sends.resume after it: the region sends again for the tests below.
    expect((await us.pool.query(`SELECT count(*)::int AS n FROM send_pauses WHERE resumed_at IS NULL`)).rows[0].n).toBe(
      0,
    );
  }, 120_000);

  it('answers 401 to no token, an expired one, one living past a day or with no issue time, one for another region, service or audience, one with no subject, and one signed by a key the issuer never published', async () => {
    const roles = [...ROLES];
    const audience = US_API;
    const bad = {
      none: undefined,
      expired: await oidc.mint({ subject: 'olga', roles, audience, expiresAt: Math.floor(Date.now() / 1000) - 120 }),
      // A token lives a day at most (API_TOKEN_MAX_AGE): from its issue to its expiry, and from its issue to now.
      'valid until the year 33658': await oidc.mint({ subject: 'olga', roles, audience, expiresAt: 1e12 }),
      'issued two days ago': await oidc.mint({
        subject: 'olga',
        roles,
        audience,
        issuedAt: Math.floor(Date.now() / 1000) - 2 * 86_400,
        expiresAt: Math.floor(Date.now() / 1000) + 3_600,
      }),
      'no issue time': await oidc.mint({ subject: 'olga', roles, audience, issuedAt: null }),
      'the EU API’s': await oidc.token('olga', adminAudience('eu')),
      'the codec endpoint’s': await oidc.token('olga', CODEC_AUDIENCE),
      'Temporal’s': await oidc.mint({ subject: 'olga', roles, audience: 'temporal-frontend' }),
      'an empty subject': await oidc.mint({ subject: ' ', roles, audience }),
      'foreign key': await oidc.mintForeign({ subject: 'olga', roles, audience }),
      'not a JWT': 'not-a-token',
    };
    // The provider's own key signs a token the API accepts, for a day: what the bad ones lack is only what their name
    // says.
    const sendsStatus = ADMIN_VERBS.find((v) => v.id === 'sends.status')!;
    const aDay = Math.floor(Date.now() / 1000) + 86_400;
    expect(
      (await call(sendsStatus, await oidc.mint({ subject: 'olga', roles, audience, expiresAt: aDay }))).status,
    ).toBe(200);
    expect((await call(sendsStatus, bad['valid until the year 33658'])).body.message).toMatch(
      /valid for \d+ s, longer than 86400 s/,
    );
    expect((await call(sendsStatus, bad['issued two days ago'])).body.message).toMatch(/issued too long ago/);
    for (const verb of ADMIN_VERBS) {
      for (const [kind, token] of Object.entries(bad)) {
        const answer = await call(verb, token);
        expect(answer.status, `${verb.id} with ${kind}`).toBe(401);
        expect(answer.body).toMatchObject({ error: 'Unauthenticated' });
      }
    }
    // Counted, never stored: nobody was identified, so nothing of theirs is the audit's.
    const stored = await us.pool.query(
      `SELECT count(*)::int AS n FROM api_audit WHERE subject IS NULL OR status = 401`,
    );
    expect(stored.rows[0].n).toBe(0);
    const counted = (await metrics.metrics()).match(
      /^hold_sweeper_api_requests_refused_total\{[^}]*status="401"[^}]*\} (\d+)$/gm,
    );
    expect(counted!.map((line) => Number(line.split(' ')[1])).reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(
      ADMIN_VERBS.length * Object.keys(bad).length,
    );
  }, 120_000);

  it('refuses an actor named in the request: who acts is the verified subject', async () => {
    const response = await fetch(`${api}/v1/sends/pause`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokens.get('oscar')}`, 'content-type': 'application/json' },
      body: JSON.stringify({ reason: 'drill', by: 'somebody else' }),
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: 'InvalidRequest' });
  });

  it('describes every verb in its OpenAPI document, with its roles', async () => {
    const doc = (await (await fetch(`${api}/openapi.json`)).json()) as {
      openapi: string;
      paths: Record<string, Record<string, { operationId: string; description: string }>>;
    };
    expect(doc.openapi).toBe('3.1.0');
    for (const verb of ADMIN_VERBS) {
      const openapiPath = verb.path.replace(/:([A-Za-z]+)/g, '{$1}');
      const operation = doc.paths[openapiPath]?.[verb.method.toLowerCase()];
      expect(operation?.operationId, `${verb.method} ${openapiPath}`).toBe(verb.id);
      expect(operation!.description).toContain(`Roles: ${verb.roles.join(', ')}`);
      for (const param of pathParams(verb)) expect(JSON.stringify(operation)).toContain(`"name":"${param}"`);
    }
  });
});

/** The US region of this file as a dev-mode entry point reads it: its ledger and Temporal, no API. */
const devRegionEnv = () => ({
  HOLD_SWEEPER_MODE: 'dev',
  HOLD_SWEEPER_REGIONS: 'us',
  DATABASE_URL_US: us.databaseUrl,
  TEMPORAL_ADDRESS: harness.address,
  TASK_QUEUE_US: us.config.taskQueue,
  SCHEDULE_ID_US: us.config.scheduleId,
});

/** How many of the merchant's webhooks are in `status`. */
const webhooksIn = async (merchantId: string, status: string) =>
  (
    await us.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM webhook_deliveries WHERE merchant_id = $1 AND status = $2',
      [merchantId, status],
    )
  ).rows[0]!.n;

describe('four eyes, on verified subjects, through the API', () => {
  let n = 0;
  async function quarantinedNight(count: number) {
    const night = await seedNight(
      us.pool,
      'us',
      `${harness.id}a${++n}`,
      { expired: count, merchants: 1 },
      harness.merchants,
    );
    const merchantId = night.merchantIds[0]!;
    // Each first attempt is refused (400: quarantined at once); what comes after, a replay, is taken.
    harness.merchants.script(merchantId, {
      secrets: [night.secrets.get(merchantId)!],
      responses: [...Array.from({ length: count }, () => ({ status: 400 })), { status: 200 }],
    });
    await us.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-api-${n}`,
      args: [{ region: 'us', releaseWaitMs: 60_000 }],
    });
    await expect.poll(() => webhooksIn(merchantId, 'quarantined'), { timeout: 30_000 }).toBe(count);
    return { night, merchantId };
  }

  const post = async (route: string, clientId: string, body: object = {}) => {
    const response = await fetch(`${api}${route}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokens.get(clientId)}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  it('the requester cannot approve, another subject can; the audit shows both', async () => {
    const { merchantId } = await quarantinedNight(2);
    const preview = await post('/v1/replay-requests', 'olga', { merchant: merchantId });
    expect(preview.status).toBe(200);
    const requestId = preview.body.id as string;
    expect(preview.body.count).toBe(2);
    // olga holds the approver role too: four eyes are about who, not what the token allows.
    const self = await post(`/v1/replay-requests/${requestId}/approve`, 'olga');
    expect(self).toMatchObject({ status: 403, body: { error: 'OperatorError', code: 'SelfApprovalRefused' } });
    const approved = await post(`/v1/replay-requests/${requestId}/approve`, 'april', { ticket: 'OPS-1' });
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({ id: requestId, applied: 2 });
    await expect.poll(() => webhooksIn(merchantId, 'delivered'), { timeout: 30_000 }).toBe(2);
    const { rows } = await us.pool.query(`SELECT requested_by, approved_by FROM replay_requests WHERE id = $1`, [
      requestId,
    ]);
    expect(rows[0]).toEqual({ requested_by: 'olga', approved_by: 'april' });
    const audit = await us.pool.query(
      `SELECT subject, verb, outcome FROM api_audit WHERE target = $1 OR (verb = 'replay.preview' AND subject = 'olga') ORDER BY id`,
      [requestId],
    );
    expect(audit.rows).toEqual([
      { subject: 'olga', verb: 'replay.preview', outcome: 'ok' },
      { subject: 'olga', verb: 'replay.approve', outcome: 'refused' },
      { subject: 'april', verb: 'replay.approve', outcome: 'ok' },
    ]);
  }, 120_000);

  it('the ops CLI, holding a token and nothing else, takes a quarantined webhook to delivered; `ops audit` lists who did', async () => {
    const { night, merchantId } = await quarantinedNight(1);
    const webhookId = (
      await us.pool.query(`SELECT webhook_id FROM webhook_deliveries WHERE merchant_id = $1`, [merchantId])
    ).rows[0].webhook_id as string;
    // The CLI process's whole environment: no DATABASE_URL, no PAYLOAD_KEYS, no MERCHANT_SECRET_KEYS, no mode.
    const ops = async (clientId: string, ...args: string[]) =>
      (
        await run(process.execPath, ['--import', 'tsx', 'src/bin/ops.ts', ...args], {
          cwd: REPO,
          env: {
            PATH: process.env.PATH,
            HOME: process.env.HOME,
            HOLD_SWEEPER_API_URL_US: api,
            HOLD_SWEEPER_API_TOKEN: tokens.get(clientId),
          },
        })
      ).stdout.trim();
    const preview = await ops('oscar', 'replay', 'preview', '--webhook', webhookId);
    const requestId = /replay request (rr_\w+): 1 quarantined webhook\(s\) frozen/.exec(preview)![1]!;
    // Errors name themselves, in JSON under --json: the API's refusal with its status and request id.
    const refused = await ops('vera', 'replay', 'approve', requestId, '--json').then(
      () => undefined,
      (err: { code: number; stderr: string }) => err,
    );
    expect(refused?.code).toBe(2);
    expect(JSON.parse(refused!.stderr)).toMatchObject({
      error: 'Forbidden',
      status: 403,
      requestId: expect.any(String),
    });
    // Naming someone on the command line is refused: the token says who.
    await expect(ops('april', 'replay', 'approve', requestId, '--by', 'april')).rejects.toMatchObject({
      stderr: expect.stringMatching(/ConfigError.*--by/),
    });
    expect(await ops('april', 'replay', 'approve', requestId)).toMatch(
      new RegExp(`replay request ${requestId} approved: 1 replay\\(s\\) applied`),
    );
    await expect
      .poll(async () => (await ops('vera', 'status', night.expired[0]!.id)).split('\n')[2], { timeout: 30_000 })
      .toMatch(/webhook: wh_\S+ delivered/);
    const audit = await ops('vera', 'audit', '--limit', '10');
    expect(audit).toMatch(/april\s+approver\s+replay\.approve\s+rr_\w+\s+ok/);
    expect(audit).toMatch(/oscar\s+operator\s+replay\.preview/);
  }, 120_000);

  it('prints through the API what it prints running the verbs itself', async () => {
    const { night, merchantId } = await quarantinedNight(1);
    const local = async (...args: string[]) => {
      const lines: string[] = [];
      expect(await runOps(args, (l) => lines.push(l), devRegionEnv())).toBe(0);
      return lines.join('\n');
    };
    const remote = async (...args: string[]) => {
      const lines: string[] = [];
      expect(
        await runOps(args, (l) => lines.push(l), {
          HOLD_SWEEPER_API_URL_US: api,
          HOLD_SWEEPER_API_TOKEN: tokens.get('vera'),
        }),
      ).toBe(0);
      return lines.join('\n');
    };
    for (const args of [
      ['status', night.expired[0]!.id],
      ['quarantine', 'list', '--merchant', merchantId],
      ['webhooks', 'list', '--status', 'quarantined', '--merchant', merchantId],
      ['merchant', 'show', merchantId],
      ['sends', 'status'],
      ['reviews', 'list', '--all'],
      ['status', night.expired[0]!.id, '--json'],
    ]) {
      const printed = await remote(...args);
      expect(printed, args.join(' ')).toBe(await local(...args));
      // And what it prints is held (ids, times, numbers and column widths made run-independent): a change to the
      // operators' output is a change to test/integration/__snapshots__/admin-api.test.ts.snap, seen in review.
      // Only what this test's own night decides (sends and reviews are the region's: other tests change them).
      if (!args.includes('--json') && !['sends', 'reviews'].includes(args[0]!))
        expect(runIndependent(printed, night.expired[0]!.id, merchantId)).toMatchSnapshot(
          args[0] === 'status' ? 'status' : args.slice(0, 2).join(' '),
        );
    }
  }, 120_000);
});

/**
 * An output with what differs from run to run replaced: this run's ids and names, times, ids, numbers, column widths.
 */
function runIndependent(text: string, holdId: string, merchantId: string): string {
  return (
    text
      .replaceAll(holdId, '<hold>')
      .replaceAll(merchantId, '<merchant>')
      .replaceAll(harness.id, '<run>')
      .replace(/\d{4}-\d{2}-\d{2}[T ][\d:.]+(Z|[+-]\d{2}(:\d{2})?)?/g, '<time>')
      .replace(/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g, '<uuid>')
      .replace(/\b(rr|rs|mr|mk|sr|wh)_[A-Za-z0-9_<>]+/g, '$1_<id>')
      // A budget's next slot is a time or "now" depending on when the last attempt was.
      .replace(/next free slot (now|<time>)/g, 'next free slot <slot>')
      .replace(/\d+/g, '9')
      .replace(/-{2,}/g, '--')
      .replace(/ {2,}/g, '  ')
  );
}

describe('what nobody identified can make the APIs keep, and the audit with the action', () => {
  it('5,000 calls with no token and 5,000 with bogus merchant keys (long paths among them) add no row to any table: counted, not stored', async () => {
    const merchantMetrics = new Registry();
    const merchantLog = capturedLogger('merchant-api');
    const merchantApp = await buildMerchantServer({
      region: 'us',
      pool: us.pool,
      metrics: merchantMetrics,
      logger: merchantLog.logger,
    });
    const adminLinesBefore = adminLog.lines.length;
    await merchantApp.listen({ host: '127.0.0.1', port: 0 });
    const merchantApi = `http://127.0.0.1:${(merchantApp.server.address() as { port: number }).port}`;
    try {
      const before = await rowsPerTable(us.pool);
      const longPath = (i: number) => `/v1/${'x'.repeat(15_000)}${i}`;
      const admin = await flood(5_000, 32, async (i) => {
        const path = i % 10 === 0 ? longPath(i) : `/v1/merchants/m_${i}/api-keys`;
        const response = await realFetch(`${api}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(i % 2 ? { authorization: 'Bearer not-a-token' } : {}) },
          body: '{}',
        });
        await response.arrayBuffer();
        return response.status;
      });
      const merchants = await flood(5_000, 32, async (i) => {
        const path = i % 10 === 0 ? longPath(i) : '/v1/webhooks';
        const response = await realFetch(`${merchantApi}${path}`, {
          headers: { authorization: `Bearer hsk_${'0'.repeat(16)}_${i.toString(16).padStart(64, '0')}` },
        });
        await response.arrayBuffer();
        return response.status;
      });
      expect(admin).toEqual({ 401: 5_000 });
      expect(merchants).toEqual({ 401: 5_000 });
      expect(await rowsPerTable(us.pool)).toEqual(before);
      const total = async (registry: Registry) =>
        [
          ...(await registry.metrics()).matchAll(
            /^hold_sweeper_api_requests_refused_total\{[^}]*status="401"[^}]*\} (\d+)$/gm,
          ),
        ]
          .map((m) => Number(m[1]))
          .reduce((a, b) => a + b, 0);
      expect(await total(merchantMetrics)).toBe(5_000);
      expect(await total(metrics)).toBeGreaterThanOrEqual(5_000);
      // Nor a log line each: a sampled line per kind of refusal at most once a minute by the lines' own times (the
      // admin API's may have been said by the 401 test above), saying how many went unlogged; no access line for any
      // of them. However long the flood took, that is a line a minute per kind. (A line's time is taken as it is
      // written, a moment after the sampler decided: a second is left for that.)
      const isSampled = (l: Record<string, unknown>) =>
        /API call refused before identification \(sampled\)$/.test(String(l.msg));
      const floodLines = [...adminLog.lines.slice(adminLinesBefore), ...merchantLog.lines];
      const sampled = floodLines.filter(isSampled);
      expect(floodLines.filter((l) => l.requestId !== undefined && !sampled.includes(l))).toEqual([]);
      const kinds = new Map<string, number[]>();
      for (const l of [...adminLog.lines, ...merchantLog.lines].filter(isSampled)) {
        const kind = `${String(l.msg).split(' ')[0]} ${String(l.status)} ${String(l.error)}`;
        kinds.set(kind, [...(kinds.get(kind) ?? []), Date.parse(String(l.ts))]);
      }
      const tooSoon = [...kinds].flatMap(([kind, times]) =>
        times
          .slice(1)
          .flatMap((t, i) => (t - times[i]! < SAMPLED_LOG_EVERY_MS - 1_000 ? [`${kind}: ${t - times[i]!} ms`] : [])),
      );
      expect(tooSoon).toEqual([]);
      expect(sampled.find((l) => String(l.msg).startsWith('merchant'))).toMatchObject({
        level: 'warn',
        status: 401,
        requestId: expect.any(String),
      });
    } finally {
      await merchantApp.close();
    }
  }, 300_000);

  it('a call whose audit row cannot be written does nothing: a key is not made (its row would share the transaction), sends are not paused (its row is written before)', async () => {
    const night = await seedNight(us.pool, 'us', `${harness.id}aud`, { expired: 0, merchants: 1 }, harness.merchants);
    const merchantId = night.merchantIds[0]!;
    const post = (route: string, clientId: string, body: object) =>
      fetch(`${api}${route}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tokens.get(clientId)}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as Record<string, unknown> }));
    const keys = async () =>
      (await us.pool.query('SELECT count(*)::int AS n FROM merchant_api_keys WHERE merchant_id = $1', [merchantId]))
        .rows[0].n;
    const pauses = async () => (await us.pool.query('SELECT count(*)::int AS n FROM send_pauses')).rows[0].n;
    const [keysBefore, pausesBefore] = [await keys(), await pauses()];
    await us.pool.query(`CREATE FUNCTION audit_unwritable() RETURNS trigger LANGUAGE plpgsql AS $$
                           BEGIN RAISE EXCEPTION 'the audit is down'; END $$`);
    await us.pool.query(
      'CREATE TRIGGER audit_unwritable BEFORE INSERT ON api_audit FOR EACH ROW EXECUTE FUNCTION audit_unwritable()',
    );
    try {
      expect((await post(`/v1/merchants/${merchantId}/api-keys`, 'mia', { label: 'ci' })).status).toBe(500);
      expect((await post('/v1/sends/pause', 'oscar', { reason: 'drill' })).status).toBe(500);
    } finally {
      await us.pool.query('DROP TRIGGER audit_unwritable ON api_audit');
      await us.pool.query('DROP FUNCTION audit_unwritable()');
    }
    expect(await keys()).toBe(keysBefore);
    expect(await pauses()).toBe(pausesBefore);
    // With the audit back, the same call makes its key, and its row is in the audit with it.
    const made = await post(`/v1/merchants/${merchantId}/api-keys`, 'mia', { label: 'ci' });
    expect(made.status).toBe(200);
    expect(await keys()).toBe(keysBefore + 1);
    const { rows } = await us.pool.query(
      `SELECT verb, subject, outcome, target FROM api_audit WHERE verb = 'merchant.api-key.create' AND target = $1`,
      [merchantId],
    );
    expect(rows).toEqual([{ verb: 'merchant.api-key.create', subject: 'mia', outcome: 'ok', target: merchantId }]);
  });

  it('a POST refuses a query string beside its body (it would skip the body’s schema), and changes nothing', async () => {
    const response = await fetch(`${api}/v1/merchants/m_nobody?rate=abc`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokens.get('mia')}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: 'InvalidRequest' });
  });

  it('the audit keeps its rows for its retention: the one way out is prune_api_audit, for rows past it, and the pruning is a row itself', async () => {
    const { rows: inserted } = await us.pool.query<{ id: string }>(
      `INSERT INTO api_audit (at, request_id, subject, verb, method, path, outcome, status)
       VALUES (now() - interval '401 days', 'old-call', 'olga', 'sends.status', 'GET', '/v1/sends', 'ok', 200),
              (now() - interval '399 days', 'young-call', 'olga', 'sends.status', 'GET', '/v1/sends', 'ok', 200)
       RETURNING id::text`,
    );
    expect(inserted).toHaveLength(2);
    await expect(us.pool.query(`DELETE FROM api_audit WHERE request_id = 'old-call'`)).rejects.toThrow(/append-only/);
    await expect(us.pool.query(`UPDATE api_audit SET subject = 'eve' WHERE request_id = 'old-call'`)).rejects.toThrow(
      /append-only/,
    );
    await expect(us.pool.query(`SELECT prune_api_audit(now() - interval '30 days', 'olga')`)).rejects.toThrow(
      /keeps 400 days at least/,
    );
    const pruned = await us.pool.query<{ n: string }>(
      `SELECT prune_api_audit(now() - interval '400 days', 'olga')::text AS n`,
    );
    expect(pruned.rows[0]!.n).toBe('1');
    const left = await us.pool.query(`SELECT request_id FROM api_audit WHERE request_id IN ('old-call', 'young-call')`);
    expect(left.rows).toEqual([{ request_id: 'young-call' }]);
    const recorded = await us.pool.query(`SELECT subject, detail FROM api_audit WHERE verb = 'audit.prune'`);
    expect(recorded.rows).toEqual([{ subject: 'olga', detail: expect.stringMatching(/^1 rows written before /) }]);
  });
});

describe('npm run api (src/bin/api.ts)', () => {
  it('serves over its own TLS, and the CLI reaches it with the CA it trusts and a token', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-api-'));
    const pki = await createClusterPki(dir);
    const port = await freePort();
    const metricsPort = await freePort();
    const api = await startApiProcess({
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      ...devRegionEnv(),
      API_ADDRESS: `127.0.0.1:${port}`,
      API_METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
      API_OIDC_ISSUER: oidc.issuer,
      API_TLS_CERT_FILE: pki.frontend.cert,
      API_TLS_KEY_FILE: pki.frontend.key,
    });
    try {
      expect(api.output()).toContain(`"url":"https://127.0.0.1:${port}"`);
      const cli = (...args: string[]) =>
        run(process.execPath, ['--import', 'tsx', 'src/bin/ops.ts', ...args], {
          cwd: REPO,
          env: {
            PATH: process.env.PATH,
            HOME: process.env.HOME,
            HOLD_SWEEPER_API_URL_US: `https://127.0.0.1:${port}`,
            HOLD_SWEEPER_API_TOKEN: tokens.get('vera'),
            NODE_EXTRA_CA_CERTS: pki.ca,
          },
        });
      expect((await cli('sends', 'status')).stdout).toMatch(/^sends in region us: running/);
      // Its metrics address: what it refused (a call with no token) beside how the process itself is doing.
      expect(
        (await httpsJson(`https://127.0.0.1:${port}/v1/sends`, await fs.readFile(pki.ca), { method: 'GET' })).status,
      ).toBe(401);
      const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      expect(metrics).toMatch(
        /^hold_sweeper_api_requests_refused_total\{api="admin",region="us",status="401",error="\w+"\} 1$/m,
      );
      expect(metrics).toMatch(/^process_cpu_seconds_total\{service="admin-api"\} /m);
      expect(metrics).toMatch(/^process_resident_memory_bytes\{service="admin-api"\} [1-9]/m);
      expect(metrics).toContain('# TYPE nodejs_eventloop_lag_seconds gauge');
      // Plain HTTP to the TLS listener gets nowhere.
      await expect(
        fetch(`http://127.0.0.1:${port}/v1/sends`, { headers: { authorization: `Bearer ${tokens.get('vera')}` } }),
      ).rejects.toThrow();
    } finally {
      api.stop();
      await fs.rm(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('production refuses to start without TLS, and says which setting', async () => {
    const refused = await run(process.execPath, ['--import', 'tsx', 'src/bin/api.ts'], {
      cwd: REPO,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        HOLD_SWEEPER_MODE: 'production',
        HOLD_SWEEPER_REGIONS: 'us',
        DATABASE_URL_US: `${us.databaseUrl}${inject('postgresTlsQuery')}`,
        TEMPORAL_ADDRESS: harness.address,
        TEMPORAL_TLS: 'true',
        PAYLOAD_KEYS_US: `k1:${Buffer.alloc(32, 3).toString('base64')}`,
        MERCHANT_SECRET_KEYS_US: `k1:${Buffer.alloc(32, 4).toString('base64')}`,
        API_OIDC_ISSUER: 'https://login.example.com',
      },
    }).then(
      () => undefined,
      (err: { code: number; stderr: string }) => err,
    );
    expect(refused?.code).toBe(1);
    expect(refused?.stderr).toMatch(/ConfigError: API_TLS_CERT_FILE/);
  }, 60_000);
});

/** A JSON request over TLS trusting `ca` (Node's fetch takes no CA of its own). */
function httpsJson(
  url: string,
  ca: Buffer,
  init: { method: string; headers?: Record<string, string>; body?: unknown },
) {
  return new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: unknown }>(
    (resolve, reject) => {
      const request = https.request(
        url,
        { method: init.method, headers: { 'content-type': 'application/json', ...init.headers }, ca },
        (response) => {
          let text = '';
          response.on('data', (d: Buffer) => (text += d.toString()));
          response.on('end', () =>
            resolve({
              status: response.statusCode!,
              headers: response.headers,
              body: text ? JSON.parse(text) : undefined,
            }),
          );
        },
      );
      request.on('error', reject);
      request.end(init.body === undefined ? undefined : JSON.stringify(init.body));
    },
  );
}

describe('the codec endpoint behind the same identity', () => {
  it('over TLS, decodes for a verified user with a role and logs who; refuses no token, a foreign one, and a user with no role', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-codec-'));
    const pki = await createClusterPki(dir);
    const ca = await fs.readFile(pki.ca);
    const verifier = await createTokenVerifier({
      issuer: oidc.issuer,
      audience: CODEC_AUDIENCE,
      rolesClaim: 'roles',
      clockToleranceSeconds: 5,
      maxTokenAgeSeconds: 86_400,
    });
    const { logger, lines } = capturedLogger('codec-server');
    /** Who encoded or decoded what: its lines about payloads (Fastify also says where it listens). */
    const logged = () => lines.filter((l) => String(l.msg).startsWith('payloads'));
    const namespace = 'hold-sweeper-us';
    const codecToken = (clientId: string) => oidc.token(clientId, CODEC_AUDIENCE);
    const codec = await startCodecServer({
      codecs: new Map([
        [namespace, new EncryptionCodec([{ id: 'k1', key: randomBytes(32) }], { namespace, unencrypted: 'refuse' })],
      ]),
      corsOrigins: ['https://ui.example.com'],
      authToken: undefined,
      identity: byNamespace(verifier, [{ namespace, region: 'us' }]),
      https: { cert: await fs.readFile(pki.frontend.cert), key: await fs.readFile(pki.frontend.key) },
      logger,
    });
    try {
      expect(codec.url).toMatch(/^https:/);
      const payloads = [
        {
          metadata: { encoding: Buffer.from('json/plain').toString('base64') },
          data: Buffer.from('{"holdId":"h_1"}').toString('base64'),
        },
      ];
      const as = (token: string | undefined, route: string, body: unknown) =>
        httpsJson(`${codec.url}${route}`, ca, {
          method: 'POST',
          headers: { 'x-namespace': namespace, ...(token ? { authorization: `Bearer ${token}` } : {}) },
          body,
        });
      // The browser's preflight: the Web UI sends the access token and the ID token (authorization-extras).
      const preflight = await httpsJson(`${codec.url}/decode`, ca, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://ui.example.com',
          'access-control-request-headers': 'authorization,authorization-extras,x-namespace',
        },
      });
      expect(preflight.status).toBe(200);
      expect(String(preflight.headers['access-control-allow-headers']).toLowerCase()).toContain('authorization-extras');
      expect(preflight.headers['access-control-allow-origin']).toBe('https://ui.example.com');

      // Encoding mints what the region's workers take from their own clients: an operator's, of that region.
      const encoded = await as(await codecToken('oscar'), '/encode', { payloads });
      expect(encoded.status).toBe(200);
      const decoded = await as(await codecToken('vera'), '/decode', encoded.body);
      expect(decoded).toMatchObject({ status: 200, body: { payloads } });
      expect(logged()).toEqual([
        expect.objectContaining({
          level: 'info',
          msg: 'payloads encoded',
          subject: 'oscar',
          namespace,
          payloads: 1,
          requestId: expect.any(String),
        }),
        expect.objectContaining({ level: 'info', msg: 'payloads decoded', subject: 'vera', namespace, payloads: 1 }),
      ]);
      // A viewer decodes, never encodes; an operator of the other region neither, here.
      expect((await as(await codecToken('vera'), '/encode', { payloads })).status).toBe(403);
      const euOperator = await oidc.mint({
        subject: 'eli',
        roles: ['eu:operator', 'eu:viewer'],
        audience: CODEC_AUDIENCE,
      });
      expect((await as(euOperator, '/encode', { payloads })).status).toBe(403);
      expect((await as(euOperator, '/decode', encoded.body)).status).toBe(403);
      const usOperator = await oidc.mint({ subject: 'uma', roles: ['us:operator'], audience: CODEC_AUDIENCE });
      expect((await as(usOperator, '/encode', { payloads })).status).toBe(200);
      expect((await as(undefined, '/decode', encoded.body)).status).toBe(401);
      expect(
        (
          await as(
            await oidc.mintForeign({ subject: 'vera', roles: ['viewer'], audience: CODEC_AUDIENCE }),
            '/decode',
            encoded.body,
          )
        ).status,
      ).toBe(401);
      // The admin API's token is not the codec endpoint's, and the reverse (checked above).
      expect((await as(tokens.get('olga'), '/decode', encoded.body)).status).toBe(401);
      expect(
        (await as(await oidc.mint({ subject: 'eve', roles: [], audience: CODEC_AUDIENCE }), '/decode', encoded.body))
          .status,
      ).toBe(403);
      // Nothing was decoded for the refused ones (the US operator's encode is the third line).
      expect(logged()).toHaveLength(3);
    } finally {
      await codec.stop();
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the OpenAPI document', () => {
  it('every answer read above is what the document says: its status listed, its body valid against its schema', () => {
    expect(violations).toEqual([]);
    expect(openapi.checked).toBeGreaterThan(ADMIN_VERBS.length * 6);
    // The check bites: a body unlike the schema, and a status the operation does not list.
    expect(openapi.check('GET', '/v1/sends', 200, { paused: 'no', held: 1, pauses: [] })).toHaveLength(1);
    expect(openapi.check('POST', '/v1/sweeps', 200, {})).toHaveLength(1);
    expect(openapi.check('GET', '/v1/sends', 418, {})).toEqual(['GET /v1/sends does not document status 418']);
  });
});
