/**
 * Operator operations on one region: what the `ops` CLI runs, and what the tests call directly. Reads come
 * from the region's ledger; decisions go to the per-hold workflows as signals (the same ones the `temporal`
 * CLI can send), and every signal sent from here is logged in `operator_signals`, applied or not.
 */
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type pg from 'pg';
import type { RegionConfig } from '../config.js';
import { inTransaction } from '../db/pool.js';
import { isoUtc } from '../db/sql.js';
import type { QuarantineReason } from '../contracts/failures.js';
import { OperatorError } from '../errors.js';
import { holdWorkflowId } from '../contracts/ids.js';
import { approveReplaySignal, discardSignal, statusQuery, type HoldStatus } from '../contracts/messages.js';

export interface OpsContext {
  region: RegionConfig;
  pool: pg.Pool;
  client: Client;
}

export interface QuarantineFilters {
  merchantId?: string;
  /** ISO timestamps bounding when the delivery was quarantined. */
  since?: string;
  until?: string;
  reason?: QuarantineReason;
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

/** 1 + approved replays so far: the run a quarantine belongs to. */
const POLICY_RUN_SQL = `1 + (SELECT count(*) FROM delivery_decisions x WHERE x.webhook_id = d.webhook_id AND x.decision = 'replay')::integer`;

const QUARANTINED_SQL = `
  SELECT d.webhook_id, d.hold_id, d.merchant_id, d.quarantine_reason, d.quarantined_at, d.attempt_count,
         d.last_status_code, d.last_error, ${POLICY_RUN_SQL} AS policy_run
    FROM webhook_deliveries d
   WHERE d.status = 'quarantined'
     AND ($1::text IS NULL OR d.merchant_id = $1::text)
     AND ($2::timestamptz IS NULL OR d.quarantined_at >= $2::timestamptz)
     AND ($3::timestamptz IS NULL OR d.quarantined_at < $3::timestamptz)
     AND ($4::text IS NULL OR d.quarantine_reason = $4::text)
   ORDER BY d.quarantined_at, d.webhook_id`;

const filterParams = (f: QuarantineFilters) => [f.merchantId ?? null, f.since ?? null, f.until ?? null, f.reason ?? null];

export async function listQuarantined(pool: pg.Pool, filters: QuarantineFilters): Promise<QuarantinedDelivery[]> {
  const { rows } = await pool.query<{
    webhook_id: string;
    hold_id: string;
    merchant_id: string;
    quarantine_reason: QuarantineReason;
    quarantined_at: Date;
    attempt_count: number;
    last_status_code: number | null;
    last_error: string | null;
    policy_run: number;
  }>(QUARANTINED_SQL, filterParams(filters));
  return rows.map((r) => ({
    webhookId: r.webhook_id,
    holdId: r.hold_id,
    merchantId: r.merchant_id,
    reason: r.quarantine_reason,
    quarantinedAt: r.quarantined_at.toISOString(),
    attempts: r.attempt_count,
    lastStatusCode: r.last_status_code,
    lastError: r.last_error,
    policyRun: r.policy_run,
  }));
}

/** Freezes the quarantined deliveries matching `filters` into a replay request awaiting approval. */
export async function previewReplay(
  pool: pg.Pool,
  filters: QuarantineFilters,
  requestedBy: string,
): Promise<{ id: string; count: number; items: QuarantinedDelivery[] }> {
  const items = await listQuarantined(pool, filters);
  if (items.length === 0) throw new OperatorError('EmptySelection', 'no quarantined delivery matches these filters; nothing to replay');
  const id = `rr_${randomUUID().slice(0, 8)}`;
  await inTransaction(pool, async (tx) => {
    await tx.query(
      'INSERT INTO replay_requests (id, requested_by, filters, item_count) VALUES ($1::text, $2::text, $3::jsonb, $4::integer)',
      [id, requestedBy, JSON.stringify(filters), items.length],
    );
    await tx.query(
      `INSERT INTO replay_request_items (request_id, webhook_id, policy_run)
       SELECT $1::text, w, r FROM unnest($2::text[], $3::integer[]) AS i(w, r)`,
      [id, items.map((i) => i.webhookId), items.map((i) => i.policyRun)],
    );
  });
  return { id, count: items.length, items };
}

interface DeliveryTarget {
  webhookId: string;
  holdId: string;
  workflowId: string;
  status: string;
  policyRun: number;
}

async function deliveryTargets(ctx: OpsContext, where: string, params: unknown[]): Promise<DeliveryTarget[]> {
  const { rows } = await ctx.pool.query<{ webhook_id: string; hold_id: string; expires_at: string; status: string; policy_run: number }>(
    `SELECT d.webhook_id, d.hold_id, d.status, ${POLICY_RUN_SQL} AS policy_run,
            ${isoUtc('h.expires_at')} AS expires_at
       FROM webhook_deliveries d JOIN auth_holds h ON h.id = d.hold_id
      WHERE ${where}`,
    params,
  );
  return rows.map((r) => ({
    webhookId: r.webhook_id,
    holdId: r.hold_id,
    workflowId: holdWorkflowId(ctx.region.region, r.hold_id, r.expires_at),
    status: r.status,
    policyRun: r.policy_run,
  }));
}

type SignalOutcome = { outcome: 'sent' } | { outcome: 'ignored'; detail: string };

/**
 * Sends one decision to a hold's workflow if its delivery is still quarantined in the expected policy run;
 * otherwise sends nothing. Either way the attempt is logged.
 */
async function sendDecision(
  ctx: OpsContext,
  target: DeliveryTarget,
  decision: { signal: 'approveReplay'; approvedBy: string; reason: string; ticket?: string } | { signal: 'discard'; by: string; reason: string },
  expectedRun?: number,
): Promise<SignalOutcome> {
  let result: SignalOutcome;
  if (target.status !== 'quarantined') result = { outcome: 'ignored', detail: `delivery is ${target.status}, not quarantined` };
  else if (expectedRun !== undefined && target.policyRun !== expectedRun) {
    result = { outcome: 'ignored', detail: `quarantined again in run ${target.policyRun} after the preview froze run ${expectedRun}` };
  } else {
    const handle = ctx.client.workflow.getHandle(target.workflowId);
    try {
      if (decision.signal === 'approveReplay') {
        await handle.signal(approveReplaySignal, { approvedBy: decision.approvedBy, reason: decision.reason, ticket: decision.ticket });
      } else {
        await handle.signal(discardSignal, { by: decision.by, reason: decision.reason });
      }
      result = { outcome: 'sent' };
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
      result = { outcome: 'ignored', detail: `workflow ${target.workflowId} is not running` };
    }
  }
  await ctx.pool.query(
    `INSERT INTO operator_signals (webhook_id, signal, sent_by, reason, outcome, detail)
     VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text)`,
    [
      target.webhookId,
      decision.signal,
      decision.signal === 'approveReplay' ? decision.approvedBy : decision.by,
      decision.reason,
      result.outcome,
      result.outcome === 'ignored' ? result.detail : null,
    ],
  );
  return result;
}

/**
 * Approves a frozen replay request: refused for the requester, and for a request already approved; then
 * signals `approveReplay` to exactly the frozen deliveries still quarantined in the frozen run, at most
 * `signalsPerSecond` (each replay is then paced again by its merchant's budget, in the replay lane).
 */
export async function approveReplayRequest(
  ctx: OpsContext,
  requestId: string,
  approvedBy: string,
  options: { signalsPerSecond?: number; ticket?: string } = {},
): Promise<{ id: string; sent: number; ignored: { webhookId: string; detail: string }[] }> {
  const { rows } = await ctx.pool.query<{ requested_by: string; status: string }>(
    'SELECT requested_by, status FROM replay_requests WHERE id = $1::text',
    [requestId],
  );
  const request = rows[0];
  if (!request) throw new OperatorError('ReplayRequestNotFound', `replay request ${requestId} does not exist in region ${ctx.region.region}`);
  if (request.requested_by === approvedBy) {
    throw new OperatorError('SelfApprovalRefused', `replay request ${requestId} was requested by ${approvedBy}; someone else must approve it`);
  }
  const approved = await ctx.pool.query(
    `UPDATE replay_requests SET status = 'approved', approved_by = $2::text, approved_at = now()
      WHERE id = $1::text AND status = 'pending'`,
    [requestId, approvedBy],
  );
  if (approved.rowCount === 0) throw new OperatorError('ReplayAlreadyApproved', `replay request ${requestId} is already approved`);

  const items = await ctx.pool.query<{ webhook_id: string; policy_run: number }>(
    'SELECT webhook_id, policy_run FROM replay_request_items WHERE request_id = $1::text ORDER BY webhook_id',
    [requestId],
  );
  const frozenRun = new Map(items.rows.map((i) => [i.webhook_id, i.policy_run]));
  const targets = await deliveryTargets(ctx, 'd.webhook_id = ANY($1::text[])', [[...frozenRun.keys()]]);
  const pauseMs = 1000 / (options.signalsPerSecond ?? 20);
  let sent = 0;
  const ignored: { webhookId: string; detail: string }[] = [];
  for (const target of targets) {
    const result = await sendDecision(
      ctx,
      target,
      { signal: 'approveReplay', approvedBy, reason: `replay request ${requestId}`, ticket: options.ticket },
      frozenRun.get(target.webhookId),
    );
    await ctx.pool.query(
      'UPDATE replay_request_items SET outcome = $3::text, signalled_at = now() WHERE request_id = $1::text AND webhook_id = $2::text',
      [requestId, target.webhookId, result.outcome === 'sent' ? 'applied' : 'ignored'],
    );
    if (result.outcome === 'sent') sent++;
    else ignored.push({ webhookId: target.webhookId, detail: result.detail });
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
  return { id: requestId, sent, ignored };
}

async function targetForHold(ctx: OpsContext, holdId: string): Promise<DeliveryTarget> {
  const [target] = await deliveryTargets(ctx, 'd.hold_id = $1::text', [holdId]);
  if (target) return target;
  const hold = await ctx.pool.query('SELECT state FROM auth_holds WHERE id = $1::text', [holdId]);
  if (!hold.rowCount) throw new OperatorError('HoldNotFound', `hold ${holdId} does not exist in region ${ctx.region.region}`);
  throw new OperatorError('NoDelivery', `hold ${holdId} has no webhook (state ${hold.rows[0].state}); nothing to decide`);
}

export async function discardHold(ctx: OpsContext, holdId: string, by: string, reason: string): Promise<SignalOutcome> {
  return sendDecision(ctx, await targetForHold(ctx, holdId), { signal: 'discard', by, reason });
}

export async function approveHold(ctx: OpsContext, holdId: string, approvedBy: string, reason: string, ticket?: string): Promise<SignalOutcome> {
  return sendDecision(ctx, await targetForHold(ctx, holdId), { signal: 'approveReplay', approvedBy, reason, ticket });
}

export interface HoldReport {
  hold: Record<string, unknown>;
  ledgerEntry: Record<string, unknown> | null;
  delivery: Record<string, unknown> | null;
  attempts: Record<string, unknown>[];
  decisions: Record<string, unknown>[];
  workflow: { workflowId: string; status: string; waiting: HoldStatus | null } | null;
}

/** Everything about one hold: ledger, delivery, attempt log, decisions, and its workflow's own account. */
export async function holdStatus(ctx: OpsContext, holdId: string): Promise<HoldReport> {
  const hold = await ctx.pool.query(
    `SELECT id, account_id, merchant_id, amount_minor, currency, state, reject_code, expires_at, released_at,
            ${isoUtc('expires_at')} AS expires_at_exact
       FROM auth_holds WHERE id = $1::text`,
    [holdId],
  );
  const row = hold.rows[0];
  if (!row) throw new OperatorError('HoldNotFound', `hold ${holdId} does not exist in region ${ctx.region.region}`);
  const { expires_at_exact: expiresAt, ...holdFields } = row;
  const [entry, delivery, attempts, decisions] = await Promise.all([
    ctx.pool.query('SELECT id, amount_minor, currency, created_at FROM ledger_entries WHERE hold_id = $1::text', [holdId]),
    ctx.pool.query(
      `SELECT webhook_id, status, attempt_count, quarantine_reason, last_status_code, last_error, created_at, delivered_at, quarantined_at
         FROM webhook_deliveries WHERE hold_id = $1::text`,
      [holdId],
    ),
    ctx.pool.query(
      `SELECT a.attempt_number, a.policy_run, a.started_at, a.duration_ms, a.status_code, a.error_class, a.outcome,
              a.next_retry_delay_ms, a.retry_reason
         FROM delivery_attempts a JOIN webhook_deliveries d ON d.webhook_id = a.webhook_id
        WHERE d.hold_id = $1::text ORDER BY a.attempt_number`,
      [holdId],
    ),
    ctx.pool.query(
      `SELECT x.policy_run, x.decision, x.decided_by, x.reason, x.ticket, x.decided_at
         FROM delivery_decisions x JOIN webhook_deliveries d ON d.webhook_id = x.webhook_id
        WHERE d.hold_id = $1::text ORDER BY x.decided_at`,
      [holdId],
    ),
  ]);
  let workflow: HoldReport['workflow'] = null;
  if (row.state === 'released' || row.state === 'active') {
    const workflowId = holdWorkflowId(ctx.region.region, holdId, expiresAt);
    const handle = ctx.client.workflow.getHandle(workflowId);
    try {
      const description = await handle.describe();
      const waiting = await handle.query(statusQuery).catch(() => null);
      workflow = { workflowId, status: description.status.name, waiting };
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
  }
  return {
    hold: holdFields,
    ledgerEntry: entry.rows[0] ?? null,
    delivery: delivery.rows[0] ?? null,
    attempts: attempts.rows,
    decisions: decisions.rows,
    workflow,
  };
}
