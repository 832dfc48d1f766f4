/**
 * A webhook's delivery workflow started from outside a workflow: again by the outbox reconciler's activity
 * (src/activities/outbox.ts) for a pending webhook nothing is driving, and by `npm run ops -- events redeliver` (same
 * workflow id and webhook id as the run that ended); and a resend's (`npm run ops -- resend`, src/ops/resends.ts). The
 * ledger decides what is sent (the release is idempotent and answers `already_released` with the webhook; the delivery
 * re-reads its status before any request; a resend's first step reopens its webhook only from an end).
 *
 * Reuse policy ALLOW_DUPLICATE_FAILED_ONLY: a run that ended without finishing (terminated, timed out, failed) may be
 * followed by a new one; a running one is never doubled, and a completed one is never repeated (the start fails with
 * WorkflowExecutionAlreadyStartedError: the caller reports it).
 */
import { WorkflowIdReusePolicy, type Client } from '@temporalio/client';
import type { ReleaseExpiredHoldInput } from '../contracts/domain.js';
import { eventDeliveryWorkflowId, holdWorkflowId, resendWorkflowId } from '../contracts/ids.js';
import type { Region } from '../contracts/regions.js';
import { deliveryStartAttributes } from '../contracts/search-attributes.js';
import {
  eventDeliveryDetails,
  eventDeliverySummary,
  holdDetails,
  holdSummary,
  resendDetails,
  resendSummary,
} from '../contracts/story.js';
import { DELIVERY_WORKFLOW_TASK_TIMEOUT_MS } from '../contracts/delivery.js';
import type { ResendWebhookInput } from '../workflows/resend-webhook.js';
import { retryHorizonFor } from './policy.js';

export interface WhereToStart {
  region: Region;
  taskQueue: string;
}

/** A webhook as its delivery's start needs it. */
export interface WebhookToStart {
  webhookId: string;
  holdId: string;
  merchantId: string;
  eventType: string;
  deliveryPolicy: unknown;
}

/** A new run of the hold's release workflow: the hold is released already, so it delivers the release's webhook. */
export async function startReleaseDelivery(
  client: Client,
  { region, taskQueue }: WhereToStart,
  hold: { holdId: string; merchantId: string; expiresAt: string },
): Promise<{ workflowId: string; runId: string }> {
  const workflowId = holdWorkflowId(region, hold.holdId, hold.expiresAt);
  const input: ReleaseExpiredHoldInput = {
    region,
    holdId: hold.holdId,
    expiresAt: hold.expiresAt,
    merchantId: hold.merchantId,
  };
  const handle = await client.workflow.start('releaseExpiredHold', {
    taskQueue,
    workflowId,
    workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
    workflowTaskTimeout: DELIVERY_WORKFLOW_TASK_TIMEOUT_MS,
    typedSearchAttributes: deliveryStartAttributes(region, hold.holdId, hold.merchantId),
    staticSummary: holdSummary(region, hold.holdId, hold.merchantId),
    staticDetails: holdDetails(region, hold.holdId, hold.merchantId),
    args: [input],
  });
  return { workflowId, runId: handle.firstExecutionRunId };
}

/** A new run of a processor event's delivery workflow. */
export async function startEventDelivery(
  client: Client,
  { region, taskQueue }: WhereToStart,
  webhook: WebhookToStart,
): Promise<{ workflowId: string; runId: string }> {
  const workflowId = eventDeliveryWorkflowId(region, webhook.webhookId);
  const handle = await client.workflow.start('deliverHoldEvent', {
    taskQueue,
    workflowId,
    workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
    workflowTaskTimeout: DELIVERY_WORKFLOW_TASK_TIMEOUT_MS,
    typedSearchAttributes: deliveryStartAttributes(region, webhook.holdId, webhook.merchantId),
    staticSummary: eventDeliverySummary(region, webhook.eventType, webhook.holdId, webhook.merchantId),
    staticDetails: eventDeliveryDetails(region, webhook.holdId, webhook.webhookId, webhook.merchantId),
    args: [
      {
        region,
        holdId: webhook.holdId,
        webhookId: webhook.webhookId,
        retryHorizonMs: retryHorizonFor(webhook.merchantId, webhook.deliveryPolicy),
      },
    ],
  });
  return { workflowId, runId: handle.firstExecutionRunId };
}

/** A webhook and a resend of it, as the resend's workflow start needs them. */
export interface ResendToStart {
  webhookId: string;
  holdId: string;
  merchantId: string;
  claim: ResendWebhookInput['claim'];
}

/**
 * A resend's workflow (`resendWebhook`), id `resendWorkflowId(region, resendId)`: a resend id names one resend, so
 * starting it twice is refused by the server (WorkflowExecutionAlreadyStartedError: the caller decides what that
 * means);
 * a run that ended without finishing (terminated) may be followed by a new one (the reconciler: the worker finds the
 * resend recorded by this workflow id and answers the webhook's current run).
 */
export async function startResend(
  client: Client,
  { region, taskQueue }: WhereToStart,
  r: ResendToStart,
): Promise<{ workflowId: string; runId: string }> {
  const workflowId = resendWorkflowId(region, r.claim.resendId);
  const input: ResendWebhookInput = { region, webhookId: r.webhookId, claim: r.claim };
  const handle = await client.workflow.start('resendWebhook', {
    taskQueue,
    workflowId,
    workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
    workflowTaskTimeout: DELIVERY_WORKFLOW_TASK_TIMEOUT_MS,
    typedSearchAttributes: deliveryStartAttributes(region, r.holdId, r.merchantId),
    staticSummary: resendSummary(region, r.webhookId, r.holdId, r.merchantId),
    staticDetails: resendDetails(region, r.webhookId, r.holdId, r.claim.requestedBy, r.claim.reason),
    args: [input],
  });
  return { workflowId, runId: handle.firstExecutionRunId };
}
