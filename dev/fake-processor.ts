/**
 * A card processor, as far as our receiver can tell: it signs each callback with the reference Standard Webhooks
 * library (`standardwebhooks`, a fresh timestamp per attempt, the same `webhook-id`), and retries what is not
 * acknowledged (5xx, timeouts, refused connections) as processors do, for as long as it is told to. 4xx ends it.
 * Used by the tests and the chaos run; `npm start` does not need it.
 */
import { Webhook } from 'standardwebhooks';
import type { ProcessorEventType } from '../src/contracts/processor.js';
import type { HoldSeed } from './seed.js';
import { keyOfSecret } from '../src/delivery/standard-webhooks.js';

export interface ProcessorEvent {
  /** The processor's own event id (`webhook-id`). */
  eventId: string;
  holdId: string;
  sequence: number;
  type: ProcessorEventType;
  /** Captured amount or increment; none for a reversal. */
  amountMinor?: number;
  currency?: string;
  occurredAt?: string;
}

interface CallbackResult {
  status: number;
  body: string;
  attempts: number;
}

export class FakeProcessor {
  private readonly webhook: Webhook;

  constructor(
    /** The receiver's `POST /processor/events` URL. */
    readonly url: string,
    secret: string,
  ) {
    this.webhook = new Webhook(secret);
  }

  /** The callback's body: what the processor signs and sends on every attempt, unchanged. */
  static body(e: ProcessorEvent): string {
    const data: Record<string, unknown> = { hold_id: e.holdId, sequence: e.sequence };
    if (e.amountMinor !== undefined) data.amount_minor = e.amountMinor;
    if (e.currency !== undefined) data.currency = e.currency;
    return JSON.stringify({ type: e.type, timestamp: e.occurredAt ?? '2026-12-01T00:00:00.000Z', data });
  }

  /** One signed attempt; `headers` override or add to the signed ones (a test's tampering). */
  async post(
    eventId: string,
    body: string,
    headers: Record<string, string | undefined> = {},
  ): Promise<{ status: number; body: string }> {
    const now = new Date();
    const signed: Record<string, string | undefined> = {
      'content-type': 'application/json',
      'webhook-id': eventId,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': this.webhook.sign(eventId, now, body),
      ...headers,
    };
    const res = await fetch(this.url, {
      method: 'POST',
      body,
      headers: Object.fromEntries(
        Object.entries(signed).filter((entry): entry is [string, string] => entry[1] !== undefined),
      ),
      signal: AbortSignal.timeout(10_000),
    });
    return { status: res.status, body: await res.text() };
  }

  /**
   * Sends `e` until it is acknowledged (2xx) or refused (4xx), retrying the rest every `retryMs`, up to `maxAttempts`.
   */
  async send(e: ProcessorEvent, { maxAttempts = 200, retryMs = 250 } = {}): Promise<CallbackResult> {
    const body = FakeProcessor.body(e);
    let last: { status: number; body: string } = { status: 0, body: '' };
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      try {
        last = await this.post(e.eventId, body);
        if (last.status < 500) return { ...last, attempts: attempt };
      } catch (err) {
        last = { status: 0, body: (err as Error).message };
      }
      await new Promise((resolve) => setTimeout(resolve, retryMs));
    }
    return { ...last, attempts: maxAttempts };
  }
}

/*
 * A processor's night (the chaos run, `npm start`): callbacks about some of the night's holds (captures, reversals,
 * increments, in per-hold sequences), sent while the sweeps release the same holds, with the processor's own bad
 * habits: every event retried until acknowledged, some sent two or three times at once, and each hold's sequence
 * often arriving out of order.
 */

/** A hold's callbacks, in the processor's sequence. Captures are of the hold's full amount or part of it. */
function scriptFor(pick: number, random: () => number): ProcessorEvent['type'][] {
  if (pick < 0.4) return ['hold.captured'];
  if (pick < 0.6) return ['hold.incremented', 'hold.captured'];
  if (pick < 0.8) return ['hold.reversed'];
  return random() < 0.5
    ? ['hold.incremented', 'hold.incremented', 'hold.reversed']
    : ['hold.incremented', 'hold.reversed'];
}

export interface CallbackPlan {
  events: ProcessorEvent[];
  holds: number;
}

/** Callbacks for `share` of `holds`, seeded. */
export function planCallbacks(holds: readonly HoldSeed[], share: number, random: () => number): CallbackPlan {
  const events: ProcessorEvent[] = [];
  let chosen = 0;
  for (const hold of holds) {
    if (random() >= share) continue;
    chosen++;
    scriptFor(random(), random).forEach((type, i) => {
      const amountMinor =
        type === 'hold.reversed'
          ? undefined
          : type === 'hold.incremented'
            ? 1 + Math.floor(random() * 500)
            : Math.max(1, Math.floor(hold.amountMinor * (0.5 + random() / 2)));
      events.push({
        eventId: `evt_${hold.id}_${i + 1}`,
        holdId: hold.id,
        sequence: i + 1,
        type,
        ...(amountMinor === undefined ? {} : { amountMinor, currency: hold.currency }),
      });
    });
  }
  return { events, holds: chosen };
}

export interface CallbackTally {
  events: number;
  /** Requests sent, duplicates and retries included. */
  requests: number;
  duplicates: number;
  /** Events that reached the receiver before an earlier one of the same hold. */
  reordered: number;
  /** Events the receiver refused (4xx): none is expected; each is a bug in the receiver or the plan. */
  refused: string[];
}

/**
 * Sends the plan over `spreadMs` from now: in batches shuffled across holds (so a hold's later sequence often goes
 * first), a third of the events duplicated (sent two or three times at once), each request retried until the
 * receiver acknowledges it (a killed receiver, a restarting database: 503 or no answer, tried again).
 */
export async function sendCallbacks(
  processor: FakeProcessor,
  plan: CallbackPlan,
  spreadMs: number,
  random: () => number,
): Promise<CallbackTally> {
  const tally: CallbackTally = { events: plan.events.length, requests: 0, duplicates: 0, reordered: 0, refused: [] };
  const order = [...plan.events].map((e) => ({ e, key: random() })).sort((a, b) => a.key - b.key);
  const highest = new Map<string, number>();
  for (const { e } of order) {
    if ((highest.get(e.holdId) ?? 0) > e.sequence) tally.reordered++;
    highest.set(e.holdId, Math.max(highest.get(e.holdId) ?? 0, e.sequence));
  }
  const batch = 8;
  const pauseMs = order.length > batch ? spreadMs / Math.ceil(order.length / batch) : 0;
  for (let i = 0; i < order.length; i += batch) {
    await Promise.all(
      order.slice(i, i + batch).map(async ({ e }) => {
        const copies = random() < 0.33 ? 2 + Math.floor(random() * 2) : 1;
        tally.duplicates += copies - 1;
        const answers = await Promise.all(
          Array.from({ length: copies }, () => processor.send(e, { maxAttempts: 2_000, retryMs: 250 })),
        );
        for (const a of answers) {
          tally.requests += a.attempts;
          if (a.status < 200 || a.status >= 300) tally.refused.push(`${e.eventId}: ${a.status} ${a.body}`);
        }
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
  return tally;
}

/** The key the receiver verifies with, from the secret this processor signs with (`whsec_<base64>`). */
export function processorKeyOf(secret: string): Buffer {
  const key = keyOfSecret(secret);
  if (typeof key === 'string') throw new Error(`the processor secret is ${key}`);
  return key;
}
