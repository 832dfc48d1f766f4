/**
 * SQL of webhook deliveries: webhook_deliveries (the one webhook each release sends), delivery_attempts (every
 * HTTP attempt at sending it) and the decisions that move a quarantined delivery on (delivery_decisions).
 *
 * Every statement in the product that inserts or updates webhook_deliveries is in this file, so that its state
 * machine (`status`; the CHECKs are in src/db/migrations/001_baseline.sql) reads here whole:
 *
 *   (a ledger change commits) --enqueueWebhook--> pending --recordAttempt 'delivered'--> delivered
 *                                                  |   ^
 *                               quarantineDelivery |   | decideQuarantine 'replay' (a new policy run)
 *                                                  v   |
 *                                               quarantined --decideQuarantine 'discard'--> discarded
 *                                                  |
 *                                                  +----------decideQuarantine 'abandon'--> abandoned
 *
 *   delivered | discarded | abandoned --reopenForResend--> pending (a new policy run, driven by a resend's workflow)
 *
 *   transition                 function                      called from
 *   (none) -> pending          enqueueWebhook                releaseHold, in the release's one statement (outbox);
 *                                                            applyProcessorEvent, in the event's transaction
 *   pending -> delivered       recordAttempt 'delivered'     deliverWebhook, on a 2xx
 *   pending -> quarantined     quarantineDelivery            the hold workflow, when a policy run gives up
 *   quarantined -> pending     decideQuarantine 'replay'     the hold workflow, on an approved replay
 *   quarantined -> discarded   decideQuarantine 'discard'    the hold workflow, on an operator's discard
 *   quarantined -> abandoned   decideQuarantine 'abandon'    the hold workflow, when nobody decided in time
 *   (an end) -> pending        reopenForResend               the resend's workflow (`resendWebhook`), its first step
 *
 * delivered, discarded and abandoned are ends: nothing moves them but an operator's resend, which records itself
 * (webhook_resends) in the statement that reopens the row. `quarantineDelivery` moves only a pending
 * row, `decideQuarantine` only a quarantined one and `reopenForResend` only one at an end: each names its from-state
 * in its WHERE. `recordAttempt` does not; the delivery activity sends only for a row it has just read as pending.
 *
 * Writes that leave `status` alone: the send gate's one statement counts `attempt_count` on admission
 * (`attemptCountedOnAdmission`, composed into `acquire` in src/sql/merchant-budget.ts), and `recordAttempt` keeps
 * `last_status_code` and `last_error` of every attempt.
 *
 * A policy run is 1 + the replays approved and the resends made so far (`POLICY_RUN_SQL`): each starts one. A run is
 * delivered by the webhook's own workflow (its hold's release, or its event's delivery) until the first resend; from
 * then on by the latest resend's workflow (`DRIVEN_BY_SQL`, `deliveryWorkflowId` in src/contracts/ids.ts).
 */
import {
  ABANDONED_BY,
  HOLD_RELEASED_EVENT,
  type DeliveryStatus,
  type QuarantineDecision,
  type ResendClaim,
} from '../contracts/delivery.js';
import type { QuarantineReason } from '../contracts/failures.js';
import type { Queryable } from '../db/pool.js';
import { isoUtc } from '../db/sql.js';
import { PREVIOUS_SECRET_IN_OVERLAP_SQL } from './fragments.js';

export { HOLD_RELEASED_EVENT };

/**
 * A webhook about a hold, as the statement that enqueues it sees it: SQL expressions over the source rows (`from`).
 * The payload is `{type, timestamp, data}` with `data`'s keys in this order; its `sequence` is the hold's ordinal.
 */
interface WebhookToEnqueue {
  /** The FROM clause the expressions read (a CTE of the statement that composes this one). */
  from: string;
  holdId: string;
  merchantId: string;
  webhookId: string;
  eventType: string;
  timestamp: string;
  /** `data`'s keys and SQL values, in order; `sequence` (the ordinal) is added where `SEQUENCE` stands. */
  data: readonly (readonly [key: string, value: string] | typeof SEQUENCE)[];
}

/** Where a payload's `data` carries the webhook's ordinal among its hold's webhooks. */
export const SEQUENCE = Symbol('sequence');

/**
 * The one outbox writer: a webhook row, fixed when written (payload, webhook id) and never changed after; pending, or
 * `not_subscribed` (never sent) if its merchant chose event types without this one.
 * It is composed into the statement of the ledger change it tells of (the release's, an applied processor event's),
 * so it exists if and only if that change committed. Its `hold_ordinal` numbers it after the hold's earlier webhooks,
 * which is what `sequence` says to the merchant: the hold's row is locked by the change, so the numbering cannot race.
 */
export const enqueueWebhook = (w: WebhookToEnqueue) => {
  const data = w.data
    .map((entry) => (entry === SEQUENCE ? `'sequence', o.ordinal` : `'${entry[0]}', ${entry[1]}`))
    .join(', ');
  return `INSERT INTO webhook_deliveries (webhook_id, hold_id, merchant_id, event_type, payload, hold_ordinal, status)
     SELECT ${w.webhookId}, ${w.holdId}, ${w.merchantId}, ${w.eventType},
            json_build_object('type', ${w.eventType}, 'timestamp', ${w.timestamp}, 'data', json_build_object(${data}))::text,
            o.ordinal,
            coalesce((SELECT 'not_subscribed' FROM merchants m WHERE m.id = ${w.merchantId}
                       AND m.event_types IS NOT NULL AND NOT ${w.eventType} = ANY (m.event_types)), 'pending')
       FROM ${w.from}
      CROSS JOIN LATERAL (SELECT coalesce(max(w.hold_ordinal), 0) + 1 AS ordinal FROM webhook_deliveries w WHERE w.hold_id = ${w.holdId}) o
     RETURNING webhook_id`;
};

/**
 * A release's webhook (`hold.released`): the `webhook` step of the release's one statement (`releaseLockedHold` in
 * src/sql/holds.ts). Needs the released hold row (as RETURNING gives it) as the CTE `released` in scope.
 */
export const releasedWebhookEnqueued = () =>
  enqueueWebhook({
    from: 'released h',
    holdId: 'h.id',
    merchantId: 'h.merchant_id',
    webhookId: `'wh_' || h.id || '_' || to_char(h.expires_at AT TIME ZONE 'UTC', 'YYYYMMDDHH24MISSUS')`,
    eventType: `'${HOLD_RELEASED_EVENT}'`,
    timestamp: isoUtc('h.released_at'),
    data: [
      ['hold_id', 'h.id'],
      ['amount_minor', 'h.amount_minor'],
      ['currency', 'h.currency'],
      ['merchant_id', 'h.merchant_id'],
      ['released_at', isoUtc('h.released_at')],
      ['ledger_entry_id', 'h.ledger_entry_id::text'],
      SEQUENCE,
    ],
  });

export interface DeliveryForSending {
  status: DeliveryStatus;
  attemptCount: number;
  /** The exact bytes signed and sent. */
  payload: string;
  merchantId: string;
  holdId: string;
  endpointUrl: string;
  /** As the ledger holds them, sealed: the activity opens them right before it signs. */
  sealedSigningSecret: string | null;
  sealedPreviousSigningSecret: string | null;
  merchantStatus: 'active' | 'paused' | 'disabled';
  /** The merchant's raw `delivery_policy` overrides, unvalidated. */
  deliveryPolicy: unknown;
  /** Attempts already sent in this policy run. */
  runAttempts: number;
  /**
   * The oldest earlier webhook of the same hold still `pending`, and how long it has existed (ms): this one waits for
   * it, so a merchant hears of a hold's events in order. Null when there is none.
   */
  earlierPending: EarlierPending | null;
}

/** An earlier webhook of the same hold, still pending; what names the workflow that delivers it. */
export interface EarlierPending {
  webhookId: string;
  ageMs: number;
  eventType: string;
  /** The hold's expiry as its release workflow's id has it (`holdWorkflowId`): a `hold.released` is delivered there. */
  holdExpiresAt: string;
  /** The workflow of its latest resend, which delivers it if it has one (`DRIVEN_BY_SQL`). */
  drivenBy: string | null;
}

/**
 * A delivery with its merchant's endpoint, secrets (sealed) and policy, as one attempt needs them; undefined if none.
 */
export async function deliveryForSending(
  db: Queryable,
  webhookId: string,
  policyRun: number,
): Promise<DeliveryForSending | undefined> {
  const { rows } = await db.query<
    Omit<DeliveryForSending, 'earlierPending'> & {
      earlierPending: string | null;
      earlierAgeMs: number | null;
      earlierEventType: string | null;
      earlierDrivenBy: string | null;
      holdExpiresAt: string;
    }
  >(
    `SELECT d.status, d.attempt_count AS "attemptCount", d.payload, d.merchant_id AS "merchantId", d.hold_id AS "holdId",
            m.endpoint_url AS "endpointUrl", m.signing_secret AS "sealedSigningSecret",
            ${PREVIOUS_SECRET_IN_OVERLAP_SQL} AS "sealedPreviousSigningSecret", m.status AS "merchantStatus",
            m.delivery_policy AS "deliveryPolicy",
            (SELECT count(*) FROM delivery_attempts a WHERE a.webhook_id = d.webhook_id AND a.policy_run = $2::integer)::integer
              AS "runAttempts",
            p.webhook_id AS "earlierPending", (extract(epoch FROM now() - p.created_at) * 1000)::float8 AS "earlierAgeMs",
            p.event_type AS "earlierEventType", ${DRIVEN_BY_SQL('p')} AS "earlierDrivenBy",
            ${isoUtc('h.expires_at')} AS "holdExpiresAt"
       FROM webhook_deliveries d JOIN merchants m ON m.id = d.merchant_id JOIN auth_holds h ON h.id = d.hold_id
       LEFT JOIN LATERAL (
         SELECT e.webhook_id, e.created_at, e.event_type FROM webhook_deliveries e
          WHERE e.hold_id = d.hold_id AND e.hold_ordinal < d.hold_ordinal AND e.status = 'pending'
          ORDER BY e.hold_ordinal LIMIT 1
       ) p ON true
      WHERE d.webhook_id = $1::text`,
    [webhookId, policyRun],
  );
  const row = rows[0];
  if (!row) return undefined;
  const { earlierPending, earlierAgeMs, earlierEventType, earlierDrivenBy, holdExpiresAt, ...delivery } = row;
  return {
    ...delivery,
    earlierPending:
      earlierPending === null
        ? null
        : {
            webhookId: earlierPending,
            ageMs: earlierAgeMs ?? 0,
            eventType: earlierEventType ?? '',
            holdExpiresAt,
            drivenBy: earlierDrivenBy,
          },
  };
}

/**
 * attempt_count + 1 on an admitted send, returning the attempt's number: the `counted` step of the gate's one
 * statement (`acquire` in src/sql/merchant-budget.ts). Admission and the attempt's count are one statement, so
 * that nothing but the HTTP request stands between the gate and the wire. Needs the gate's decision as the CTE
 * `slot` in scope; `webhookIdParam` is the statement's placeholder for the webhook id (e.g. '$5').
 */
export const attemptCountedOnAdmission = (
  webhookIdParam: string,
) => `UPDATE webhook_deliveries SET attempt_count = attempt_count + 1
            WHERE webhook_id = ${webhookIdParam}::text AND (SELECT outcome FROM slot) = 'send'
            RETURNING attempt_count`;

interface AttemptRecord {
  webhookId: string;
  attemptNumber: number;
  policyRun: number;
  /** When Temporal scheduled this attempt, ms since the epoch. */
  scheduledAtMs: number;
  /**
   * When the merchant's budget admitted it (`acquire`'s `nowMs`: the ledger's clock at the gate), ms since the epoch:
   * the attempt log's pacing is the gate's, exactly.
   */
  startedAtMs: number;
  durationMs: number;
  statusCode: number | null;
  errorClass: string | null;
  /** Made inert when it was read (src/delivery/http-sender.ts): no control character, NUL included. */
  responseExcerpt: string | undefined;
  outcome: 'delivered' | 'retry' | 'quarantine';
  next?: { delayMs: number; reason: string };
}

/**
 * One HTTP attempt in the attempt log, and its result on the delivery: the last status and error, and on
 * 'delivered' the move pending -> delivered. One statement. `releaseToDeliveredSeconds`: for a release's webhook this
 * attempt delivered, from its row's writing (in the release's transaction) to now; else null.
 */
export async function recordAttempt(
  db: Queryable,
  a: AttemptRecord,
): Promise<{ releaseToDeliveredSeconds: number | null }> {
  const { rows } = await db.query<{ release_to_delivered_s: number | null }>(
    `WITH lease_returned AS (
       -- The attempt's lease on a request in flight (src/sql/merchant-budget.ts), given back with its record: its own,
       -- never a later attempt's.
       DELETE FROM merchant_requests_in_flight WHERE webhook_id = $1::text AND attempt_number = $2::integer
     ), attempt AS (
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
            -- A retry comes back after its delay (Temporal's, then the activity's): the reconciler waits that long.
            awaited_until = now() + make_interval(secs => coalesce($10::bigint, 0)::double precision / 1000)
      WHERE webhook_id = $1::text
      RETURNING CASE WHEN $9::text = 'delivered' AND event_type = 'hold.released'
                     THEN extract(epoch FROM now() - created_at)::float8 END AS release_to_delivered_s`,
    [
      a.webhookId,
      a.attemptNumber,
      a.policyRun,
      a.startedAtMs,
      a.durationMs,
      a.statusCode,
      a.errorClass,
      a.responseExcerpt ?? null,
      a.outcome,
      a.next?.delayMs ?? null,
      a.next?.reason ?? null,
      a.scheduledAtMs,
    ],
  );
  return { releaseToDeliveredSeconds: rows[0]?.release_to_delivered_s ?? null };
}

/**
 * Its workflow waits `waitMs` before it comes back to the webhook (the answer `wait` or `held`): the outbox reconciler
 * leaves the row alone until then.
 */
export async function markAwaited(db: Queryable, webhookId: string, waitMs: number): Promise<void> {
  await db.query(
    `UPDATE webhook_deliveries SET awaited_until = now() + make_interval(secs => $2::double precision / 1000)
      WHERE webhook_id = $1::text AND status = 'pending'`,
    [webhookId, waitMs],
  );
}

/** How much of the policy run's last response `last_error` quotes after a quarantine's detail. */
const QUARANTINE_EXCERPT_CHARS = 200;

/**
 * pending -> quarantined, with its reason; a no-op for a delivery no longer pending. `last_error` is the detail (the
 * failure's message, which never quotes the merchant) and the start of what the merchant answered last in this policy
 * run, from the attempt log: what an operator reads in `quarantine list`.
 */
export async function quarantineDelivery(
  db: Queryable,
  webhookId: string,
  reason: QuarantineReason,
  detail: string,
): Promise<void> {
  await db.query(
    `UPDATE webhook_deliveries d
        SET status = 'quarantined', quarantine_reason = $2::text, quarantined_at = now(),
            last_error = $3::text || coalesce(': ' || nullif(left(
              (SELECT a.response_excerpt FROM delivery_attempts a
                WHERE a.webhook_id = d.webhook_id AND a.policy_run = ${POLICY_RUN_SQL}
                ORDER BY a.attempt_number DESC LIMIT 1), ${QUARANTINE_EXCERPT_CHARS}), ''), '')
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

/** Who decided, why and under which ticket, as the ledger holds it. */
type DecisionAuthority = { ok: true; by: string; reason: string; ticket: string | null } | { ok: false; why: string };

/**
 * What in the ledger makes a decision on a webhook's quarantined run stand. A replay or a discard stands only on a row
 * an operator recorded before sending it (operator_decisions: this webhook, this run, this decision, this person), or,
 * for a replay, on an approved replay request whose items freeze this webhook at this run and whose approver is this
 * person. Where four eyes rule, a replay stands only on a request. An abandon is the workflow's own.
 */
export async function decisionAuthority(
  db: Queryable,
  input: QuarantineDecision,
  rules: { fourEyes: boolean },
): Promise<DecisionAuthority> {
  const { webhookId, policyRun, decision } = input;
  if (decision === 'abandon') return { ok: true, by: ABANDONED_BY, reason: input.reason, ticket: null };
  if (decision === 'replay' && input.replayRequestId !== undefined) {
    const { rows } = await db.query<{ approved_by: string | null; status: string; covers: boolean }>(
      `SELECT r.approved_by, r.status,
              EXISTS (SELECT 1 FROM replay_request_items i
                       WHERE i.request_id = r.id AND i.webhook_id = $2::text AND i.policy_run = $3::integer) AS covers
         FROM replay_requests r WHERE r.id = $1::text AND r.kind = 'replay'`,
      [input.replayRequestId, webhookId, policyRun],
    );
    const request = rows[0];
    const named = `replay request ${input.replayRequestId}`;
    if (!request) return { ok: false, why: `${named} is not in the ledger` };
    if (request.status !== 'approved' || request.approved_by === null)
      return { ok: false, why: `${named} is not approved` };
    if (!request.covers)
      return { ok: false, why: `${named} does not cover webhook ${webhookId}'s policy run ${policyRun}` };
    if (!(await samePersonInLedger(db, request.approved_by, input.by)))
      return { ok: false, why: `${named} was approved by ${request.approved_by}, not ${input.by}` };
    return { ok: true, by: request.approved_by, reason: input.reason, ticket: input.ticket ?? null };
  }
  if (decision === 'replay' && rules.fourEyes)
    return { ok: false, why: 'four eyes: a replay stands only on a replay request approved by a second person' };
  if (input.decisionId === undefined) {
    return {
      ok: false,
      why: `no decision in the ledger names it: a ${decision} is recorded before it is sent (npm run ops, through the admin API)`,
    };
  }
  const { rows } = await db.query<{
    webhook_id: string;
    policy_run: number | null;
    signal: string;
    sent_by: string;
    reason: string;
    ticket: string | null;
    same_person: boolean;
  }>(
    `SELECT webhook_id, policy_run, signal, sent_by, reason, ticket, identity_key(sent_by) = identity_key($2::text) AS same_person
       FROM operator_decisions WHERE decision_id = $1::text`,
    [input.decisionId, input.by],
  );
  const row = rows[0];
  const named = `decision ${input.decisionId}`;
  if (!row) return { ok: false, why: `${named} is not in the ledger` };
  if (row.webhook_id !== webhookId)
    return { ok: false, why: `${named} is for webhook ${row.webhook_id}, not ${webhookId}` };
  if (row.policy_run !== policyRun)
    return { ok: false, why: `${named} is for policy run ${row.policy_run}, not ${policyRun}` };
  const recorded = row.signal === 'approveReplay' ? 'replay' : 'discard';
  if (recorded !== decision) return { ok: false, why: `${named} is a ${recorded}, not a ${decision}` };
  if (!row.same_person) return { ok: false, why: `${named} was made by ${row.sent_by}, not ${input.by}` };
  return { ok: true, by: row.sent_by, reason: row.reason, ticket: row.ticket };
}

async function samePersonInLedger(db: Queryable, a: string, b: string): Promise<boolean> {
  const { rows } = await db.query<{ same: boolean }>('SELECT identity_key($1::text) = identity_key($2::text) AS same', [
    a,
    b,
  ]);
  return rows[0]!.same;
}

/**
 * Records the decision on a quarantined delivery as its authority says (who, why, the ticket) and moves it on
 * (quarantined -> pending | discarded | abandoned; a replay clears the reason). Idempotent per policy run: one decision
 * per run, the first wins; the answer is the decision the ledger holds for the run, which a retried call finds too.
 */
export async function decideQuarantine(
  db: Queryable,
  input: QuarantineDecision,
  authority: Extract<DecisionAuthority, { ok: true }>,
): Promise<{ decision: QuarantineDecision['decision']; by: string; reason: string }> {
  const { rows } = await db.query<{ decision: QuarantineDecision['decision']; decided_by: string; reason: string }>(
    `WITH decided AS (
       INSERT INTO delivery_decisions (webhook_id, policy_run, decision, decided_by, reason, ticket)
       VALUES ($1::text, $2::integer, $3::text, $4::text, $5::text, $6::text)
       ON CONFLICT (webhook_id, policy_run) DO NOTHING
       RETURNING webhook_id, decision, decided_by, reason
     ), moved AS (
       UPDATE webhook_deliveries
          SET status = $7::text,
              quarantine_reason = CASE WHEN $7::text = 'pending' THEN NULL ELSE quarantine_reason END
        WHERE webhook_id IN (SELECT webhook_id FROM decided) AND status = 'quarantined'
     )
     SELECT decision, decided_by, reason FROM decided
     UNION ALL
     SELECT decision, decided_by, reason FROM delivery_decisions
      WHERE webhook_id = $1::text AND policy_run = $2::integer AND NOT EXISTS (SELECT 1 FROM decided)`,
    [
      input.webhookId,
      input.policyRun,
      input.decision,
      authority.by,
      authority.reason,
      authority.ticket,
      DECIDED_STATUS[input.decision],
    ],
  );
  const row = rows[0];
  // Another call recorded this run's decision after this statement's snapshot was taken: the retry reads it.
  if (!row) throw new Error(`webhook ${input.webhookId}'s decision on policy run ${input.policyRun} is being recorded`);
  return { decision: row.decision, by: row.decided_by, reason: row.reason };
}

/**
 * A resend as its workflow records it: the claim (who asked, why, a request and its approver) as the worker checked it,
 * and the workflow that delivers it, recorded from the activity's own context, never from what a caller says.
 */
interface ResendRecord extends ResendClaim {
  workflowId: string;
  /** A request froze the webhook at this policy run: reopen only if it still stands there. */
  frozenRun?: number;
}

export type Reopened = {
  resendId: string;
  webhookId: string;
  holdId: string;
  merchantId: string;
  policyRun: number;
  fromStatus: DeliveryStatus;
};

/**
 * delivered | discarded | abandoned -> pending, as a new policy run, with the resend recorded (webhook_resends): one
 * statement, so a resend exists exactly when its row was reopened. The row forgets when it was delivered (the resend
 * keeps it). Undefined when the row is not at an end (pending, quarantined: being delivered or waiting for a decision),
 * not at the request's frozen run, or another resend took the run first.
 */
export async function reopenForResend(db: Queryable, r: ResendRecord): Promise<Reopened | undefined> {
  const { rows } = await db.query<Reopened>(
    `WITH target AS (
       SELECT d.webhook_id, d.status, d.delivered_at, ${POLICY_RUN_SQL} AS run
         FROM webhook_deliveries d
        WHERE d.webhook_id = $2::text AND d.status IN ('delivered', 'discarded', 'abandoned')
        FOR UPDATE
     ), resent AS (
       INSERT INTO webhook_resends (id, webhook_id, policy_run, from_status, from_delivered_at, requested_by, reason, ticket,
                                    request_id, approved_by, workflow_id)
       SELECT $1::text, t.webhook_id, t.run + 1, t.status, t.delivered_at, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text
         FROM target t WHERE $9::integer IS NULL OR t.run = $9::integer
       ON CONFLICT DO NOTHING
       RETURNING id, webhook_id, policy_run, from_status
     )
     UPDATE webhook_deliveries d
        SET status = 'pending', delivered_at = NULL, quarantine_reason = NULL
       FROM resent
      WHERE d.webhook_id = resent.webhook_id
     RETURNING resent.id AS "resendId", d.webhook_id AS "webhookId", d.hold_id AS "holdId", d.merchant_id AS "merchantId",
               resent.policy_run AS "policyRun", resent.from_status AS "fromStatus"`,
    [
      r.resendId,
      r.webhookId,
      r.requestedBy,
      r.reason,
      r.ticket ?? null,
      r.requestId ?? null,
      r.approvedBy ?? null,
      r.workflowId,
      r.frozenRun ?? null,
    ],
  );
  return rows[0];
}

/** The resend with this id as recorded (a retried activity finds its own), with its webhook's hold and merchant. */
export async function resendById(
  db: Queryable,
  resendId: string,
): Promise<(Reopened & { workflowId: string }) | undefined> {
  const { rows } = await db.query<Reopened & { workflowId: string }>(
    `SELECT r.id AS "resendId", r.webhook_id AS "webhookId", d.hold_id AS "holdId", d.merchant_id AS "merchantId",
            r.policy_run AS "policyRun", r.from_status AS "fromStatus", r.workflow_id AS "workflowId"
       FROM webhook_resends r JOIN webhook_deliveries d ON d.webhook_id = r.webhook_id WHERE r.id = $1::text`,
    [resendId],
  );
  return rows[0];
}

export interface ResendFilters {
  merchantId?: string;
  /** ISO timestamps bounding when the webhook was written (its event). */
  since?: string;
  until?: string;
  webhookId?: string;
}

/** A webhook that reached an end and may be resent, with the policy run it ended in. */
export interface ResendableWebhook {
  webhookId: string;
  holdId: string;
  merchantId: string;
  eventType: string;
  status: DeliveryStatus;
  createdAt: string;
  policyRun: number;
}

/** Webhooks at an end (delivered, discarded, abandoned) matching every given filter, oldest first. */
export async function resendableWebhooks(db: Queryable, filters: ResendFilters): Promise<ResendableWebhook[]> {
  const { rows } = await db.query<Omit<ResendableWebhook, 'createdAt'> & { createdAt: Date }>(
    `SELECT d.webhook_id AS "webhookId", d.hold_id AS "holdId", d.merchant_id AS "merchantId", d.event_type AS "eventType",
            d.status, d.created_at AS "createdAt", ${POLICY_RUN_SQL} AS "policyRun"
       FROM webhook_deliveries d
      WHERE d.status IN ('delivered', 'discarded', 'abandoned')
        AND ($1::text IS NULL OR d.merchant_id = $1::text)
        AND ($2::timestamptz IS NULL OR d.created_at >= $2::timestamptz)
        AND ($3::timestamptz IS NULL OR d.created_at < $3::timestamptz)
        AND ($4::text IS NULL OR d.webhook_id = $4::text)
      ORDER BY d.created_at, d.webhook_id`,
    [filters.merchantId ?? null, filters.since ?? null, filters.until ?? null, filters.webhookId ?? null],
  );
  return rows.map((r) => ({ ...r, createdAt: r.createdAt.toISOString() }));
}

/** Webhooks in one status, oldest first (written in [since, until) where given), with their hold, attempts and runs. */
export async function webhooksInStatus(
  db: Queryable,
  status: DeliveryStatus,
  filters: { merchantId?: string; since?: string; until?: string; limit: number },
): Promise<Record<string, unknown>[]> {
  const { rows } = await db.query(
    `SELECT d.webhook_id, d.hold_id, d.merchant_id, d.event_type, d.created_at, d.updated_at, d.attempt_count,
            ${POLICY_RUN_SQL} AS policy_run, d.quarantine_reason, d.last_error
       FROM webhook_deliveries d
      WHERE d.status = $1::text
        AND ($2::text IS NULL OR d.merchant_id = $2::text)
        AND ($3::timestamptz IS NULL OR d.created_at >= $3::timestamptz)
        AND ($4::timestamptz IS NULL OR d.created_at < $4::timestamptz)
      ORDER BY d.created_at, d.webhook_id
      LIMIT $5::integer`,
    [status, filters.merchantId ?? null, filters.since ?? null, filters.until ?? null, filters.limit],
  );
  return rows;
}

/** The latest decision recorded on a webhook (its quarantined run, what, by whom), or undefined. */
export async function latestDecision(
  db: Queryable,
  webhookId: string,
): Promise<{ policyRun: number; decision: QuarantineDecision['decision']; decidedBy: string } | undefined> {
  const { rows } = await db.query<{ policyRun: number; decision: QuarantineDecision['decision']; decidedBy: string }>(
    `SELECT policy_run AS "policyRun", decision, decided_by AS "decidedBy" FROM delivery_decisions
      WHERE webhook_id = $1::text ORDER BY policy_run DESC LIMIT 1`,
    [webhookId],
  );
  return rows[0];
}

/** 1 + approved replays + resends so far: the webhook's current policy run. Needs `d` (webhook_deliveries) in scope. */
export const POLICY_RUN_SQL = `(1 + (SELECT count(*) FROM delivery_decisions x WHERE x.webhook_id = d.webhook_id AND x.decision = 'replay')
                          + (SELECT count(*) FROM webhook_resends r WHERE r.webhook_id = d.webhook_id))::integer`;

/**
 * The workflow of the webhook's latest resend (it drives every run since), or NULL: its own. Needs `alias` in scope.
 */
const DRIVEN_BY_SQL = (alias: string) =>
  `(SELECT r.workflow_id FROM webhook_resends r WHERE r.webhook_id = ${alias}.webhook_id ORDER BY r.policy_run DESC LIMIT 1)`;

export interface QuarantineFilters {
  merchantId?: string;
  /** One hold's webhooks, or one webhook: a replay request for a single delivery. */
  holdId?: string;
  webhookId?: string;
  /** ISO timestamps bounding when the delivery was quarantined. */
  since?: string;
  until?: string;
  reason?: QuarantineReason;
  /** Only the oldest this many (a canary: a small known set replayed before the rest). */
  limit?: number;
}

export interface QuarantinedDelivery {
  webhookId: string;
  holdId: string;
  merchantId: string;
  reason: QuarantineReason;
  quarantinedAt: string;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  /** The policy run that ended in this quarantine. */
  policyRun: number;
}

/** Quarantined deliveries matching every given filter, oldest quarantine first. */
export async function quarantinedDeliveries(db: Queryable, filters: QuarantineFilters): Promise<QuarantinedDelivery[]> {
  const { rows } = await db.query<Omit<QuarantinedDelivery, 'quarantinedAt'> & { quarantinedAt: Date }>(
    `SELECT d.webhook_id AS "webhookId", d.hold_id AS "holdId", d.merchant_id AS "merchantId", d.quarantine_reason AS reason,
            d.quarantined_at AS "quarantinedAt", d.attempt_count AS attempts, d.last_status_code AS "lastStatusCode",
            d.last_error AS "lastError", ${POLICY_RUN_SQL} AS "policyRun"
       FROM webhook_deliveries d
      WHERE d.status = 'quarantined'
        AND ($1::text IS NULL OR d.merchant_id = $1::text)
        AND ($2::timestamptz IS NULL OR d.quarantined_at >= $2::timestamptz)
        AND ($3::timestamptz IS NULL OR d.quarantined_at < $3::timestamptz)
        AND ($4::text IS NULL OR d.quarantine_reason = $4::text)
        AND ($5::text IS NULL OR d.hold_id = $5::text)
        AND ($6::text IS NULL OR d.webhook_id = $6::text)
      ORDER BY d.quarantined_at, d.webhook_id
      LIMIT $7::integer`,
    [
      filters.merchantId ?? null,
      filters.since ?? null,
      filters.until ?? null,
      filters.reason ?? null,
      filters.holdId ?? null,
      filters.webhookId ?? null,
      filters.limit ?? null,
    ],
  );
  return rows.map((r) => ({ ...r, quarantinedAt: r.quarantinedAt.toISOString() }));
}

/**
 * A delivery as an operator's decision needs it: where it stands, and its hold's exact expiry (naming the workflow).
 */
export interface DecisionTarget {
  webhookId: string;
  holdId: string;
  merchantId: string;
  holdExpiresAt: string;
  /** hold.released (the hold's release workflow delivers it) or a processor event's (its own delivery workflow). */
  eventType: string;
  status: DeliveryStatus;
  policyRun: number;
  /** The workflow of its latest resend, which delivers its current run if it has one. */
  drivenBy: string | null;
}

const DECISION_TARGET_SQL = `
  SELECT d.webhook_id AS "webhookId", d.hold_id AS "holdId", d.merchant_id AS "merchantId",
         ${isoUtc('h.expires_at')} AS "holdExpiresAt", d.event_type AS "eventType", d.status,
         ${POLICY_RUN_SQL} AS "policyRun", ${DRIVEN_BY_SQL('d')} AS "drivenBy"
    FROM webhook_deliveries d JOIN auth_holds h ON h.id = d.hold_id`;

/** `where` is one of the two constant conditions below, never a value. */
async function decisionTargetsWhere(db: Queryable, where: string, params: unknown[]): Promise<DecisionTarget[]> {
  const { rows } = await db.query<DecisionTarget>(
    `${DECISION_TARGET_SQL}
      WHERE ${where}`,
    params,
  );
  return rows;
}

/** The deliveries with these webhook ids (a replay request's frozen items). */
export function decisionTargetsOf(db: Queryable, webhookIds: readonly string[]): Promise<DecisionTarget[]> {
  return decisionTargetsWhere(db, 'd.webhook_id = ANY($1::text[])', [webhookIds]);
}

/** A hold's delivery, or undefined when it has none (not released, or no such hold). */
export async function decisionTargetOfHold(db: Queryable, holdId: string): Promise<DecisionTarget | undefined> {
  const [target] = await decisionTargetsWhere(db, `d.hold_id = $1::text AND d.event_type = '${HOLD_RELEASED_EVENT}'`, [
    holdId,
  ]);
  return target;
}

/** A webhook, with what starting a delivery run for it needs: its merchant and the merchant's policy overrides. */
interface WebhookToDeliver {
  webhookId: string;
  holdId: string;
  merchantId: string;
  eventType: string;
  status: DeliveryStatus;
  deliveryPolicy: unknown;
}

export async function webhookToDeliver(db: Queryable, webhookId: string): Promise<WebhookToDeliver | undefined> {
  const { rows } = await db.query<WebhookToDeliver>(
    `SELECT d.webhook_id AS "webhookId", d.hold_id AS "holdId", d.merchant_id AS "merchantId", d.event_type AS "eventType",
            d.status, m.delivery_policy AS "deliveryPolicy"
       FROM webhook_deliveries d JOIN merchants m ON m.id = d.merchant_id WHERE d.webhook_id = $1::text`,
    [webhookId],
  );
  return rows[0];
}

/** A hold's delivery as the operator's status report shows it, or null. */
export async function deliveryOfHold(db: Queryable, holdId: string): Promise<Record<string, unknown> | null> {
  const { rows } = await db.query(
    `SELECT webhook_id, status, attempt_count, quarantine_reason, last_status_code, last_error, created_at, delivered_at, quarantined_at
       FROM webhook_deliveries WHERE hold_id = $1::text AND event_type = '${HOLD_RELEASED_EVENT}'`,
    [holdId],
  );
  return rows[0] ?? null;
}

/** A hold's attempt log, in attempt order. */
export async function attemptsOfHold(db: Queryable, holdId: string): Promise<Record<string, unknown>[]> {
  const { rows } = await db.query(
    `SELECT a.attempt_number, a.policy_run, a.started_at, a.duration_ms, a.status_code, a.error_class, a.outcome,
            a.next_retry_delay_ms, a.retry_reason
       FROM delivery_attempts a JOIN webhook_deliveries d ON d.webhook_id = a.webhook_id
      WHERE d.hold_id = $1::text AND d.event_type = '${HOLD_RELEASED_EVENT}' ORDER BY a.attempt_number`,
    [holdId],
  );
  return rows;
}
