/**
 * The codec endpoint the Temporal Web UI (and `temporal --codec-endpoint`) decodes payloads through, so an
 * operator can read encrypted histories without the server ever seeing a key. Temporal's remote codec contract:
 * POST /encode and /decode with `{"payloads": [{"metadata": {k: base64}, "data": base64}]}`, the namespace in
 * `X-Namespace` (each namespace is a region, with that region's keys). CORS admits the UI's origin only.
 *
 * Who may decode: with `identity`, every request carries the signed-in user's OIDC access token (the Web UI passes it,
 * `TEMPORAL_CODEC_PASS_ACCESS_TOKEN`), verified like the admin API's; the caller's subject is logged with what it
 * decoded (the namespace and how many payloads: the UI does not say which workflow). In dev, a static token
 * (`authToken`) may stand in; production refuses one (src/config.ts). Fastify, as the APIs: each line carries the
 * request's id, and its OpenAPI document (`GET /openapi.json`) is written from the routes' schemas below. What it
 * counts is served on an address of its own (CODEC_METRICS_ADDRESS), never on the port the browsers reach.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import swagger from '@fastify/swagger';
import type { Payload, PayloadCodec } from '@temporalio/common';
import fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { jsonSchema, notServed, requestErrorStatus } from '../doors.js';
import { ConfigError } from '../errors.js';
import { fastifyLogging, silentLogger, type Logger } from '../observability/logger.js';
import { serveMetrics } from '../observability/metrics-listener.js';
import { Counter, Registry } from 'prom-client';
import { z } from 'zod';

interface CodecServerOptions {
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
  /** Where its counters are served (CODEC_METRICS_ADDRESS), never on the port the browsers reach; none: not served. */
  metrics?: { host: string; port: number };
}

const base64 = z.string().meta({ contentEncoding: 'base64' });
/** Temporal's remote codec contract: what the Web UI and the CLI send, and what they are answered. */
const PAYLOADS = z.object({
  payloads: z.array(z.object({ metadata: z.record(z.string(), base64).optional(), data: base64.optional() })),
});
type JsonPayload = z.output<typeof PAYLOADS>['payloads'][number];
const error = (description: string) => jsonSchema(z.object({ error: z.string() }).describe(description));

/** A route's document: what Temporal's remote codec contract sends and every answer it can get. */
const codecSchema = (kind: 'encode' | 'decode') => ({
  operationId: `payloads.${kind}`,
  summary:
    kind === 'decode'
      ? 'Decrypt payloads of the namespace’s region (any role there).'
      : 'Encrypt payloads with the namespace’s region key (an operator or an approver there).',
  headers: jsonSchema(
    z.object({
      'x-namespace': z.string().describe('the Temporal namespace: its region’s keys'),
      authorization: z.string().describe('Bearer <the signed-in user’s OIDC access token>').optional(),
    }),
  ),
  body: jsonSchema(PAYLOADS),
  response: {
    200: jsonSchema(PAYLOADS.describe('The payloads, in order.')),
    400: error('No codec for the namespace, or a body that is not payloads.'),
    401: error('No token, or one that does not verify.'),
    403: error('A verified caller without the role in the namespace’s region.'),
    413: error('A body over 8 MiB, not read.'),
    415: error('A Content-Type that is not a media type, not read.'),
  },
});

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

export interface CodecServer {
  url: string;
  /** Its Fastify app: what it serves (`app.printRoutes()`). */
  app: FastifyInstance;
  /** What it counts: served on its own metrics address (CODEC_METRICS_ADDRESS), never on its callers' port. */
  metrics: Registry;
  /** Its `GET /metrics` on `options.metrics`, when given. */
  metricsUrl: string | undefined;
  /** Stops both listeners. */
  stop(): Promise<void>;
}

export async function startCodecServer(options: CodecServerOptions): Promise<CodecServer> {
  // An empty list would leave no origin to answer with (config.ts refuses it too): a named error, not a crash later.
  if (options.corsOrigins.length === 0)
    throw new ConfigError('CODEC_CORS_ORIGIN', '', 'at least one Web UI origin, e.g. http://localhost:8080');
  // Scraped like every service (deploy/prometheus/prometheus.yml), so its absence is an alert (CodecServerDown).
  const metrics = new Registry();
  const requestsTotal = new Counter({
    name: 'hold_sweeper_codec_requests_total',
    help: 'codec requests answered, by route and status',
    labelNames: ['route', 'status'],
    registers: [metrics],
  });
  const app = fastify({
    ...(options.https ? { https: options.https } : {}),
    ...fastifyLogging(options.logger ?? silentLogger()),
    bodyLimit: MAX_BODY_BYTES,
  });
  // Whatever the caller calls it (the Web UI says application/json, a script may say nothing), the body is read as
  // text and parsed here, so a malformed one is this endpoint's 400, not a parser's.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => done(null, body));
  // The schemas document; the handlers parse with the same declarations (a bad body is their 400, in their words).
  app.setValidatorCompiler(() => () => true);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'hold-sweeper codec endpoint',
        version: '1',
        description:
          'Temporal’s remote codec for the Web UI and `temporal --codec-endpoint`: payloads encrypted with the region’s ' +
          'keys (src/codec/encryption-codec.ts), decrypted for a verified user with a role in that region.',
      },
    },
  });

  app.addHook('onRequest', async (request, reply) => {
    // Only a listed origin is echoed; any other browser origin gets no CORS grant at all.
    const origin = request.headers.origin;
    reply.headers({
      'access-control-allow-methods': 'POST, OPTIONS',
      // authorization-extras: the Web UI sends the user's ID token in it beside the access token.
      'access-control-allow-headers': 'Content-Type, X-Namespace, Authorization, Authorization-Extras',
      'access-control-allow-credentials': 'true',
      vary: 'Origin',
      ...(origin && options.corsOrigins.includes(origin) ? { 'access-control-allow-origin': origin } : {}),
    });
  });
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url;
    requestsTotal.inc({
      route: route === '/encode' || route === '/decode' ? route : 'other',
      status: String(reply.statusCode),
    });
  });
  app.setErrorHandler(async (err: Error, request, reply) => {
    // A request Fastify could not read (a body over the limit, a content type that is not a media type): the caller's.
    const status = requestErrorStatus(err);
    if (status !== undefined) return reply.status(status).send({ error: err.message });
    // Never an unhandled rejection: answer and go on serving.
    request.log.error({ err }, 'codec request failed');
    return reply.status(500).send({ error: `${err.name}: ${err.message}` });
  });
  app.setNotFoundHandler(async (request, reply) => {
    const { status, message } = notServed(request, reply);
    return reply.status(status).send({ error: `${message}: POST /encode or /decode` });
  });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  // The path alone: the Web UI adds query parameters (2.54 sends /decode?preserveStorageRefs=true).
  for (const kind of ['encode', 'decode'] as const) {
    // The browser's CORS preflight carries no token: it is answered with the grant above, and nothing else.
    app.options(`/${kind}`, { schema: { hide: true } }, async (_request, reply) => reply.status(200).send());
    // /encode as much as /decode: an open /encode lets anyone mint payloads under the region's key. Who asks is
    // decided before the body is read.
    app.post(
      `/${kind}`,
      { schema: codecSchema(kind), onRequest: async (request, reply) => admit(kind, request, reply) },
      async (request, reply) => code(kind, request, reply),
    );
  }

  /** Who may ask: a verified user with a role for `kind` in the namespace's region, or (dev) the static token. */
  async function admit(kind: 'encode' | 'decode', request: FastifyRequest, reply: FastifyReply) {
    const namespace = request.headers['x-namespace'];
    if (options.identity) {
      let verified: Awaited<ReturnType<NonNullable<CodecServerOptions['identity']>['authenticate']>>;
      try {
        verified = await options.identity.authenticate(request.headers.authorization);
      } catch (err) {
        if ((err as Error).name !== 'Unauthenticated') throw err;
        return reply.status(401).send({ error: (err as Error).message });
      }
      const held = typeof namespace === 'string' ? verified.rolesIn(namespace) : [];
      if (!ROUTE_ROLES[kind].some((role) => held.includes(role))) {
        return reply.status(403).send({
          error: `${verified.subject} holds none of the roles ${ROUTE_ROLES[kind].join(', ')} in namespace ${JSON.stringify(namespace)}`,
        });
      }
      callers.set(request, verified);
    } else if (options.authToken && !authorized(request.headers.authorization, options.authToken)) {
      return reply.status(401).send({ error: 'missing or wrong bearer token' });
    }
    const plain = typeof namespace === 'string' && (options.plainNamespaces ?? []).includes(namespace);
    if (!plain && (typeof namespace !== 'string' || !options.codecs.has(namespace)))
      return reply.status(400).send({ error: `no codec for namespace ${JSON.stringify(namespace)}; send X-Namespace` });
  }
  const callers = new WeakMap<FastifyRequest, { subject: string }>();

  async function code(kind: 'encode' | 'decode', request: FastifyRequest, reply: FastifyReply) {
    const namespace = request.headers['x-namespace'] as string;
    const codec = options.codecs.get(namespace);
    try {
      const payloads = PAYLOADS.parse(JSON.parse((request.body as string | undefined) ?? '')).payloads.map(toPayload);
      const result = !codec
        ? payloads
        : kind === 'encode'
          ? await codec.encode(payloads)
          : await codec.decode(payloads);
      const caller = callers.get(request);
      if (caller)
        request.log.info({ subject: caller.subject, namespace, payloads: payloads.length }, `payloads ${kind}d`);
      return reply.send({ payloads: result.map(toJson) });
    } catch (err) {
      const why = err instanceof z.ZodError ? `not payloads: ${z.prettifyError(err)}` : String(err);
      return reply.status(400).send({ error: why });
    }
  }

  await app.listen({ port: options.port ?? 0, host: options.host ?? '127.0.0.1' });
  const { address, port } = app.server.address() as { address: string; port: number };
  // An address the counters cannot be served on is the caller's to see, with no listener left behind.
  const served = options.metrics
    ? await serveMetrics(metrics, options.metrics, 'codec').catch(async (err: unknown) => {
        await app.close();
        throw err;
      })
    : undefined;
  return {
    url: `${options.https ? 'https' : 'http'}://${address}:${port}`,
    app,
    metrics,
    metricsUrl: served?.url,
    stop: async () => {
      await app.close();
      await served?.close();
    },
  };
}
