/**
 * `POST /processor/events`: the card processor's callbacks about holds, one receiver per region.
 *
 * Each request is verified (Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature` under the
 * processor's secret, the timestamp within five minutes), validated, and recorded in the region's ledger database
 * (processor_events, keyed by the processor's event id forever) before it is answered 202. A duplicate (same id, same
 * body) answers 200 and changes nothing. Recording is one INSERT into a table no ledger transaction locks, bounded by
 * `recordTimeoutMs`: a slow ledger does not slow the answer, and a database that cannot record in time gets a 503 (the
 * processor retries; the event is never acknowledged unrecorded).
 *
 * Anything refused gets a 4xx with a named error and nothing of it is applied. What anyone can send costs the
 * database nothing: a request refused before its signature is checked (wrong path or method, too large, a body it
 * cannot read, unsigned, stale, badly signed) is counted (`hold_sweeper_processor_requests_refused_total`, by reason)
 * and logged by sample, never written. Only a correctly signed request that is still refused (malformed, conflicting: the processor's bug,
 * which someone must read) gets a row in processor_requests_refused, through a pool of its own (`refusalPool`) with a
 * timeout, so refusals never take a connection from recording; rows older than `refusedRetentionMs` are deleted. The
 * headers are checked before the body is read, a declared Content-Length over the limit is answered 413 unread, and
 * the server bounds connections and how long headers and requests may take, checked every second. Fastify, as the
 * APIs: its OpenAPI document written from its routes' schemas (./openapi.ts), each line with the request's id.
 *
 * Applying is not the receiver's job: after answering, it hands the event to its hold's workflow (signal-with-start,
 * src/workflows/hold-events.ts) and marks it dispatched. A receiver killed between recording and handing over, or a
 * Temporal that is down, leaves the event recorded and undispatched: the relay (every `relayIntervalMs`, in every
 * receiver of the region) hands over what is older than `relayAfterMs`. A second hand-over is harmless: the hold's
 * workflow keeps one event per sequence, and the ledger applies each event id once.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import swagger from '@fastify/swagger';
import { SpanKind } from '@opentelemetry/api';
import type { Client } from '@temporalio/client';
import fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type pg from 'pg';
import { holdEventsWorkflowId } from '../contracts/ids.js';
import { processorEventSignal, type ProcessorEventRef } from '../contracts/processor.js';
import type { Region } from '../contracts/regions.js';
import { holdSearchAttributes } from '../contracts/search-attributes.js';
import { holdEventsDetails, holdEventsSummary } from '../contracts/story.js';
import {
  checkWebhookHeaders,
  verifySignature,
  WebhookUnverified,
  type WebhookHeaders,
} from '../delivery/standard-webhooks.js';
import { isOpen, notServed, OPEN, requestErrorStatus } from '../doors.js';
import { inert } from '../delivery/inert-text.js';
import { Counter, Registry } from 'prom-client';
import * as events from '../sql/processor-events.js';
import { every, fastifyLogging, log, type Logger } from '../observability/logger.js';
import { sampledLog } from '../observability/sampled-log.js';
import { tracer } from '../observability/spans.js';
import {
  EVENTS_SCHEMA,
  FIELD_REFUSALS,
  HEALTH_SCHEMA,
  ID_PATTERN,
  OPENAPI_INFO,
  PROCESSOR_EVENT,
  type RefusalCode,
} from './openapi.js';
import type { AcceptedEvent } from '../sql/processor-events.js';

const PROCESSOR_EVENTS_PATH = '/processor/events';

const HEALTH_PATH = '/healthz';
/** Its OpenAPI document, written from its routes' schemas (src/processor/openapi.ts). */
const OPENAPI_PATH = '/openapi.json';

/** A hold event is a few hundred bytes; anything near this is not one. */
const MAX_BODY_BYTES = 64 * 1024;
/** What a refused request keeps of its body, for the operator reading processor_requests_refused. */
const REFUSED_EXCERPT_CHARS = 1_000;

/** Refusals decided before the signature is known good: anyone can cause them, so they are counted, never written. */
const UNSIGNED_REFUSALS: ReadonlySet<RefusalCode> = new Set([
  'NotFound',
  'MethodNotAllowed',
  'PayloadTooLarge',
  'UnreadableBody',
  'MissingSignature',
  'InvalidTimestamp',
  'StaleTimestamp',
  'BadSignature',
]);
/** A signed refusal's row waits this long at most, for a connection and for its INSERT; then it is only logged. */
const REFUSAL_RECORD_TIMEOUT_MS = 1_000;
const DEFAULT_REFUSED_RETENTION_MS = 30 * 86_400_000;
const PRUNE_BATCH = 10_000;
/** How often old refusal rows are deleted. */
const PRUNE_INTERVAL_MS = 3_600_000;

class Refusal extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: RefusalCode,
    message: string,
  ) {
    super(message);
  }
}

/** The pool events are recorded and relayed with: a connection is waited for no longer than an answer may take. */
export const RECORDING_POOL_OPTIONS = { max: 20, connectionTimeoutMillis: 2_000 } as const;
/** The refusal pool: two connections, a short wait for one, and no statement running longer than a second. */
export const REFUSAL_POOL_OPTIONS = { max: 2, connectionTimeoutMillis: 500, statement_timeout: 1_000 } as const;

export interface ReceiverOptions {
  region: Region;
  /** Its own TLS (PROCESSOR_RECEIVER_TLS_*); none behind a TLS-terminating proxy, or in dev. */
  https?: { cert: string | Buffer; key: string | Buffer };
  /** Records events and relays them: only signed, valid events ever use it. */
  pool: pg.Pool;
  /**
   * Records signed refusals and prunes them: small (2 connections) and with a connection timeout in production, so a
   * burst of refusals waits on itself and never on, or for, the connections events are recorded with.
   */
  refusalPool: pg.Pool;
  /** How long a signed refusal's row is kept (PROCESSOR_REFUSED_RETENTION); 30 days by default. */
  refusedRetentionMs?: number;
  /** Connections the server accepts at once; more are closed as they arrive. 512 by default. */
  maxConnections?: number;
  /** The region's Temporal client (a lazy connection is fine: recording does not need Temporal). */
  client: Client;
  taskQueue: string;
  /** The processor's signing key (decoded `whsec_...`). Never logged, never sent anywhere. */
  processorKey: Buffer;
  /** Passed to each hold's event workflow it starts (PROCESSOR_GAP_WAIT); the workflow's default otherwise. */
  gapWaitMs?: number;
  /**
   * How long a started hold-event workflow stays open with nothing to apply; the workflow's default (1 min) otherwise.
   */
  workflowIdleMs?: number;
  recordTimeoutMs?: number;
  relayIntervalMs?: number;
  relayAfterMs?: number;
  /**
   * Where the receiver reports (the process's logger unless given); never a secret or a body. A callback's lines carry
   * its event id (the processor's webhook-id) and, once verified, its trace id.
   */
  logger?: Logger;
}

export interface ProcessorReceiver {
  listen(port: number, host?: string): Promise<AddressInfo>;
  /** Hands over recorded, undispatched events older than `relayAfterMs`; returns how many. */
  relayOnce(): Promise<number>;
  /** Deletes signed-refusal rows older than the retention; returns how many. */
  pruneRefused(): Promise<number>;
  /** What it counts: served on its own metrics address (src/observability/metrics-listener.ts), never here. */
  readonly metrics: Registry;
  /** Its Fastify app: what it serves (`app.printRoutes()`). */
  readonly app: FastifyInstance;
  close(): Promise<void>;
}

export function createProcessorReceiver(options: ReceiverOptions): ProcessorReceiver {
  const { region, pool, refusalPool, client, taskQueue, processorKey } = options;
  const recordTimeoutMs = options.recordTimeoutMs ?? 2_000;
  const relayIntervalMs = options.relayIntervalMs ?? 5_000;
  const relayAfterMs = options.relayAfterMs ?? 5_000;
  const refusedRetentionMs = options.refusedRetentionMs ?? DEFAULT_REFUSED_RETENTION_MS;
  const logger = options.logger ?? log;
  const report = (level: 'info' | 'warn', msg: string, fields: Record<string, unknown>) => logger[level](fields, msg);
  const handingOver = new Set<Promise<unknown>>();

  const metrics = new Registry();
  const refusedTotal = new Counter({
    name: 'hold_sweeper_processor_requests_refused_total',
    help: 'processor callbacks refused (4xx), by reason; only signed ones are also written to processor_requests_refused',
    labelNames: ['region', 'reason'],
    registers: [metrics],
  });
  const eventsTotal = new Counter({
    name: 'hold_sweeper_processor_events_received_total',
    help: 'signed, valid processor events by outcome: recorded, duplicate, not_recorded (503, the processor retries)',
    labelNames: ['region', 'outcome'],
    registers: [metrics],
  });
  const logRefusal = sampledLog((fields) =>
    report('warn', 'processor request refused before its signature was verified (sampled)', fields),
  );
  const reportSampled = (refusal: Refusal) =>
    logRefusal(refusal.code, { region, status: refusal.statusCode, error: refusal.code });

  /** Signal-with-start of the hold's event workflow, then the row is marked dispatched. Failures wait for the relay. */
  async function handOver(ref: ProcessorEventRef & { holdId: string }): Promise<boolean> {
    try {
      // The hold's merchant, when the ledger knows the hold: operators filter a merchant's stopped holds by it.
      const merchantId = await events.merchantOfHold(pool, ref.holdId);
      await client.workflow.signalWithStart('applyHoldEvents', {
        workflowId: holdEventsWorkflowId(region, ref.holdId),
        taskQueue,
        args: [
          {
            region,
            holdId: ref.holdId,
            ...(options.gapWaitMs === undefined ? {} : { gapWaitMs: options.gapWaitMs }),
            ...(options.workflowIdleMs === undefined ? {} : { idleMs: options.workflowIdleMs }),
          },
        ],
        signal: processorEventSignal,
        signalArgs: [{ eventId: ref.eventId, sequence: ref.sequence }],
        typedSearchAttributes: holdSearchAttributes({
          region,
          holdId: ref.holdId,
          ...(merchantId === undefined ? {} : { merchantId }),
        }),
        staticSummary: holdEventsSummary(region, ref.holdId),
        staticDetails: holdEventsDetails(region, ref.holdId),
      });
      await events.markDispatched(pool, [ref.eventId]);
      return true;
    } catch (err) {
      report('warn', 'processor event recorded, hand-over failed: the relay retries', {
        region,
        eventId: ref.eventId,
        holdId: ref.holdId,
        error: (err as Error).message,
      });
      return false;
    }
  }

  /** A hand-over (or a relay's round of them) that close() waits for. */
  const track = <T>(p: Promise<T>): Promise<T> => {
    handingOver.add(p);
    void p.finally(() => handingOver.delete(p)).catch(() => undefined);
    return p;
  };

  /**
   * Answers a refusal; a signed one is also written (its own pool, bounded in time), an unsigned one only counted.
   * `close`: the body was left unread (too large, or of unknown length), so the connection goes with the answer.
   */
  async function refuse(
    request: FastifyRequest,
    reply: FastifyReply,
    refusal: Refusal,
    eventId: string | null,
    body: string | null,
    close = false,
  ): Promise<FastifyReply> {
    if (close) reply.header('connection', 'close');
    void reply.status(refusal.statusCode).send({ error: refusal.code, message: refusal.message });
    refusedTotal.inc({ region, reason: refusal.code });
    if (UNSIGNED_REFUSALS.has(refusal.code)) {
      reportSampled(refusal);
      return reply;
    }
    request.log.warn({ region, status: refusal.statusCode, error: refusal.code, eventId }, 'processor request refused');
    try {
      await withTimeout(
        events.recordRefused(refusalPool, {
          statusCode: refusal.statusCode,
          errorCode: refusal.code,
          message: refusal.message,
          eventId,
          bodyExcerpt: body === null ? null : inert(body.slice(0, REFUSED_EXCERPT_CHARS)),
        }),
        REFUSAL_RECORD_TIMEOUT_MS,
      );
    } catch (err) {
      request.log.warn({ region, error: (err as Error).message }, 'refused processor request not recorded');
    }
    return reply;
  }

  /** 413, the body left unread past the limit, the connection closed with the answer. */
  const tooLarge = (request: FastifyRequest, reply: FastifyReply) =>
    refuse(request, reply, new Refusal(413, 'PayloadTooLarge', `body over ${MAX_BODY_BYTES} bytes`), null, null, true);

  // A processor holds connections open between callbacks; close() must not wait for them. A request that trickles in
  // (a slow or hostile client) is cut off long before a processor's own timeout would matter: Node checks the header
  // and request timeouts every `connectionsCheckingInterval` (30 s unless said), so they are checked every second.
  const limits = {
    keepAliveTimeout: 5_000,
    headersTimeout: 5_000,
    requestTimeout: 10_000,
    connectionsCheckingInterval: 1_000,
  };
  const app = fastify({
    ...fastifyLogging(logger),
    bodyLimit: MAX_BODY_BYTES,
    // Idle keep-alive connections go at close(); a request in flight is answered first.
    forceCloseConnections: 'idle',
    serverFactory: (handler) =>
      options.https ? https.createServer({ ...limits, ...options.https }, handler) : http.createServer(limits, handler),
  });
  app.server.maxConnections = options.maxConnections ?? 512;
  // Fastify's validator never decides: the signature is checked over the raw body first, then the body is parsed by
  // the same schema the document shows, each failure a named refusal; answers are serialized as they are.
  app.setValidatorCompiler(() => () => true);
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  // The signature is over the bytes as sent: the body is kept as text whatever its content type says.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => done(null, body));

  /** The signature headers a request passed with, for its handler. */
  const signedHeaders = new WeakMap<FastifyRequest, WebhookHeaders>();

  // Everything decided before the body is read: the path and method, a declared length over the limit, the signature
  // headers. What is refused here leaves the body unread: one of unknown length (chunked) could go on for as long as
  // the request timeout allows, so its connection is closed instead of drained.
  app.addHook('onRequest', async (request, reply) => {
    if (isOpen(request)) return;
    const unread =
      request.headers['content-length'] === undefined && request.headers['transfer-encoding'] !== undefined;
    const early = (refusal: Refusal) => refuse(request, reply, refusal, null, null, unread);
    // Past the open routes, only POST /processor/events is served: a path or method it does not serve is 404 or 405.
    if (request.is404) {
      const { status, error, message } = notServed(request, reply);
      return early(new Refusal(status, error, message));
    }
    if (Number(request.headers['content-length'] ?? 0) > MAX_BODY_BYTES) return tooLarge(request, reply);
    try {
      signedHeaders.set(
        request,
        checkWebhookHeaders(
          header(request, 'webhook-id'),
          header(request, 'webhook-timestamp'),
          header(request, 'webhook-signature'),
          Math.floor(Date.now() / 1000),
        ),
      );
    } catch (err) {
      if (!(err instanceof WebhookUnverified)) throw err;
      return early(new Refusal(401, err.reason, err.message));
    }
  });

  app.setErrorHandler(async (err: Error & { code?: string }, request, reply) => {
    // A body of unknown length that went past the limit: reading stopped there, and the connection goes.
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return tooLarge(request, reply);
    // A body Fastify could not read (a content type that is not a media type, a length it does not have): the
    // caller's to fix, and its signature, over what was not read, never checked.
    const status = requestErrorStatus(err);
    if (status !== undefined)
      return refuse(request, reply, new Refusal(status, 'UnreadableBody', err.message), null, null, true);
    request.log.warn({ region, error: err.message }, 'processor request failed');
    return reply.status(500).send({ error: 'Internal', message: 'not recorded; retry' });
  });

  void app.register(swagger, { openapi: OPENAPI_INFO });
  void app.register(async (routes) => {
    routes.get(OPENAPI_PATH, { config: OPEN, schema: { hide: true } }, async () => app.swagger());
    routes.get(HEALTH_PATH, { config: OPEN, schema: HEALTH_SCHEMA }, async () => ({ status: 'ok', region }));
    routes.post(PROCESSOR_EVENTS_PATH, { schema: EVENTS_SCHEMA }, async (request, reply) => {
      const signed = signedHeaders.get(request)!;
      const body = (request.body as string | undefined) ?? '';
      try {
        verifySignature(processorKey, signed, body, 'the processor secret');
      } catch (err) {
        if (!(err instanceof WebhookUnverified)) throw err;
        return refuse(request, reply, new Refusal(401, err.reason, err.message), null, null);
      }
      let accepted: AcceptedEvent;
      try {
        accepted = parseEvent(signed.id, body);
      } catch (err) {
        if (!(err instanceof Refusal)) throw err;
        return refuse(request, reply, err, ID_PATTERN.test(signed.id) ? signed.id : null, body);
      }
      // A verified event starts its hold's trace (src/observability/tracing.ts): its recording, and the signal that
      // hands it to the hold's workflow, which the client's interceptor carries on.
      return tracer().startActiveSpan(
        'processor event',
        { kind: SpanKind.SERVER, attributes: { 'hold.id': accepted.holdId, 'processor.event_id': accepted.eventId } },
        async (span) => {
          try {
            return await recordAndHandOver(request, reply, accepted, body);
          } finally {
            span.end();
          }
        },
      );
    });
  });

  async function recordAndHandOver(
    request: FastifyRequest,
    reply: FastifyReply,
    accepted: AcceptedEvent,
    body: string,
  ): Promise<FastifyReply> {
    const { eventId } = accepted;
    let outcome: events.RecordOutcome;
    try {
      outcome = await withTimeout(events.recordEvent(pool, accepted), recordTimeoutMs);
    } catch (err) {
      eventsTotal.inc({ region, outcome: 'not_recorded' });
      request.log.warn(
        { region, eventId, error: (err as Error).message },
        'processor event not recorded: answered 503, the processor retries',
      );
      return reply
        .status(503)
        .send({ error: 'NotRecorded', message: 'the event could not be recorded in time; retry' });
    }
    if (outcome.status === 'conflict')
      return refuse(request, reply, new Refusal(409, 'EventConflict', outcome.why), accepted.eventId, body);
    eventsTotal.inc({ region, outcome: outcome.status });
    void reply
      .status(outcome.status === 'recorded' ? 202 : 200)
      .send({ status: outcome.status, eventId: accepted.eventId });
    request.log.info(
      {
        region,
        eventId: accepted.eventId,
        holdId: accepted.holdId,
        sequence: accepted.sequence,
        type: accepted.eventType,
      },
      outcome.status === 'recorded' ? 'processor event recorded' : 'processor event duplicate: nothing changed',
    );
    if (outcome.status === 'recorded' || !outcome.dispatched) void track(handOver(accepted));
    return reply;
  }

  let relaying = false;
  async function relayOnce(): Promise<number> {
    if (relaying) return 0;
    relaying = true;
    try {
      const due = await events.undispatchedEvents(pool, relayAfterMs, 500);
      let handed = 0;
      for (const ref of due) if (await handOver(ref)) handed++;
      if (due.length > 0) report('info', 'relay handed over recorded events', { region, due: due.length, handed });
      return handed;
    } finally {
      relaying = false;
    }
  }
  const stopRelaying = every(
    relayIntervalMs,
    () => track(relayOnce()),
    (err) => report('warn', 'relay failed', { region, error: err.message }),
  );

  async function pruneRefused(): Promise<number> {
    let deleted = 0;
    for (;;) {
      const n = await events.deleteRefusedBefore(refusalPool, refusedRetentionMs, PRUNE_BATCH);
      deleted += n;
      if (n < PRUNE_BATCH) return deleted;
    }
  }
  const stopPruning = every(PRUNE_INTERVAL_MS, pruneRefused, (err) =>
    report('warn', 'refused-request retention failed', { region, error: err.message }),
  );

  return {
    async listen(port, host = '127.0.0.1') {
      await app.listen({ port, host });
      return app.server.address() as AddressInfo;
    },
    relayOnce,
    pruneRefused,
    metrics,
    app,
    async close() {
      stopRelaying();
      stopPruning();
      await app.close();
      await Promise.allSettled([...handingOver]);
    },
  };
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

async function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`not recorded within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The processor's event, parsed by its schema (src/processor/openapi.ts, `PROCESSOR_EVENT`): a field that fails it is
 * refused by name, the first in FIELD_REFUSALS' order.
 */
export function parseEvent(eventId: string, body: string): AcceptedEvent {
  if (!ID_PATTERN.test(eventId))
    throw new Refusal(400, 'InvalidEventId', 'webhook-id must be 1-128 of [A-Za-z0-9_.:-]');
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new Refusal(400, 'MalformedJson', 'the body is not JSON');
  }
  const read = PROCESSOR_EVENT.safeParse(parsed);
  if (!read.success) {
    const failed = read.error.issues.map((issue) => issue.path.join('.'));
    const fails = (field: string) =>
      failed.some((path) => path === '' || field === path || field.startsWith(`${path}.`));
    const [, code, words] = FIELD_REFUSALS.find(([field]) => fails(field)) ?? FIELD_REFUSALS[0];
    if (code === 'InvalidAmount') {
      // Only a capture's or an increment's amount is read: the event is an object of that type, with data.
      const { type, data } = parsed as { type: string; data: { amount_minor?: unknown } };
      const amount = data.amount_minor;
      const text =
        typeof amount === 'number' && Number.isSafeInteger(amount)
          ? String(amount)
          : typeof amount === 'string'
            ? amount
            : '';
      if (/^-\d+$/.test(text))
        throw new Refusal(
          400,
          'NegativeAmount',
          `data.amount_minor is negative (${text}); a ${type} carries a positive amount`,
        );
      throw new Refusal(400, code, words(type));
    }
    throw new Refusal(400, code, words(''));
  }
  const event = read.data;
  const moves = event.type === 'hold.reversed' ? undefined : event.data;
  return {
    eventId,
    holdId: event.data.hold_id,
    sequence: event.data.sequence,
    eventType: event.type,
    amountMinor: moves ? String(moves.amount_minor) : null,
    currency: moves ? moves.currency : null,
    occurredAt: event.timestamp,
    body,
    bodySha256: createHash('sha256').update(body).digest('hex'),
  };
}
