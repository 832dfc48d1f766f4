/**
 * Workflow ids derived from the business action, never from a run: starting the same hold's workflow twice
 * (a second sweep, a late schedule, a re-run) collides on the id and is a no-op.
 */
import type { Region } from './regions.js';

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

/** Base id for sweeps; schedules append the nominal time, manual sweeps a caller-chosen suffix. */
export function sweepWorkflowIdPrefix(region: Region): string {
  return `sweep-${region}`;
}
