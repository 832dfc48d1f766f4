/**
 * The merchant API's ledger: API keys, a merchant's own webhooks with their attempts, and the resends
 * merchants ask for. Every read here that a merchant's call makes names the merchant its key belongs to: a webhook of
 * another merchant is not found, never forbidden.
 */
import type { Queryable } from '../db/pool.js';
import { isoUtc } from '../db/sql.js';

interface ApiKeyRecord {
  id: string;
  merchantId: string;
  secretSha256: Buffer;
  label: string | undefined;
  ratePerSecond: number;
  burst: number;
  createdBy: string;
  /** How long the key lives; undefined: until it is revoked. */
  ttlMs?: number | undefined;
}

export async function insertApiKey(db: Queryable, k: ApiKeyRecord): Promise<{ expiresAt: string | null } | undefined> {
  const { rows } = await db.query<{ expiresAt: string | null }>(
    `INSERT INTO merchant_api_keys (id, merchant_id, secret_sha256, label, rate_per_second, burst, created_by, expires_at)
     SELECT $1, m.id, $3, $4, $5, $6, $7, now() + make_interval(secs => $8::double precision / 1000)
       FROM merchants m WHERE m.id = $2
     RETURNING ${isoUtc('expires_at')} AS "expiresAt"`,
    [k.id, k.merchantId, k.secretSha256, k.label ?? null, k.ratePerSecond, k.burst, k.createdBy, k.ttlMs ?? null],
  );
  return rows[0];
}

/** Revokes a live key; false if there is none by that id (or it is revoked already). */
export async function revokeApiKey(db: Queryable, keyId: string, by: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE merchant_api_keys SET revoked_at = now(), revoked_by = $2 WHERE id = $1 AND revoked_at IS NULL`,
    [keyId, by],
  );
  return rowCount === 1;
}

/** A merchant's keys, newest first: never the secret's hash. */
export async function apiKeysOf(db: Queryable, merchantId: string): Promise<Record<string, unknown>[]> {
  const { rows } = await db.query(
    `SELECT id, label, rate_per_second::float8 AS rate_per_second, burst, created_at, created_by, expires_at, revoked_at,
            revoked_by, last_used_at
       FROM merchant_api_keys WHERE merchant_id = $1 ORDER BY created_at DESC, id`,
    [merchantId],
  );
  return rows;
}

interface KeyForAuth {
  id: string;
  merchantId: string;
  secretSha256: Buffer;
  ratePerSecond: number;
  burst: number;
  /** Revoked, or past its end. */
  ended: boolean;
  merchantStatus: string;
}

export async function keyForAuth(db: Queryable, keyId: string): Promise<KeyForAuth | undefined> {
  const { rows } = await db.query<KeyForAuth>(
    `SELECT k.id, k.merchant_id AS "merchantId", k.secret_sha256 AS "secretSha256",
            k.rate_per_second::float8 AS "ratePerSecond", k.burst, (k.revoked_at IS NOT NULL OR k.expires_at <= now()) AS ended,
            m.status AS "merchantStatus"
       FROM merchant_api_keys k JOIN merchants m ON m.id = k.merchant_id WHERE k.id = $1`,
    [keyId],
  );
  return rows[0];
}

/** Marks the key used now (at most once a minute per key: a busy key does not write on every call). */
export async function touchApiKey(db: Queryable, keyId: string): Promise<void> {
  await db.query(
    `UPDATE merchant_api_keys SET last_used_at = now() WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`,
    [keyId],
  );
}

/**
 * The merchant's endpoint as the merchant sees it: where its webhooks go, at what pace, the event types it takes
 * (null: every type), and whether sending is on; if not, since when and why. A pause's reason is the operators' own
 * words, not the merchant's to read: it says who paused it.
 */
export async function merchantEndpoint(
  db: Queryable,
  merchantId: string,
): Promise<Record<string, unknown> | undefined> {
  const { rows } = await db.query(
    `SELECT m.id AS "merchantId", m.endpoint_url AS url, m.rate_per_second::float8 AS "ratePerSecond", m.burst,
            m.rate_ceiling::float8 AS "rateCeiling", m.burst_ceiling AS "burstCeiling", m.event_types AS "eventTypes",
            m.status, CASE m.status WHEN 'disabled' THEN m.disabled_reason WHEN 'paused' THEN 'paused by the operators' END
              AS "statusReason", m.disabled_at AS "statusSince"
       FROM merchants m WHERE m.id = $1`,
    [merchantId],
  );
  return rows[0];
}

/** Each attempt as a merchant sees it: when, the HTTP status or the error, how long, what it answered. */
const ATTEMPTS = `COALESCE((SELECT json_agg(json_build_object(
           'attempt', a.attempt_number, 'policyRun', a.policy_run, 'startedAt', a.started_at, 'durationMs', a.duration_ms,
           'statusCode', a.status_code, 'errorClass', a.error_class, 'responseExcerpt', a.response_excerpt)
         ORDER BY a.attempt_number) FROM delivery_attempts a WHERE a.webhook_id = d.webhook_id), '[]'::json)`;

interface WebhookQuery {
  since?: string;
  until?: string;
  status?: string;
  eventType?: string;
  limit: number;
}

/**
 * The merchant's webhooks written in [since, until), in one status and of one type if given, newest first, with their
 * attempts.
 */
export async function merchantWebhooks(
  db: Queryable,
  merchantId: string,
  q: WebhookQuery,
): Promise<Record<string, unknown>[]> {
  const { rows } = await db.query(
    `SELECT d.webhook_id AS "webhookId", d.event_type AS "eventType", d.status, d.quarantine_reason AS "quarantineReason",
            d.created_at AS "createdAt", d.delivered_at AS "deliveredAt", d.attempt_count AS "attemptCount", ${ATTEMPTS} AS attempts
       FROM webhook_deliveries d
      WHERE d.merchant_id = $1
        AND ($2::timestamptz IS NULL OR d.created_at >= $2::timestamptz)
        AND ($3::timestamptz IS NULL OR d.created_at < $3::timestamptz)
        AND ($4::text IS NULL OR d.status = $4::text)
        AND ($6::text IS NULL OR d.event_type = $6::text)
      ORDER BY d.created_at DESC, d.webhook_id DESC
      LIMIT $5::integer`,
    [merchantId, q.since ?? null, q.until ?? null, q.status ?? null, q.limit, q.eventType ?? null],
  );
  return rows;
}

/** One of the merchant's webhooks with the exact payload it was (and is) sent with, its attempts and resends. */
export async function merchantWebhook(
  db: Queryable,
  merchantId: string,
  webhookId: string,
): Promise<Record<string, unknown> | undefined> {
  const { rows } = await db.query(
    `SELECT d.webhook_id AS "webhookId", d.event_type AS "eventType", d.status, d.quarantine_reason AS "quarantineReason",
            d.created_at AS "createdAt", d.delivered_at AS "deliveredAt", d.attempt_count AS "attemptCount", d.payload,
            ${ATTEMPTS} AS attempts,
            COALESCE((SELECT json_agg(json_build_object('resendId', r.id, 'policyRun', r.policy_run, 'requestedAt', r.created_at)
                      ORDER BY r.policy_run) FROM webhook_resends r WHERE r.webhook_id = d.webhook_id), '[]'::json) AS resends
       FROM webhook_deliveries d WHERE d.merchant_id = $1 AND d.webhook_id = $2`,
    [merchantId, webhookId],
  );
  return rows[0];
}

/**
 * Records a merchant's resend of its own webhook, if that webhook is at an end (delivered, discarded, abandoned) and
 * no resend this merchant asked for is waiting to start for it. Returns the request, or why not.
 */
export async function insertMerchantResendRequest(
  db: Queryable,
  r: { id: string; merchantId: string; webhookId: string; keyId: string; resendId: string },
): Promise<
  { recorded: true } | { recorded: false; why: 'not-found' | 'not-at-an-end' | 'already-waiting'; status?: string }
> {
  // One waiting per webhook is the unique index's (merchant_resend_requests_one_waiting): a second insert, however
  // close, conflicts.
  const { rows } = await db.query<{ recorded: boolean; status: string | null }>(
    `WITH target AS (SELECT status FROM webhook_deliveries WHERE webhook_id = $3 AND merchant_id = $2),
          ins AS (
            INSERT INTO merchant_resend_requests (id, merchant_id, webhook_id, key_id, resend_id)
            SELECT $1, $2, $3, $4, $5 FROM target WHERE target.status IN ('delivered', 'discarded', 'abandoned')
            ON CONFLICT (webhook_id) WHERE started_at IS NULL DO NOTHING
            RETURNING 1)
     SELECT EXISTS (SELECT 1 FROM ins) AS recorded, (SELECT status FROM target) AS status`,
    [r.id, r.merchantId, r.webhookId, r.keyId, r.resendId],
  );
  const row = rows[0]!;
  if (row.recorded) return { recorded: true };
  if (row.status === null) return { recorded: false, why: 'not-found' };
  if (!['delivered', 'discarded', 'abandoned'].includes(row.status))
    return { recorded: false, why: 'not-at-an-end', status: row.status };
  return { recorded: false, why: 'already-waiting', status: row.status };
}

/** A resend request of the merchant's, with where it stands: waiting, started, and the resend it became. */
export async function merchantResendRequest(
  db: Queryable,
  merchantId: string,
  requestId: string,
): Promise<Record<string, unknown> | undefined> {
  const { rows } = await db.query(
    `SELECT q.id, q.webhook_id AS "webhookId", q.resend_id AS "resendId", q.requested_at AS "requestedAt", q.started_at AS "startedAt",
            r.policy_run AS "policyRun", d.status AS "webhookStatus",
            CASE WHEN q.started_at IS NULL THEN 'waiting' WHEN r.id IS NULL THEN 'started'
                 WHEN d.status = 'pending' THEN 'sending' ELSE d.status END AS state
       FROM merchant_resend_requests q
       JOIN webhook_deliveries d ON d.webhook_id = q.webhook_id
       LEFT JOIN webhook_resends r ON r.id = q.resend_id
      WHERE q.merchant_id = $1 AND q.id = $2`,
    [merchantId, requestId],
  );
  return rows[0];
}

/**
 * The worker's side: requests no reconciler has started yet, merchants served in turn (each one's oldest first, then
 * each one's second...) and at most `perMerchant` of each: one merchant asking for a range waits behind nobody's and
 * holds back nobody's.
 */
export async function unstartedMerchantResends(
  db: Queryable,
  limit: number,
  perMerchant: number,
): Promise<{ id: string; merchantId: string; webhookId: string; holdId: string; keyId: string; resendId: string }[]> {
  const { rows } = await db.query(
    `SELECT id, "merchantId", "webhookId", "holdId", "keyId", "resendId" FROM (
       SELECT q.id, q.merchant_id AS "merchantId", q.webhook_id AS "webhookId", d.hold_id AS "holdId", q.key_id AS "keyId",
              q.resend_id AS "resendId", q.requested_at,
              row_number() OVER (PARTITION BY q.merchant_id ORDER BY q.requested_at, q.id) AS turn
         FROM merchant_resend_requests q JOIN webhook_deliveries d ON d.webhook_id = q.webhook_id
        WHERE q.started_at IS NULL) waiting
      WHERE turn <= $2::integer
      ORDER BY turn, requested_at, id LIMIT $1::integer`,
    [limit, perMerchant],
  );
  return rows;
}

export async function markMerchantResendStarted(db: Queryable, requestId: string): Promise<void> {
  await db.query(`UPDATE merchant_resend_requests SET started_at = now() WHERE id = $1 AND started_at IS NULL`, [
    requestId,
  ]);
}

/** What a resend's first step checks of a merchant's request: whose webhook, which key, and whether it was live. */
export async function merchantResendForClaim(
  db: Queryable,
  requestId: string,
): Promise<
  | {
      merchantId: string;
      webhookId: string;
      keyId: string;
      resendId: string;
      webhookMerchantId: string;
      keyLiveAtRequest: boolean;
    }
  | undefined
> {
  const { rows } = await db.query(
    `SELECT q.merchant_id AS "merchantId", q.webhook_id AS "webhookId", q.key_id AS "keyId", q.resend_id AS "resendId",
            d.merchant_id AS "webhookMerchantId",
            (k.merchant_id = q.merchant_id AND (k.revoked_at IS NULL OR k.revoked_at > q.requested_at)) AS "keyLiveAtRequest"
       FROM merchant_resend_requests q
       JOIN webhook_deliveries d ON d.webhook_id = q.webhook_id
       JOIN merchant_api_keys k ON k.id = q.key_id
      WHERE q.id = $1`,
    [requestId],
  );
  return rows[0];
}

type EndpointCheckKind = 'test' | 'verify' | 'rotate';

/** A merchant's check of its endpoint, recorded for a worker to send (the merchant API cannot sign). */
export async function insertEndpointCheck(
  db: Queryable,
  c: {
    id: string;
    merchantId: string;
    keyId: string;
    kind: EndpointCheckKind;
    url: string;
    /** A rotation's: the public key its secret is written back to, and its overlap. */
    replyKey?: string;
    overlapMs?: number;
  },
): Promise<void> {
  await db.query(
    `INSERT INTO endpoint_checks (id, merchant_id, key_id, kind, url, reply_key, overlap_ms)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [c.id, c.merchantId, c.keyId, c.kind, c.url, c.replyKey ?? null, c.overlapMs ?? null],
  );
}

/**
 * Ends a check no worker has finished, as `result` says, so none ever sends or applies it; false when a worker finished
 * it first (one holding it makes this wait until it commits).
 */
export async function giveUpEndpointCheck(db: Queryable, id: string, result: object): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE endpoint_checks SET finished_at = now(), result = $2::jsonb, applied = false
      WHERE id = $1 AND finished_at IS NULL`,
    [id, JSON.stringify(result)],
  );
  return rowCount === 1;
}

/** Drops a key from a finished check's result: a rotation's secret, once read. */
export async function forgetCheckResult(db: Queryable, id: string, key: string): Promise<void> {
  await db.query(`UPDATE endpoint_checks SET result = result - $2::text WHERE id = $1`, [id, key]);
}

/** The merchant's signing secrets (never a value): the current one, and the previous one while it still signs. */
export async function merchantSecrets(db: Queryable, merchantId: string) {
  const { rows } = await db.query<{ id: string; createdAt: string; expiresAt: string | null; current: boolean }>(
    `SELECT s.id, ${isoUtc('s.created_at')} AS "createdAt", ${isoUtc('s.until')} AS "expiresAt", s.current
       FROM merchants m,
            LATERAL (VALUES (m.signing_secret_id, m.signing_secret_created_at, NULL::timestamptz, true),
                            (m.previous_signing_secret_id, m.previous_signing_secret_created_at,
                             m.previous_signing_secret_until, false)) AS s (id, created_at, until, current)
      WHERE m.id = $1 AND s.id IS NOT NULL AND (s.until IS NULL OR s.until > now())
      ORDER BY s.current DESC`,
    [merchantId],
  );
  return rows;
}

/** One of the merchant's checks, as it stands: waiting for a worker (`finishedAt` null), or sent and answered. */
export async function merchantEndpointCheck(
  db: Queryable,
  merchantId: string,
  checkId: string,
): Promise<Record<string, unknown> | undefined> {
  const { rows } = await db.query(
    `SELECT id, kind, url, requested_at AS "requestedAt", finished_at AS "finishedAt", result, applied
       FROM endpoint_checks WHERE merchant_id = $1 AND id = $2`,
    [merchantId, checkId],
  );
  return rows[0];
}

/**
 * Whether any check waits for a worker: one round trip on the waiting checks' index, so that a worker's idle poll opens
 * no transaction (three round trips) to find nothing.
 */
export async function endpointChecksWaiting(db: Queryable): Promise<boolean> {
  const { rows } = await db.query<{ waiting: boolean }>(
    'SELECT EXISTS (SELECT 1 FROM endpoint_checks WHERE finished_at IS NULL) AS waiting',
  );
  return rows[0]!.waiting;
}

/**
 * The worker's side: the oldest check no worker has finished, locked for the caller's transaction (another worker
 * skips it; if this one dies before it commits, the next takes it again).
 */
export async function claimEndpointCheck(
  db: Queryable,
): Promise<
  | { id: string; merchantId: string; kind: EndpointCheckKind; url: string; replyKey: string; overlapMs: number }
  | undefined
> {
  const { rows } = await db.query(
    `SELECT id, merchant_id AS "merchantId", kind, url, reply_key AS "replyKey", overlap_ms::float8 AS "overlapMs"
       FROM endpoint_checks WHERE finished_at IS NULL
      ORDER BY requested_at LIMIT 1 FOR UPDATE SKIP LOCKED`,
  );
  return rows[0];
}

export async function finishEndpointCheck(db: Queryable, id: string, result: object, applied: boolean) {
  await db.query(`UPDATE endpoint_checks SET finished_at = now(), result = $2::jsonb, applied = $3 WHERE id = $1`, [
    id,
    JSON.stringify(result),
    applied,
  ]);
}
