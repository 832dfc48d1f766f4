/**
 * Merchants' API keys: `hsk_<id>_<secret>`, where the id (`mk_` + 16 hex) names the key in logs, the audit and the
 * ledger, and the secret is 32 random bytes (base64url) shown once. The ledger keeps the secret's SHA-256 only
 * (merchant_api_keys); a presented key is checked by its id's row, in constant time.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { DEFAULT_PORTAL_URL } from '../config.js';
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
  /** When it stops working by itself (ledger clock, ISO 8601); null: when it is revoked. */
  expiresAt: string | null;
}

/** A new key for the merchant (its rate budget 5/s, burst 10, unless given), living until revoked unless `ttlMs`. */
export async function createApiKey(
  pool: Queryable,
  merchantId: string,
  createdBy: string,
  options: { label?: string; ratePerSecond?: number; burst?: number; ttlMs?: number } = {},
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
    ttlMs: options.ttlMs,
  });
  if (!added) throw new OperatorError('MerchantNotFound', `no merchant ${merchantId} in this region`);
  return { id, merchantId, apiKey: `hsk_${id}_${secret}`, ratePerSecond, burst, expiresAt: added.expiresAt };
}

/** How long a portal link lets its merchant in unless the operator says otherwise, and the longest it may. */
const PORTAL_LINK_TTL_MS = 60 * 60_000;
const PORTAL_LINK_MAX_TTL_MS = 24 * 60 * 60_000;

/**
 * A link that signs the merchant in to its portal (the merchant API's `/portal`): a key of the merchant's that ends by
 * itself, carried in the URL's fragment, which a browser sends to no server and in no Referer. The portal keeps it for
 * the tab's life; every call it makes is audited under the key's id; `merchant api-key revoke` ends it early.
 */
export async function mintPortalLink(
  pool: Queryable,
  portalUrl: string | undefined,
  merchantId: string,
  createdBy: string,
  ttlMs = PORTAL_LINK_TTL_MS,
): Promise<{ id: string; merchantId: string; link: string; expiresAt: string }> {
  if (!(Number.isInteger(ttlMs) && ttlMs >= 60_000 && ttlMs <= PORTAL_LINK_MAX_TTL_MS))
    throw new InvalidMerchantSetting('ttl', ttlMs, 'a duration from 1m to 24h');
  const key = await createApiKey(pool, merchantId, createdBy, { label: 'portal link', ttlMs });
  const link = new URL(portalUrl ?? DEFAULT_PORTAL_URL);
  link.hash = `key=${key.apiKey}`;
  return { id: key.id, merchantId, link: link.href, expiresAt: key.expiresAt! };
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
