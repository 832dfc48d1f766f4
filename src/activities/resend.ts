/**
 * The resend authority: `reopenForResend`, one of the delivery activities (src/activities/delivery.ts), checks a
 * resend's claim against the ledger and reopens its webhook.
 */
import { activityInfo, ApplicationFailure, log } from '@temporalio/activity';
import type { MetricCounter } from '@temporalio/common';
import type pg from 'pg';
import type { ResendClaim, ResendOutcome } from '../contracts/delivery.js';
import { samePerson } from '../contracts/identity.js';
import type { Region } from '../contracts/regions.js';
import { retryHorizonFor } from '../delivery/policy.js';
import * as deliveries from '../sql/deliveries.js';
import * as merchantApi from '../sql/merchant-api.js';
import * as records from '../sql/operator-records.js';

/** What of the delivery activities' context a resend needs. */
export interface ResendContext {
  region: Region;
  pool: pg.Pool;
  fourEyes: boolean;
  resends: MetricCounter;
}

/**
 * The first step of a resend's workflow: checks its claim against the ledger and reopens the webhook as a new policy
 * run, recording the resend (who, why, the request and its approver, this workflow) in the same statement. Refused,
 * with why, for a webhook not at an end, a request that is not an approved resend request covering it (approved by
 * the approver the claim names, never its requester), and, where four eyes rule, a resend without a request. A
 * retried call finds its own resend recorded and answers as the first did.
 */
export async function reopenForResend(ctx: ResendContext, claim: ResendClaim): Promise<ResendOutcome> {
  const { region, pool } = ctx;
  const workflowId = activityInfo().workflowExecution?.workflowId;
  if (!workflowId)
    throw ApplicationFailure.nonRetryable('reopenForResend runs only as a workflow activity', 'NotInAWorkflow');
  const refused = (why: string): ResendOutcome => {
    log.warn('resend refused', { region, webhookId: claim.webhookId, resendId: claim.resendId, why });
    return { status: 'refused', why };
  };
  const recorded = await deliveries.resendById(pool, claim.resendId);
  if (recorded) {
    if (recorded.workflowId !== workflowId)
      return refused(`resend ${claim.resendId} was made by ${recorded.workflowId}, not this workflow`);
    // This workflow's own resend (a retried call, or a run started again by the outbox reconciler): it delivers the
    // webhook's current run, a replay approved since included.
    const [now] = await deliveries.decisionTargetsOf(pool, [recorded.webhookId]);
    return reopenedAnswer(pool, { ...recorded, policyRun: now?.policyRun ?? recorded.policyRun });
  }
  const text = (v: unknown) => typeof v === 'string' && v.trim() !== '';
  if (!text(claim.requestedBy) || !text(claim.reason)) return refused('a resend names who asks for it and why');
  const allowed = await resendAllowed(ctx, claim);
  if (typeof allowed === 'string') return refused(allowed);
  const { requestedBy, frozenRun } = allowed;
  const reopened = await deliveries.reopenForResend(pool, {
    ...claim,
    requestedBy,
    approvedBy: claim.requestId === undefined ? undefined : claim.approvedBy,
    workflowId,
    frozenRun,
  });
  if (!reopened) return refused(await notReopenedWhy(ctx, claim.webhookId, frozenRun));
  ctx.resends.add(1, { region, from: reopened.fromStatus });
  log.info('webhook reopened for resend', {
    region,
    webhookId: claim.webhookId,
    resendId: claim.resendId,
    policyRun: reopened.policyRun,
    from: reopened.fromStatus,
    requestedBy,
    ...(claim.requestId ? { requestId: claim.requestId, approvedBy: claim.approvedBy } : {}),
    ...(claim.merchantRequestId ? { merchantRequestId: claim.merchantRequestId } : {}),
  });
  return reopenedAnswer(pool, reopened);
}

/** A reopened webhook as the resend's workflow delivers it: its run and the horizon its merchant's policy gives it. */
async function reopenedAnswer(pool: pg.Pool, r: deliveries.Reopened): Promise<ResendOutcome> {
  const { holdId, merchantId, policyRun, fromStatus } = r;
  const webhook = await deliveries.webhookToDeliver(pool, r.webhookId);
  const retryHorizonMs = retryHorizonFor(merchantId, webhook?.deliveryPolicy);
  return { status: 'reopened', holdId, merchantId, policyRun, fromStatus, retryHorizonMs };
}

/**
 * Who a resend is recorded as asked by, and the policy run its request froze, from what the claim stands on: an
 * operator's approved resend request, a merchant's resend request (through its API key), or neither (refused where
 * four eyes rule); or why it is refused.
 */
async function resendAllowed(
  { pool, fourEyes }: ResendContext,
  claim: ResendClaim,
): Promise<{ requestedBy: string; frozenRun?: number } | string> {
  if (claim.requestId !== undefined) {
    const request = await records.resendApprovalFor(pool, claim.requestId, claim.webhookId);
    if (!request) return `resend request ${claim.requestId} does not exist`;
    if (request.status !== 'approved' || !request.approvedBy)
      return `resend request ${claim.requestId} is not approved`;
    if (samePerson(request.approvedBy, request.requestedBy))
      return `resend request ${claim.requestId} was approved by its own requester`;
    if (!claim.approvedBy || !samePerson(request.approvedBy, claim.approvedBy))
      return `resend request ${claim.requestId} was approved by ${request.approvedBy}, not ${claim.approvedBy ?? 'nobody named'}`;
    if (request.frozenRun === null)
      return `resend request ${claim.requestId} does not cover webhook ${claim.webhookId}`;
    return { requestedBy: request.requestedBy, frozenRun: request.frozenRun };
  }
  if (claim.merchantRequestId !== undefined) {
    const request = await merchantApi.merchantResendForClaim(pool, claim.merchantRequestId);
    if (!request) return `merchant resend request ${claim.merchantRequestId} does not exist`;
    if (request.webhookId !== claim.webhookId || request.resendId !== claim.resendId)
      return `merchant resend request ${claim.merchantRequestId} is resend ${request.resendId} of ${request.webhookId}, not this one`;
    if (request.webhookMerchantId !== request.merchantId)
      return `webhook ${claim.webhookId} is not merchant ${request.merchantId}'s`;
    if (!request.keyLiveAtRequest)
      return `API key ${request.keyId} was revoked before merchant resend request ${claim.merchantRequestId}`;
    return { requestedBy: `merchant ${request.merchantId} (API key ${request.keyId})` };
  }
  if (fourEyes)
    return 'four eyes: a resend needs a request approved by a second person (resend preview, then resend approve)';
  return { requestedBy: claim.requestedBy };
}

/** Why the ledger did not reopen the webhook: gone, moved past the run the request froze, or not at an end. */
async function notReopenedWhy(
  { region, pool }: ResendContext,
  webhookId: string,
  frozenRun: number | undefined,
): Promise<string> {
  const [now] = await deliveries.decisionTargetsOf(pool, [webhookId]);
  if (!now) return `webhook ${webhookId} does not exist in region ${region}`;
  if (frozenRun !== undefined && now.policyRun !== frozenRun)
    return `webhook ${webhookId} is at policy run ${now.policyRun}, not the run ${frozenRun} the request froze`;
  return `webhook ${webhookId} is ${now.status}: only a delivered, discarded or abandoned webhook is resent`;
}
