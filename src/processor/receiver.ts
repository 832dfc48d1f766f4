/**
 * `POST /processor/events`: the card processor's callbacks about holds, one receiver per region.
 *
 * Each request is verified (Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature` under the
 * processor's secret, the timestamp within five minutes), validated, and recorded in the region's ledger database
 * (processor_events, keyed by the processor's event id forever) before it is answered 202. A duplicate (same id, same
 * body) answers 200 and changes nothing. Anything refused gets a 4xx with a named error and a row in
 * processor_requests_refused; nothing of it is applied. Recording is one INSERT into a table no ledger transaction
 * locks, bounded by `recordTimeoutMs`: a slow ledger does not slow the answer, and a database that cannot record in
 * time gets a 503 (the processor retries; the event is never acknowledged unrecorded).
 *
 * Applying is not the receiver's job: after answering, it hands the event to its hold's workflow (signal-with-start,
 * src/workflows/hold-events.ts) and marks it dispatched. A receiver killed between recording and handing over, or a
 * Temporal that is down, leaves the event recorded and undispatched: the relay (every `relayIntervalMs`, in every
 * receiver of the region) hands over what is older than `relayAfterMs`. A second hand-over is harmless: the hold's
 * workflow keeps one event per sequence, and the ledger applies each event id once.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Client } from '@temporalio/client';
import type pg from 'pg';
import { holdEventsWorkflowId } from '../contracts/ids.js';
import { PROCESSOR_EVENT_TYPES, processorEventSignal, type ProcessorEventRef, type ProcessorEventType } from '../contracts/processor.js';
import type { Region } from '../contracts/regions.js';
import { HoldIdKey, MerchantIdKey, RegionKey } from '../contracts/search-attributes.js';
import { holdEventsDetails, holdEventsSummary } from '../contracts/story.js';
import { signature } from '../delivery/signing.js';
import * as events from '../sql/processor-events.js';
import type { AcceptedEvent } from '../sql/processor-events.js';

export const PROCESSOR_EVENTS_PATH = '/processor/events';

/** Standard Webhooks' replay window: a signed request older (or newer) than this is refused. */
const TIMESTAMP_TOLERANCE_SECONDS = 5 * 60;
/** A hold event is a few hundred bytes; anything near this is not one. */
const MAX_BODY_BYTES = 64 * 1024;
/** What a refused request keeps of its body, for the operator reading processor_requests_refused. */
const REFUSED_EXCERPT_CHARS = 1_000;
/** Event ids as processors issue them (`msg_...`, `evt_...`, UUIDs): also part of a workflow's and webhook's id. */
const EVENT_ID_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;
const HOLD_ID_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;

/** Why a request is refused: the `error` of the 4xx body and processor_requests_refused.error_code. */
export type RefusalCode =
  | 'NotFound'
  | 'MethodNotAllowed'
  | 'PayloadTooLarge'
  | 'MissingSignature'
  | 'InvalidTimestamp'
  | 'StaleTimestamp'
  | 'BadSignature'
  | 'InvalidEventId'
  | 'MalformedJson'
  | 'UnknownEventType'
  | 'InvalidHoldId'
  | 'InvalidSequence'
  | 'InvalidAmount'
  | 'NegativeAmount'
  | 'InvalidCurrency'
  | 'InvalidOccurredAt'
  | 'EventConflict';

class Refusal extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: RefusalCode,
    message: string,
  ) {
    super(message);
  }
}

export interface ReceiverOptions {
  region: Region;
  pool: pg.Pool;
  /** The region's Temporal client (a lazy connection is fine: recording does not need Temporal). */
  client: Client;
  taskQueue: string;
  /** The processor's signing key (decoded `whsec_...`). Never logged, never sent anywhere. */
  processorKey: Buffer;
  /** Passed to each hold's event workflow it starts (PROCESSOR_GAP_WAIT); the workflow's default otherwise. */
  gapWaitMs?: number;
  /** How long a started hold-event workflow stays open with nothing to apply; the workflow's default (1 min) otherwise. */
  workflowIdleMs?: number;
  recordTimeoutMs?: number;
  relayIntervalMs?: number;
  relayAfterMs?: number;
  /** Where the receiver reports (JSON lines by default); never receives a secret or a body. */
  log?: (level: 'info' | 'warn', msg: string, fields: Record<string, unknown>) => void;
  /** Seconds since the epoch; tests move it. */
  nowSeconds?: () => number;
}

export interface ProcessorReceiver {
  listen(port: number, host?: string): Promise<AddressInfo>;
  /** Hands over recorded, undispatched events older than `relayAfterMs`; returns how many. */
  relayOnce(): Promise<number>;
  close(): Promise<void>;
}

const defaultLog: NonNullable<ReceiverOptions['log']> = (level, msg, fields) =>
  (level === 'warn' ? console.error : console.log)(JSON.stringify({ level, msg, ...fields }));

export function createProcessorReceiver(options: ReceiverOptions): ProcessorReceiver {
  const { region, pool, client, taskQueue, processorKey } = options;
  const recordTimeoutMs = options.recordTimeoutMs ?? 2_000;
  const relayIntervalMs = options.relayIntervalMs ?? 5_000;
  const relayAfterMs = options.relayAfterMs ?? 5_000;
  const report = options.log ?? defaultLog;
  const nowSeconds = options.nowSeconds ?? (() => Math.floor(Date.now() / 1000));
  const handingOver = new Set<Promise<unknown>>();

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
        typedSearchAttributes: [
          { key: RegionKey, value: region },
          { key: HoldIdKey, value: ref.holdId },
          ...(merchantId === undefined ? [] : [{ key: MerchantIdKey, value: merchantId }]),
        ],
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

  const track = (p: Promise<unknown>) => {
    handingOver.add(p);
    void p.finally(() => handingOver.delete(p));
  };

  async function refuse(res: http.ServerResponse, refusal: Refusal, eventId: string | null, body: string | null): Promise<void> {
    send(res, refusal.statusCode, { error: refusal.code, message: refusal.message });
    report('warn', 'processor request refused', { region, status: refusal.statusCode, error: refusal.code, eventId });
    // Another path or method is not a callback (a scanner, a health probe): answered, not recorded as one.
    if (refusal.code === 'NotFound' || refusal.code === 'MethodNotAllowed') return;
    try {
      await events.recordRefused(pool, {
        statusCode: refusal.statusCode,
        errorCode: refusal.code,
        message: refusal.message,
        eventId,
        bodyExcerpt: body === null ? null : body.slice(0, REFUSED_EXCERPT_CHARS).replaceAll('\u0000', ''),
      });
    } catch (err) {
      report('warn', 'refused processor request not recorded', { region, error: (err as Error).message });
    }
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0];
    if (path !== PROCESSOR_EVENTS_PATH) return refuse(res, new Refusal(404, 'NotFound', `only POST ${PROCESSOR_EVENTS_PATH} is served`), null, null);
    if (req.method !== 'POST') return refuse(res, new Refusal(405, 'MethodNotAllowed', `${req.method} is not allowed; use POST`), null, null);
    const body = await readBody(req);
    if (body === undefined) return refuse(res, new Refusal(413, 'PayloadTooLarge', `body over ${MAX_BODY_BYTES} bytes`), null, null);
    const eventId = header(req, 'webhook-id');
    let accepted: AcceptedEvent;
    try {
      verify(eventId, header(req, 'webhook-timestamp'), header(req, 'webhook-signature'), body);
      accepted = parseEvent(eventId!, body);
    } catch (err) {
      if (!(err instanceof Refusal)) throw err;
      return refuse(res, err, eventId && EVENT_ID_PATTERN.test(eventId) ? eventId : null, body);
    }

    let outcome: events.RecordOutcome;
    try {
      outcome = await withTimeout(events.recordEvent(pool, accepted), recordTimeoutMs);
    } catch (err) {
      report('warn', 'processor event not recorded: answered 503, the processor retries', { region, eventId, error: (err as Error).message });
      return send(res, 503, { error: 'NotRecorded', message: 'the event could not be recorded in time; retry' });
    }
    if (outcome.status === 'conflict') return refuse(res, new Refusal(409, 'EventConflict', outcome.why), accepted.eventId, body);
    send(res, outcome.status === 'recorded' ? 202 : 200, { status: outcome.status, eventId: accepted.eventId });
    report('info', outcome.status === 'recorded' ? 'processor event recorded' : 'processor event duplicate: nothing changed', {
      region,
      eventId: accepted.eventId,
      holdId: accepted.holdId,
      sequence: accepted.sequence,
      type: accepted.eventType,
    });
    if (outcome.status === 'recorded' || !outcome.dispatched) track(handOver(accepted));
  }

  function verify(id: string | undefined, timestamp: string | undefined, signatures: string | undefined, body: string): void {
    if (!id || !timestamp || !signatures) {
      throw new Refusal(401, 'MissingSignature', 'webhook-id, webhook-timestamp and webhook-signature are required (Standard Webhooks)');
    }
    if (!/^\d{1,12}$/.test(timestamp)) throw new Refusal(401, 'InvalidTimestamp', 'webhook-timestamp must be seconds since the epoch');
    if (Math.abs(nowSeconds() - Number(timestamp)) > TIMESTAMP_TOLERANCE_SECONDS) {
      throw new Refusal(401, 'StaleTimestamp', `webhook-timestamp is more than ${TIMESTAMP_TOLERANCE_SECONDS} s from now`);
    }
    const expected = Buffer.from(signature(processorKey, id, Number(timestamp), body).slice('v1,'.length), 'base64');
    const matches = signatures
      .split(' ')
      .filter((s) => s.startsWith('v1,'))
      .some((s) => {
        const given = Buffer.from(s.slice('v1,'.length), 'base64');
        return given.length === expected.length && timingSafeEqual(given, expected);
      });
    if (!matches) throw new Refusal(401, 'BadSignature', 'no v1 signature in webhook-signature matches the processor secret');
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err) => {
      report('warn', 'processor request failed', { region, error: (err as Error).message });
      if (!res.headersSent) send(res, 500, { error: 'Internal', message: 'not recorded; retry' });
    });
  });
  // A processor holds connections open between callbacks; close() must not wait for them. A request that trickles in
  // (a slow or hostile client) is cut off long before a processor's own timeout would matter.
  server.keepAliveTimeout = 5_000;
  server.headersTimeout = 5_000;
  server.requestTimeout = 10_000;

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
  const relayTimer = setInterval(() => {
    relayOnce().catch((err) => report('warn', 'relay failed', { region, error: (err as Error).message }));
  }, relayIntervalMs);
  relayTimer.unref();

  return {
    listen: (port, host = '127.0.0.1') =>
      new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => resolve(server.address() as AddressInfo));
      }),
    relayOnce,
    async close() {
      clearInterval(relayTimer);
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      });
      await Promise.allSettled([...handingOver]);
    },
  };
}

function header(req: http.IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function send(res: http.ServerResponse, status: number, body: Record<string, unknown>): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** The body as text, or undefined when it is over MAX_BODY_BYTES (the rest is drained, not buffered). */
async function readBody(req: http.IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= MAX_BODY_BYTES) chunks.push(chunk);
  }
  return size > MAX_BODY_BYTES ? undefined : Buffer.concat(chunks).toString('utf8');
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
 * The processor's event, checked field by field: `{ type, timestamp, data: { hold_id, sequence, amount_minor,
 * currency } }`, where a capture and an increment carry a positive amount and a currency, and a reversal neither.
 */
export function parseEvent(eventId: string, body: string): AcceptedEvent {
  if (!EVENT_ID_PATTERN.test(eventId)) throw new Refusal(400, 'InvalidEventId', 'webhook-id must be 1-128 of [A-Za-z0-9_.:-]');
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new Refusal(400, 'MalformedJson', 'the body is not JSON');
  }
  const event = (parsed && typeof parsed === 'object' ? parsed : {}) as Record<string, unknown>;
  const data = (event.data && typeof event.data === 'object' ? event.data : {}) as Record<string, unknown>;
  const type = event.type;
  if (typeof type !== 'string' || !(PROCESSOR_EVENT_TYPES as readonly string[]).includes(type)) {
    throw new Refusal(400, 'UnknownEventType', `type must be one of ${PROCESSOR_EVENT_TYPES.join(', ')}`);
  }
  const holdId = data.hold_id;
  if (typeof holdId !== 'string' || !HOLD_ID_PATTERN.test(holdId))
    throw new Refusal(400, 'InvalidHoldId', 'data.hold_id must be 1-128 of [A-Za-z0-9_.:-]');
  const sequence = data.sequence;
  if (typeof sequence !== 'number' || !Number.isInteger(sequence) || sequence < 1 || sequence > 2 ** 31 - 1) {
    throw new Refusal(400, 'InvalidSequence', 'data.sequence must be a positive integer');
  }
  const occurredAt = typeof event.timestamp === 'string' ? event.timestamp : undefined;
  if (!occurredAt || Number.isNaN(Date.parse(occurredAt))) throw new Refusal(400, 'InvalidOccurredAt', 'timestamp must be an ISO 8601 time');

  let amountMinor: string | null = null;
  let currency: string | null = null;
  if (type !== 'hold.reversed') {
    const amount = data.amount_minor;
    const text = typeof amount === 'number' && Number.isSafeInteger(amount) ? String(amount) : typeof amount === 'string' ? amount : '';
    if (/^-\d+$/.test(text)) throw new Refusal(400, 'NegativeAmount', `data.amount_minor is negative (${text}); a ${type} carries a positive amount`);
    if (!/^\d{1,18}$/.test(text) || BigInt(text) === 0n) {
      throw new Refusal(400, 'InvalidAmount', `data.amount_minor must be a positive integer of minor units for ${type}`);
    }
    amountMinor = text;
    if (typeof data.currency !== 'string' || !/^[A-Z]{3}$/.test(data.currency))
      throw new Refusal(400, 'InvalidCurrency', 'data.currency must be an ISO 4217 code');
    currency = data.currency;
  }
  return {
    eventId,
    holdId,
    sequence,
    eventType: type as ProcessorEventType,
    amountMinor,
    currency,
    occurredAt,
    body,
    bodySha256: createHash('sha256').update(body).digest('hex'),
  };
}
