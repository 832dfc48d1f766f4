/**
 * Every door of every server anyone on the network reaches (docs/security.md#every-door-every-method): the admin API,
 * the merchant API, the processor receiver and the codec endpoint, each as its entry point builds it, on one region's
 * ledger. Every method on every route each one serves (read from its Fastify app) and on a path none serves, with no
 * credential and with a bad one: no row added to any table of the ledger, no error logged, no 5xx; a 2xx only for a
 * GET or HEAD of an open route (the health check, the OpenAPI document) and the codec endpoint's CORS preflight.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminServer } from '../../src/api/admin-server.js';
import { byNamespace, createTokenVerifier } from '../../src/api/identity.js';
import { buildMerchantServer } from '../../src/api/merchant-server.js';
import { startCodecServer, type CodecServer } from '../../src/codec/codec-server.js';
import { EncryptionCodec } from '../../src/codec/encryption-codec.js';
import { adminAudience, CODEC_AUDIENCE } from '../../src/contracts/identity.js';
import { localKeyRing } from '../../src/delivery/secret-box.js';
import { startDevOidcProvider, type DevOidcProvider } from '../../dev/oidc-provider.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { rowsPerTable } from '../support/ledger.js';
import { capturedLogger } from '../support/logs.js';
import { startTestReceiver, type TestReceiver } from '../support/processor.js';
import { TEST_SECRET_KEYS } from '../support/secrets.js';
import { flood } from '../support/wait.js';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'PROPFIND'] as const;
/** A path no server serves, and one no router can read. */
const UNKNOWN_PATHS = ['/no-such-door', '/healthz/', '/%zz'];

let harness: Harness;
let us: TestRegion;
let oidc: DevOidcProvider;
let receiver: TestReceiver;
let codec: CodecServer;
const apps: FastifyInstance[] = [];

interface Door {
  name: string;
  url: () => string;
  app: () => FastifyInstance;
  lines: Record<string, unknown>[];
  /** What a caller without the right credential sends instead: garbage where the credential goes. */
  badCredential: Record<string, string>;
  /** `METHOD path` of what anyone may call and get a 2xx. */
  open: readonly string[];
}

const logs = {
  admin: capturedLogger('admin-api'),
  merchant: capturedLogger('merchant-api'),
  receiver: capturedLogger('receiver'),
  codec: capturedLogger('codec-server'),
};
const urlOf = (app: FastifyInstance) => `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
const HEALTH_AND_DOCUMENT = ['GET /healthz', 'HEAD /healthz', 'GET /openapi.json', 'HEAD /openapi.json'];

const DOORS: Door[] = [
  {
    name: 'admin API',
    url: () => urlOf(apps[0]!),
    app: () => apps[0]!,
    lines: logs.admin.lines,
    badCredential: { authorization: 'Bearer eyJhbGciOiJSUzI1NiJ9.e30.bm90LWEtc2lnbmF0dXJl' },
    open: HEALTH_AND_DOCUMENT,
  },
  {
    name: 'merchant API',
    url: () => urlOf(apps[1]!),
    app: () => apps[1]!,
    lines: logs.merchant.lines,
    badCredential: { authorization: `Bearer hsk_${'0'.repeat(16)}_${'f'.repeat(64)}` },
    open: HEALTH_AND_DOCUMENT,
  },
  {
    name: 'processor receiver',
    url: () => receiver.processor.url.replace(/\/processor\/events$/, ''),
    app: () => receiver.receiver.app,
    lines: logs.receiver.lines,
    badCredential: {
      'webhook-id': 'evt_doors_1',
      'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
      'webhook-signature': `v1,${randomBytes(32).toString('base64')}`,
    },
    open: HEALTH_AND_DOCUMENT,
  },
  {
    name: 'codec endpoint',
    url: () => codec.url,
    app: () => codec.app,
    lines: logs.codec.lines,
    badCredential: { authorization: 'Bearer not-a-token' },
    open: ['GET /openapi.json', 'HEAD /openapi.json', 'OPTIONS /encode', 'OPTIONS /decode'],
  },
];

beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
  oidc = await startDevOidcProvider([]);
  const verifier = (audience: string) =>
    createTokenVerifier({ issuer: oidc.issuer, audience, rolesClaim: 'roles', clockToleranceSeconds: 5 });
  apps.push(
    await buildAdminServer({
      context: {
        region: us.config,
        pool: us.pool,
        client: us.client,
        fourEyes: true,
        webhooks: { allowInsecureHttp: true, allowPrivateAddresses: true, trustedNetworks: [] },
        secrets: { region: 'us', sealer: localKeyRing(TEST_SECRET_KEYS) },
      },
      logger: logs.admin.logger,
      verifier: await verifier(adminAudience('us')),
    }),
    await buildMerchantServer({ region: 'us', pool: us.pool, logger: logs.merchant.logger }),
  );
  for (const app of apps) await app.listen({ host: '127.0.0.1', port: 0 });
  receiver = await startTestReceiver(us, { logger: logs.receiver.logger });
  const namespace = us.config.namespace;
  codec = await startCodecServer({
    codecs: new Map([
      [namespace, new EncryptionCodec([{ id: 'k1', key: randomBytes(32) }], { namespace, unencrypted: 'pass' })],
    ]),
    corsOrigins: ['http://localhost:8080'],
    authToken: undefined,
    identity: byNamespace(await verifier(CODEC_AUDIENCE), [{ namespace, region: 'us' }]),
    logger: logs.codec.logger,
  });
}, 120_000);

afterAll(async () => {
  await codec?.stop();
  await receiver?.close();
  for (const app of apps) await app.close();
  await oidc?.stop();
  await harness?.close();
});

/**
 * `METHOD path` of every route `app` serves, read from its router (Fastify's printed tree, one path segment a level):
 * a parameter or a wildcard stands for a value a caller picks.
 */
function routesOf(app: FastifyInstance): string[] {
  const routes: string[] = [];
  const prefixes: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^([│ ]*)[├└]── (\S+)(?: \(([^)]*)\))?$/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    prefixes.length = depth;
    prefixes.push(m[2]!);
    const path = `/${prefixes.join('').replace(/^\//, '')}`.replace(/:[A-Za-z]+|\*/g, 'x_1');
    for (const method of m[3]?.split(', ') ?? []) routes.push(`${method} ${path}`);
  }
  return routes;
}

describe('every door, every method, without a credential', () => {
  it('adds no row to any ledger table, logs no error and answers no 5xx; only the open doors answer 2xx', async () => {
    const before = await rowsPerTable(us.pool);
    const answers: { door: string; call: string; status: number }[] = [];
    for (const door of DOORS) {
      const served = routesOf(door.app());
      // What it serves is read from it: an empty read would prove nothing.
      expect(served, door.name).toContain('GET /openapi.json');
      const paths = [...new Set([...served.map((r) => r.split(' ')[1]!), ...UNKNOWN_PATHS])];
      const calls = paths.flatMap((path) =>
        METHODS.flatMap((method) => [
          { method, path, headers: {} },
          { method, path, headers: door.badCredential },
        ]),
      );
      await flood(calls.length, 16, async (i) => {
        const { method, path, headers } = calls[i]!;
        const body = method === 'GET' || method === 'HEAD' ? undefined : '{"type":"hold.captured","payloads":[]}';
        const response = await fetch(`${door.url()}${path}`, {
          method,
          headers: {
            ...headers,
            'x-namespace': us.config.namespace,
            ...(body ? { 'content-type': 'application/json' } : {}),
          },
          body,
        });
        await response.arrayBuffer();
        answers.push({ door: door.name, call: `${method} ${path}`, status: response.status });
        return response.status;
      });
    }
    const notFourHundreds = answers.filter(
      (a) =>
        !(a.status >= 400 && a.status < 500) &&
        !(a.status < 300 && DOORS.find((d) => d.name === a.door)!.open.includes(a.call)),
    );
    // Each part is said whatever the others show: how many answers, error lines and rows were wrong.
    expect.soft(notFourHundreds.map((a) => `${a.door}: ${a.call} ${a.status}`)).toEqual([]);
    const errorLines = DOORS.flatMap((door) =>
      door.lines
        .filter((l) => l.level === 'error' || l.level === 'fatal' || JSON.stringify(l).includes('"stack"'))
        .map((l) => `${door.name}: ${String(l.msg)}`),
    );
    expect.soft(errorLines).toEqual([]);
    const after = await rowsPerTable(us.pool);
    const added = Object.entries(after).flatMap(([table, n]) =>
      n === before[table] ? [] : [`${table}: ${n - (before[table] ?? 0)}`],
    );
    expect.soft(added).toEqual([]);
    const openAnswers = answers.filter((a) => DOORS.find((d) => d.name === a.door)!.open.includes(a.call));
    expect(openAnswers.filter((a) => a.status >= 300)).toEqual([]);
    expect(openAnswers).toHaveLength(DOORS.reduce((n, d) => n + d.open.length * 2, 0));
  }, 60_000);
});
