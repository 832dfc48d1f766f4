/**
 * Signals and queries of the per-hold workflow, defined once and shared by the workflow, the activities, the
 * operator CLI and the tests. The `temporal` CLI uses the same names:
 *   temporal workflow signal --name approveReplay --input '{"approvedBy":"alice","reason":"..."}' ...
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { QuarantineReason } from './failures.js';

export interface ApproveReplay {
  approvedBy: string;
  reason: string;
  ticket?: string;
}

export interface Discard {
  by: string;
  reason: string;
}

/** Sent by the delivery activity when an attempt failed and Temporal will retry it at `nextAttemptAt`. */
export interface DeliveryAttemptFailed {
  attemptNumber: number;
  /** "HTTP 503", "AttemptTimeout", "ConnectionError (ECONNRESET)" */
  outcome: string;
  nextAttemptAt: string;
  /** "Retry-After 120 s" or "backoff attempt 3" */
  reason: string;
}

/** Where a hold's workflow is and what it waits for. */
export type HoldStage =
  | { stage: 'releasing' }
  | { stage: 'delivering'; policyRun: number }
  /** No slot in the merchant's shared budget yet (or one reserved for later): waiting, not failing. */
  | { stage: 'waiting_for_budget'; policyRun: number; lane: 'first' | 'retry' | 'replay'; until: string; reserved: boolean }
  /** The last attempt failed; Temporal retries it at `until`, honouring the merchant's Retry-After or backing off. */
  | { stage: 'honouring_retry_after' | 'backing_off'; policyRun: number; attempt: number; until: string; reason: string }
  | { stage: 'held'; policyRun: number; merchantStatus: 'paused' | 'disabled'; until: string }
  | { stage: 'quarantined'; policyRun: number; reason: QuarantineReason; since: string; detail: string }
  | { stage: 'delivered'; attempts: number }
  | { stage: 'discarded'; by: string; reason: string }
  /** Quarantined and nobody decided within the quarantine timeout. */
  | { stage: 'abandoned'; reason: QuarantineReason; since: string }
  /** Nothing (more) for this workflow to do: the hold was not released here, or its delivery is owned elsewhere. */
  | { stage: 'not_released'; status: string };

/** A signal that arrived when it did not apply (not quarantined, already decided): kept, never an error. */
export interface IgnoredSignal {
  signal: 'approveReplay' | 'discard';
  by: string;
  reason: string;
  at: string;
  /** The stage the workflow was in. */
  stage: HoldStage['stage'];
}

export type HoldStatus = HoldStage & {
  lastAttempt?: { attemptNumber: number; outcome: string; at: string };
  ignoredSignals: IgnoredSignal[];
};

export const approveReplaySignal = defineSignal<[ApproveReplay]>('approveReplay');
export const discardSignal = defineSignal<[Discard]>('discard');
export const deliveryAttemptFailedSignal = defineSignal<[DeliveryAttemptFailed]>('deliveryAttemptFailed');
/** "Why is it waiting?": the stage, the last attempt's outcome, and any signals that did not apply. */
export const statusQuery = defineQuery<HoldStatus>('status');
