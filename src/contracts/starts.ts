/**
 * How each workflow that delivers a webhook is started, whoever starts it: the sweep's batch (a hold's release, as a
 * child), the hold's event workflow (an event's delivery, as a child), and from outside a workflow the outbox
 * reconciler, `ops events redeliver` and `ops resend` (src/delivery/starts.ts, through a client). Its id, its
 * workflow task timeout, what the Web UI shows and searches by, and its input: one place, so a child and a client
 * start of the same workflow cannot drift apart. Each caller adds what is its own: the id reuse policy (what a second
 * start means differs), the parent close policy of a child, the task queue of a client.
 */
import { DELIVERY_WORKFLOW_TASK_TIMEOUT_MS } from './delivery.js';
import type { DeliverHoldEventInput, ReleaseExpiredHoldInput, ResendWebhookInput } from './domain.js';
import { eventDeliveryWorkflowId, holdWorkflowId, resendWorkflowId } from './ids.js';
import type { Region } from './regions.js';
import { deliveryStartAttributes } from './search-attributes.js';
import {
  eventDeliveryDetails,
  eventDeliverySummary,
  holdDetails,
  holdSummary,
  resendDetails,
  resendSummary,
} from './story.js';

/** What every delivering workflow's start says of its hold: its search attributes and its workflow task timeout. */
export function deliveryStartBasics(region: Region, holdId: string, merchantId: string) {
  return {
    typedSearchAttributes: deliveryStartAttributes(region, holdId, merchantId),
    workflowTaskTimeout: DELIVERY_WORKFLOW_TASK_TIMEOUT_MS,
  };
}

/**
 * `releaseExpiredHold` of one hold; `cutoff` is the sweep's (absent from a client: the database's clock decides), and
 * so is `trace`, a sampled hold's.
 */
export function holdReleaseStart(
  region: Region,
  hold: { holdId: string; merchantId: string; expiresAt: string; trace?: Record<string, string> },
  cutoff?: string,
) {
  const { holdId, merchantId, expiresAt, trace } = hold;
  const input: ReleaseExpiredHoldInput = {
    region,
    holdId,
    expiresAt,
    merchantId,
    ...(cutoff ? { cutoff } : {}),
    ...(trace ? { trace } : {}),
    releaseDelivers: true,
  };
  return {
    workflowId: holdWorkflowId(region, holdId, expiresAt),
    ...deliveryStartBasics(region, holdId, merchantId),
    // The Web UI's list view and header: who and where, and what to run (never an amount).
    staticSummary: holdSummary(region, holdId, merchantId),
    staticDetails: holdDetails(region, holdId, merchantId),
    args: [input] as [ReleaseExpiredHoldInput],
  };
}

/** `deliverHoldEvent` of one applied event's webhook. */
export function eventDeliveryStart(
  region: Region,
  webhook: { holdId: string; webhookId: string; merchantId: string; eventType: string; retryHorizonMs: number },
) {
  const { holdId, webhookId, merchantId, retryHorizonMs } = webhook;
  const input: DeliverHoldEventInput = { region, holdId, webhookId, retryHorizonMs };
  return {
    workflowId: eventDeliveryWorkflowId(region, webhookId),
    ...deliveryStartBasics(region, holdId, merchantId),
    staticSummary: eventDeliverySummary(region, webhook.eventType, holdId, merchantId),
    staticDetails: eventDeliveryDetails(region, holdId, webhookId, merchantId),
    args: [input] as [DeliverHoldEventInput],
  };
}

/** `resendWebhook` of one resend: its id names the resend, so a second start of it is the same resend. */
export function resendStart(
  region: Region,
  resend: { webhookId: string; holdId: string; merchantId: string; claim: ResendWebhookInput['claim'] },
) {
  const { webhookId, holdId, merchantId, claim } = resend;
  const input: ResendWebhookInput = { region, webhookId, claim };
  return {
    workflowId: resendWorkflowId(region, claim.resendId),
    ...deliveryStartBasics(region, holdId, merchantId),
    staticSummary: resendSummary(region, webhookId, holdId, merchantId),
    staticDetails: resendDetails(region, webhookId, holdId, claim.requestedBy, claim.reason),
    args: [input] as [ResendWebhookInput],
  };
}
