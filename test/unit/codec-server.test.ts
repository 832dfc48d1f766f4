/**
 * The codec endpoint fails closed: a configuration it cannot serve is a named error at start-up, /encode needs the same
 * token as /decode, and only listed origins get a CORS grant; its OpenAPI document says every answer it gives. A real
 * HTTP server on loopback; no Temporal.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDevConfig } from '../../dev/dev-config.js';
import { freePort } from '../../dev/embedded-postgres.js';
import { startLocalStack } from '../../dev/local-stack.js';
import { startCodecServer, type CodecServer } from '../../src/codec/codec-server.js';
import { EncryptionCodec } from '../../src/codec/encryption-codec.js';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { openApiValidator, type OpenApiDocument } from '../support/openapi.js';

const TOKEN = 'codec-token-for-tests';
const UI = 'http://localhost:8080';
let server: CodecServer;

beforeAll(async () => {
  const codecs = new Map([
    [
      'hold-sweeper-eu',
      new EncryptionCodec([{ id: 'k1', key: randomBytes(32) }], { namespace: 'hold-sweeper-eu', unencrypted: 'pass' }),
    ],
  ]);
  server = await startCodecServer({
    codecs,
    plainNamespaces: ['hold-sweeper-us'],
    corsOrigins: [UI],
    authToken: TOKEN,
    metrics: { host: '127.0.0.1', port: 0 },
  });
});
afterAll(async () => {
  await server?.stop();
});

const payloads = {
  payloads: [
    {
      metadata: { encoding: Buffer.from('json/plain').toString('base64') },
      data: Buffer.from('"h_1"').toString('base64'),
    },
  ],
};

function post(
  route: string,
  headers: Record<string, string>,
  body: string = JSON.stringify(payloads),
  namespace = 'hold-sweeper-eu',
) {
  return fetch(`${server.url}${route}`, { method: 'POST', headers: { 'X-Namespace': namespace, ...headers }, body });
}

describe('fail closed: the codec endpoint', () => {
  it('refuses an empty or malformed CODEC_CORS_ORIGIN at start-up with a named error', async () => {
    for (const value of ['', ' , ', 'localhost:8080', 'http://localhost:8080/ui', 'ftp://ui.example']) {
      expect(() => loadConfig({ CODEC_CORS_ORIGIN: value }), value).toThrow(ConfigError);
      expect(() => loadConfig({ CODEC_CORS_ORIGIN: value }), value).toThrow(/CODEC_CORS_ORIGIN/);
    }
    expect(
      loadConfig({ CODEC_CORS_ORIGIN: 'https://ui.example, http://localhost:8080' }).codecServer.corsOrigins,
    ).toEqual(['https://ui.example', 'http://localhost:8080']);
    await expect(startCodecServer({ codecs: new Map(), corsOrigins: [], authToken: undefined })).rejects.toBeInstanceOf(
      ConfigError,
    );
  });

  it('/encode needs the bearer token as much as /decode', async () => {
    for (const route of ['/encode', '/decode']) {
      expect((await post(route, {})).status, route).toBe(401);
      expect((await post(route, { Authorization: `Bearer ${TOKEN}x` })).status, route).toBe(401);
      expect((await post(route, { Authorization: TOKEN })).status, route).toBe(401);
    }
    const encoded = await post('/encode', { Authorization: `Bearer ${TOKEN}` });
    expect(encoded.status).toBe(200);
    const decoded = await post('/decode', { Authorization: `Bearer ${TOKEN}` }, await encoded.text());
    expect(await decoded.json()).toEqual(payloads);
  });

  it('counts its requests on its metrics address (scraped: its silence is an alert), never on its callers’ port, and nothing of a payload', async () => {
    await post('/decode', {});
    for (const method of ['GET', 'HEAD']) {
      const onTheCallersPort = await fetch(`${server.url}/metrics`, { method });
      expect(onTheCallersPort.status, method).toBe(404);
      expect(await onTheCallersPort.text()).not.toContain('hold_sweeper');
    }
    const metrics = await (await fetch(server.metricsUrl!)).text();
    expect(metrics).toContain('# TYPE hold_sweeper_codec_requests_total counter');
    expect(metrics).toMatch(/hold_sweeper_codec_requests_total\{route="\/decode",status="401"\} [1-9]/);
    expect(metrics).not.toContain('h_1');
    // And how the process itself is doing, as every process says it.
    expect(metrics).toMatch(/^process_cpu_seconds_total\{service="codec"\} [0-9.e-]+$/m);
    expect(metrics).toMatch(/^process_resident_memory_bytes\{service="codec"\} [1-9]/m);
    await expect
      .poll(async () =>
        (await (await fetch(server.metricsUrl!)).text()).match(
          /^nodejs_eventloop_lag_seconds\{service="codec"\} \S+$/m,
        ),
      )
      .toBeTruthy();
  });

  it('npm start’s codec endpoint serves its counters on CODEC_METRICS_ADDRESS when it is set', async () => {
    // Every region's Temporal and database configured: the local stack starts nothing but the codec endpoint.
    const cacheDir = await fs.mkdtemp(path.join(os.tmpdir(), 'codec-stack-'));
    const port = await freePort();
    const lines: string[] = [];
    const config = loadConfig({
      TEMPORAL_ADDRESS: '127.0.0.1:1',
      DATABASE_URL_US: 'postgres://127.0.0.1:1/us',
      DATABASE_URL_EU: 'postgres://127.0.0.1:1/eu',
      PAYLOAD_KEYS_EU: `k1:${randomBytes(32).toString('base64')}`,
      CODEC_METRICS_ADDRESS: `127.0.0.1:${port}`,
    });
    const stack = await startLocalStack(config, { ...loadDevConfig({}), cacheDir }, { log: (l) => lines.push(l) });
    try {
      const metrics = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toContain('# TYPE hold_sweeper_codec_requests_total counter');
      expect(lines.join('\n')).toContain(`its counters on http://127.0.0.1:${port}/metrics`);
    } finally {
      await stack.stop();
      await fs.rm(cacheDir, { recursive: true, force: true });
    }
  });

  it('grants CORS to listed origins only, and a malformed request leaves it serving', async () => {
    const listed = await post('/decode', { Authorization: `Bearer ${TOKEN}`, Origin: UI });
    expect(listed.headers.get('access-control-allow-origin')).toBe(UI);
    const other = await post('/decode', { Authorization: `Bearer ${TOKEN}`, Origin: 'https://evil.example' });
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
    expect((await post('/decode', { Authorization: `Bearer ${TOKEN}` }, '{not json')).status).toBe(400);
    // JSON that is not payloads, as its document says: a 400 naming what is wrong, never an empty payload coded.
    for (const body of ['{}', '{"payloads":[5]}', '{"payloads":[{"metadata":{"encoding":7}}]}']) {
      const refused = await post('/decode', { Authorization: `Bearer ${TOKEN}` }, body);
      expect(refused.status, body).toBe(400);
      expect(((await refused.json()) as { error: string }).error, body).toMatch(/^not payloads: .*payloads/s);
    }
    expect((await post('/decode', { Authorization: `Bearer ${TOKEN}` })).status).toBe(200);
  });

  it("answers a plain namespace's payloads as they came, and refuses a namespace it does not know", async () => {
    const auth = { Authorization: `Bearer ${TOKEN}` };
    for (const route of ['/encode', '/decode']) {
      const plain = await post(route, auth, JSON.stringify(payloads), 'hold-sweeper-us');
      expect(plain.status, route).toBe(200);
      expect(await plain.json(), route).toEqual(payloads);
      const unknown = await post(route, auth, JSON.stringify(payloads), 'hold-sweeper-ap');
      expect(unknown.status, route).toBe(400);
      expect(await unknown.json(), route).toEqual({
        error: 'no codec for namespace "hold-sweeper-ap"; send X-Namespace',
      });
    }
    // The Web UI adds query parameters to the route.
    const withQuery = await post('/decode?preserveStorageRefs=true', auth, JSON.stringify(payloads), 'hold-sweeper-us');
    expect(withQuery.status).toBe(200);
    // Still behind the token.
    expect((await post('/decode', {}, JSON.stringify(payloads), 'hold-sweeper-us')).status).toBe(401);
  });
});

it('its OpenAPI document, written from its routes, says each answer it gives', async () => {
  const document = (await (await fetch(`${server.url}/openapi.json`)).json()) as OpenApiDocument;
  expect(Object.keys(document.paths).sort()).toEqual(['/decode', '/encode']);
  const openapi = openApiValidator(document);
  const answers = [
    await post('/decode', { Authorization: `Bearer ${TOKEN}` }),
    await post('/encode', { Authorization: `Bearer ${TOKEN}` }),
    await post('/decode', {}),
    await post('/decode', { Authorization: `Bearer ${TOKEN}` }, JSON.stringify(payloads), 'hold-sweeper-apac'),
  ];
  expect(answers.map((a) => a.status)).toEqual([200, 200, 401, 400]);
  for (const [i, answer] of answers.entries()) {
    const route = i === 1 ? '/encode' : '/decode';
    expect(openapi.check('POST', route, answer.status, await answer.json()), route).toEqual([]);
  }
  // The check bites: an answer off the document is reported.
  expect(openapi.check('POST', '/decode', 200, { payloads: 'none' })).not.toEqual([]);
});
