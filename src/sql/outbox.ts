/**
 * SQL of the outbox reconciler: pending and quarantined webhooks nothing may be driving (with their latest resend,
 * whose workflow drives a resent one), and each run's account.
 */
import type { Queryable } from '../db/pool.js';
import { isoUtc } from '../db/sql.js';
import type { QuarantineReason } from '../contracts/failures.js';
import type { OutboxCursor } from '../contracts/outbox.js';
import { POLICY_RUN_SQL } from './deliveries.js';

/** A pending or quarantined webhook old enough to be looked at: what naming and restarting its workflow needs. */
export interface OutboxCandidate {
  webhookId: string;
  holdId: string;
  merchantId: string;
  eventType: string;
  /** The hold's expiry as its release workflow's id has it (`holdWorkflowId`). */
  holdExpiresAt: string;
  deliveryPolicy: unknown;
  createdAt: string;
  /** Its latest resend, whose workflow delivers it (src/contracts/ids.ts, `deliveryWorkflowId`), if it was resent. */
  resend: { resendId: string; workflowId: string; requestedBy: string; reason: string; policyRun: number } | null;
  /** Quarantined: as the ledger recorded it, the policy run it closed and the attempts so far. */
  quarantine: { reason: QuarantineReason; since: string; policyRun: number; attempts: number } | null;
}

/**
 * Pending webhooks created and last touched (an attempt admitted, a decision) more than `graceMs` ago, and not awaited
 * by a workflow that said it comes back to them (`awaited_until`, within the grace), and quarantined ones as old (a
 * quarantine waits for a human in its workflow, which may have ended too), oldest first, after `cursor`.
 */
export async function outboxCandidates(
  db: Queryable,
  graceMs: number,
  limit: number,
  cursor?: OutboxCursor,
): Promise<OutboxCandidate[]> {
  const { rows } = await db.query<OutboxCandidate>(
    `SELECT d.webhook_id AS "webhookId", d.hold_id AS "holdId", d.merchant_id AS "merchantId", d.event_type AS "eventType",
            ${isoUtc('h.expires_at')} AS "holdExpiresAt", m.delivery_policy AS "deliveryPolicy",
            ${isoUtc('d.created_at')} AS "createdAt",
            CASE WHEN r.id IS NOT NULL THEN json_build_object('resendId', r.id, 'workflowId', r.workflow_id,
              'requestedBy', r.requested_by, 'reason', r.reason, 'policyRun', r.policy_run) END AS resend,
            CASE WHEN d.status = 'quarantined' THEN json_build_object('reason', d.quarantine_reason,
              'since', ${isoUtc('d.quarantined_at')}, 'policyRun', ${POLICY_RUN_SQL}, 'attempts', d.attempt_count) END
              AS quarantine
       FROM webhook_deliveries d JOIN auth_holds h ON h.id = d.hold_id JOIN merchants m ON m.id = d.merchant_id
       LEFT JOIN LATERAL (
         SELECT x.id, x.workflow_id, x.requested_by, x.reason, x.policy_run FROM webhook_resends x
          WHERE x.webhook_id = d.webhook_id ORDER BY x.policy_run DESC LIMIT 1
       ) r ON true
      WHERE (d.status = 'quarantined' OR d.status = 'pending'
             AND (d.awaited_until IS NULL OR d.awaited_until <= now() - make_interval(secs => $1::double precision / 1000)))
        AND d.created_at <= now() - make_interval(secs => $1::double precision / 1000)
        AND d.updated_at <= now() - make_interval(secs => $1::double precision / 1000)
        AND ($3::timestamptz IS NULL OR (d.created_at, d.webhook_id) > ($3::timestamptz, $4::text))
      ORDER BY d.created_at, d.webhook_id
      LIMIT $2::integer`,
    [graceMs, limit, cursor?.createdAt ?? null, cursor?.webhookId ?? null],
  );
  return rows;
}

interface ReconcileRecord {
  graceMs: number;
  checked: number;
  running: number;
  restarted: number;
  unfixable: number;
  details: {
    restarted: string[];
    unfixable: { webhookId: string; why: string }[];
    truncated: boolean;
    resumeAfter?: OutboxCursor;
  };
}

/** Where the last run stopped with its budget spent, if it did: this run goes on after it. */
export async function lastStop(db: Queryable): Promise<OutboxCursor | undefined> {
  const { rows } = await db.query<{ resume_after: OutboxCursor | null }>(
    `SELECT details->'resumeAfter' AS resume_after FROM outbox_reconciliations ORDER BY id DESC LIMIT 1`,
  );
  return rows[0]?.resume_after ?? undefined;
}

export async function recordReconciliation(db: Queryable, r: ReconcileRecord): Promise<void> {
  await db.query(
    `INSERT INTO outbox_reconciliations (grace_ms, checked, running, restarted, unfixable, details)
     VALUES ($1::bigint, $2::integer, $3::integer, $4::integer, $5::integer, $6::jsonb)`,
    [r.graceMs, r.checked, r.running, r.restarted, r.unfixable, JSON.stringify(r.details)],
  );
}
