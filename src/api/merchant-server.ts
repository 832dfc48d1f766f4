/**
 * The merchant API of one region (`npm run merchant-api`, src/bin/merchant-api.ts): internet-facing, apart from the
 * admin API (its own process and listener, its own database role). A merchant, with one of its API keys
 * (merchant-keys.ts), lists its webhooks by time and status with every attempt (time, HTTP status, latency, error
 * class, response excerpt), fetches one webhook's exact payload, asks for one webhook or a range to be sent again,
 * reads the catalog of event types (src/delivery/event-types.ts), and reads its endpoint and chooses the types it
 * takes.
 *
 * It holds no Temporal access, no payload key and no merchant secret: a resend is a row (merchant_resend_requests)
 * that the worker's outbox reconciler turns into a resend workflow within OUTBOX_RECONCILE_INTERVAL, whose first step
 * checks it; the merchant follows it at `GET /v1/resends/{requestId}`. Another merchant's webhook is "not found".
 * Each key has its own rate budget (429 with Retry-After past it). Every call of a key that verifies is in the audit
 * (api_audit, subject `merchant:<id>`, the key's id beside it; a resend's row in the transaction that records it); a
 * call refused before that (401) or past its key's budget (429) is counted and logged by sample, never stored.
 */
import { generateKeyPairSync, privateDecrypt, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifySchema,
} from 'fastify';
import swagger from '@fastify/swagger';
import type pg from 'pg';
import { z } from 'zod';
import { DELIVERY_STATUSES } from '../contracts/delivery.js';
import { InvalidEndpointUrl, parseEndpoint, type EndpointRules } from '../delivery/endpoint.js';
import { eventTypeCatalog, SUBSCRIBABLE_EVENT_TYPES } from '../delivery/event-types.js';
import type { Region } from '../contracts/regions.js';
import { inTransaction, type Queryable } from '../db/pool.js';
import { Registry } from 'prom-client';
import { insertAudit } from '../sql/audit.js';
import { apiRefusals } from './refusals.js';
import { isOpen, jsonSchema, notServed, OPEN, requestErrorStatus } from '../doors.js';
import { fastifyLogging, log, type Logger } from '../observability/logger.js';
import * as ledger from '../sql/merchant-api.js';
import { declareMerchantPace, expirePreviousSecret, setMerchantEventTypes } from '../sql/merchants.js';
import { DEFAULT_ROTATION_OVERLAP_MS, MAX_ROTATION_OVERLAP_MS } from '../operations/merchants.js';
import { parseApiKey, secretMatches } from '../operations/merchant-keys.js';

interface MerchantServerOptions {
  region: Region;
  /** Where its refusals are counted (its metrics address serves it); its own when not given. */
  metrics?: Registry;
  /** The merchant API's own role (hold_sweeper_merchant_api). */
  pool: pg.Pool;
  https?: { cert: string | Buffer; key: string | Buffer };
  /** Its access log and errors; the process's logger unless given. */
  logger?: Logger;
  /** How often the reconciler starts waiting resends (OUTBOX_RECONCILE_INTERVAL), said to the merchant. */
  resendsStartWithinMs?: number;
  /**
   * What a new endpoint URL must pass (the workers' own guard: WEBHOOK_*), checked before it is recorded; unset,
   * production's: https, no private address.
   */
  endpointRules?: EndpointRules;
  /** How long a check's call waits for a worker's answer (8 s unless given). */
  checkAnswerWaitMs?: number;
}

const PRODUCTION_RULES: EndpointRules = { allowInsecureHttp: false, allowPrivateAddresses: false };

const PORTAL_FILES = [
  ['index.html', 'text/html; charset=utf-8'],
  ['portal.js', 'text/javascript; charset=utf-8'],
  ['portal.css', 'text/css; charset=utf-8'],
] as const;
/** The portal loads only its own script and style and talks only to this API; no page may frame it. */
const PORTAL_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

/** How long a check's call waits for a worker to send it and record the answer (below the connection timeout). */
const CHECK_ANSWER_WAIT_MS = 8_000;

/** A call the merchant API refuses, with its HTTP status and a name the merchant can act on. */
class Refusal extends Error {
  constructor(
    readonly status: number,
    override readonly name: string,
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

/** Resends asked for in one call at most (a range beyond it: ask again from where it stopped). */
const RANGE_MAX = 100;

/** A token bucket per key: `rate` per second, up to `burst` at once. In memory, per process. */
function keyBudgets(now: () => number) {
  const buckets = new Map<string, { tokens: number; at: number }>();
  return {
    /** Takes a token, or says how many seconds until one is there. */
    take(keyId: string, rate: number, burst: number): number | undefined {
      const t = now();
      const b = buckets.get(keyId) ?? { tokens: burst, at: t };
      b.tokens = Math.min(burst, b.tokens + ((t - b.at) / 1000) * rate);
      b.at = t;
      buckets.set(keyId, b);
      if (b.tokens >= 1) {
        b.tokens -= 1;
        return undefined;
      }
      return Math.max(1, Math.ceil((1 - b.tokens) / rate));
    },
  };
}

declare module 'fastify' {
  interface FastifyRequest {
    merchant?: { merchantId: string; keyId: string };
  }
}

// Input and answers in zod: Fastify validates with their JSON Schema (its answers to invalid input as they are), the
// OpenAPI document publishes it, and a handler reads its input parsed. An answer's properties are all optional, as it
// documents them without binding what is added.
const time = z.string().meta({ format: 'date-time' });
const int = z.number().int();
const webhookShape = {
  webhookId: z.string(),
  eventType: z.string(),
  status: z.enum(DELIVERY_STATUSES),
  quarantineReason: z.string().nullable(),
  createdAt: time,
  deliveredAt: z.string().nullable().meta({ format: 'date-time' }),
  attemptCount: int,
  attempts: z.array(
    z
      .object({
        attempt: int,
        policyRun: int,
        startedAt: time,
        durationMs: int,
        statusCode: int.nullable(),
        errorClass: z.string().nullable(),
        responseExcerpt: z.string().nullable(),
      })
      .partial(),
  ),
};
const resendAsked = z
  .object({
    requestId: z.string(),
    webhookId: z.string(),
    resendId: z.string(),
    state: z.string().describe('waiting (to start), started, sending, delivered, quarantined, discarded, abandoned'),
    startsWithinSeconds: int,
  })
  .partial();
const endpointShape = z
  .object({
    merchantId: z.string(),
    url: z.string().describe('where your webhooks are sent'),
    ratePerSecond: z.number().describe('the most requests per second sent to you, across every worker'),
    burst: int,
    rateCeiling: z.number().describe('the most requests per second you may declare (PUT /v1/endpoint/rate)'),
    burstCeiling: int,
    eventTypes: z
      .array(z.string())
      .nullable()
      .describe('the event types your endpoint takes; null: every type, including types added later'),
    status: z.enum(['active', 'paused', 'disabled']).describe('paused or disabled: webhooks wait, none is lost'),
    statusReason: z.string().nullable().describe('why it is paused or disabled'),
    statusSince: z.string().nullable().meta({ format: 'date-time' }),
  })
  .partial();
const eventTypesBody = z.strictObject({
  eventTypes: z
    .array(z.enum(SUBSCRIBABLE_EVENT_TYPES))
    .min(1)
    .nullable()
    .describe('the types to take from now on, or null for every type'),
});
const endpointCheck = z
  .object({
    id: z.string(),
    kind: z.enum(['test', 'verify', 'rotate']),
    url: z.string(),
    requestedAt: time,
    finishedAt: z.string().nullable().meta({ format: 'date-time' }).describe('null: not sent yet; ask again'),
    result: z
      .looseObject({
        statusCode: int.nullable(),
        errorClass: z.string().nullable(),
        durationMs: int,
        responseExcerpt: z.string(),
        signatures: int,
        policyAction: z
          .string()
          .describe('what a webhook answered so would get: delivered, retry, reject, disable_endpoint'),
        refused: z.string().nullable().describe('why nothing was sent (SendsPaused, MerchantBudgetBusy, ...)'),
        message: z.string(),
      })
      .partial()
      .nullable(),
    applied: z.boolean().nullable().describe('verify: the URL answered 2xx and is your endpoint now'),
  })
  .partial();
const urlBody = z.strictObject({ url: z.string().min(1).max(2048) });
const paceBody = z.strictObject({
  ratePerSecond: z.number().gt(0).describe('requests per second your endpoint takes, across every worker'),
  burst: int.min(1).describe('requests at once above the rate'),
});
const secretShape = z
  .object({
    id: z.string(),
    createdAt: time,
    expiresAt: z.string().nullable().meta({ format: 'date-time' }).describe('null: signs until a rotation replaces it'),
    current: z.boolean(),
  })
  .partial();
const rotateBody = z.strictObject({
  overlapSeconds: int
    .min(0)
    .max(MAX_ROTATION_OVERLAP_MS / 1000)
    .optional()
    .describe('how long the current secret also signs, in seconds (86400 unless given)'),
});
const expireBody = z.strictObject({
  inSeconds: int
    .min(0)
    .max(MAX_ROTATION_OVERLAP_MS / 1000)
    .default(0),
});
const secretIdParam = z.object({ secretId: z.string().min(1).max(100) });
const checkIdParam = z.object({ checkId: z.string().min(1).max(100) });
const webhookIdParam = z.object({ webhookId: z.string().min(1).max(200) });
const listQuery = z.strictObject({
  since: time.optional(),
  until: time.optional(),
  status: z.enum(DELIVERY_STATUSES).optional(),
  eventType: z.string().min(1).max(100).optional(),
  limit: int.min(1).max(500).default(50),
});
const rangeBody = z.strictObject({ since: time, until: time });
const requestIdParam = z.object({ requestId: z.string().min(1).max(100) });
/** What names the call's target for the audit, where its route has one. */
const targetParams = z.object({
  webhookId: z.string().optional(),
  requestId: z.string().optional(),
  checkId: z.string().optional(),
  secretId: z.string().optional(),
});

const errorSchema = jsonSchema(z.object({ error: z.string(), message: z.string(), requestId: z.string() }));
const errors = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [s, errorSchema]));
/** A route's options: its operation names both its audit verb and its OpenAPI operation; the rest is its document. */
const described = (operation: string, summary: string, schema: FastifySchema) => ({
  config: { operation },
  schema: { operationId: operation, summary, ...schema },
});

export async function buildMerchantServer(
  options: MerchantServerOptions,
  now: () => number = Date.now,
): Promise<FastifyInstance> {
  const { pool } = options;
  const budgets = keyBudgets(now);
  const startsWithinSeconds = Math.round((options.resendsStartWithinMs ?? 5 * 60_000) / 1000);
  const checkAnswerWaitMs = options.checkAnswerWaitMs ?? CHECK_ANSWER_WAIT_MS;
  const app = fastify({
    ...(options.https ? { https: options.https } : {}),
    ...fastifyLogging(options.logger ?? log),
    bodyLimit: 16 * 1024,
    // Slow or idle clients are dropped: it faces the internet.
    connectionTimeout: 10_000,
    requestTimeout: 15_000,
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', useDefaults: true } },
  });
  // Answers are serialized as they are (JSON.stringify): the response schemas document them (OpenAPI) and the tests
  // validate real answers against them, rather than a schema-driven serializer reshaping or dropping fields to fit.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: `hold-sweeper merchant API (${options.region})`,
        version: '1',
        description:
          'Your webhooks, their attempts and payloads, resends, your endpoint and the event types it takes. Authorization: Bearer hsk_<key id>_<secret>.',
      },
      components: { securitySchemes: { apiKey: { type: 'http', scheme: 'bearer' } } },
      security: [{ apiKey: [] }],
    },
  });

  const refusals = apiRefusals(app, options.metrics ?? new Registry(), 'merchant', options.region);
  /**
   * The audit row of an identified merchant's call, in `db`: a resend's transaction, or after a read answers. If it
   * cannot be written the call fails (and a resend records nothing).
   */
  const audit = async (request: FastifyRequest, status: number, detail?: string, db: Queryable = pool) => {
    const params = targetParams.safeParse(request.params).data;
    const { merchantId, keyId } = request.merchant!;
    await insertAudit(db, {
      requestId: request.id,
      subject: `merchant:${merchantId}`,
      roles: [`key:${keyId}`],
      verb: `merchant-api.${request.routeOptions.config.operation ?? 'unknown'}`,
      method: request.method,
      path: request.url.split('?')[0]!,
      target: params?.webhookId ?? params?.requestId ?? params?.checkId ?? params?.secretId,
      outcome: status < 400 ? 'ok' : status === 403 ? 'refused' : status < 500 ? 'rejected' : 'failed',
      status,
      detail,
    });
  };

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    if (isOpen(request)) return;
    const presented = /^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1];
    const parsed = presented === undefined ? undefined : parseApiKey(presented);
    if (!parsed)
      throw new Refusal(401, 'Unauthenticated', 'an API key is required: Authorization: Bearer hsk_<key id>_<secret>');
    const key = await ledger.keyForAuth(pool, parsed.id);
    // One answer for an unknown key, a wrong secret and a revoked or expired key: which it was is not the caller's to
    // learn.
    if (!key || key.ended || !secretMatches(parsed.secret, key.secretSha256))
      throw new Refusal(401, 'Unauthenticated', 'the API key is not valid');
    request.merchant = { merchantId: key.merchantId, keyId: key.id };
    const wait = budgets.take(key.id, key.ratePerSecond, key.burst);
    if (wait !== undefined)
      throw new Refusal(429, 'RateLimited', `this key makes at most ${key.ratePerSecond} requests per second`, wait);
    await ledger.touchApiKey(pool, key.id);
  });

  app.setErrorHandler(async (err: FastifyError | Refusal, request, reply) => {
    const status = err instanceof Refusal ? err.status : err.validation ? 400 : (requestErrorStatus(err) ?? 500);
    const name = err instanceof Refusal ? err.name : status < 500 ? 'InvalidRequest' : 'InternalError';
    const message = status >= 500 ? `the request failed; its request id is ${request.id}` : err.message;
    if (status >= 500) request.log.error({ err }, 'merchant API request failed');
    if (err instanceof Refusal && err.retryAfterSeconds !== undefined)
      reply.header('retry-after', String(err.retryAfterSeconds));
    // No key that verifies, or a key past its budget: what anyone can send is counted, never stored.
    if (!request.merchant || status === 401 || status === 429) {
      refusals.refused(request, status, name);
    } else {
      await audit(request, status, `${name}: ${message}`).catch((auditErr: unknown) =>
        request.log.error({ error: auditErr }, 'audit write failed'),
      );
    }
    return reply.status(status).send({ error: name, message, requestId: request.id });
  });
  app.setNotFoundHandler(async (request, reply) => {
    const { status, error, message } = notServed(request, reply);
    await audit(request, status, error);
    return reply.status(status).send({ error, message, requestId: request.id });
  });

  app.get('/healthz', { config: OPEN, schema: { hide: true } }, async () => ({ ok: true }));
  // The portal: its page and assets are open; what it shows comes from the routes below, with the merchant's key.
  // A browser asks for an icon unprompted: answered empty rather than refused, which the page would log as an error.
  app.get('/favicon.ico', { config: OPEN, schema: { hide: true } }, async (_request, reply) =>
    reply.status(204).send(),
  );
  for (const [file, type] of PORTAL_FILES) {
    const body = readFileSync(new URL(`./portal/${file}`, import.meta.url));
    const path = file === 'index.html' ? '/portal' : `/portal/${file}`;
    app.get(path, { config: OPEN, schema: { hide: true } }, async (_request, reply) =>
      reply.headers({ ...PORTAL_HEADERS, 'content-type': type }).send(body),
    );
  }
  app.get('/openapi.json', { config: OPEN, schema: { hide: true } }, async () => app.swagger());

  const merchantOf = (request: FastifyRequest) => request.merchant!.merchantId;
  const notFound = (webhookId: string) => new Refusal(404, 'NotFound', `no webhook ${webhookId}`);

  app.get(
    '/v1/webhooks',
    described('webhooks.list', 'Your webhooks written in [since, until), newest first, each with its attempts.', {
      querystring: jsonSchema(listQuery),
      response: {
        200: jsonSchema(z.object({ items: z.array(z.object(webhookShape).partial()) })),
        ...errors(400, 401, 429),
      },
    }),
    async (request) => {
      const items = await ledger.merchantWebhooks(pool, merchantOf(request), listQuery.parse(request.query));
      await audit(request, 200);
      return { items };
    },
  );

  app.get(
    '/v1/webhooks/:webhookId',
    described(
      'webhooks.get',
      'One of your webhooks: the exact payload it is sent with (sign-checked bytes), its attempts and resends.',
      {
        params: jsonSchema(webhookIdParam),
        response: {
          200: jsonSchema(
            z
              .object({
                ...webhookShape,
                payload: z.string().describe('the request body, byte for byte'),
                resends: z.array(z.object({ resendId: z.string(), policyRun: int, requestedAt: z.string() }).partial()),
              })
              .partial(),
          ),
          ...errors(401, 404, 429),
        },
      },
    ),
    async (request) => {
      const { webhookId } = webhookIdParam.parse(request.params);
      const webhook = await ledger.merchantWebhook(pool, merchantOf(request), webhookId);
      if (!webhook) throw notFound(webhookId);
      await audit(request, 200);
      return webhook;
    },
  );

  const eventTypes = eventTypeCatalog();
  app.get(
    '/v1/event-types',
    described(
      'eventTypes.list',
      'Every event type your endpoint may receive: what it tells, its JSON Schema and an example.',
      {
        response: {
          200: jsonSchema(
            z.object({
              items: z.array(
                z
                  .object({
                    type: z.string(),
                    description: z.string(),
                    subscribable: z.boolean().describe('false: sent whatever your endpoint takes (merchant.ping)'),
                    schema: z.looseObject({}).describe('JSON Schema 2020-12 of the request body'),
                    example: z.looseObject({}),
                  })
                  .partial(),
              ),
            }),
          ),
          ...errors(401, 429),
        },
      },
    ),
    async (request) => {
      await audit(request, 200);
      return { items: eventTypes };
    },
  );

  const endpointOf = async (request: FastifyRequest, db: Queryable = pool) => {
    const endpoint = await ledger.merchantEndpoint(db, merchantOf(request));
    if (!endpoint) throw new Refusal(404, 'NotFound', 'no endpoint');
    return endpoint;
  };

  app.get(
    '/v1/endpoint',
    described(
      'endpoint.get',
      'Your endpoint: its URL, its pace, the event types it takes, and whether sending is on (if not, why).',
      {
        response: { 200: jsonSchema(endpointShape), ...errors(401, 429) },
      },
    ),
    async (request) => {
      const endpoint = await endpointOf(request);
      await audit(request, 200);
      return endpoint;
    },
  );

  app.put(
    '/v1/endpoint/event-types',
    described(
      'endpoint.eventTypes',
      'Choose the event types your endpoint takes. A webhook written after this of a type it does not take is listed as not_subscribed and never sent.',
      {
        body: jsonSchema(eventTypesBody),
        response: { 200: jsonSchema(endpointShape), ...errors(400, 401, 429) },
      },
    ),
    async (request) => {
      const { eventTypes } = eventTypesBody.parse(request.body);
      const chosen = eventTypes === null ? null : [...new Set(eventTypes)].sort();
      return inTransaction(pool, async (tx) => {
        await setMerchantEventTypes(tx, merchantOf(request), chosen);
        await audit(request, 200, `event types: ${chosen?.join(' ') ?? 'every type'}`, tx);
        return endpointOf(request, tx);
      });
    },
  );

  app.put(
    '/v1/endpoint/rate',
    described(
      'endpoint.rate',
      'Declare the pace your endpoint takes, up to the ceiling your provider set: it holds from the next request, across every worker.',
      {
        body: jsonSchema(paceBody),
        response: { 200: jsonSchema(endpointShape), ...errors(400, 401, 429) },
      },
    ),
    async (request) => {
      const { ratePerSecond, burst } = paceBody.parse(request.body);
      return inTransaction(pool, async (tx) => {
        if (!(await declareMerchantPace(tx, merchantOf(request), ratePerSecond, burst))) {
          const { rateCeiling, burstCeiling } = await endpointOf(request, tx);
          throw new Refusal(
            400,
            'AboveCeiling',
            `at most ${rateCeiling} per second and a burst of ${burstCeiling}: ask your provider for more`,
          );
        }
        await audit(request, 200, `rate ${ratePerSecond}/s burst ${burst}`, tx);
        return endpointOf(request, tx);
      });
    },
  );

  /** Records a check of the merchant's endpoint (or a rotation) for a worker, with its audit row. */
  async function recordCheck(
    request: FastifyRequest,
    kind: 'test' | 'verify' | 'rotate',
    url: string,
    rotation?: { replyKey: string; overlapMs: number },
  ) {
    const { merchantId, keyId } = request.merchant!;
    const id = `ck_${randomBytes(10).toString('hex')}`;
    await inTransaction(pool, async (tx) => {
      await ledger.insertEndpointCheck(tx, { id, merchantId, keyId, kind, url, ...rotation });
      await audit(request, 202, `${kind} ${id}`, tx);
    });
    return id;
  }

  /** The check as it stands once a worker finished it, or when the wait is over (`finishedAt` still null). */
  async function awaitCheck(merchantId: string, id: string) {
    const until = now() + checkAnswerWaitMs;
    for (;;) {
      const found = await ledger.merchantEndpointCheck(pool, merchantId, id);
      if (found?.finishedAt || now() >= until) return found;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  /**
   * Records a check of the merchant's endpoint for a worker to send, then waits for its answer: 200 with it, or 202
   * with the check still waiting (`GET /v1/endpoint/checks/{checkId}` follows it).
   */
  async function check(request: FastifyRequest, reply: FastifyReply, kind: 'test' | 'verify', url: string) {
    const id = await recordCheck(request, kind, url);
    const found = await awaitCheck(merchantOf(request), id);
    return reply.status(found?.finishedAt ? 200 : 202).send(found);
  }
  const checkAnswers = { 200: jsonSchema(endpointCheck), 202: jsonSchema(endpointCheck) };

  app.post(
    '/v1/endpoint/test',
    described(
      'endpoint.test',
      'Send your endpoint a signed merchant.ping now, paced and signed as webhooks are; answers what it answered.',
      {
        response: { ...checkAnswers, ...errors(400, 401, 429) },
      },
    ),
    async (request, reply) => {
      if (request.body !== undefined) throw new Refusal(400, 'InvalidRequest', 'a test send takes no body');
      return check(request, reply, 'test', String((await endpointOf(request)).url));
    },
  );

  app.put(
    '/v1/endpoint/url',
    described(
      'endpoint.url',
      'Verify a URL with a signed merchant.ping: if it answers 2xx it is your endpoint from then on (pending webhooks go there from their next attempt), and an endpoint disabled by a 410 is enabled again.',
      {
        body: jsonSchema(urlBody),
        response: { ...checkAnswers, ...errors(400, 401, 429) },
      },
    ),
    async (request, reply) => {
      const { url } = urlBody.parse(request.body);
      try {
        parseEndpoint(merchantOf(request), url, options.endpointRules ?? PRODUCTION_RULES);
      } catch (err) {
        if (err instanceof InvalidEndpointUrl) throw new Refusal(400, err.name, err.message);
        throw err;
      }
      return check(request, reply, 'verify', url);
    },
  );

  app.get(
    '/v1/endpoint/checks/:checkId',
    described('endpoint.checks.get', 'A check of your endpoint you asked for: waiting, or sent and what it answered.', {
      params: jsonSchema(checkIdParam),
      response: { 200: jsonSchema(endpointCheck), ...errors(401, 404, 429) },
    }),
    async (request) => {
      const { checkId } = checkIdParam.parse(request.params);
      const found = await ledger.merchantEndpointCheck(pool, merchantOf(request), checkId);
      if (!found) throw new Refusal(404, 'NotFound', `no check ${checkId}`);
      await audit(request, 200);
      return found;
    },
  );

  app.get(
    '/v1/endpoint/secrets',
    described(
      'secrets.list',
      'Your signing secrets: the current one, and the previous one while it still signs. Never a value.',
      {
        response: { 200: jsonSchema(z.object({ items: z.array(secretShape) })), ...errors(401, 429) },
      },
    ),
    async (request) => {
      const items = await ledger.merchantSecrets(pool, merchantOf(request));
      await audit(request, 200);
      return { items };
    },
  );

  app.post(
    '/v1/endpoint/secrets',
    described(
      'secrets.rotate',
      'A new signing secret, in this answer only: it signs from now on, and the current one also signs until the overlap ends (24 h unless given).',
      {
        body: jsonSchema(rotateBody),
        response: {
          201: jsonSchema(
            z
              .object({
                id: z.string(),
                secret: z.string().describe('whsec_…: shown this once'),
                createdAt: time,
                previousSecret: z
                  .object({ id: z.string(), expiresAt: time })
                  .partial()
                  .nullable()
                  .describe('the secret that also signs until expiresAt'),
              })
              .partial(),
          ),
          ...errors(400, 401, 429, 503),
        },
      },
    ),
    async (request, reply) => {
      const { overlapSeconds } = rotateBody.parse(request.body);
      // The worker writes the secret back encrypted to this key, which lives for this call only: no one reads the row
      // into a secret afterwards, not even this process.
      const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
      const replyKey = publicKey.export({ type: 'spki', format: 'pem' }).toString();
      const merchantId = merchantOf(request);
      const endpoint = await endpointOf(request);
      const id = await recordCheck(request, 'rotate', String(endpoint.url), {
        replyKey,
        overlapMs: (overlapSeconds ?? DEFAULT_ROTATION_OVERLAP_MS / 1000) * 1000,
      });
      const found = await awaitCheck(merchantId, id);
      if (!found?.finishedAt) {
        const refused = { refused: 'NotAnsweredInTime', message: 'no worker rotated it in time: nothing changed' };
        if (await ledger.giveUpEndpointCheck(pool, id, refused))
          throw new Refusal(503, 'RotationNotAnswered', `${refused.message}; ask again`, 5);
      }
      const done = found?.finishedAt ? found : await ledger.merchantEndpointCheck(pool, merchantId, id);
      const result = (done?.result ?? {}) as Record<string, unknown>;
      if (!done?.applied) throw new Refusal(409, String(result.refused ?? 'NotRotated'), String(result.message));
      const secret = privateDecrypt(
        { key: privateKey, oaepHash: 'sha256' },
        Buffer.from(String(result.secretForCaller), 'base64'),
      ).toString('utf8');
      await ledger.forgetCheckResult(pool, id, 'secretForCaller');
      return reply
        .status(201)
        .send({ id: result.secretId, secret, createdAt: result.createdAt, previousSecret: result.previousSecret });
    },
  );

  app.post(
    '/v1/endpoint/secrets/:secretId/expire',
    described(
      'secrets.expire',
      'End your previous secret early: it stops signing in inSeconds (0: now), never later than it was to. The current one ends only by a rotation.',
      {
        params: jsonSchema(secretIdParam),
        body: jsonSchema(expireBody),
        response: { 200: jsonSchema(z.object({ items: z.array(secretShape) })), ...errors(400, 401, 404, 409, 429) },
      },
    ),
    async (request) => {
      const { secretId } = secretIdParam.parse(request.params);
      const { inSeconds } = expireBody.parse(request.body);
      return inTransaction(pool, async (tx) => {
        const said = await expirePreviousSecret(tx, merchantOf(request), secretId, inSeconds * 1000);
        if (said === 'not-found') throw new Refusal(404, 'NotFound', `no secret ${secretId} that still signs`);
        if (said === 'current')
          throw new Refusal(409, 'CurrentSecret', `${secretId} is your current secret: rotate to replace it`);
        await audit(request, 200, `ends ${secretId} in ${inSeconds} s`, tx);
        return { items: await ledger.merchantSecrets(tx, merchantOf(request)) };
      });
    },
  );

  /** Records one resend; throws the refusal a single-webhook call answers with. */
  async function askResend(db: Queryable, request: FastifyRequest, webhookId: string) {
    const { merchantId, keyId } = request.merchant!;
    const requestId = `mr_${randomBytes(10).toString('hex')}`;
    const resendId = `rs_${randomBytes(10).toString('hex')}`;
    const result = await ledger.insertMerchantResendRequest(db, {
      id: requestId,
      merchantId,
      webhookId,
      keyId,
      resendId,
    });
    if (result.recorded) return { requestId, webhookId, resendId, state: 'waiting', startsWithinSeconds };
    if (result.why === 'not-found') throw notFound(webhookId);
    if (result.why === 'already-waiting')
      throw new Refusal(409, 'ResendWaiting', `a resend of ${webhookId} you asked for is waiting to start`);
    throw new Refusal(
      409,
      'NotAtAnEnd',
      `webhook ${webhookId} is ${result.status}: only a delivered, discarded or abandoned webhook is sent again`,
    );
  }

  app.post(
    '/v1/webhooks/:webhookId/resend',
    described(
      'webhooks.resend',
      'Send a webhook at an end again: same webhook id and payload, a fresh signature. Starts within the answer’s seconds.',
      {
        params: jsonSchema(webhookIdParam),
        response: { 202: jsonSchema(resendAsked), ...errors(401, 404, 409, 429) },
      },
    ),
    async (request, reply) => {
      const { webhookId } = webhookIdParam.parse(request.params);
      const asked = await inTransaction(pool, async (tx) => {
        const recorded = await askResend(tx, request, webhookId);
        await audit(request, 202, undefined, tx);
        return recorded;
      });
      return reply.status(202).send(asked);
    },
  );

  app.post(
    '/v1/resends',
    described(
      'resends.range',
      `Send again every webhook of yours at an end written in [since, until), oldest first, at most ${RANGE_MAX} per call.`,
      {
        body: jsonSchema(rangeBody),
        response: {
          202: jsonSchema(
            z
              .object({
                requested: z.array(resendAsked),
                skipped: z.array(z.object({ webhookId: z.string(), why: z.string() }).partial()),
                more: z.boolean().describe('more webhooks match: ask again with since = the last one’s createdAt'),
              })
              .partial(),
          ),
          ...errors(400, 401, 429),
        },
      },
    ),
    async (request, reply) => {
      const { since, until } = rangeBody.parse(request.body);
      const matching = await ledger.merchantWebhooks(pool, merchantOf(request), { since, until, limit: RANGE_MAX + 1 });
      const oldestFirst = matching.slice(0, RANGE_MAX).reverse();
      const requested: unknown[] = [];
      const skipped: { webhookId: string; why: string }[] = [];
      await inTransaction(pool, async (tx) => {
        for (const w of oldestFirst) {
          const webhookId = w.webhookId as string;
          try {
            // Each in its own savepoint: one refused leaves the others recorded.
            requested.push(await inTransaction(tx, (savepoint) => askResend(savepoint, request, webhookId)));
          } catch (err) {
            if (!(err instanceof Refusal)) throw err;
            skipped.push({ webhookId, why: err.message });
          }
        }
        await audit(request, 202, `${requested.length} requested, ${skipped.length} skipped`, tx);
      });
      return reply.status(202).send({ requested, skipped, more: matching.length > RANGE_MAX });
    },
  );

  app.get(
    '/v1/resends/:requestId',
    described('resends.get', 'Where a resend you asked for stands.', {
      params: jsonSchema(requestIdParam),
      response: {
        200: jsonSchema(
          z
            .object({
              id: z.string(),
              webhookId: z.string(),
              resendId: z.string(),
              requestedAt: z.string(),
              startedAt: z.string().nullable(),
              policyRun: int.nullable(),
              webhookStatus: z.string(),
              state: z.string(),
            })
            .partial(),
        ),
        ...errors(401, 404, 429),
      },
    }),
    async (request) => {
      const { requestId } = requestIdParam.parse(request.params);
      const found = await ledger.merchantResendRequest(pool, merchantOf(request), requestId);
      if (!found) throw new Refusal(404, 'NotFound', `no resend request ${requestId}`);
      await audit(request, 200);
      return found;
    },
  );
  return app;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    operation?: string;
  }
}
