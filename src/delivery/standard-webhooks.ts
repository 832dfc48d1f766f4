/**
 * Standard Webhooks (https://www.standardwebhooks.com/), both sides, in one place: signing what we send merchants
 * (the delivery activity, `merchant ping`) and verifying what the processor sends us (src/processor/receiver.ts).
 * A request carries `webhook-id`, `webhook-timestamp` (seconds) and `webhook-signature`:
 * `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`, several space-separated while a secret rotates.
 * Secrets are `whsec_<base64>` (the prefix is optional on input). Tested both ways against the reference library
 * (test/unit/standard-webhooks.test.ts).
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { SecretUnsealFailed, type SecretsAtRest } from './secret-box.js';

/**
 * No signing secret for the merchant, one that is not base64, or a sealed one that does not open here (its
 * SecretUnsealFailed is the cause): a named error that never prints it. All three quarantine as `missing_secret`.
 */
export class MissingSigningSecret extends Error {
  override readonly name = 'MissingSigningSecret';
  constructor(
    readonly merchantId: string,
    readonly problem: 'missing' | 'undecodable' | 'unopenable',
    options?: ErrorOptions,
  ) {
    super(
      {
        missing: `merchant ${merchantId} has no signing secret; rotate one in (merchant rotate-secret)`,
        undecodable: `merchant ${merchantId}'s signing secret does not decode; it must be whsec_<base64> of at least 16 bytes`,
        unopenable:
          `${(options?.cause as Error | undefined)?.message ?? `merchant ${merchantId}'s signing secret does not open`} ` +
          '(a secret that does not open is handled as a missing one: missing_secret)',
      }[problem],
      options,
    );
  }
}

/** Shortest key accepted: Standard Webhooks secrets are 24–64 random bytes; 16 rules out typos and stubs. */
const MIN_SECRET_BYTES = 16;

/** The key in a `whsec_<base64>` secret (the prefix optional), or why there is none. Never says what it read. */
export function keyOfSecret(secret: string | null | undefined): Buffer | 'missing' | 'undecodable' {
  if (!secret || !secret.trim()) return 'missing';
  const encoded = secret.trim().replace(/^whsec_/, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded) || encoded.length % 4 !== 0) return 'undecodable';
  const key = Buffer.from(encoded, 'base64');
  return key.length < MIN_SECRET_BYTES ? 'undecodable' : key;
}

export function decodeSigningSecret(merchantId: string, secret: string | null | undefined): Buffer {
  const key = keyOfSecret(secret);
  if (typeof key === 'string') throw new MissingSigningSecret(merchantId, key);
  return key;
}

/** The keys a request is signed with: the current secret's, then the previous one's while it still signs. */
function signingKeys(
  merchantId: string,
  current: string | null | undefined,
  previous: string | null | undefined,
): Buffer[] {
  const keys = [decodeSigningSecret(merchantId, current)];
  if (previous) keys.push(decodeSigningSecret(merchantId, previous));
  return keys;
}

/**
 * `signingKeys` of the merchant's sealed secrets (as the ledger holds them), opened here, right before signing: the
 * only place the delivery activity and `merchant ping` see a secret. One that does not open is MissingSigningSecret
 * (`unopenable`), named and never retried, like a missing one.
 */
export async function openSigningKeys(
  { region, sealer }: SecretsAtRest,
  merchantId: string,
  sealedCurrent: string | null,
  sealedPrevious: string | null,
): Promise<Buffer[]> {
  const open = async (sealed: string | null): Promise<string | null> => {
    if (!sealed) return sealed;
    try {
      return await sealer.open(sealed, { region, merchantId });
    } catch (err) {
      if (err instanceof SecretUnsealFailed) throw new MissingSigningSecret(merchantId, 'unopenable', { cause: err });
      throw err;
    }
  };
  return signingKeys(merchantId, await open(sealedCurrent), await open(sealedPrevious));
}

export function signature(key: Buffer, webhookId: string, timestampSeconds: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${webhookId}.${timestampSeconds}.${body}`).digest('base64')}`;
}

interface SignedHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
  'idempotency-key': string;
}

/** Headers for one attempt: a fresh timestamp and signature each time, the same id and idempotency key. */
export function signedHeaders(
  keys: readonly Buffer[],
  webhookId: string,
  timestampSeconds: number,
  body: string,
): SignedHeaders {
  return {
    'webhook-id': webhookId,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': keys.map((key) => signature(key, webhookId, timestampSeconds, body)).join(' '),
    'idempotency-key': webhookId,
  };
}

/** Standard Webhooks' replay window: a signed request older (or newer) than this is refused (the reference's too). */
export const TIMESTAMP_TOLERANCE_SECONDS = 5 * 60;

/** Why a request's signature headers are refused, with what the sender is told. */
type UnverifiedReason = 'MissingSignature' | 'InvalidTimestamp' | 'StaleTimestamp' | 'BadSignature';

export class WebhookUnverified extends Error {
  override readonly name = 'WebhookUnverified';
  constructor(
    readonly reason: UnverifiedReason,
    message: string,
  ) {
    super(message);
  }
}

export interface WebhookHeaders {
  id: string;
  timestampSeconds: number;
  signatures: string;
}

/**
 * What can be checked from the headers alone, before a byte of the body is read: all three present, the timestamp
 * seconds since the epoch and within the tolerance of `nowSeconds`. Throws WebhookUnverified.
 */
export function checkWebhookHeaders(
  id: string | undefined,
  timestamp: string | undefined,
  signatures: string | undefined,
  nowSeconds: number,
): WebhookHeaders {
  if (!id || !timestamp || !signatures) {
    throw new WebhookUnverified(
      'MissingSignature',
      'webhook-id, webhook-timestamp and webhook-signature are required (Standard Webhooks)',
    );
  }
  if (!/^\d{1,12}$/.test(timestamp))
    throw new WebhookUnverified('InvalidTimestamp', 'webhook-timestamp must be seconds since the epoch');
  if (Math.abs(nowSeconds - Number(timestamp)) > TIMESTAMP_TOLERANCE_SECONDS) {
    throw new WebhookUnverified(
      'StaleTimestamp',
      `webhook-timestamp is more than ${TIMESTAMP_TOLERANCE_SECONDS} s from now`,
    );
  }
  return { id, timestampSeconds: Number(timestamp), signatures };
}

/**
 * Whether one `v1` signature in the header is `key`'s over exactly these bytes, compared in constant time. Throws
 * WebhookUnverified (`BadSignature`) when none is; `whose` names the key in the message.
 */
export function verifySignature(
  key: Buffer,
  { id, timestampSeconds, signatures }: WebhookHeaders,
  body: string,
  whose: string,
): void {
  const expected = Buffer.from(signature(key, id, timestampSeconds, body).slice('v1,'.length), 'base64');
  const matches = signatures
    .split(' ')
    .filter((s) => s.startsWith('v1,'))
    .some((s) => {
      const given = Buffer.from(s.slice('v1,'.length), 'base64');
      return given.length === expected.length && timingSafeEqual(given, expected);
    });
  if (!matches) throw new WebhookUnverified('BadSignature', `no v1 signature in webhook-signature matches ${whose}`);
}

/** A new merchant secret in the Standard Webhooks format: 24 random bytes, base64, `whsec_` prefix. */
export function generateSigningSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}
