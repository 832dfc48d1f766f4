/**
 * The catalog of event types a merchant's endpoint receives: one schema per type, what it tells, and one example. The
 * merchant API serves it as JSON Schema (`GET /v1/event-types`), and the tests parse every body the fake merchants
 * receive with it, so what the catalog says and what is sent cannot drift apart. The payloads are composed by
 * `enqueueWebhook` (src/sql/deliveries.ts: a release's, a processor event's) and by `merchant ping`.
 */
import { z } from 'zod';
import { HOLD_RELEASED_EVENT, MERCHANT_PING_EVENT } from '../contracts/delivery.js';
import { HOLD_EVENT_WEBHOOK_TYPES as EVENT } from '../contracts/processor.js';
import { REGIONS } from '../contracts/regions.js';

const time = z.iso.datetime();
const int = z.number().int();
const webhookSequence = int.min(1).describe("the hold's webhooks, numbered in the order they were written, from 1");
const currency = z.string().regex(/^[A-Z]{3}$/);
const ledgerEntryId = z.string().regex(/^\d+$/).describe('the ledger entry that moved the money');

/** `{type, timestamp, data}`: every event's envelope. Published without `additionalProperties: false`. */
const envelope = <const T extends string>(type: T, data: z.ZodRawShape) =>
  z.object({ type: z.literal(type), timestamp: time, data: z.object(data) });

/** A processor event's webhook: what the event did to the hold, and the hold as it left it. */
const holdEvent = <const T extends string>(type: T, amount: z.ZodType, holdState: z.ZodType) =>
  envelope(type, {
    hold_id: z.string(),
    merchant_id: z.string(),
    sequence: webhookSequence,
    processor_event_id: z.string(),
    processor_sequence: int.min(1).describe("the processor's sequence of this hold's events"),
    amount_minor: amount,
    hold_amount_minor: int.describe("the hold's amount after the event"),
    currency,
    hold_state: holdState,
    outcome: z.literal(type.slice('hold.'.length)),
    occurred_at: time.describe('when it happened at the processor'),
    ledger_entry_id: ledgerEntryId,
  });

const eventExample = (type: string, data: Record<string, unknown>) => ({
  type,
  timestamp: '2026-12-01T10:02:12.004117Z',
  data: {
    hold_id: 'h_123',
    merchant_id: 'm_us_03',
    sequence: 1,
    processor_event_id: 'evt_9f2',
    processor_sequence: 1,
    amount_minor: 4200,
    hold_amount_minor: 4200,
    currency: 'USD',
    ...data,
    outcome: type.slice('hold.'.length),
    occurred_at: '2026-12-01T10:02:11.000000Z',
    ledger_entry_id: '913',
  },
});

interface EventType {
  type: string;
  description: string;
  schema: z.ZodType;
  example: unknown;
}

export const EVENT_TYPES: readonly EventType[] = [
  {
    type: HOLD_RELEASED_EVENT,
    description: 'A hold expired and was released: its amount is available again.',
    schema: envelope(HOLD_RELEASED_EVENT, {
      hold_id: z.string(),
      amount_minor: int,
      currency,
      merchant_id: z.string(),
      released_at: time,
      ledger_entry_id: ledgerEntryId,
      sequence: webhookSequence,
    }),
    example: {
      type: HOLD_RELEASED_EVENT,
      timestamp: '2026-11-30T10:44:33.120391Z',
      data: {
        hold_id: 'h_123',
        amount_minor: 12345,
        currency: 'USD',
        merchant_id: 'm_us_03',
        released_at: '2026-11-30T10:44:33.120391Z',
        ledger_entry_id: '812',
        sequence: 1,
      },
    },
  },
  {
    type: EVENT.captured,
    description: 'The processor captured the hold (amount_minor): the hold is final, the rest of it is available.',
    schema: holdEvent(EVENT.captured, int, z.literal('captured')),
    example: eventExample(EVENT.captured, { amount_minor: 4000, hold_state: 'captured' }),
  },
  {
    type: EVENT.reversed,
    description: 'The processor reversed the hold: its amount is available again, the hold is final.',
    schema: holdEvent(EVENT.reversed, z.null(), z.literal('reversed')),
    example: eventExample(EVENT.reversed, { amount_minor: null, hold_state: 'reversed' }),
  },
  {
    type: EVENT.incremented,
    description: 'The processor added amount_minor to the hold, which stays active.',
    schema: holdEvent(EVENT.incremented, int, z.literal('active')),
    example: eventExample(EVENT.incremented, { amount_minor: 800, hold_amount_minor: 5000, hold_state: 'active' }),
  },
  {
    type: EVENT.late_captured,
    description:
      'A capture that came after the hold was released or reversed: amount_minor is taken from the available balance.',
    schema: holdEvent(EVENT.late_captured, int, z.enum(['released', 'reversed'])),
    example: eventExample(EVENT.late_captured, { sequence: 2, hold_state: 'released' }),
  },
  {
    type: MERCHANT_PING_EVENT,
    description: 'A check of the endpoint an operator sent (`merchant ping`): about no hold; answer 2xx.',
    schema: envelope(MERCHANT_PING_EVENT, { merchant_id: z.string(), region: z.enum(REGIONS) }),
    example: {
      type: MERCHANT_PING_EVENT,
      timestamp: '2026-12-01T09:00:00.000Z',
      data: { merchant_id: 'm_us_03', region: 'us' },
    },
  },
];

/** What an endpoint can choose to take: every type the ledger writes (a ping is a check, always sent when asked). */
export const SUBSCRIBABLE_EVENT_TYPES = EVENT_TYPES.map((t) => t.type).filter((t) => t !== MERCHANT_PING_EVENT);

/** The catalog as the merchant API answers it: each schema as JSON Schema (2020-12), as a receiver may validate. */
export const eventTypeCatalog = () =>
  EVENT_TYPES.map(({ schema, ...rest }) => ({
    ...rest,
    subscribable: rest.type !== MERCHANT_PING_EVENT,
    schema: z.toJSONSchema(schema, { io: 'input' }),
  }));
