/**
 * Resend (`npm run ops -- resend`): a webhook that reached an end (delivered, discarded, abandoned) sent again to its
 * merchant with its original webhook id and payload and a fresh signature, in the merchant's replay lane. One webhook
 * by one person where four eyes do not rule; many (or any, where they do) through a frozen request and a second
 * person's approval, exactly as a bulk replay.
 *
 * The CLI only starts the resend's workflow (src/workflows/resend-webhook.ts): the worker checks the claim against the
 * ledger and reopens the webhook, recording who, why and when (`webhook_resends`), in one statement; `status` shows it.
 * The CLI writes no delivery row itself.
 */
import { createHash, randomUUID } from 'node:crypto';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Queryable } from '../db/pool.js';
import { OperatorError } from '../errors.js';
import { resendStart } from '../contracts/starts.js';
import { startFromOutside } from '../delivery/starts.js';
import * as deliveries from '../sql/deliveries.js';
import type { DecisionTarget, ResendableWebhook, ResendFilters } from '../sql/deliveries.js';
import * as records from '../sql/operator-records.js';
import type { ResendWebhookInput, ResendWebhookResult } from '../contracts/domain.js';
import { approveRequest, fourEyesRequired, freezeRequest, type OpsContext } from './operations.js';

/** The ends a webhook may be resent from. */
const ENDS: readonly string[] = ['delivered', 'discarded', 'abandoned'];

/** How long `resend` waits for the worker to reopen the webhook before it reports the resend as started only. */
const REOPEN_WAIT_MS = 30_000;

interface ResendStarted {
  resendId: string;
  workflowId: string;
  webhookId: string;
  /** The policy run the resend is, once the worker reopened it; undefined if it had not within REOPEN_WAIT_MS. */
  policyRun?: number;
}

function refuseUnlessAtAnEnd(
  ctx: OpsContext,
  webhookId: string,
  target: DecisionTarget | undefined,
): asserts target is DecisionTarget {
  if (!target)
    throw new OperatorError('NoDelivery', `webhook ${webhookId} does not exist in region ${ctx.region.region}`);
  if (!ENDS.includes(target.status)) {
    const what =
      target.status === 'quarantined'
        ? `quarantined: approve its replay (npm run ops -- approve ${webhookId}) or discard it`
        : 'pending: it is being delivered';
    throw new OperatorError(
      'NotAtAnEnd',
      `webhook ${webhookId} is ${what}; only a delivered, discarded or abandoned webhook is resent`,
    );
  }
}

/**
 * One webhook resent by one person (where four eyes rule: refused before anything is sent, with the commands that do
 * it). Waits for the worker to reopen it, and throws `ResendRefused` with the worker's reason if it refused.
 */
export async function resendWebhookNow(
  ctx: OpsContext,
  webhookId: string,
  by: string,
  reason: string,
  ticket?: string,
): Promise<ResendStarted> {
  const [target] = await deliveries.decisionTargetsOf(ctx.pool, [webhookId]);
  refuseUnlessAtAnEnd(ctx, webhookId, target);
  if (ctx.fourEyes) throw fourEyesRequired(ctx, 'resend', webhookId);
  const resendId = `rs_${randomUUID().replaceAll('-', '').slice(0, 20)}`;
  const { workflowId } = await start(ctx, target, { resendId, requestedBy: by, reason, ...(ticket ? { ticket } : {}) });
  return awaitReopened(ctx, { resendId, workflowId, webhookId });
}

function start(ctx: OpsContext, target: DecisionTarget, claim: ResendWebhookInput['claim']) {
  const { webhookId, holdId, merchantId } = target;
  const resend = resendStart(ctx.region.region, { webhookId, holdId, merchantId, claim });
  return startFromOutside(ctx.client, ctx.region.taskQueue, 'resendWebhook', resend);
}

/** The ledger's record of the resend once the worker made it, or the workflow's refusal; at most REOPEN_WAIT_MS. */
async function awaitReopened(ctx: OpsContext, started: ResendStarted): Promise<ResendStarted> {
  const handle = ctx.client.workflow.getHandle(started.workflowId);
  for (const deadline = Date.now() + REOPEN_WAIT_MS; Date.now() < deadline;) {
    const recorded = await deliveries.resendById(ctx.pool, started.resendId);
    if (recorded) return { ...started, policyRun: recorded.policyRun };
    const { status } = await handle.describe();
    if (status.name !== 'RUNNING') {
      const result = (await handle
        .result()
        .catch((err: Error) => ({ status: 'refused', why: err.message }))) as ResendWebhookResult;
      if (result.status === 'refused')
        throw new OperatorError('ResendRefused', `resend of ${started.webhookId} refused by the worker: ${result.why}`);
      return { ...started, policyRun: result.policyRun };
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return started;
}

/** Freezes the webhooks at an end matching `filters` into a resend request awaiting a second person's approval. */
export async function previewResend(
  pool: Queryable,
  filters: ResendFilters,
  requestedBy: string,
): Promise<{ id: string; count: number; items: ResendableWebhook[] }> {
  const items = await deliveries.resendableWebhooks(pool, filters);
  const what = 'delivered, discarded or abandoned webhook';
  return freezeRequest(pool, { kind: 'resend', requestedBy, filters }, items, what, 'resend');
}

/** A bulk resend's id for one of its webhooks: the same on every run of the approval, so none is started twice. */
function requestResendId(requestId: string, webhookId: string): string {
  return `rs_${requestId}_${createHash('sha256').update(webhookId).digest('hex').slice(0, 16)}`;
}

/**
 * Approves a frozen resend request (refused for its requester, and once another person approved it), then starts a
 * resend of exactly the frozen webhooks still at the end and run the preview froze, at most `startsPerSecond`; each is
 * then paced by its merchant's budget in the replay lane. Resumable item by item, as a bulk replay: an item whose
 * resend exists is `applied` without starting anything again. The worker checks each resend against the request.
 */
export async function approveResendRequest(
  ctx: OpsContext,
  requestId: string,
  approvedBy: string,
  options: { startsPerSecond?: number; ticket?: string } = {},
): Promise<{ id: string; applied: number; ignored: { webhookId: string; detail: string }[]; alreadyDone: number }> {
  const request = await approveRequest(ctx, requestId, approvedBy, 'resend');
  const items = await records.replayRequestItems(ctx.pool, requestId);
  const open = items.filter((i) => i.outcome === null);
  const targets = new Map(
    (
      await deliveries.decisionTargetsOf(
        ctx.pool,
        open.map((i) => i.webhookId),
      )
    ).map((t) => [t.webhookId, t]),
  );
  const pauseMs = 1000 / (options.startsPerSecond ?? 20);
  let applied = 0;
  const ignored: { webhookId: string; detail: string }[] = [];
  for (const item of open) {
    const target = targets.get(item.webhookId)!;
    let detail: string | undefined;
    if (item.decidedRun) {
      // Resent by an earlier run of this approval (interrupted before its outcome was written).
    } else if (!ENDS.includes(target.status) || target.policyRun !== item.policyRun) {
      detail = `${target.status} in policy run ${target.policyRun}; the preview froze it at an end in run ${item.policyRun}`;
    } else {
      try {
        await start(ctx, target, {
          resendId: requestResendId(requestId, item.webhookId),
          requestedBy: request.requestedBy,
          reason: `resend request ${requestId}`,
          requestId,
          approvedBy: request.approvedBy,
          ...(options.ticket ? { ticket: options.ticket } : {}),
        });
      } catch (err) {
        if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
    await records.recordReplayItemOutcome(
      ctx.pool,
      requestId,
      item.webhookId,
      detail === undefined ? 'applied' : 'ignored',
    );
    if (detail === undefined) applied++;
    else ignored.push({ webhookId: item.webhookId, detail });
  }
  return { id: requestId, applied, ignored, alreadyDone: items.length - open.length };
}
