/**
 * SQL of webhook deliveries: webhook_deliveries (the one webhook each release sends), delivery_attempts (every
 * HTTP attempt at sending it) and the decisions that move a quarantined delivery on (delivery_decisions).
 *
 * Every statement in the product that inserts or updates webhook_deliveries is in this file, so that its state
 * machine (`status`; the CHECKs are in migrations/002_webhook_deliveries.sql) reads here whole:
 *
 *   (release commits) --enqueueReleasedWebhook--> pending --recordAttempt 'delivered'--> delivered
 *                                                  |   ^
 *                               quarantineDelivery |   | decideQuarantine 'replay' (a new policy run)
 *                                                  v   |
 *                                               quarantined --decideQuarantine 'discard'--> discarded
 *                                                  |
 *                                                  +----------decideQuarantine 'abandon'--> abandoned
 *
 *   transition                 function                      called from
 *   (none) -> pending          enqueueReleasedWebhook        releaseHold, in the release's transaction (outbox)
 *   pending -> delivered       recordAttempt 'delivered'     deliverWebhook, on a 2xx
 *   pending -> quarantined     quarantineDelivery            the hold workflow, when a policy run gives up
 *   quarantined -> pending     decideQuarantine 'replay'     the hold workflow, on an approved replay
 *   quarantined -> discarded   decideQuarantine 'discard'    the hold workflow, on an operator's discard
 *   quarantined -> abandoned   decideQuarantine 'abandon'    the hold workflow, when nobody decided in time
 *
 * delivered, discarded and abandoned are terminal. `quarantineDelivery` moves only a pending row and
 * `decideQuarantine` only a quarantined one: each names its from-state in its WHERE. `recordAttempt` does not; the
 * delivery activity sends only for a row it has just read as pending.
 *
 * Writes that leave `status` alone: the send gate's one statement counts `attempt_count` on admission
 * (`attemptCountedOnAdmission`, composed into `acquire` in src/sql/merchant-budget.ts), and `recordAttempt` keeps
 * `last_status_code` and `last_error` of every attempt.
 */
import type pg from 'pg';
import type { DeliveryStatus, QuarantineDecision } from '../contracts/delivery.js';
import type { QuarantineReason } from '../contracts/failures.js';
import type { Queryable } from '../db/pool.js';
import { isoUtc } from '../db/sql.js';

/** The event type of the webhook each release sends. */
export const HOLD_RELEASED_EVENT = 'hold.released';

/**
 * pending: the outbox row of a committed release, fixed then (payload, webhook id) and never changed after. In the
 * release's transaction, after the hold row is marked released, so it exists if and only if the release committed.
 */
export async function enqueueReleasedWebhook(tx: pg.PoolClient, holdId: string): Promise<void> {
  await tx.query(
    `INSERT INTO webhook_deliveries (webhook_id, hold_id, merchant_id, event_type, payload)
     SELECT 'wh_' || h.id || '_' || to_char(h.expires_at AT TIME ZONE 'UTC', 'YYYYMMDDHH24MISSUS'), h.id, h.merchant_id,
            '${HOLD_RELEASED_EVENT}',
            json_build_object(
              'type', '${HOLD_RELEASED_EVENT}',
              'timestamp', ${isoUtc('h.released_at')},
              'data', json_build_object(
                'hold_id', h.id, 'amount_minor', h.amount_minor, 'currency', h.currency, 'merchant_id', h.merchant_id,
                'released_at', ${isoUtc('h.released_at')}, 'ledger_entry_id', h.ledger_entry_id::text))::text
       FROM auth_holds h WHERE h.id = $1::text`,
    [holdId],
  );
}

export interface DeliveryForSending {
  status: DeliveryStatus;
  attemptCount: number;
  /** The exact bytes signed and sent. */
  payload: string;
  merchantId: string;
  holdId: string;
  endpointUrl: string;
  signingSecret: string | null;
  previousSigningSecret: string | null;
  merchantStatus: 'active' | 'paused' | 'disabled';
  /** The merchant's raw `delivery_policy` overrides, unvalidated. */
  deliveryPolicy: unknown;
  /** Attempts already sent in this policy run. */
  runAttempts: number;
}

/** A delivery with its merchant's endpoint, secrets and policy, as one attempt needs them; undefined if none. */
export async function deliveryForSending(db: Queryable, webhookId: string, policyRun: number): Promise<DeliveryForSending | undefined> {
  const { rows } = await db.query<{
    status: DeliveryStatus;
    attempt_count: number;
    payload: string;
    merchant_id: string;
    endpoint_url: string;
    signing_secret: string | null;
    previous_signing_secret: string | null;
    merchant_status: DeliveryForSending['merchantStatus'];
    delivery_policy: unknown;
    run_attempts: number;
    hold_id: string;
  }>(
    `SELECT d.status, d.attempt_count, d.payload, d.merchant_id, d.hold_id, m.endpoint_url, m.signing_secret,
            m.previous_signing_secret, m.status AS merchant_status, m.delivery_policy,
            (SELECT count(*) FROM delivery_attempts a WHERE a.webhook_id = d.webhook_id AND a.policy_run = $2::integer)::integer
              AS run_attempts
       FROM webhook_deliveries d JOIN merchants m ON m.id = d.merchant_id
      WHERE d.webhook_id = $1::text`,
    [webhookId, policyRun],
  );
  const row = rows[0];
  if (!row) return undefined;
  return {
    status: row.status,
    attemptCount: row.attempt_count,
    payload: row.payload,
    merchantId: row.merchant_id,
    holdId: row.hold_id,
    endpointUrl: row.endpoint_url,
    signingSecret: row.signing_secret,
    previousSigningSecret: row.previous_signing_secret,
    merchantStatus: row.merchant_status,
    deliveryPolicy: row.delivery_policy,
    runAttempts: row.run_attempts,
  };
}

/**
 * attempt_count + 1 on an admitted send, returning the attempt's number: the `counted` step of the gate's one
 * statement (`acquire` in src/sql/merchant-budget.ts). Admission and the attempt's count are one statement, so
 * that nothing but the HTTP request stands between the gate and the wire. Needs the gate's decision as the CTE
 * `slot` in scope; `webhookIdParam` is the statement's placeholder for the webhook id (e.g. '$5').
 */
export const attemptCountedOnAdmission = (webhookIdParam: string) => `UPDATE webhook_deliveries SET attempt_count = attempt_count + 1, updated_at = now()
            WHERE webhook_id = ${webhookIdParam}::text AND (SELECT outcome FROM slot) = 'send'
            RETURNING attempt_count`;

/** Merchant response excerpts are stored as text: strip NUL, which Postgres text cannot hold. */
const storable = (text: string | undefined) => (text === undefined ? null : text.replaceAll('\u0000', ''));

export interface AttemptRecord {
  webhookId: string;
  attemptNumber: number;
  policyRun: number;
  /** When Temporal scheduled this attempt, ms since the epoch. */
  scheduledAtMs: number;
  startedAtMs: number;
  durationMs: number;
  statusCode: number | null;
  errorClass: string | null;
  responseExcerpt: string | undefined;
  outcome: 'delivered' | 'retry' | 'quarantine';
  next?: { delayMs: number; reason: string };
}

/**
 * One HTTP attempt in the attempt log, and its result on the delivery: the last status and error, and on
 * 'delivered' the move pending -> delivered. One statement.
 */
export async function recordAttempt(db: Queryable, a: AttemptRecord): Promise<void> {
  await db.query(
    `WITH attempt AS (
       INSERT INTO delivery_attempts (webhook_id, attempt_number, policy_run, scheduled_at, started_at, duration_ms,
                                      status_code, error_class, response_excerpt, outcome, next_retry_delay_ms, retry_reason)
       VALUES ($1::text, $2::integer, $3::integer, to_timestamp($12::double precision / 1000),
               to_timestamp($4::double precision / 1000), $5::integer, $6::integer,
               $7::text, $8::text, $9::text, $10::bigint, $11::text)
     )
     UPDATE webhook_deliveries
        SET last_status_code = $6::integer,
            last_error = CASE WHEN $9::text = 'delivered' THEN NULL ELSE coalesce($7::text, 'HTTP ' || $6::integer) END,
            status = CASE WHEN $9::text = 'delivered' THEN 'delivered' ELSE status END,
            delivered_at = CASE WHEN $9::text = 'delivered' THEN now() ELSE delivered_at END,
            updated_at = now()
      WHERE webhook_id = $1::text`,
    [a.webhookId, a.attemptNumber, a.policyRun, a.startedAtMs, a.durationMs, a.statusCode, a.errorClass,
      storable(a.responseExcerpt), a.outcome, a.next?.delayMs ?? null, a.next?.reason ?? null, a.scheduledAtMs],
  );
}

/** pending -> quarantined, with its reason; a no-op for a delivery no longer pending. */
export async function quarantineDelivery(db: Queryable, webhookId: string, reason: QuarantineReason, detail: string): Promise<void> {
  await db.query(
    `UPDATE webhook_deliveries
        SET status = 'quarantined', quarantine_reason = $2::text, quarantined_at = now(),
            last_error = $3::text, updated_at = now()
      WHERE webhook_id = $1::text AND status = 'pending'`,
    [webhookId, reason, detail],
  );
}

/** Where each decision moves a quarantined delivery. */
const DECIDED_STATUS: Readonly<Record<QuarantineDecision['decision'], DeliveryStatus>> = Object.freeze({
  replay: 'pending',
  discard: 'discarded',
  abandon: 'abandoned',
});

/**
 * Records the decision on a quarantined delivery and moves it on (quarantined -> pending | discarded | abandoned;
 * a replay clears the reason). One statement; idempotent per policy run (one decision per run, the first wins).
 */
export async function decideQuarantine(db: Queryable, input: QuarantineDecision): Promise<void> {
  await db.query(
    `WITH decided AS (
       INSERT INTO delivery_decisions (webhook_id, policy_run, decision, decided_by, reason, ticket)
       VALUES ($1::text, $2::integer, $3::text, $4::text, $5::text, $6::text)
       ON CONFLICT (webhook_id, policy_run) DO NOTHING
       RETURNING webhook_id
     )
     UPDATE webhook_deliveries
        SET status = $7::text,
            quarantine_reason = CASE WHEN $7::text = 'pending' THEN NULL ELSE quarantine_reason END,
            updated_at = now()
      WHERE webhook_id IN (SELECT webhook_id FROM decided) AND status = 'quarantined'`,
    [input.webhookId, input.policyRun, input.decision, input.by, input.reason, input.ticket ?? null, DECIDED_STATUS[input.decision]],
  );
}
