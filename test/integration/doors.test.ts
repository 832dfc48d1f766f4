/**
 * Every door of every server anyone on the network reaches (docs/security.md#every-door-every-method): the admin API,
 * the merchant API, the processor receiver and the codec endpoint, each as its entry point builds it, on one region's
 * ledger. Every method on every route each one serves (read from its Fastify app) and on a path none serves, with no
 * credential and with a bad one: no row added to any table of the ledger, no error logged, no 5xx; a 2xx only for a
 * GET or HEAD of an open route (the health check, the OpenAPI document) and the codec endpoint's CORS preflight. With a
 * credential that verifies, a route or method nothing serves is 404 or 405 and a body Fastify cannot read a 4xx, each
 * in the audit, still with no 5xx and no error logged.
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
import { generateSigningSecret, signedHeaders } from '../../src/delivery/standard-webhooks.js';
import { createApiKey } from '../../src/operations/merchant-keys.js';
import { processorKeyOf } from '../../dev/fake-processor.js';
import { startDevOidcProvider, type DevOidcProvider } from '../../dev/oidc-provider.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { rowsPerTable, seedNight } from '../support/ledger.js';
import { capturedLogger } from '../support/logs.js';
import { startTestReceiver, type TestReceiver } from '../support/processor.js';
import { TEST_SECRET_KEYS } from '../support/secrets.js';
import { flood } from '../support/wait.js';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'PROPFIND'] as const;
/** Paths no server serves (one a served path with a trailing slash), and one no router can read. */
const UNKNOWN_PATHS = ['/no-such-door', '/healthz/', '/%zz'];

let harness: Harness;
let us: TestRegion;
let oidc: DevOidcProvider;
let receiver: TestReceiver;
let codec: CodecServer;
const apps: FastifyInstance[] = [];
/** Credentials that verify: a viewer's tokens for the admin API and the codec endpoint, a merchant's API key. */
const verified = { adminToken: '', codecToken: '', apiKey: '' };
const PROCESSOR_SECRET = generateSigningSecret();

interface Door {
  name: string;
  url: () => string;
  app: () => FastifyInstance;
  lines: Record<string, unknown>[];
  /** What a caller without the right credential sends instead: garbage where the credential goes. */
  badCredential: Record<string, string>;
  /** A credential the server verifies, for `body`. */
  credential: (body: string) => Record<string, string>;
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
/** The merchant portal's page, script, style and the icon a browser asks for: open, static, the same for everyone. */
const PORTAL = ['/portal', '/portal/portal.js', '/portal/portal.css', '/favicon.ico'].flatMap((p) => [
  `GET ${p}`,
  `HEAD ${p}`,
]);

const DOORS: Door[] = [
  {
    name: 'admin API',
    url: () => urlOf(apps[0]!),
    app: () => apps[0]!,
    lines: logs.admin.lines,
    badCredential: { authorization: 'Bearer eyJhbGciOiJSUzI1NiJ9.e30.bm90LWEtc2lnbmF0dXJl' },
    credential: () => ({ authorization: `Bearer ${verified.adminToken}` }),
    open: HEALTH_AND_DOCUMENT,
  },
  {
    name: 'merchant API',
    url: () => urlOf(apps[1]!),
    app: () => apps[1]!,
    lines: logs.merchant.lines,
    badCredential: { authorization: `Bearer hsk_mk_0000000000000000_${'A'.repeat(43)}` },
    credential: () => ({ authorization: `Bearer ${verified.apiKey}` }),
    open: [...HEALTH_AND_DOCUMENT, ...PORTAL],
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
    credential: (body) => ({
      ...signedHeaders([processorKeyOf(PROCESSOR_SECRET)], 'evt_doors_2', Math.floor(Date.now() / 1000), body),
    }),
    open: HEALTH_AND_DOCUMENT,
  },
  {
    name: 'codec endpoint',
    url: () => codec.url,
    app: () => codec.app,
    lines: logs.codec.lines,
    badCredential: { authorization: 'Bearer not-a-token' },
    credential: () => ({ authorization: `Bearer ${verified.codecToken}` }),
    open: ['GET /openapi.json', 'HEAD /openapi.json', 'OPTIONS /encode', 'OPTIONS /decode'],
  },
];

beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
  oidc = await startDevOidcProvider([{ clientId: 'vera', roles: ['viewer'] }]);
  verified.adminToken = await oidc.token('vera', adminAudience('us'));
  verified.codecToken = await oidc.token('vera', CODEC_AUDIENCE);
  const night = await seedNight(us.pool, 'us', `${harness.id}d`, { expired: 0, merchants: 1 }, harness.merchants);
  verified.apiKey = (
    await createApiKey(us.pool, night.merchantIds[0]!, 'mia', { ratePerSecond: 1_000, burst: 10_000 })
  ).apiKey;
  const verifier = (audience: string) =>
    createTokenVerifier({
      issuer: oidc.issuer,
      audience,
      rolesClaim: 'roles',
      clockToleranceSeconds: 5,
      maxTokenAgeSeconds: 86_400,
    });
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
  receiver = await startTestReceiver(us, { logger: logs.receiver.logger, secret: PROCESSOR_SECRET });
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

interface Call {
  method: string;
  path: string;
  headers: (body: string) => Record<string, string>;
  /** The body sent with any method but GET and HEAD, and its content type. */
  body?: { text: string; type: string };
}
interface Answer {
  door: string;
  call: string;
  status: number;
  /** Its `Allow` header, if any. */
  allow: string | null;
}

const ANY_BODY = { text: '{"type":"hold.captured","payloads":[]}', type: 'application/json' };

/** Each of `calls` to `door`, 16 at a time: the status each got. */
async function answersOf(door: Door, calls: readonly Call[]): Promise<Answer[]> {
  const answers: Answer[] = [];
  await flood(calls.length, 16, async (i) => {
    const { method, path, headers, body = ANY_BODY } = calls[i]!;
    const sent = method === 'GET' || method === 'HEAD' ? undefined : body;
    const response = await fetch(`${door.url()}${path}`, {
      method,
      headers: {
        ...headers(sent?.text ?? ''),
        'x-namespace': us.config.namespace,
        ...(sent ? { 'content-type': sent.type } : {}),
      },
      body: sent?.text,
    });
    await response.arrayBuffer();
    answers.push({
      door: door.name,
      call: `${method} ${path}`,
      status: response.status,
      allow: response.headers.get('allow'),
    });
    return response.status;
  });
  return answers;
}

/** Every path `served` names (each route's), and the paths none serves. */
const pathsOf = (served: readonly string[]) => [...new Set([...served.map((r) => r.split(' ')[1]!), ...UNKNOWN_PATHS])];

/** What the servers logged at error level, or with a stack, after `marks` (each door's line count then). */
const errorLinesAfter = (marks: readonly number[]) =>
  DOORS.flatMap((door, i) =>
    door.lines
      .slice(marks[i])
      .filter((l) => l.level === 'error' || l.level === 'fatal' || JSON.stringify(l).includes('"stack"'))
      .map((l) => `${door.name}: ${String(l.msg)}`),
  );

/** The rows each table of the ledger gained since `before`. */
async function rowsAddedSince(before: Record<string, number>): Promise<Record<string, number>> {
  const after = await rowsPerTable(us.pool);
  return Object.fromEntries(
    Object.entries(after).flatMap(([table, n]) => (n === before[table] ? [] : [[table, n - (before[table] ?? 0)]])),
  );
}

describe('every door, every method, without a credential', () => {
  it('adds no row to any ledger table, logs no error and answers no 5xx; only the open doors answer 2xx', async () => {
    const before = await rowsPerTable(us.pool);
    const marks = DOORS.map((d) => d.lines.length);
    const answers: Answer[] = [];
    for (const door of DOORS) {
      const served = routesOf(door.app());
      // What it serves is read from it: an empty read would prove nothing.
      expect(served, door.name).toContain('GET /openapi.json');
      const calls = pathsOf(served).flatMap((path) =>
        METHODS.flatMap((method) => [
          { method, path, headers: () => ({}) },
          { method, path, headers: () => door.badCredential },
        ]),
      );
      answers.push(...(await answersOf(door, calls)));
    }
    const notFourHundreds = answers.filter(
      (a) =>
        !(a.status >= 400 && a.status < 500) &&
        !(a.status < 300 && DOORS.find((d) => d.name === a.door)!.open.includes(a.call)),
    );
    // Each part is said whatever the others show: how many answers, error lines and rows were wrong.
    expect.soft(notFourHundreds.map((a) => `${a.door}: ${a.call} ${a.status}`)).toEqual([]);
    expect.soft(errorLinesAfter(marks)).toEqual([]);
    expect.soft(await rowsAddedSince(before)).toEqual({});
    const openAnswers = answers.filter((a) => DOORS.find((d) => d.name === a.door)!.open.includes(a.call));
    expect(openAnswers.filter((a) => a.status >= 300)).toEqual([]);
    expect(openAnswers).toHaveLength(DOORS.reduce((n, d) => n + d.open.length * 2, 0));
  }, 60_000);
});

/**
 * Bodies Fastify cannot take on a route that takes them, with a credential that verifies: one that is not JSON, as JSON
 * and as text (the receiver and the codec endpoint read any content type as text, then refuse it themselves), and a
 * content type that is not a media type (refused unread, 415). `read`: whether the server reads it at all.
 */
const BAD_BODIES = [
  { text: '{', type: 'application/json', read: true },
  { text: '{', type: 'text/plain', read: true },
  { text: '{}', type: 'json', read: false },
];

describe('to a caller the server identified', () => {
  it('a method a route does not serve is 405 with its Allow, a path none serves 404, a body it cannot read a 4xx, each audited; never a 5xx or an error line', async () => {
    const before = await rowsPerTable(us.pool);
    const marks = DOORS.map((d) => d.lines.length);
    const notServedAnswers: string[] = [];
    const notServedExpected: string[] = [];
    const unknown: Answer[] = [];
    const unreadable: (Answer & { read: boolean })[] = [];
    for (const door of DOORS) {
      const served = routesOf(door.app());
      const notServed = pathsOf(served).flatMap((path) =>
        METHODS.filter((method) => !served.includes(`${method} ${path}`)).map((method) => ({
          method,
          path,
          headers: door.credential,
        })),
      );
      const answers = await answersOf(door, notServed);
      unknown.push(...answers);
      for (const a of answers) {
        const path = a.call.split(' ')[1]!;
        const allow = served.filter((r) => r.endsWith(` ${path}`)).map((r) => r.split(' ')[0]!);
        // A path no router can read is 400 before any route is looked for.
        const expected = path === '/%zz' ? '400' : allow.length > 0 ? `405 Allow: ${allow.sort().join(', ')}` : '404';
        notServedExpected.push(`${door.name}: ${a.call} ${expected}`);
        const got = a.status === 405 ? `405 Allow: ${(a.allow ?? '').split(', ').sort().join(', ')}` : a.status;
        notServedAnswers.push(`${door.name}: ${a.call} ${got}`);
      }
      const posts = served.filter((r) => r.startsWith('POST ')).map((r) => r.split(' ')[1]!);
      for (const body of BAD_BODIES) {
        const calls = posts.map((path) => ({ method: 'POST', path, headers: door.credential, body }));
        unreadable.push(...(await answersOf(door, calls)).map((a) => ({ ...a, read: body.read })));
      }
    }
    const said = (answers: Answer[]) => answers.map((a) => `${a.door}: ${a.call} ${a.status}`);
    expect.soft(notServedAnswers.sort()).toEqual(notServedExpected.sort());
    expect.soft(said(unreadable.filter((a) => !(a.status >= 400 && a.status < 500)))).toEqual([]);
    expect.soft(errorLinesAfter(marks)).toEqual([]);
    // Every call of an identified caller to an API is in its audit (but the unreadable path, which reaches no hook);
    // the receiver writes the signed bodies it read and could not take, and nothing whose signature it could not
    // check: a body it never read, or a call it refused before the signature.
    const apis = [...unknown, ...unreadable].filter(
      (a) => (a.door === 'admin API' || a.door === 'merchant API') && !a.call.endsWith(' /%zz'),
    );
    const signedUnreadable = unreadable.filter((a) => a.door === 'processor receiver' && a.read);
    expect(signedUnreadable.length).toBeGreaterThan(0);
    expect(await rowsAddedSince(before)).toEqual({
      api_audit: apis.length,
      processor_requests_refused: signedUnreadable.length,
    });
    // What it did not read it counted as what anyone could have sent.
    expect(await receiver.receiver.metrics.metrics()).toContain('reason="UnreadableBody"');
  }, 60_000);
});
