/**
 * A webhook's delivery workflow started from outside a workflow: again by the outbox reconciler's activity
 * (src/activities/outbox.ts) for a pending webhook nothing is driving, and by `npm run ops -- events redeliver` (same
 * workflow id and webhook id as the run that ended); and a resend's (`npm run ops -- resend`,
 * src/operations/resends.ts). The ledger decides what is sent (the release is idempotent and answers `already_released`
 * with the webhook; the delivery re-reads its status before any request; a resend's first step reopens its webhook only
 * from an end).
 *
 * Reuse policy ALLOW_DUPLICATE_FAILED_ONLY: a run that ended without finishing (terminated, timed out, failed) may be
 * followed by a new one; a running one is never doubled, and a completed one is never repeated (the start fails with
 * WorkflowExecutionAlreadyStartedError: the caller reports it).
 */
import { WorkflowIdReusePolicy, type Client } from '@temporalio/client';
import type { DeliveryResume, ReleaseExpiredHoldInput, ResendWebhookInput } from '../contracts/domain.js';
import type { Region } from '../contracts/regions.js';
import { eventDeliveryStart, holdReleaseStart, resendStart } from '../contracts/starts.js';
import { retryHorizonFor } from './policy.js';

interface WhereToStart {
  region: Region;
  taskQueue: string;
}

/** A webhook as its delivery's start needs it. */
interface WebhookToStart {
  webhookId: string;
  holdId: string;
  merchantId: string;
  eventType: string;
  deliveryPolicy: unknown;
}

/** What a start from outside a workflow adds: the task queue, and that only a run that ended unfinished is followed. */
const fromOutside = (taskQueue: string) => ({
  taskQueue,
  workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
});

/**
 * A new run of the hold's release workflow: the hold is released already, so it delivers the release's webhook (with
 * `resume`: goes on from there, as a continued run does, e.g. waiting for a quarantine's decision).
 */
export async function startReleaseDelivery(
  client: Client,
  { region, taskQueue }: WhereToStart,
  hold: { holdId: string; merchantId: string; expiresAt: string },
  resume?: ReleaseExpiredHoldInput['resume'],
): Promise<{ workflowId: string; runId: string }> {
  const start = holdReleaseStart(region, hold);
  const options = { ...start, args: [{ ...start.args[0], resume }] as const, ...fromOutside(taskQueue) };
  const handle = await client.workflow.start('releaseExpiredHold', options);
  return { workflowId: options.workflowId, runId: handle.firstExecutionRunId };
}

/** A new run of a processor event's delivery workflow (with `resume`: going on from there). */
export async function startEventDelivery(
  client: Client,
  { region, taskQueue }: WhereToStart,
  webhook: WebhookToStart,
  resume?: DeliveryResume,
): Promise<{ workflowId: string; runId: string }> {
  const retryHorizonMs = retryHorizonFor(webhook.merchantId, webhook.deliveryPolicy);
  const start = eventDeliveryStart(region, { ...webhook, retryHorizonMs });
  const options = { ...start, args: [{ ...start.args[0], resume }] as const, ...fromOutside(taskQueue) };
  const handle = await client.workflow.start('deliverHoldEvent', options);
  return { workflowId: options.workflowId, runId: handle.firstExecutionRunId };
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
 * means); a run that ended without finishing (terminated) may be followed by a new one (the reconciler: the worker
 * finds the resend recorded by this workflow id and answers the webhook's current run).
 */
export async function startResend(
  client: Client,
  { region, taskQueue }: WhereToStart,
  r: ResendToStart,
  resumed?: Pick<ResendWebhookInput, 'reopened' | 'resume'>,
): Promise<{ workflowId: string; runId: string }> {
  const start = resendStart(region, r);
  const options = { ...start, args: [{ ...start.args[0], ...resumed }] as const, ...fromOutside(taskQueue) };
  const handle = await client.workflow.start('resendWebhook', options);
  return { workflowId: options.workflowId, runId: handle.firstExecutionRunId };
}
