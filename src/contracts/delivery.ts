/**
 * The delivery contract between the hold workflow and the delivery activities: the default policy (the workflow
 * turns it into retry options), the lanes of a merchant's budget, and each activity's input and result.
 */
import type { DeliveryAttemptFailed } from './messages.js';

export interface DeliveryPolicy {
  /** One HTTP attempt, connect to last byte; enforced by the activity itself. */
  readonly attemptTimeoutMs: number;
  /** First retry delay before jitter. */
  readonly initialBackoffMs: number;
  readonly backoffMultiplier: number;
  /** Longest backoff step before jitter (Retry-After may ask for longer, up to its cap). */
  readonly maxBackoffMs: number;
  /** A merchant's Retry-After is honoured up to this long. */
  readonly retryAfterCapMs: number;
  /** From the first attempt of a policy run to giving up (quarantine: exhausted). */
  readonly retryHorizonMs: number;
}

const SECOND = 1000;
const HOUR = 3600 * SECOND;

export const DEFAULT_DELIVERY_POLICY: DeliveryPolicy = Object.freeze({
  // Standard Webhooks and most receivers expect an answer within seconds; 15 s tolerates a slow cold start.
  attemptTimeoutMs: 15 * SECOND,
  // A blip (deploy, restart) usually heals within seconds: retry soon, then back off fast.
  initialBackoffMs: 5 * SECOND,
  backoffMultiplier: 2,
  // Six hours between tries at worst keeps a dead endpoint cheap while still trying several times a day.
  maxBackoffMs: 6 * HOUR,
  // A merchant asking for more than a day is treated as asking for a day.
  retryAfterCapMs: 24 * HOUR,
  // Three days covers a long weekend's outage on the merchant side.
  retryHorizonMs: 72 * HOUR,
});

/** Lanes of one merchant's budget, in priority order: first attempts, then retries, then approved replays. */
export type Lane = 'first' | 'retry' | 'replay';

export type DeliveryStatus = 'pending' | 'delivered' | 'quarantined' | 'discarded' | 'abandoned';

export type DeliverWebhookResult =
  | { status: 'delivered'; attempts: number; statusCode: number }
  /** Already terminal (a retry after success was recorded, or a duplicate workflow): nothing sent. */
  | { status: 'already_terminal'; deliveryStatus: DeliveryStatus; attempts: number }
  /** The merchant is paused or disabled: nothing sent, nothing spent; the workflow waits and asks again. */
  | { status: 'held'; merchantStatus: 'paused' | 'disabled' }
  /**
   * The merchant's budget has no slot for this lane soon: nothing reserved; ask again at `retryAt`. With `after`,
   * an earlier webhook of the same hold is still pending (it goes first), not the budget.
   */
  | { status: 'throttled'; lane: Lane; retryAt: number; after?: string }
  /** A slot is reserved at `sendAt` (ms): call again then, passing it as `reservedSlotMs`. */
  | { status: 'scheduled'; lane: Lane; sendAt: number }
  /**
   * Only from a local-activity call (the workflow's fast path): the attempt failed and may be retried after
   * `failed.nextAttemptAt`. A regular activity throws instead, and Temporal's retry policy takes it from there.
   */
  | { status: 'failed_attempt'; failed: DeliveryAttemptFailed };

/** An approval that names a replay request, to be checked against the ledger (four eyes). */
export interface ReplayApprovalClaim {
  holdId: string;
  policyRun: number;
  replayRequestId: string;
  approvedBy: string;
}

export type ReplayApprovalCheck = { ok: true } | { ok: false; why: string };

/** What `quarantineDelivery` answers: the rules a decision on this quarantine must meet, set by the worker. */
export interface QuarantineRecorded {
  /**
   * An `approveReplay` applies only with a `replayRequestId` (a reviewed request, approved by a second person, checked
   * against the ledger). Production workers say true. Absent in histories written before it: false.
   */
  fourEyes: boolean;
}

export interface QuarantineDecision {
  webhookId: string;
  policyRun: number;
  decision: 'replay' | 'discard' | 'abandon';
  by: string;
  reason: string;
  ticket?: string;
}

export interface DeliverWebhookInput {
  webhookId: string;
  /** 1 for the first policy run; each approved replay is a new run. */
  policyRun: number;
  /** A send slot reserved by an earlier call that answered `scheduled`. */
  reservedSlotMs?: number;
}
