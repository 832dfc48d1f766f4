/** The outbox reconciler's input and report (src/workflows/reconcile-outbox.ts, src/activities/outbox.ts). */
import type { Region } from './regions.js';

export interface ReconcileOutboxInput {
  /**
   * Pending webhooks younger than this (since created, and since last touched) are left alone: their workflow is at it.
   */
  graceMs: number;
}

export interface ReconcileOutboxWorkflowInput extends ReconcileOutboxInput {
  region: Region;
}

export interface OutboxReport {
  /** Pending webhooks past the grace period looked at. */
  checked: number;
  /** Of those, driven by a running workflow: nothing to do. */
  running: number;
  /** Of those, whose delivery workflow was started again (same workflow id, same webhook id). */
  restarted: number;
  /** Of those, not fixed (its workflow completed without delivering it, or Temporal refused): a human looks. */
  unfixable: number;
  restartedWebhooks: string[];
  unfixableWebhooks: { webhookId: string; why: string }[];
  /** More were restarted or not fixed than the lists name. */
  truncated: boolean;
  /**
   * Where the run stopped with its page or time budget spent: the next run goes on after it. Absent when the run got
   * to the end of the backlog (the next one starts from the oldest again).
   */
  resumeAfter?: OutboxCursor;
}

/** Where a page of candidates ended: the next page starts after it. */
export interface OutboxCursor {
  createdAt: string;
  webhookId: string;
}
