/**
 * Merchant signing secrets at rest: `merchants.signing_secret` and `previous_signing_secret` hold sealed values,
 * never the `whsec_...` text, so a dump, a backup or a read-only login to the ledger shows nothing that signs a
 * webhook. A secret is opened only where a request is signed (the delivery activity, `merchant ping`) and where the
 * migration step re-seals it under a newer key (src/db/secrets-at-rest.ts).
 *
 * `localKeyRing` seals with the key ring of MERCHANT_SECRET_KEYS_<REGION> (src/crypto/key-ring.ts: the first key
 * seals, every key opens), each value bound to its region and merchant, so a sealed value copied into another
 * merchant's row or another region's ledger does not open.
 * Stored as text, `sealed:v1:<key id>:<base64url(iv | ciphertext | tag)>`: the version says how to open it, the key
 * id with which key. The same value serves as current and as previous secret (a rotation moves it as it is).
 *
 * A value without the prefix (clear text) never opens: `open` refuses it as
 * `SecretUnsealFailed` (`not_sealed`) rather than hand it back, because the table's CHECK admits only sealed values,
 * so clear text there means something wrote around this code. Only the migration step reads clear text, to seal it.
 *
 * The methods are async so that a KMS can sit behind the same interface: by envelope encryption, `seal` would ask the
 * KMS for a data key, encrypt locally with it and store the KMS-wrapped data key in the value (a `sealed:v2:` format),
 * and `open` would ask the KMS to unwrap it, each a network call.
 */
import { createHash } from 'node:crypto';
import { KeyRing, type EncryptionKey } from '../crypto/key-ring.js';
import type { Region } from '../contracts/regions.js';

/** What a sealed value is bound to: it opens only for the same region and merchant. */
export interface SecretContext {
  region: Region;
  merchantId: string;
}

export interface SecretSealer {
  /** The sealed text of `secret` for `context`, under the current key. */
  seal(secret: string, context: SecretContext): Promise<string>;
  /** The secret inside `sealed`; SecretUnsealFailed when it is not sealed, or not for `context`, or its key is gone. */
  open(sealed: string, context: SecretContext): Promise<string>;
  /** True for clear text and for a value sealed under any key but the current one (the migration step re-seals it). */
  needsReseal(sealed: string): boolean;
}

/** How one region keeps its merchants' secrets: the region every value is bound to, and its sealer. */
export interface SecretsAtRest {
  readonly region: Region;
  readonly sealer: SecretSealer;
}

/**
 * Every sealed value starts so, whatever its version: `sealed:v<n>:<key id>:`. The merchants table's CHECK
 * (merchants_signing_secrets_sealed) spells the same pattern in SQL.
 */
const SEALED_PREFIX = /^sealed:v\d+:[A-Za-z0-9_.-]+:/;

export function isSealed(value: string): boolean {
  return SEALED_PREFIX.test(value);
}

/** Why a value did not open; never the value, nor any part of it. */
type UnsealProblem = 'not_sealed' | 'malformed' | 'unknown_key' | 'not_authentic';

/** A sealed secret that does not open here: the merchant and the key id it names, never the value. */
export class SecretUnsealFailed extends Error {
  override readonly name = 'SecretUnsealFailed';
  constructor(
    readonly merchantId: string,
    readonly keyId: string | undefined,
    readonly problem: UnsealProblem,
  ) {
    const key = `key "${keyId}"`;
    super(
      {
        not_sealed: `merchant ${merchantId}'s signing secret is stored in clear text, not sealed; rotate it (merchant rotate-secret)`,
        malformed: `merchant ${merchantId}'s sealed signing secret (${key}) is malformed; rotate it (merchant rotate-secret)`,
        unknown_key:
          `merchant ${merchantId}'s signing secret is sealed under ${key}, which is not in this region's MERCHANT_SECRET_KEYS; ` +
          'put the key back (keep retired keys until every worker has re-sealed at start-up), or rotate the secret',
        not_authentic:
          `merchant ${merchantId}'s signing secret does not open under ${key}: it was altered, or sealed for another merchant ` +
          'or region; rotate it (merchant rotate-secret)',
      }[problem],
    );
  }
}

/**
 * The dev key ring: id `dev`, the SHA-256 of a fixed string. It protects nothing (its key is in this file); it exists
 * so that `npm start`, a dev worker joining it and the tests need no configuration. Production refuses it.
 */
export const DEV_SECRET_KEY_ID = 'dev';
export const DEV_SECRET_KEYS: readonly EncryptionKey[] = Object.freeze([
  {
    id: DEV_SECRET_KEY_ID,
    key: createHash('sha256').update('hold-sweeper dev merchant-secret key: protects nothing').digest(),
  },
]);

const VERSION = 'v1';
const SEALED_V1 = /^sealed:v1:([A-Za-z0-9_.-]+):([A-Za-z0-9_-]+)$/;

/** What a v1 value is bound to, beside its key id; NUL cannot occur in a region or a Postgres text. */
const boundTo = (context: SecretContext) =>
  `hold-sweeper merchant signing secret\0${VERSION}\0${context.region}\0${context.merchantId}`;

/** A sealer over `keys` (MERCHANT_SECRET_KEYS_<REGION>): `keys[0]` seals, every key opens. */
export function localKeyRing(keys: readonly EncryptionKey[]): SecretSealer {
  const ring = new KeyRing(keys, 'merchant-secret');
  return {
    async seal(secret, context) {
      const body = ring.seal(Buffer.from(secret, 'utf8'), boundTo(context));
      return `sealed:${VERSION}:${ring.currentId}:${body.toString('base64url')}`;
    },
    async open(sealed, context) {
      if (!isSealed(sealed)) throw new SecretUnsealFailed(context.merchantId, undefined, 'not_sealed');
      const match = SEALED_V1.exec(sealed);
      const keyId = match?.[1] ?? sealed.split(':')[2]!;
      const plain = match ? ring.open(keyId, Buffer.from(match[2]!, 'base64url'), boundTo(context)) : 'malformed';
      if (typeof plain === 'string') throw new SecretUnsealFailed(context.merchantId, keyId, plain);
      return plain.toString('utf8');
    },
    needsReseal(sealed) {
      return !sealed.startsWith(`sealed:${VERSION}:${ring.currentId}:`);
    },
  };
}
