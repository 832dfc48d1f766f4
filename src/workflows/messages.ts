/**
 * Signals and queries of the per-hold workflow, defined once and shared by the workflow, the operator CLI and
 * the tests. The `temporal` CLI uses the same names: `temporal workflow signal --name approveReplay ...`.
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { QuarantineReason } from '../delivery/policy.js';

export interface ApproveReplay {
  approvedBy: string;
  reason: string;
  ticket?: string;
}

export interface Discard {
  by: string;
  reason: string;
}

/** Where a hold's workflow is and what it waits for. */
export type HoldStage =
  | { stage: 'releasing' }
  | { stage: 'delivering'; policyRun: number }
  /** No slot in the merchant's shared budget yet (or one reserved for later): waiting, not failing. */
  | { stage: 'waiting_for_budget'; policyRun: number; lane: 'first' | 'retry' | 'replay'; until: string; reserved: boolean }
  | { stage: 'held'; policyRun: number; merchantStatus: 'paused' | 'disabled'; until: string }
  | { stage: 'quarantined'; policyRun: number; reason: QuarantineReason; since: string; detail: string }
  | { stage: 'delivered'; attempts: number }
  | { stage: 'discarded'; by: string; reason: string }
  /** Quarantined and nobody decided within the quarantine timeout. */
  | { stage: 'abandoned'; reason: QuarantineReason; since: string }
  /** Nothing (more) for this workflow to do: the hold was not released here, or its delivery is owned elsewhere. */
  | { stage: 'not_released'; status: string };

export const approveReplaySignal = defineSignal<[ApproveReplay]>('approveReplay');
export const discardSignal = defineSignal<[Discard]>('discard');
export const stageQuery = defineQuery<HoldStage>('stage');
