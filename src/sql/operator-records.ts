/**
 * SQL of what operators did: replay requests and their frozen items (replay_requests, replay_request_items),
 * requests to skip a missing processor sequence (processor_skip_requests), every decision made with the ops tooling
 * (operator_decisions), and the decisions recorded on a hold's delivery (delivery_decisions, written by
 * `decideQuarantine` in src/sql/deliveries.ts). Both kinds of request are four-eyes: the ledger refuses an
 * approver who is the requester by `identity_key()`.
 */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import type { Queryable } from '../db/pool.js';
import { HOLD_RELEASED_EVENT, type QuarantineFilters, type ResendFilters } from './deliveries.js';

/** What the ledger says of a resend request for one webhook: approved, by whom, and the run it froze the webhook at. */
export async function resendApprovalFor(db: Queryable, requestId: string, webhookId: string) {
  const { rows } = await db.query<{
    status: string;
    requestedBy: string;
    approvedBy: string | null;
    frozenRun: number | null;
  }>(
    `SELECT r.status, r.requested_by AS "requestedBy", r.approved_by AS "approvedBy",
            (SELECT i.policy_run FROM replay_request_items i WHERE i.request_id = r.id AND i.webhook_id = $2::text) AS "frozenRun"
       FROM replay_requests r WHERE r.id = $1::text AND r.kind = 'resend'`,
    [requestId, webhookId],
  );
  return rows[0];
}

export type RequestKind = 'replay' | 'resend';

/**
 * A request awaiting approval, with the filters that selected its items: a replay of quarantined webhooks, or a resend
 * of webhooks at an end.
 */
export async function insertReplayRequest(
  tx: pg.PoolClient,
  request: {
    id: string;
    requestedBy: string;
    filters: QuarantineFilters | ResendFilters;
    itemCount: number;
    kind: RequestKind;
  },
): Promise<void> {
  await tx.query(
    'INSERT INTO replay_requests (id, requested_by, filters, item_count, kind) VALUES ($1::text, $2::text, $3::jsonb, $4::integer, $5::text)',
    [request.id, request.requestedBy, JSON.stringify(request.filters), request.itemCount, request.kind],
  );
}

/** The deliveries a replay request froze, each with the policy run it was quarantined in. */
export async function insertReplayRequestItems(
  tx: pg.PoolClient,
  requestId: string,
  items: readonly { webhookId: string; policyRun: number }[],
): Promise<void> {
  await tx.query(
    `INSERT INTO replay_request_items (request_id, webhook_id, policy_run)
     SELECT $1::text, w, r FROM unnest($2::text[], $3::integer[]) AS i(w, r)`,
    [requestId, items.map((i) => i.webhookId), items.map((i) => i.policyRun)],
  );
}

export async function replayRequest(db: Queryable, requestId: string) {
  const { rows } = await db.query<{
    requestedBy: string;
    status: string;
    approvedBy: string | null;
    kind: RequestKind;
  }>(
    'SELECT requested_by AS "requestedBy", status, approved_by AS "approvedBy", kind FROM replay_requests WHERE id = $1::text',
    [requestId],
  );
  return rows[0];
}

/** pending -> approved; false when the request was not pending (already approved). */
export async function markReplayRequestApproved(
  db: Queryable,
  requestId: string,
  approvedBy: string,
): Promise<boolean> {
  const approved = await db.query(
    `UPDATE replay_requests SET status = 'approved', approved_by = $2::text, approved_at = now()
      WHERE id = $1::text AND status = 'pending'`,
    [requestId, approvedBy],
  );
  return approved.rowCount !== 0;
}

/** A request's frozen items, each with the outcome its approval recorded (null: not sent yet, or interrupted). */
export async function replayRequestItems(db: Queryable, requestId: string) {
  const { rows } = await db.query<{
    webhookId: string;
    policyRun: number;
    outcome: 'applied' | 'ignored' | null;
    decidedRun: boolean;
  }>(
    // Decided: the replay of the frozen run recorded (a replay request), or the resend carrying out the request (a
    // resend request).
    `SELECT i.webhook_id AS "webhookId", i.policy_run AS "policyRun", i.outcome,
            EXISTS (SELECT 1 FROM delivery_decisions x
                     WHERE x.webhook_id = i.webhook_id AND x.policy_run = i.policy_run AND x.decision = 'replay')
            OR EXISTS (SELECT 1 FROM webhook_resends s WHERE s.request_id = i.request_id AND s.webhook_id = i.webhook_id) AS "decidedRun"
       FROM replay_request_items i WHERE i.request_id = $1::text ORDER BY i.webhook_id`,
    [requestId],
  );
  return rows;
}

export async function recordReplayItemOutcome(
  db: Queryable,
  requestId: string,
  webhookId: string,
  outcome: 'applied' | 'ignored',
): Promise<void> {
  await db.query(
    'UPDATE replay_request_items SET outcome = $3::text, signalled_at = now() WHERE request_id = $1::text AND webhook_id = $2::text',
    [requestId, webhookId, outcome],
  );
}

/** A decision an operator makes on one webhook's quarantined policy run, recorded before it is sent. */
interface OperatorDecisionRecord {
  webhookId: string;
  policyRun: number;
  signal: 'approveReplay' | 'discard';
  by: string;
  reason: string;
  ticket?: string;
}

/**
 * Records a decision before it is sent (operator_decisions): the id the workflow is sent, which the worker checks
 * against this row (same webhook, run, decision, person) before it records anything.
 */
export async function recordOperatorDecision(db: Queryable, d: OperatorDecisionRecord): Promise<string> {
  const decisionId = `dc_${randomBytes(16).toString('hex')}`;
  await db.query(
    `INSERT INTO operator_decisions (decision_id, webhook_id, policy_run, signal, sent_by, reason, ticket, outcome)
     VALUES ($1::text, $2::text, $3::integer, $4::text, $5::text, $6::text, $7::text, 'sent')`,
    [decisionId, d.webhookId, d.policyRun, d.signal, d.by, d.reason, d.ticket ?? null],
  );
  return decisionId;
}

/**
 * What the workflow answered a recorded decision: applied (it recorded it and answered), or ignored and why. A
 * decision never sent (the ledger showed the webhook no longer waiting) is logged with its outcome and no id: it
 * decides nothing.
 */
export async function recordDecisionOutcome(
  db: Queryable,
  outcome: { decisionId: string } | Omit<OperatorDecisionRecord, 'policyRun' | 'ticket'>,
  result: { outcome: 'applied' | 'ignored'; detail: string },
): Promise<void> {
  if ('decisionId' in outcome) {
    await db.query(`UPDATE operator_decisions SET outcome = $2::text, detail = $3::text WHERE decision_id = $1::text`, [
      outcome.decisionId,
      result.outcome,
      result.detail,
    ]);
    return;
  }
  await db.query(
    `INSERT INTO operator_decisions (webhook_id, signal, sent_by, reason, outcome, detail)
     VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text)`,
    [outcome.webhookId, outcome.signal, outcome.by, outcome.reason, result.outcome, result.detail],
  );
}

/**
 * The resends of a hold's webhooks (its release's and its events'), oldest first: who, why, when, and what delivers
 * them.
 */
export async function resendsOfHold(db: Queryable, holdId: string): Promise<Record<string, unknown>[]> {
  const { rows } = await db.query(
    `SELECT r.id, r.webhook_id, r.policy_run, r.from_status, r.from_delivered_at, r.requested_by, r.approved_by, r.request_id,
            r.reason, r.ticket, r.workflow_id, r.created_at
       FROM webhook_resends r JOIN webhook_deliveries d ON d.webhook_id = r.webhook_id
      WHERE d.hold_id = $1::text ORDER BY r.created_at, r.id`,
    [holdId],
  );
  return rows;
}

/** The decisions recorded on a hold's delivery, oldest first. */
export async function decisionsOfHold(db: Queryable, holdId: string): Promise<Record<string, unknown>[]> {
  const { rows } = await db.query(
    `SELECT x.policy_run, x.decision, x.decided_by, x.reason, x.ticket, x.decided_at
       FROM delivery_decisions x JOIN webhook_deliveries d ON d.webhook_id = x.webhook_id
      WHERE d.hold_id = $1::text AND d.event_type = '${HOLD_RELEASED_EVENT}' ORDER BY x.decided_at`,
    [holdId],
  );
  return rows;
}

interface SkipRequest {
  id: string;
  holdId: string;
  sequence: number;
  requestedBy: string;
  reason: string;
  status: 'pending' | 'approved';
  approvedBy: string | null;
}

/** A request to skip a hold's missing processor sequence, awaiting a second person's approval. */
export async function insertSkipRequest(
  db: Queryable,
  request: { id: string; holdId: string; sequence: number; requestedBy: string; reason: string },
): Promise<void> {
  await db.query(
    'INSERT INTO processor_skip_requests (id, hold_id, sequence, requested_by, reason) VALUES ($1::text, $2::text, $3::integer, $4::text, $5::text)',
    [request.id, request.holdId, request.sequence, request.requestedBy, request.reason],
  );
}

export async function skipRequest(db: Queryable, requestId: string): Promise<SkipRequest | undefined> {
  const { rows } = await db.query<SkipRequest>(
    `SELECT id, hold_id AS "holdId", sequence, requested_by AS "requestedBy", reason, status, approved_by AS "approvedBy"
       FROM processor_skip_requests WHERE id = $1::text`,
    [requestId],
  );
  return rows[0];
}

/** pending -> approved by `approvedBy`; false when it was not pending. The ledger refuses the requester (CHECK). */
export async function markSkipRequestApproved(db: Queryable, requestId: string, approvedBy: string): Promise<boolean> {
  const approved = await db.query(
    `UPDATE processor_skip_requests SET status = 'approved', approved_by = $2::text, approved_at = now()
      WHERE id = $1::text AND status = 'pending'`,
    [requestId, approvedBy],
  );
  return approved.rowCount !== 0;
}
