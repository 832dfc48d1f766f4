/**
 * The processor receiver's routes as its OpenAPI document says them (served at `GET /openapi.json`, written by
 * @fastify/swagger from these schemas, like the APIs'): what the card processor sends, as receiver.ts reads it, and
 * every answer it can get. The schemas document; the receiver's own checks decide (receiver.ts turns Fastify's
 * validation off). test/integration/receiver-edges.test.ts validates the receiver's real answers against the document.
 */
import { PROCESSOR_EVENT_TYPES } from '../contracts/processor.js';

const refusal = (codes: readonly string[], description: string) => ({
  description,
  type: 'object',
  additionalProperties: false,
  required: ['error', 'message'],
  properties: { error: { type: 'string', enum: codes }, message: { type: 'string' } },
});

const answered = (status: 'recorded' | 'duplicate', description: string) => ({
  description,
  type: 'object',
  additionalProperties: false,
  required: ['status', 'eventId'],
  properties: { status: { const: status }, eventId: { type: 'string' } },
});

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
    200: {
      description: 'Serving.',
      type: 'object',
      required: ['status', 'region'],
      properties: { status: { const: 'ok' }, region: { type: 'string' } },
    },
  },
};

export const EVENTS_SCHEMA = {
  operationId: 'processorEvents.record',
  summary: 'One processor event about a hold.',
  headers: {
    type: 'object',
    required: ['webhook-id', 'webhook-timestamp', 'webhook-signature'],
    properties: {
      'webhook-id': {
        type: 'string',
        pattern: '^.{1,256}$',
        description: 'the event id (1-128 of [A-Za-z0-9_.:-]); a resend of the same event carries the same id',
      },
      'webhook-timestamp': {
        type: 'string',
        pattern: '^\\d{1,12}$',
        description: 'seconds since the epoch, within 5 minutes of the receiver’s clock',
      },
      'webhook-signature': {
        type: 'string',
        pattern: '^.+$',
        description: 'v1,<base64 HMAC-SHA256 of id.timestamp.body>, space-separated',
      },
    },
  },
  body: {
    type: 'object',
    required: ['type', 'timestamp', 'data'],
    properties: {
      type: { type: 'string', enum: PROCESSOR_EVENT_TYPES },
      timestamp: { type: 'string', format: 'date-time', description: 'when it happened at the processor (RFC 3339)' },
      data: {
        type: 'object',
        required: ['hold_id', 'sequence'],
        properties: {
          hold_id: { type: 'string', pattern: '^[A-Za-z0-9_.:-]{1,128}$' },
          sequence: { type: 'integer', minimum: 1, maximum: 2147483647, description: 'per hold, from 1, no gaps' },
          amount_minor: {
            oneOf: [
              { type: 'integer', minimum: 1 },
              { type: 'string', pattern: '^\\d{1,18}$' },
            ],
            description: 'minor units; captures and increments only',
          },
          currency: { type: 'string', pattern: '^[A-Z]{3}$', description: 'ISO 4217; captures and increments only' },
        },
      },
    },
  },
  response: {
    202: answered('recorded', 'Recorded in the ledger; applied to the hold in order.'),
    200: answered('duplicate', 'This event id was recorded before with the same body: nothing changed.'),
    400: refusal(
      [
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
      'Signed, but not an event this receiver takes: recorded as refused, never applied. UnreadableBody: a body that ' +
        'ends before its Content-Length, its signature never checked: counted, not recorded.',
    ),
    401: refusal(
      ['MissingSignature', 'InvalidTimestamp', 'StaleTimestamp', 'BadSignature'],
      'Not signed by the processor’s secret, or too old.',
    ),
    404: refusal(['NotFound'], 'Only POST /processor/events is served.'),
    405: refusal(['MethodNotAllowed'], 'Only POST (the `Allow` header says so).'),
    409: refusal(
      ['EventConflict'],
      'This event id was recorded before with another body, or the hold’s sequence says otherwise.',
    ),
    413: refusal(['PayloadTooLarge'], 'Over 64 KiB.'),
    415: refusal(['UnreadableBody'], 'A Content-Type that is not a media type: the body is not read, nor recorded.'),
    500: refusal(['Internal'], 'Not recorded: retry.'),
    503: refusal(['NotRecorded'], 'The ledger did not record it in time: retry.'),
  },
};
