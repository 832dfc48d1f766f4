/**
 * Workflow ids derived from the business action, never from a run: starting the same hold's workflow twice
 * (a second sweep, a late schedule, a re-run) collides on the id and is a no-op.
 */
import { HOLD_RELEASED_EVENT } from './delivery.js';
import { REGIONS, type Region } from './regions.js';

/** One per hold and expiry: a hold re-authorised with a new expiry is a new business action. */
export function holdWorkflowId(region: Region, holdId: string, expiresAt: string): string {
  return `hold-release-${region}-${holdId}-${expiresAt}`;
}

/** One per hold: its processor events apply in sequence here, whichever run of it is open. */
export function holdEventsWorkflowId(region: Region, holdId: string): string {
  return `hold-events-${region}-${holdId}`;
}

/** One per webhook a processor event writes (its release's webhook is delivered by the hold's release workflow). */
export function eventDeliveryWorkflowId(region: Region, webhookId: string): string {
  return `hold-event-delivery-${region}-${webhookId}`;
}

/**
 * One per resend of a webhook (`resendWebhook`): the resend's id is chosen by whoever asks for it (the ops CLI: random
 * for one webhook, derived from the request and the webhook for a bulk resend, so a resumed approval starts none
 * twice).
 */
export function resendWorkflowId(region: Region, resendId: string): string {
  return `hold-resend-${region}-${resendId}`;
}

/** What names the workflow delivering a webhook's current policy run. */
interface WebhookDriver {
  webhookId: string;
  holdId: string;
  eventType: string;
  /** The hold's expiry as its release workflow's id has it. */
  holdExpiresAt: string;
  /** The latest resend's workflow id, if the webhook was ever resent (the ledger's webhook_resends). */
  drivenBy?: string | null;
}

/**
 * The workflow delivering a webhook's current run: the latest resend's, if any; else a release's webhook is delivered
 * by its hold's release workflow and a processor event's by its own delivery workflow.
 */
export function deliveryWorkflowId(region: Region, w: WebhookDriver): string {
  if (w.drivenBy) return w.drivenBy;
  return w.eventType === HOLD_RELEASED_EVENT
    ? holdWorkflowId(region, w.holdId, w.holdExpiresAt)
    : eventDeliveryWorkflowId(region, w.webhookId);
}

/** Base id for the outbox reconciler's runs; its schedule appends the nominal time. */
export function outboxWorkflowIdPrefix(region: Region): string {
  return `outbox-${region}`;
}

/** Base id for the retention job's runs; its schedule appends the nominal time. */
export function retentionWorkflowIdPrefix(region: Region): string {
  return `retention-${region}`;
}

/** Base id for sweeps; schedules append the nominal time, manual sweeps a caller-chosen suffix. */
export function sweepWorkflowIdPrefix(region: Region): string {
  return `sweep-${region}`;
}

/**
 * The longest part of any workflow id above that is not the hold id: the widest region, an expiry with microseconds,
 * an event webhook of the highest sequence. A hold id longer than the server's id limit less this cannot be the hold
 * of a workflow, so the sweep rejects its row (`UnusableHoldId`) instead of failing every start of its page.
 */
export function longestHoldIdAffix(): number {
  const expiry = '2026-01-01T00:00:00.000000Z';
  const highestSequence = 2_147_483_647;
  return Math.max(
    ...REGIONS.flatMap((region) => [
      holdWorkflowId(region, '', expiry).length,
      holdEventsWorkflowId(region, '').length,
      eventDeliveryWorkflowId(region, `wh__ev${highestSequence}`).length,
    ]),
  );
}

/** Temporal's default `limit.maxIDLength` is 1000; deploy/temporal/dynamicconfig.yaml sets 255, and so do we. */
export const DEFAULT_MAX_WORKFLOW_ID_LENGTH = 255;

/** The longest hold id (in UTF-8 bytes: the server counts bytes) whose workflow ids fit `maxWorkflowIdLength`. */
export function maxHoldIdBytes(maxWorkflowIdLength = DEFAULT_MAX_WORKFLOW_ID_LENGTH): number {
  return maxWorkflowIdLength - longestHoldIdAffix();
}
