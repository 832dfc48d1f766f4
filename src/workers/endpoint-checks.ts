/**
 * Every worker sends the checks merchants ask of their endpoints through the merchant API, which holds no signing
 * secret (src/api/merchant-server.ts): each is one signed `merchant.ping` sent as `merchant ping` sends it (the
 * endpoint guard, the merchant's budget, policy and keys), its answer recorded in the check's row in the transaction
 * that claimed it, with its effect: a `verify` check answered 2xx makes its URL the endpoint (src/sql/merchant-api.ts).
 * A `rotate` check sends nothing: it rotates the merchant's signing secret and writes the new one back encrypted to the
 * caller's one-time key. One at a time per worker and region; the merchant API waits on the row and answers the
 * merchant.
 */
import { publicEncrypt } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type pg from 'pg';
import type { Region } from '../contracts/regions.js';
import { inTransaction, type Queryable } from '../db/pool.js';
import type { EndpointRules } from '../delivery/endpoint.js';
import type { SecretsAtRest } from '../delivery/secret-box.js';
import { OperatorError } from '../errors.js';
import { every, log } from '../observability/logger.js';
import { pingMerchant, rotateSigningSecret } from '../operations/merchants.js';
import { signalHeldDeliveries } from '../operations/send-pauses.js';
import { claimEndpointCheck, endpointChecksWaiting, finishEndpointCheck } from '../sql/merchant-api.js';
import { applyVerifiedUrl } from '../sql/merchants.js';

/** How soon a check asked for is sent: the merchant waits on it. An empty partial index, read once a second. */
const ENDPOINT_CHECK_INTERVAL_MS = 1_000;

/** Refusals of the check itself: its URL, the merchant's secret or policy. */
const ANSWERS = new Set([
  'InvalidEndpointUrl',
  'MissingSigningSecret',
  'InvalidDeliveryPolicyError',
  'InvalidMerchantSetting',
]);

/**
 * Sends every waiting check, oldest first, until none is left. An endpoint a verification enabled again has its held
 * deliveries told once that is committed, so its backlog drains at its rate now rather than at their next re-check.
 */
async function sendEndpointChecks(
  pool: pg.Pool,
  rules: EndpointRules,
  secrets: SecretsAtRest,
  client: Client | undefined,
): Promise<void> {
  while (await endpointChecksWaiting(pool)) {
    let enabled: string | undefined;
    const sent = await inTransaction(pool, async (tx) => {
      const check = await claimEndpointCheck(tx);
      if (!check) return false;
      if (check.kind === 'rotate') {
        await finishEndpointCheck(tx, check.id, ...(await rotated(tx, secrets, check)));
        return true;
      }
      const result = await pingMerchant(pool, rules, secrets, check.merchantId, check.url).then(
        (ping) => ({ ...ping, refused: null }),
        (err: unknown) => {
          // What stopped it before a request is its answer; anything else leaves the check for the next round.
          if (err instanceof OperatorError) return { refused: err.code, message: err.message };
          if (err instanceof Error && ANSWERS.has(err.name)) return { refused: err.name, message: err.message };
          throw err;
        },
      );
      const answered = 'statusCode' in result && result.statusCode !== null && result.statusCode < 300;
      const applied = check.kind === 'verify' && answered;
      if (applied && (await applyVerifiedUrl(tx, check.merchantId, check.url))) enabled = check.merchantId;
      await finishEndpointCheck(tx, check.id, result, applied);
      return true;
    });
    if (!sent) return;
    if (enabled && client) {
      const told = await signalHeldDeliveries(client, enabled);
      log.info({ merchantId: enabled, ...told }, 'endpoint enabled again: its held deliveries told');
    }
  }
}

/**
 * A rotation the merchant asked for: the new secret sealed into its row as an operator's rotation seals it, and written
 * back only encrypted to the public key the merchant API made for that call (RSA-OAEP, SHA-256).
 */
async function rotated(
  tx: Queryable,
  secrets: SecretsAtRest,
  check: { merchantId: string; replyKey: string; overlapMs: number },
): Promise<[object, boolean]> {
  try {
    const r = await rotateSigningSecret(tx, secrets, check.merchantId, check.overlapMs);
    const secretForCaller = publicEncrypt(
      { key: check.replyKey, oaepHash: 'sha256' },
      Buffer.from(r.signingSecret, 'utf8'),
    ).toString('base64');
    const previous = r.previousSecretId ? { id: r.previousSecretId, expiresAt: r.previousSignsUntil } : null;
    return [{ secretId: r.secretId, createdAt: r.createdAt, previousSecret: previous, secretForCaller }, true];
  } catch (err) {
    if (err instanceof OperatorError || (err instanceof Error && ANSWERS.has(err.name)))
      return [{ refused: err instanceof OperatorError ? err.code : err.name, message: err.message }, false];
    throw err;
  }
}

export function startEndpointChecks({
  region,
  pool,
  rules,
  secrets,
  client,
  intervalMs = ENDPOINT_CHECK_INTERVAL_MS,
}: {
  region: Region;
  pool: pg.Pool;
  rules: EndpointRules;
  secrets: SecretsAtRest;
  /** Tells an endpoint's held deliveries when a verification enables it again; without it they re-check on their own. */
  client?: Client;
  intervalMs?: number;
}): { stop(): void } {
  // A round still sending when the next is due is left to finish: one check at a time per worker and region.
  let running: Promise<void> | undefined;
  const stop = every(
    intervalMs,
    async () => {
      if (running) return;
      running = sendEndpointChecks(pool, rules, secrets, client).finally(() => (running = undefined));
      await running;
    },
    (err) => log.warn({ region, error: err }, 'endpoint checks not sent'),
  );
  return { stop };
}
