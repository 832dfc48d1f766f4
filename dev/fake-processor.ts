/**
 * A card processor, as far as our receiver can tell: it signs each callback with the reference Standard Webhooks
 * library (`standardwebhooks`, a fresh timestamp per attempt, the same `webhook-id`), and retries what is not
 * acknowledged (5xx, timeouts, refused connections) as processors do, for as long as it is told to. 4xx ends it.
 * Used by the tests and the chaos run; `npm start` does not need it.
 */
import { Webhook } from 'standardwebhooks';
import type { ProcessorEventType } from '../src/contracts/processor.js';

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

export interface CallbackResult {
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
  async post(eventId: string, body: string, headers: Record<string, string | undefined> = {}): Promise<{ status: number; body: string }> {
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
      headers: Object.fromEntries(Object.entries(signed).filter((entry): entry is [string, string] => entry[1] !== undefined)),
      signal: AbortSignal.timeout(10_000),
    });
    return { status: res.status, body: await res.text() };
  }

  /** Sends `e` until it is acknowledged (2xx) or refused (4xx), retrying the rest every `retryMs`, up to `maxAttempts`. */
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
