/**
 * The webhook delivery policy, declared in one place: which response leads to which action, and the delay before
 * the next attempt. Pure. Its defaults and the names of its failures are part of the contract with the workflow
 * (src/contracts/delivery.ts, src/contracts/failures.ts).
 *
 * | response                                        | action                                              |
 * |-------------------------------------------------|-----------------------------------------------------|
 * | 2xx                                             | delivered                                           |
 * | 408, 425, 429, 5xx, connection error, timeout   | retry: jittered exponential backoff, Retry-After as |
 * |                                                 | a floor (capped at 24 h), until the horizon (3 d)   |
 * | 410                                             | disable the merchant endpoint, quarantine           |
 * | 3xx, other 4xx, anything else                   | reject: quarantine at once, no retry                |
 * | bad URL, forbidden address, missing secret      | quarantine at once (checked before any request)     |
 */
import {
  DEFAULT_DELIVERY_POLICY,
  MAX_ATTEMPT_TIMEOUT_MS,
  MAX_IN_FLIGHT_LIMIT,
  type DeliveryPolicy,
} from '../contracts/delivery.js';

export type AttemptResult =
  | { kind: 'response'; status: number; retryAfter?: string }
  /** Cancelled: the request was aborted because its activity was cancelled (a worker shutting down, a timeout). */
  | { kind: 'error'; errorClass: 'ConnectionError' | 'AttemptTimeout' | 'Cancelled' };

export type DeliveryAction = 'delivered' | 'retry' | 'disable_endpoint' | 'reject';

interface ResponseRule {
  /** How the rule reads in the table above. */
  readonly when: string;
  readonly matches: (result: AttemptResult) => boolean;
  readonly action: DeliveryAction;
}

const status = (test: (code: number) => boolean) => (r: AttemptResult) => r.kind === 'response' && test(r.status);

/** First match wins; the last rule catches everything else. */
const RESPONSE_RULES: readonly ResponseRule[] = [
  { when: '2xx', matches: status((s) => s >= 200 && s < 300), action: 'delivered' },
  {
    when: '408 Request Timeout, 425 Too Early, 429 Too Many Requests',
    matches: status((s) => [408, 425, 429].includes(s)),
    action: 'retry',
  },
  { when: '5xx', matches: status((s) => s >= 500 && s < 600), action: 'retry' },
  {
    when: 'connection error',
    matches: (r) => r.kind === 'error' && r.errorClass === 'ConnectionError',
    action: 'retry',
  },
  { when: 'attempt timeout', matches: (r) => r.kind === 'error' && r.errorClass === 'AttemptTimeout', action: 'retry' },
  { when: 'attempt cancelled', matches: (r) => r.kind === 'error' && r.errorClass === 'Cancelled', action: 'retry' },
  { when: '410 Gone', matches: status((s) => s === 410), action: 'disable_endpoint' },
  { when: '3xx, other 4xx, anything else', matches: () => true, action: 'reject' },
];

export function classifyAttempt(result: AttemptResult): ResponseRule {
  return RESPONSE_RULES.find((rule) => rule.matches(result))!;
}

/** A merchant's `delivery_policy` override that cannot be used; names the key. */
export class InvalidDeliveryPolicyError extends Error {
  override readonly name = 'InvalidDeliveryPolicyError';
  constructor(
    readonly merchantId: string,
    readonly key: string,
    readonly value: unknown,
  ) {
    const expected =
      key === 'attemptTimeoutMs'
        ? `a positive number of milliseconds up to ${MAX_ATTEMPT_TIMEOUT_MS} (the attempt activity's start-to-close is derived from it)`
        : key === 'maxInFlight'
          ? `a whole number of requests from 1 to ${MAX_IN_FLIGHT_LIMIT}`
          : 'a positive number (multiplier >= 1)';
    super(
      `merchant ${merchantId}: delivery_policy.${key}=${JSON.stringify(value)} is invalid; expected ${expected}; fix merchants.delivery_policy`,
    );
  }
}

/** The default policy with a merchant's overrides applied; every key and value is checked. */
export function resolveDeliveryPolicy(merchantId: string, overrides: unknown): DeliveryPolicy {
  if (overrides === null || overrides === undefined) return DEFAULT_DELIVERY_POLICY;
  if (typeof overrides !== 'object' || Array.isArray(overrides))
    throw new InvalidDeliveryPolicyError(merchantId, '(root)', overrides);
  const policy: Record<string, number> = { ...DEFAULT_DELIVERY_POLICY };
  for (const [key, value] of Object.entries(overrides)) {
    if (key === 'maxInFlight') {
      if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > MAX_IN_FLIGHT_LIMIT) {
        throw new InvalidDeliveryPolicyError(merchantId, key, value);
      }
      policy[key] = value as number;
      continue;
    }
    if (!(key in DEFAULT_DELIVERY_POLICY)) throw new InvalidDeliveryPolicyError(merchantId, key, value);
    const min = key === 'backoffMultiplier' ? 1 : 1e-9;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < min)
      throw new InvalidDeliveryPolicyError(merchantId, key, value);
    if (key === 'attemptTimeoutMs' && value > MAX_ATTEMPT_TIMEOUT_MS)
      throw new InvalidDeliveryPolicyError(merchantId, key, value);
    policy[key] = value;
  }
  return Object.freeze(policy) as unknown as DeliveryPolicy;
}

/**
 * Parses a Retry-After header: delay-seconds or an HTTP-date. Returns milliseconds (0 for a date in the past),
 * or undefined when the header is absent or unreadable (then plain backoff applies).
 */
export function parseRetryAfter(header: string | undefined, nowMs: number): number | undefined {
  if (header === undefined) return undefined;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  // An HTTP-date always names a weekday and "GMT"; Date.parse alone accepts too much ("1", "2026").
  if (!/^[A-Za-z]{3},? .*GMT$/.test(value) && !/^[A-Za-z]+, \d{2}-[A-Za-z]{3}-\d{2} .*GMT$/.test(value))
    return undefined;
  const at = Date.parse(value);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}

interface RetryDecision {
  delayMs: number;
  /** For the attempt log: why this delay. */
  reason: string;
}

/**
 * Delay before the next attempt: exponential backoff with equal jitter (a random point in the upper half of
 * the step, so retries from many holds spread out but never come back sooner than half the step), raised to
 * the merchant's Retry-After when that is longer (capped). The server adds no jitter of its own.
 */
export function retryDelay(
  policy: DeliveryPolicy,
  attempt: number,
  random: () => number,
  retryAfterMs?: number,
): RetryDecision {
  const step = Math.min(policy.maxBackoffMs, policy.initialBackoffMs * policy.backoffMultiplier ** (attempt - 1));
  const backoff = Math.round(step / 2 + random() * (step / 2));
  if (retryAfterMs !== undefined) {
    const floor = Math.min(retryAfterMs, policy.retryAfterCapMs);
    if (floor >= backoff) {
      const capped =
        retryAfterMs > policy.retryAfterCapMs ? ` (asked ${Math.round(retryAfterMs / 1000)} s, capped)` : '';
      return { delayMs: floor, reason: `Retry-After ${Math.round(floor / 1000)} s${capped}` };
    }
  }
  return { delayMs: backoff, reason: `backoff attempt ${attempt}` };
}

/**
 * The delivery's retry horizon, which the workflow turns into the activity's schedule-to-close timeout. An
 * unusable override falls back to the default here; the delivery itself then quarantines with the named error.
 */
export function retryHorizonFor(merchantId: string, overrides: unknown): number {
  try {
    return resolveDeliveryPolicy(merchantId, overrides).retryHorizonMs;
  } catch {
    return DEFAULT_DELIVERY_POLICY.retryHorizonMs;
  }
}

/** A webhook as its workflow delivers it: the retry horizon its merchant's policy gives it, not the policy. */
export function withRetryHorizon<T extends { merchantId: string; deliveryPolicy: unknown }>({
  deliveryPolicy,
  ...webhook
}: T) {
  return { ...webhook, retryHorizonMs: retryHorizonFor(webhook.merchantId, deliveryPolicy) };
}
