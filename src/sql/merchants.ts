/**
 * SQL of the merchants table: what the operator's `merchant` commands (src/operations/merchants.ts) and the delivery
 * policy write. The values arrive validated; the table's CHECKs (rate > 0, burst >= 0, status) are the last word.
 *
 * Signing secrets come in and go out sealed (src/delivery/secret-box.ts): this file never sees one in clear, and the
 * table refuses clear text (merchants_signing_secrets_sealed).
 */
import type { Queryable } from '../db/pool.js';
import { isoUtc } from '../db/sql.js';
import { PREVIOUS_SECRET_IN_OVERLAP_SQL } from './fragments.js';
import { RATE_SAFETY_MARGIN } from './merchant-budget.js';

type MerchantStatus = 'active' | 'paused' | 'disabled';

/** A merchant as an operator sees it: everything but its secrets, of which only whether they are set. */
export interface MerchantView {
  id: string;
  name: string;
  endpointUrl: string;
  ratePerSecond: number;
  burst: number;
  /** The most the merchant may declare for itself (merchant API). */
  rateCeiling: number;
  burstCeiling: number;
  status: MerchantStatus;
  /** Why sending stopped (paused by an operator, disabled on 410 Gone); null while active. */
  statusReason: string | null;
  statusSince: string | null;
  deliveryPolicy: Record<string, unknown>;
  hasSigningSecret: boolean;
  /** Until when the previous secret still signs, ISO 8601; null when there is none (or it has no end). */
  previousSecretSignsUntil: string | null;
  hasPreviousSecret: boolean;
  /** The event types its endpoint takes, as its merchant chose them (merchant API); null: every type. */
  eventTypes: string[] | null;
  createdAt: string;
  updatedAt: string;
  /** Where its sends stand in its budget (send_budgets), and what is waiting to go. */
  budget: MerchantBudgetState;
}

/** A merchant's budget, as `merchant show` prints it: its own, or its shared destination's. */
interface MerchantBudgetState {
  /** The declared shared destination it names; null: its budget is its own. */
  destination: string | null;
  /** Other merchants naming the same destination, sharing the budget. */
  sharedWith: number;
  /** The rate its sends are paced at: its own published rate, or its destination's. */
  ratePerSecond: number;
  /** When the next first attempt could go (the queue's next free slot), ISO 8601; null: now. */
  nextSlotAt: string | null;
  /** A 429's (or 503's) push-back of the destination still running: until when and why; null: none. */
  pausedUntil: string | null;
  pauseReason: string | null;
  /** Its pending webhooks, the oldest's age, and how long the backlog takes at the destination's pace. */
  backlog: number;
  oldestPendingSeconds: number | null;
  drainSeconds: number;
}

interface NewMerchant {
  id: string;
  name: string;
  endpointUrl: string;
  /** Sealed for this merchant (src/delivery/secret-box.ts). */
  sealedSigningSecret: string;
  ratePerSecond: number;
  burst: number;
  deliveryPolicy: Record<string, unknown>;
  /** A declared shared destination (`destinations`); null: its budget is its own. */
  destinationId: string | null;
}

/** Inserts the merchant; false when the id is taken. */
export async function insertMerchant(db: Queryable, m: NewMerchant): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO merchants (id, name, endpoint_url, signing_secret, rate_per_second, burst, delivery_policy, destination_id)
     VALUES ($1::text, $2::text, $3::text, $4::text, $5::numeric, $6::integer, $7::jsonb, $8::text)
     ON CONFLICT (id) DO NOTHING`,
    [
      m.id,
      m.name,
      m.endpointUrl,
      m.sealedSigningSecret,
      m.ratePerSecond,
      m.burst,
      JSON.stringify(m.deliveryPolicy),
      m.destinationId,
    ],
  );
  return rowCount === 1;
}

export async function merchantView(db: Queryable, merchantId: string): Promise<MerchantView | undefined> {
  const { rows } = await db.query<
    Omit<MerchantView, 'ratePerSecond' | 'rateCeiling' | 'budget'> &
      Omit<MerchantBudgetState, 'ratePerSecond' | 'drainSeconds'> & {
        ratePerSecond: string;
        rateCeiling: string;
        budgetRate: string;
      }
  >(
    `SELECT m.id, m.name, m.endpoint_url AS "endpointUrl", m.rate_per_second AS "ratePerSecond", m.burst,
            m.rate_ceiling AS "rateCeiling", m.burst_ceiling AS "burstCeiling", m.status,
            m.disabled_reason AS "statusReason", ${isoUtc('m.disabled_at')} AS "statusSince",
            m.delivery_policy AS "deliveryPolicy", m.signing_secret IS NOT NULL AS "hasSigningSecret",
            ${isoUtc('m.previous_signing_secret_until')} AS "previousSecretSignsUntil",
            ${PREVIOUS_SECRET_IN_OVERLAP_SQL} IS NOT NULL AS "hasPreviousSecret", m.event_types AS "eventTypes",
            ${isoUtc('m.created_at')} AS "createdAt", ${isoUtc('m.updated_at')} AS "updatedAt",
            m.destination_id AS destination,
            (SELECT count(*) FROM merchants o WHERE o.destination_id = m.destination_id AND o.id <> m.id)::integer AS "sharedWith",
            bo.rate AS "budgetRate",
            CASE WHEN b.tat > now() THEN ${isoUtc('b.tat')} END AS "nextSlotAt",
            CASE WHEN b.paused_until > now() THEN ${isoUtc('b.paused_until')} END AS "pausedUntil",
            CASE WHEN b.paused_until > now() THEN b.pause_reason END AS "pauseReason",
            (SELECT count(*) FROM webhook_deliveries d WHERE d.merchant_id = m.id AND d.status = 'pending')::integer AS backlog,
            (SELECT extract(epoch FROM now() - min(d.created_at))::float8 FROM webhook_deliveries d
              WHERE d.merchant_id = m.id AND d.status = 'pending') AS "oldestPendingSeconds"
       FROM merchants m CROSS JOIN LATERAL budget_of(m.id) bo LEFT JOIN send_budgets b ON b.key = bo.key
      WHERE m.id = $1::text`,
    [merchantId],
  );
  const r = rows[0];
  if (!r) return undefined;
  const { destination, sharedWith, budgetRate, nextSlotAt, pausedUntil, pauseReason, backlog, oldestPendingSeconds } =
    r;
  const active = r.status === 'active';
  const ratePerSecond = Number(budgetRate);
  return {
    id: r.id,
    name: r.name,
    endpointUrl: r.endpointUrl,
    ratePerSecond: Number(r.ratePerSecond),
    burst: r.burst,
    rateCeiling: Number(r.rateCeiling),
    burstCeiling: r.burstCeiling,
    status: r.status,
    statusReason: active ? null : r.statusReason,
    statusSince: active ? null : r.statusSince,
    deliveryPolicy: r.deliveryPolicy,
    hasSigningSecret: r.hasSigningSecret,
    hasPreviousSecret: r.hasPreviousSecret,
    previousSecretSignsUntil: r.hasPreviousSecret ? r.previousSecretSignsUntil : null,
    eventTypes: r.eventTypes,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    budget: {
      destination,
      sharedWith,
      ratePerSecond,
      nextSlotAt,
      pausedUntil,
      pauseReason,
      backlog,
      oldestPendingSeconds: oldestPendingSeconds === null ? null : Math.round(oldestPendingSeconds),
      // Sends go one emission interval apart, RATE_SAFETY_MARGIN under the rate (src/sql/merchant-budget.ts).
      drainSeconds: Math.ceil((backlog * (1 + RATE_SAFETY_MARGIN)) / ratePerSecond),
    },
  };
}

/**
 * The secrets (sealed) and endpoint one signed request needs (a ping); the previous secret only while it still signs.
 * The caller opens them right before it signs (openSigningKeys in src/delivery/standard-webhooks.ts).
 */
export async function merchantForSending(db: Queryable, merchantId: string) {
  const { rows } = await db.query<{
    endpointUrl: string;
    sealedSigningSecret: string | null;
    sealedPreviousSigningSecret: string | null;
    deliveryPolicy: unknown;
    status: MerchantStatus;
  }>(
    `SELECT m.endpoint_url AS "endpointUrl", m.signing_secret AS "sealedSigningSecret",
            ${PREVIOUS_SECRET_IN_OVERLAP_SQL} AS "sealedPreviousSigningSecret", m.delivery_policy AS "deliveryPolicy", m.status
       FROM merchants m WHERE m.id = $1::text`,
    [merchantId],
  );
  return rows[0];
}

/** A merchant's settings an operator gives, each optional. */
export interface MerchantChanges {
  name?: string;
  endpointUrl?: string;
  ratePerSecond?: number;
  burst?: number;
  /** The most the merchant may declare for itself through the merchant API. */
  rateCeiling?: number;
  burstCeiling?: number;
  /** Overrides of the default delivery policy (src/delivery/policy.ts), e.g. {"retryHorizonMs": 86400000}. */
  deliveryPolicy?: Record<string, unknown>;
  /** A declared shared destination, or null to leave it (its budget its own again). */
  destinationId?: string | null;
}

/** Applies the given changes (the others stay); false when there is no such merchant. */
export async function updateMerchant(db: Queryable, merchantId: string, c: MerchantChanges): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE merchants
        SET name = coalesce($2::text, name), endpoint_url = coalesce($3::text, endpoint_url),
            rate_per_second = coalesce($4::numeric, rate_per_second), burst = coalesce($5::integer, burst),
            delivery_policy = coalesce($6::jsonb, delivery_policy),
            destination_id = CASE WHEN $7::boolean THEN $8::text ELSE destination_id END,
            rate_ceiling = coalesce($9::numeric, rate_ceiling), burst_ceiling = coalesce($10::integer, burst_ceiling),
            updated_at = now()
      WHERE id = $1::text`,
    [
      merchantId,
      c.name ?? null,
      c.endpointUrl ?? null,
      c.ratePerSecond ?? null,
      c.burst ?? null,
      c.deliveryPolicy === undefined ? null : JSON.stringify(c.deliveryPolicy),
      c.destinationId !== undefined,
      c.destinationId ?? null,
      c.rateCeiling ?? null,
      c.burstCeiling ?? null,
    ],
  );
  return rowCount === 1;
}

/** A shared destination as declared: its published rate and its own cap on requests in flight. */
export interface Destination {
  id: string;
  ratePerSecond: number;
  maxInFlight: number | null;
  note: string | null;
  /** The merchants naming it. */
  merchants: string[];
}

/** Declares a shared destination, or changes the given values of one. */
export async function upsertDestination(
  db: Queryable,
  d: { id: string; ratePerSecond?: number; maxInFlight?: number | null; note?: string },
): Promise<void> {
  await db.query(
    `INSERT INTO destinations AS x (id, rate_per_second, max_in_flight, note)
     VALUES ($1::text, $2::numeric, $4::integer, $5::text)
     ON CONFLICT (id) DO UPDATE
        SET rate_per_second = coalesce($2::numeric, x.rate_per_second),
            max_in_flight = CASE WHEN $3::boolean THEN $4::integer ELSE x.max_in_flight END,
            note = coalesce($5::text, x.note), updated_at = now()`,
    [d.id, d.ratePerSecond ?? null, d.maxInFlight !== undefined, d.maxInFlight ?? null, d.note ?? null],
  );
}

export async function destinationView(db: Queryable, id: string): Promise<Destination | undefined> {
  const { rows } = await db.query<Omit<Destination, 'ratePerSecond'> & { ratePerSecond: string }>(
    `SELECT d.id, d.rate_per_second AS "ratePerSecond", d.max_in_flight AS "maxInFlight", d.note,
            array(SELECT m.id FROM merchants m WHERE m.destination_id = d.id ORDER BY m.id) AS merchants
       FROM destinations d WHERE d.id = $1::text`,
    [id],
  );
  const r = rows[0];
  return r && { ...r, ratePerSecond: Number(r.ratePerSecond) };
}

/** Whether a destination of this id is declared. */
export async function destinationExists(db: Queryable, id: string): Promise<boolean> {
  return (await db.query('SELECT 1 FROM destinations WHERE id = $1::text', [id])).rowCount === 1;
}

/** active -> paused by an operator, with the reason; its backlog waits, held. False when not active. */
export async function pauseMerchant(db: Queryable, merchantId: string, reason: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE merchants SET status = 'paused', disabled_reason = $2::text, disabled_at = now(), updated_at = now()
      WHERE id = $1::text AND status = 'active'`,
    [merchantId, reason],
  );
  return rowCount === 1;
}

/** paused or disabled -> active: its held backlog is sent again at the next re-check. False when already active. */
export async function resumeMerchant(db: Queryable, merchantId: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE merchants SET status = 'active', disabled_reason = NULL, disabled_at = NULL, updated_at = now()
      WHERE id = $1::text AND status <> 'active'`,
    [merchantId],
  );
  return rowCount === 1;
}

/**
 * The new secret (sealed, named `newSecretId`) signs from now on; the current one becomes the previous, as it is
 * sealed and with its name, and signs alongside it for `overlapMs`, then is erased (erasePreviousSecretsPastOverlap).
 * Returns when the overlap ends and when the new secret was made (database clock), or undefined when there is no
 * such merchant.
 */
export async function rotateSigningSecret(
  db: Queryable,
  merchantId: string,
  newSealedSecret: string,
  newSecretId: string,
  overlapMs: number,
): Promise<{ until: string; createdAt: string; previousId: string | null } | undefined> {
  const { rows } = await db.query<{ until: string; createdAt: string; previousId: string | null }>(
    `UPDATE merchants
        SET previous_signing_secret = signing_secret, previous_signing_secret_id = signing_secret_id,
            previous_signing_secret_created_at = signing_secret_created_at,
            signing_secret = $2::text, signing_secret_id = $3::text, signing_secret_created_at = now(),
            previous_signing_secret_until = now() + make_interval(secs => $4::double precision / 1000), updated_at = now()
      WHERE id = $1::text
      RETURNING ${isoUtc('previous_signing_secret_until')} AS until, ${isoUtc('signing_secret_created_at')} AS "createdAt",
                previous_signing_secret_id AS "previousId"`,
    [merchantId, newSealedSecret, newSecretId, overlapMs],
  );
  return rows[0];
}

/**
 * Stops all sending to a merchant (its backlog waits, held, intact) until someone re-enables it; a no-op for one
 * already disabled, which keeps the first reason.
 */
export async function disableMerchant(db: Queryable, merchantId: string, reason: string): Promise<void> {
  await db.query(
    `UPDATE merchants SET status = 'disabled', disabled_reason = $2::text, disabled_at = now(), updated_at = now()
      WHERE id = $1::text AND status <> 'disabled'`,
    [merchantId, reason],
  );
}

/**
 * The pace the merchant declares for its endpoint, if within the ceiling its operators set: false (nothing changed)
 * when above it. The limiter reads it from the next admission on.
 */
export async function declareMerchantPace(db: Queryable, merchantId: string, ratePerSecond: number, burst: number) {
  const { rowCount } = await db.query(
    `UPDATE merchants SET rate_per_second = $2::numeric, burst = $3::integer, updated_at = now()
      WHERE id = $1 AND $2::numeric <= rate_ceiling AND $3::integer <= burst_ceiling`,
    [merchantId, ratePerSecond, burst],
  );
  return rowCount === 1;
}

/** The event types the merchant's endpoint takes from now on: its webhooks written after this are sent or not by it. */
export async function setMerchantEventTypes(db: Queryable, merchantId: string, types: readonly string[] | null) {
  await db.query(`UPDATE merchants SET event_types = $2::text[], updated_at = now() WHERE id = $1`, [
    merchantId,
    types,
  ]);
}

/**
 * A `verify` check's effect once its URL answered 2xx: the URL becomes the endpoint, and an endpoint a 410 disabled is
 * enabled again (an operators' pause is theirs to lift). Pending webhooks go to it from their next attempt. Says
 * whether it enabled the endpoint again: its held deliveries are then told (merchantResumed).
 */
export async function applyVerifiedUrl(db: Queryable, merchantId: string, url: string): Promise<boolean> {
  const { rows } = await db.query<{ enabled: boolean }>(
    `UPDATE merchants m SET endpoint_url = $2, updated_at = now(),
            status = CASE m.status WHEN 'disabled' THEN 'active' ELSE m.status END,
            disabled_reason = CASE m.status WHEN 'disabled' THEN NULL ELSE m.disabled_reason END,
            disabled_at = CASE m.status WHEN 'disabled' THEN NULL ELSE m.disabled_at END
       FROM (SELECT status FROM merchants WHERE id = $1 FOR UPDATE) before
      WHERE m.id = $1
      RETURNING before.status = 'disabled' AS enabled`,
    [merchantId, url],
  );
  return rows[0]?.enabled ?? false;
}

/**
 * Ends the merchant's previous secret within `inMs` (never later than it was to end): what it says of the secret named
 * `secretId`, of this merchant only.
 */
export async function expirePreviousSecret(
  db: Queryable,
  merchantId: string,
  secretId: string,
  inMs: number,
): Promise<'expired' | 'current' | 'not-found'> {
  const { rowCount } = await db.query(
    `UPDATE merchants
        SET previous_signing_secret_until = LEAST(COALESCE(previous_signing_secret_until, 'infinity'),
                                                  now() + make_interval(secs => $3::double precision / 1000)),
            updated_at = now()
      WHERE id = $1 AND previous_signing_secret_id = $2
        AND (previous_signing_secret_until IS NULL OR previous_signing_secret_until > now())`,
    [merchantId, secretId, inMs],
  );
  if (rowCount === 1) return 'expired';
  const { rows } = await db.query(`SELECT 1 FROM merchants WHERE id = $1 AND signing_secret_id = $2`, [
    merchantId,
    secretId,
  ]);
  return rows.length === 1 ? 'current' : 'not-found';
}
