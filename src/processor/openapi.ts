/**
 * The processor receiver's routes, declared once: what the card processor sends, and every answer it can get. The
 * event's schema is what the receiver parses a signed body with (receiver.ts, `parseEvent`), and the OpenAPI document
 * (`GET /openapi.json`, written by @fastify/swagger, like the APIs') is written from the same declarations.
 * test/integration/receiver-edges.test.ts validates the receiver's real answers against the document.
 */
import { z } from 'zod';
import { PROCESSOR_EVENT_TYPES } from '../contracts/processor.js';
import { jsonSchema } from '../doors.js';

/** Event and hold ids as processors issue them (`evt_...`, UUIDs): also part of a workflow's and webhook's id. */
export const ID_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

/**
 * RFC 3339's date-time exactly (section 5.6), each field in its range, the day in its month, years 0001-9999: what
 * PostgreSQL's timestamptz takes. `Date.parse` is not the check: it takes "1", "Nov 30 2026" and "2026-02-30", which
 * the ledger then refuses (the receiver would answer 503 to the same event for ever).
 */
export function isRfc3339(text: string): boolean {
  const m = RFC3339.exec(text);
  if (!m) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const daysInMonth = new Date(Date.UTC(2000 + (year % 400), month, 0)).getUTCDate();
  const offsetOk = m[8] === undefined || (Number(m[9]) <= 23 && Number(m[10]) <= 59);
  return (
    year >= 1 &&
    month >= 1 &&
    month <= 12 &&
    day >= 1 &&
    day <= daysInMonth &&
    hour <= 23 &&
    minute <= 59 &&
    second <= 60 &&
    offsetOk
  );
}

const holdAndSequence = {
  hold_id: z.string().regex(ID_PATTERN),
  sequence: z
    .int()
    .min(1)
    .max(2 ** 31 - 1)
    .describe('per hold, from 1, no gaps'),
};
const timestamp = z
  .string()
  .refine(isRfc3339)
  .meta({ format: 'date-time' })
  .describe('when it happened at the processor (RFC 3339)');

/** A capture or an increment: they move money, so they carry a positive amount and its currency. */
const moving = <const T extends string>(type: T) =>
  z.looseObject({
    type: z.literal(type),
    timestamp,
    data: z.looseObject({
      ...holdAndSequence,
      amount_minor: z
        .union([
          z.int().min(1),
          z
            .string()
            .regex(/^\d{1,18}$/, { abort: true })
            .refine((text) => BigInt(text) > 0n),
        ])
        .describe('minor units, more than 0: a JSON integer, or its digits as a string'),
      currency: z
        .string()
        .regex(/^[A-Z]{3}$/)
        .describe('ISO 4217'),
    }),
  });

/**
 * The processor's event: `{ type, timestamp, data: { hold_id, sequence, amount_minor, currency } }`, where a capture
 * and an increment carry a positive amount and a currency, and a reversal neither (what it carries besides is not
 * read). Other fields are the processor's own: kept in the recorded body, not read.
 */
export const PROCESSOR_EVENT = z.discriminatedUnion('type', [
  moving('hold.captured'),
  moving('hold.incremented'),
  z.looseObject({ type: z.literal('hold.reversed'), timestamp, data: z.looseObject(holdAndSequence) }),
]);

/**
 * Every refusal the receiver answers, by status: the codes its `error` may carry and what its document says of them.
 * The receiver refuses with these codes only (`RefusalCode`), so none is missing from the document.
 */
const REFUSALS = {
  400: {
    codes: [
      'InvalidEventId',
      'MalformedJson',
      'UnknownEventType',
      'InvalidHoldId',
      'InvalidSequence',
      'InvalidOccurredAt',
      'NegativeAmount',
      'InvalidAmount',
      'InvalidCurrency',
      'UnreadableBody',
    ],
    description:
      'Signed, but not an event this receiver takes: recorded as refused, never applied. UnreadableBody: a body that ' +
      'ends before its Content-Length, its signature never checked: counted, not recorded.',
  },
  401: {
    codes: ['MissingSignature', 'InvalidTimestamp', 'StaleTimestamp', 'BadSignature'],
    description: 'Not signed by the processor’s secret, or too old.',
  },
  404: { codes: ['NotFound'], description: 'Only POST /processor/events is served.' },
  405: { codes: ['MethodNotAllowed'], description: 'Only POST (the `Allow` header says so).' },
  409: {
    codes: ['EventConflict'],
    description: 'This event id was recorded before with another body, or the hold’s sequence says otherwise.',
  },
  413: { codes: ['PayloadTooLarge'], description: 'Over 64 KiB.' },
  415: {
    codes: ['UnreadableBody'],
    description: 'A Content-Type that is not a media type: the body is not read, nor recorded.',
  },
} as const;
/** Why a request is refused: the `error` of the 4xx body and processor_requests_refused.error_code. */
export type RefusalCode = (typeof REFUSALS)[keyof typeof REFUSALS]['codes'][number];

/**
 * What a field that fails its schema is refused as, in the order the receiver names them (the first failing one is
 * the answer), by the field's path in the event. A failure at a path that contains a field fails that field too: an
 * event that is not an object has no type, and `data` that is not one has no hold id. An amount's words name the
 * event's type, and a negative one is refused as such (parseEvent).
 */
const ID_WORDS = 'must be 1-128 of [A-Za-z0-9_.:-]';
type FieldRefusal = readonly [
  field: string,
  code: (typeof REFUSALS)[400]['codes'][number],
  words: (type: string) => string,
];
export const FIELD_REFUSALS: readonly [FieldRefusal, ...FieldRefusal[]] = [
  ['type', 'UnknownEventType', () => `type must be one of ${PROCESSOR_EVENT_TYPES.join(', ')}`],
  ['data.hold_id', 'InvalidHoldId', () => `data.hold_id ${ID_WORDS}`],
  ['data.sequence', 'InvalidSequence', () => 'data.sequence must be a positive integer'],
  ['timestamp', 'InvalidOccurredAt', () => 'timestamp must be an RFC 3339 date-time, e.g. 2026-11-30T02:00:00Z'],
  [
    'data.amount_minor',
    'InvalidAmount',
    (type: string) => `data.amount_minor must be a positive integer of minor units for ${type}`,
  ],
  ['data.currency', 'InvalidCurrency', () => 'data.currency must be an ISO 4217 code'],
];

const refusal = (codes: readonly [string, ...string[]], description: string) =>
  jsonSchema(z.strictObject({ error: z.enum(codes), message: z.string() }).describe(description));

const answered = (status: 'recorded' | 'duplicate', description: string) =>
  jsonSchema(z.strictObject({ status: z.literal(status), eventId: z.string() }).describe(description));

export const OPENAPI_INFO = {
  openapi: '3.1.0',
  info: {
    title: 'hold-sweeper processor receiver',
    version: '1',
    description:
      'Card-processor callbacks about holds, signed with Standard Webhooks (the processor’s secret). Recorded before answered: ' +
      'a 202 or 200 means the event is in the ledger; anything else is retried by the processor (4xx refusals are not applied).',
  },
};

export const HEALTH_SCHEMA = {
  summary: 'Up.',
  operationId: 'health',
  response: {
    200: jsonSchema(z.object({ status: z.literal('ok'), region: z.string() }).describe('Serving.')),
  },
};

export const EVENTS_SCHEMA = {
  operationId: 'processorEvents.record',
  summary: 'One processor event about a hold.',
  headers: jsonSchema(
    z.object({
      'webhook-id': z
        .string()
        .regex(/^.{1,256}$/)
        .describe('the event id (1-128 of [A-Za-z0-9_.:-]); a resend of the same event carries the same id'),
      'webhook-timestamp': z
        .string()
        .regex(/^\d{1,12}$/)
        .describe('seconds since the epoch, within 5 minutes of the receiver’s clock'),
      'webhook-signature': z
        .string()
        .regex(/^.+$/)
        .describe('v1,<base64 HMAC-SHA256 of id.timestamp.body>, space-separated'),
    }),
  ),
  body: jsonSchema(PROCESSOR_EVENT),
  response: {
    202: answered('recorded', 'Recorded in the ledger; applied to the hold in order.'),
    200: answered('duplicate', 'This event id was recorded before with the same body: nothing changed.'),
    ...Object.fromEntries(
      Object.entries(REFUSALS).map(([status, { codes, description }]) => [status, refusal(codes, description)]),
    ),
    500: refusal(['Internal'], 'Not recorded: retry.'),
    503: refusal(['NotRecorded'], 'The ledger did not record it in time: retry.'),
  },
};
