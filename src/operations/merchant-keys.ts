/**
 * Merchants' API keys: `hsk_<id>_<secret>`, where the id (`mk_` + 16 hex) names the key in logs, the audit and the
 * ledger, and the secret is 32 random bytes (base64url) shown once. The ledger keeps the secret's SHA-256 only
 * (merchant_api_keys); a presented key is checked by its id's row, in constant time.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Queryable } from '../db/pool.js';
import { InvalidMerchantSetting, OperatorError } from '../errors.js';
import * as keys from '../sql/merchant-api.js';

const KEY = /^hsk_(mk_[0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;

const sha256 = (secret: string) => createHash('sha256').update(secret, 'utf8').digest();

/** The key's id and secret, or undefined for anything not shaped like a key. */
export function parseApiKey(presented: string): { id: string; secret: string } | undefined {
  const m = KEY.exec(presented);
  return m ? { id: m[1]!, secret: m[2]! } : undefined;
}

/** Whether `secret` is the one whose hash the ledger keeps (constant time). */
export const secretMatches = (secret: string, stored: Buffer) =>
  stored.length === 32 && timingSafeEqual(sha256(secret), stored);

interface CreatedKey {
  id: string;
  merchantId: string;
  /** The whole key, shown once: the ledger cannot give it back. */
  apiKey: string;
  ratePerSecond: number;
  burst: number;
}

/** A new key for the merchant (its rate budget 5/s, burst 10, unless given). */
export async function createApiKey(
  pool: Queryable,
  merchantId: string,
  createdBy: string,
  options: { label?: string; ratePerSecond?: number; burst?: number } = {},
): Promise<CreatedKey> {
  const ratePerSecond = options.ratePerSecond ?? 5;
  const burst = options.burst ?? 10;
  if (!(ratePerSecond > 0 && ratePerSecond <= 1000))
    throw new InvalidMerchantSetting('rate', ratePerSecond, 'requests per second for this key, > 0 and <= 1000');
  if (!Number.isInteger(burst) || burst < 1 || burst > 10_000)
    throw new InvalidMerchantSetting('burst', burst, 'a whole number of requests, >= 1');
  const id = `mk_${randomBytes(8).toString('hex')}`;
  const secret = randomBytes(32).toString('base64url');
  const added = await keys.insertApiKey(pool, {
    id,
    merchantId,
    secretSha256: sha256(secret),
    label: options.label,
    ratePerSecond,
    burst,
    createdBy,
  });
  if (!added) throw new OperatorError('MerchantNotFound', `no merchant ${merchantId} in this region`);
  return { id, merchantId, apiKey: `hsk_${id}_${secret}`, ratePerSecond, burst };
}

export async function revokeApiKey(
  pool: Queryable,
  keyId: string,
  by: string,
): Promise<{ id: string; revokedBy: string }> {
  if (!(await keys.revokeApiKey(pool, keyId, by)))
    throw new OperatorError('ApiKeyNotFound', `no live API key ${keyId} in this region`);
  return { id: keyId, revokedBy: by };
}
