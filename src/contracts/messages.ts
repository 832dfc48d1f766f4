/**
 * Signals, updates and queries of the per-hold workflow, defined once and shared by the workflow, the activities,
 * the operator CLI and the tests. A decision is an Update (validated before it enters history; the caller gets the
 * workflow's answer) or a signal (the Web UI, batch signals by query): both go through one decision function in the
 * workflow, and either is recorded only if the ledger holds the decision it names (`decisionId`, recorded by `npm run
 * ops` before it sends; or an approved `replayRequestId`). The `temporal` CLI uses the same names:
 *   temporal workflow signal --name discard --input '{"decisionId":"dc_...","by":"alice","reason":"..."}' ...
 *   temporal workflow signal --query '...' --name approveReplay --input '{"replayRequestId":"rr_...","approvedBy":"bob","reason":"..."}'
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { QuarantineReason } from './failures.js';
import type { HeldBy } from './delivery.js';
import { isRefusedUnencrypted, UNENCRYPTED_REFUSED_WHY } from './unencrypted.js';

export interface ApproveReplay {
  approvedBy: string;
  reason: string;
  ticket?: string;
  /** The quarantined policy run this approval is for; one for another run is stale and refused. Optional. */
  policyRun?: number;
  /**
   * The reviewed replay request this approval carries out (`npm run ops -- replay approve` sets it). The workflow
   * then checks it against the ledger: approved, by `approvedBy`, who is not its requester, covering this run.
   */
  replayRequestId?: string;
  /** The decision as the ledger recorded it before it was sent (`npm run ops` sets it): this webhook, run and person. */
  decisionId?: string;
}

export interface Discard {
  by: string;
  reason: string;
  /** As in ApproveReplay. */
  policyRun?: number;
  /** As in ApproveReplay. */
  decisionId?: string;
}

/** The id of a decision recorded in the ledger (operator_decisions.decision_id). */
const DECISION_ID_PATTERN = /^dc_[0-9a-f]{32}$/;

/** Why a decision naming nothing the ledger recorded is refused before it enters history. */
const NOT_RECORDED_WHY =
  'names no decision in the ledger: decide with npm run ops (the admin API), which records the decision and sends its ' +
  'decisionId; an approval may name an approved replay request (replayRequestId) instead';

export type DecisionKind = 'approveReplay' | 'discard';

/** The workflow's answer to an accepted decision, once the decision is recorded in the ledger. */
export interface DecisionAnswer {
  decision: 'replay' | 'discard';
  /** The quarantined run the decision closed. */
  policyRun: number;
  /** Where the workflow went: `delivering` (the replay's run), `discarded`. */
  stage: HoldStage['stage'];
}

/** Operator-supplied text is kept short: it lands in history, the ledger and the status query. */
const MAX_DECISION_TEXT = 500;

const nonEmptyText = (value: unknown): value is string =>
  typeof value === 'string' && value.trim() !== '' && value.length <= MAX_DECISION_TEXT;

/** What a caller sent, described and never quoted: its JSON type and its size in bytes of JSON. */
export interface PayloadShape {
  type: 'none' | 'null' | 'array' | 'object' | 'string' | 'number' | 'boolean';
  bytes: number;
}

export function payloadShape(payload: unknown): PayloadShape {
  const type =
    payload === undefined
      ? 'none'
      : payload === null
        ? 'null'
        : Array.isArray(payload)
          ? 'array'
          : (typeof payload as PayloadShape['type']);
  return { type, bytes: payload === undefined ? 0 : new TextEncoder().encode(JSON.stringify(payload)).length };
}

/**
 * Checks a decision's payload as it arrives from any client (the `temporal` CLI sends whatever it is given:
 * nothing, `null`, `{}`). Pure: the workflow runs it on every signal and update, the ops CLI before sending.
 */
export function parseDecision(
  kind: 'approveReplay',
  payload: unknown,
): { ok: true; value: ApproveReplay } | { ok: false; why: string };
export function parseDecision(
  kind: 'discard',
  payload: unknown,
): { ok: true; value: Discard } | { ok: false; why: string };
export function parseDecision(
  kind: DecisionKind,
  payload: unknown,
): { ok: true; value: ApproveReplay | Discard } | { ok: false; why: string };
export function parseDecision(
  kind: DecisionKind,
  payload: unknown,
): { ok: true; value: ApproveReplay | Discard } | { ok: false; why: string } {
  if (isRefusedUnencrypted(payload)) return { ok: false, why: `${kind} ${UNENCRYPTED_REFUSED_WHY}` };
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    return {
      ok: false,
      why: `malformed ${kind}: expected a JSON object, got ${payload === undefined ? 'no input' : payloadShape(payload).type}`,
    };
  }
  const p = payload as Record<string, unknown>;
  const who = kind === 'approveReplay' ? 'approvedBy' : 'by';
  const text = `a non-empty string of at most ${MAX_DECISION_TEXT} characters`;
  if (!nonEmptyText(p[who])) return { ok: false, why: `malformed ${kind}: "${who}" must be ${text}` };
  if (!nonEmptyText(p.reason)) return { ok: false, why: `malformed ${kind}: "reason" must be ${text}` };
  if (p.ticket !== undefined && !nonEmptyText(p.ticket))
    return { ok: false, why: `malformed ${kind}: "ticket", when given, must be ${text}` };
  if (kind === 'approveReplay' && p.replayRequestId !== undefined && !nonEmptyText(p.replayRequestId)) {
    return { ok: false, why: `malformed ${kind}: "replayRequestId", when given, must be ${text}` };
  }
  if (p.decisionId !== undefined && !(typeof p.decisionId === 'string' && DECISION_ID_PATTERN.test(p.decisionId)))
    return { ok: false, why: `malformed ${kind}: "decisionId", when given, must be dc_ and 32 hex digits` };
  if (p.policyRun !== undefined && !(Number.isInteger(p.policyRun) && (p.policyRun as number) >= 1)) {
    return { ok: false, why: `malformed ${kind}: "policyRun", when given, must be a positive integer` };
  }
  if (p.decisionId === undefined && (kind === 'discard' || p.replayRequestId === undefined)) {
    return { ok: false, why: `${kind} ${NOT_RECORDED_WHY}` };
  }
  const policyRun = p.policyRun as number | undefined;
  const decisionId = p.decisionId === undefined ? {} : { decisionId: p.decisionId as string };
  const value =
    kind === 'approveReplay'
      ? {
          approvedBy: p.approvedBy as string,
          reason: p.reason as string,
          ...(p.ticket === undefined ? {} : { ticket: p.ticket as string }),
          ...(p.replayRequestId === undefined ? {} : { replayRequestId: p.replayRequestId as string }),
          ...decisionId,
        }
      : { by: p.by as string, reason: p.reason as string, ...decisionId };
  return { ok: true, value: policyRun === undefined ? value : { ...value, policyRun } };
}

/** Where a hold's workflow is and what it waits for. */
export type HoldStage =
  | { stage: 'releasing' }
  | { stage: 'delivering'; policyRun: number }
  /** No slot in the merchant's shared budget yet (or one reserved for later): waiting, not failing. */
  | {
      stage: 'waiting_for_budget';
      policyRun: number;
      lane: 'first' | 'retry' | 'replay';
      until: string;
      reserved: boolean;
      /** Not the budget: every request in flight is taken, or an earlier webhook of the hold (`after`) goes first. */
      why?: 'in_flight' | 'earlier';
      after?: string;
    }
  /** The last attempt failed; Temporal retries it at `until`, honouring the merchant's Retry-After or backing off. */
  | {
      stage: 'honouring_retry_after' | 'backing_off';
      policyRun: number;
      attempt: number;
      until: string;
      reason: string;
    }
  | { stage: 'held'; policyRun: number; merchantStatus: HeldBy; until: string }
  | { stage: 'quarantined'; policyRun: number; reason: QuarantineReason; since: string; detail: string }
  | { stage: 'delivered'; attempts: number }
  | { stage: 'discarded'; by: string; reason: string }
  /** Quarantined and nobody decided within the quarantine timeout. */
  | { stage: 'abandoned'; reason: QuarantineReason; since: string }
  /** Nothing (more) for this workflow to do: the hold was not released here, or its delivery is owned elsewhere. */
  | { stage: 'not_released'; status: string };

/**
 * A decision signal that did not apply (malformed, not quarantined, already decided, stale): kept with why, never
 * an error, and never with what its caller sent (only its shape). (An Update that does not apply is rejected by its
 * validator and never enters history.)
 */
export interface IgnoredSignal {
  signal: DecisionKind;
  /** Absent in an entry carried from a run that kept the caller's text instead. */
  payload?: PayloadShape;
  at: string;
  /** The stage the workflow was in. */
  stage: HoldStage['stage'];
  /** Why it was ignored. */
  why: string;
}

export type HoldStatus = HoldStage & {
  lastAttempt?: { attemptNumber: number; outcome: string; at: string };
  ignoredSignals: IgnoredSignal[];
};

/** Signals take `unknown`: whatever a client sends is checked by `parseDecision` in the workflow. */
export const approveReplaySignal = defineSignal<[unknown]>('approveReplay');
export const discardSignal = defineSignal<[unknown]>('discard');
export const approveReplayUpdate = defineUpdate<DecisionAnswer, [ApproveReplay]>('approveReplay');
export const discardUpdate = defineUpdate<DecisionAnswer, [Discard]>('discard');
/**
 * The merchant of a held delivery is active again: re-check now instead of at the next (up to 5-minute) re-check.
 * Send it to every held workflow of the merchant with a batch signal by query; nothing is lost without it.
 */
export const merchantResumedSignal = defineSignal('merchantResumed');
/** "Why is it waiting?": the stage, the last attempt's outcome, and any signals that did not apply. */
export const statusQuery = defineQuery<HoldStatus>('status');
