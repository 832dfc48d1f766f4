/**
 * The codec endpoint the Temporal Web UI (and `temporal --codec-endpoint`) decodes payloads through, so an
 * operator can read encrypted histories without the server ever seeing a key. Temporal's remote codec contract:
 * POST /encode and /decode with `{"payloads": [{"metadata": {k: base64}, "data": base64}]}`, the namespace in
 * `X-Namespace` (each namespace is a region, with that region's keys). CORS admits the UI's origin only.
 *
 * Who may decode: with `identity`, every request carries the signed-in user's OIDC access token (the Web UI passes it,
 * `TEMPORAL_CODEC_PASS_ACCESS_TOKEN`), verified like the admin API's; the caller's subject is logged with what it
 * decoded (the namespace and how many payloads: the UI does not say which workflow). In dev, a static token
 * (`authToken`) may stand in; production refuses one (src/config.ts).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { ConfigError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import { CounterRegistry } from '../observability/prometheus-text.js';

export interface CodecServerOptions {
  /** Codec per Temporal namespace. */
  codecs: ReadonlyMap<string, PayloadCodec>;
  /**
   * Namespaces whose payloads are not encrypted (a dev region without keys), answered as they came: a Web UI pointed
   * at this endpoint asks it for every namespace, and an error would put "Codec Server could not connect" on every
   * page of those. Any other namespace is refused: an encrypted one missing from `codecs` is a mistake to see.
   */
  plainNamespaces?: readonly string[];
  /** The Web UI's origins (a browser sends one; it is echoed back when listed). */
  corsOrigins: readonly string[];
  authToken: string | undefined;
  /**
   * Verifies the request's `Authorization` header (an OIDC access token): the caller and the roles it holds in the
   * namespace's region, or a thrown error named `Unauthenticated` (401). Given by the entry point
   * (src/api/identity.ts): the codec layer knows no issuer. /decode needs a role there, /encode an operator's or an
   * approver's (403 otherwise): encoding mints payloads the region's workers take as their own clients'.
   */
  identity?: {
    authenticate(
      authorization: string | undefined,
    ): Promise<{ subject: string; rolesIn(namespace: string): readonly string[] }>;
  };
  /** TLS for the listener: the Web UI sends a user's token only to an https endpoint. */
  https?: { cert: string | Buffer; key: string | Buffer };
  /** Who encoded or decoded what (a line each: subject, namespace, how many payloads), and what failed. */
  logger?: Logger;
  host?: string;
  port?: number;
}

interface JsonPayload {
  metadata?: Record<string, string>;
  data?: string;
}

/** Request bodies are a page of payloads; 8 MiB is well above the 2 MiB Temporal allows per payload. */
const MAX_BODY_BYTES = 8 * 1024 * 1024;

const toPayload = (p: JsonPayload): Payload => ({
  metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
  data: Buffer.from(p.data ?? '', 'base64'),
});

const toJson = (p: Payload): JsonPayload => ({
  metadata: Object.fromEntries(
    Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
  ),
  data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
});

/** Who may ask for what, in the namespace's region. */
const ROUTE_ROLES: Readonly<Record<'encode' | 'decode', readonly string[]>> = {
  decode: ['viewer', 'operator', 'approver', 'merchant-admin'],
  encode: ['operator', 'approver'],
};

/** A digest of each side first: equal lengths for timingSafeEqual, and no early exit on the first wrong byte. */
const digest = (text: string) => createHash('sha256').update(text).digest();

/** Whether the request carries the bearer token, compared in constant time. */
function authorized(header: string | undefined, token: string): boolean {
  return timingSafeEqual(digest(header ?? ''), digest(`Bearer ${token}`));
}

export async function startCodecServer(options: CodecServerOptions): Promise<{ url: string; stop(): Promise<void> }> {
  // An empty list would leave no origin to answer with (config.ts refuses it too): a named error, not a crash later.
  if (options.corsOrigins.length === 0)
    throw new ConfigError('CODEC_CORS_ORIGIN', '', 'at least one Web UI origin, e.g. http://localhost:8080');
  // Its /metrics: scraped like every service (deploy/prometheus/prometheus.yml), so its absence is an alert
  // (CodecServerDown).
  const metrics = new CounterRegistry();
  const requestsTotal = metrics.counter(
    'hold_sweeper_codec_requests_total',
    'codec requests answered, by route and status',
    ['route', 'status'],
  );
  const listener = (req: http.IncomingMessage, res: http.ServerResponse) => {
    res.once('finish', () => {
      const route = new URL(req.url ?? '/', 'http://codec').pathname;
      requestsTotal.inc({
        route: ['/encode', '/decode', '/metrics'].includes(route) ? route : 'other',
        status: String(res.statusCode),
      });
    });
    handle(req, res).catch((err: unknown) => {
      // Never an unhandled rejection: answer (if we still can) and go on serving.
      options.logger?.error({ err, route: req.url?.split('?')[0]?.slice(0, 120) }, 'codec request failed');
      if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ error: `${(err as Error).name}: ${(err as Error).message}` }));
    });
  };
  const server = options.https ? https.createServer(options.https, listener) : http.createServer(listener);

  async function handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const origin = req.headers.origin;
    const headers: Record<string, string> = {
      'Access-Control-Allow-Methods': 'POST, OPTIONS',
      // authorization-extras: the Web UI sends the user's ID token in it beside the access token.
      'Access-Control-Allow-Headers': 'Content-Type, X-Namespace, Authorization, Authorization-Extras',
      'Access-Control-Allow-Credentials': 'true',
      Vary: 'Origin',
    };
    // Only a listed origin is echoed; any other browser origin gets no CORS grant at all.
    if (origin && options.corsOrigins.includes(origin)) headers['Access-Control-Allow-Origin'] = origin;
    const reply = (status: number, body?: unknown) => {
      res.writeHead(status, body === undefined ? headers : { ...headers, 'Content-Type': 'application/json' });
      res.end(body === undefined ? undefined : JSON.stringify(body));
    };
    if (req.method === 'OPTIONS') return reply(200);
    if (req.method === 'GET' && new URL(req.url ?? '/', 'http://codec').pathname === '/metrics') {
      res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4' });
      res.end(metrics.render());
      return;
    }
    // The path alone: the Web UI adds query parameters (2.54 sends /decode?preserveStorageRefs=true).
    const route = /^\/(encode|decode)$/.exec(new URL(req.url ?? '/', 'http://codec').pathname);
    if (req.method !== 'POST' || !route) return reply(404, { error: 'POST /encode or /decode' });
    // /encode as much as /decode: an open /encode lets anyone mint payloads under the region's key.
    const namespace = req.headers['x-namespace'];
    const kind = route[1] as 'encode' | 'decode';
    let caller: { subject: string } | undefined;
    if (options.identity) {
      let verified: Awaited<ReturnType<NonNullable<CodecServerOptions['identity']>['authenticate']>>;
      try {
        verified = await options.identity.authenticate(req.headers.authorization);
      } catch (err) {
        if ((err as Error).name !== 'Unauthenticated') throw err;
        return reply(401, { error: (err as Error).message });
      }
      caller = verified;
      const held = typeof namespace === 'string' ? verified.rolesIn(namespace) : [];
      if (!ROUTE_ROLES[kind].some((role) => held.includes(role))) {
        return reply(403, {
          error: `${verified.subject} holds none of the roles ${ROUTE_ROLES[kind].join(', ')} in namespace ${JSON.stringify(namespace)}`,
        });
      }
    } else if (options.authToken && !authorized(req.headers.authorization, options.authToken)) {
      return reply(401, { error: 'missing or wrong bearer token' });
    }
    const plain = typeof namespace === 'string' && (options.plainNamespaces ?? []).includes(namespace);
    const codec = typeof namespace === 'string' ? options.codecs.get(namespace) : undefined;
    if (!codec && !plain)
      return reply(400, { error: `no codec for namespace ${JSON.stringify(namespace)}; send X-Namespace` });

    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > MAX_BODY_BYTES) return reply(413, { error: 'request body too large' });
      chunks.push(chunk as Buffer);
    }
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { payloads?: JsonPayload[] };
      const payloads = (body.payloads ?? []).map(toPayload);
      const result = !codec
        ? payloads
        : kind === 'encode'
          ? await codec.encode(payloads)
          : await codec.decode(payloads);
      reply(200, { payloads: result.map(toJson) });
      if (caller)
        options.logger?.info({ subject: caller.subject, namespace, payloads: payloads.length }, `payloads ${kind}d`);
    } catch (err) {
      reply(400, { error: `${(err as Error).name}: ${(err as Error).message}` });
    }
  }

  await new Promise<void>((resolve) => server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve));
  const { address, port } = server.address() as net.AddressInfo;
  return {
    url: `${options.https ? 'https' : 'http'}://${address}:${port}`,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
