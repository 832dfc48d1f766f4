/**
 * The delivery contract between the hold workflow and the delivery activities: the default policy (the workflow
 * turns it into retry options), the lanes of a merchant's budget, and each activity's input and result.
 */
/** The event type of the webhook each release sends (a processor event's webhooks have their own). */
export const HOLD_RELEASED_EVENT = 'hold.released';
/** The event `merchant ping` sends: a check of the endpoint, about no hold, never a webhook of the ledger. */
export const MERCHANT_PING_EVENT = 'merchant.ping';

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
  /**
   * The merchant's own cap on its requests open at once, across every worker; unset: the workers'
   * WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT. A merchant with a high rate and slow answers needs rate × latency of them.
   */
  readonly maxInFlight?: number;
}

/** The largest `maxInFlight` a policy may set. */
export const MAX_IN_FLIGHT_LIMIT = 1_000;

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

/**
 * The longest attempt timeout a merchant's policy may set: the activity's start-to-close is derived from it, so an
 * attempt always ends (and its request is aborted) before Temporal starts the next one.
 */
export const MAX_ATTEMPT_TIMEOUT_MS = 30 * SECOND;
/** Waits for the merchant's budget up to this long happen inside the activity; longer ones are durable timers. */
export const IN_ACTIVITY_WAIT_MAX_MS = 2_000;
/** The same on the fast path, whose wait holds a workflow task: a second at most. */
export const FAST_PATH_WAIT_MAX_MS = 1_000;
/** What an attempt's activity does besides the request: the ledger writes around it, the lease. */
export const ATTEMPT_LEDGER_SLACK_MS = 10 * SECOND;
/** A delivery held over an hour re-checks its merchant this often (`merchantResumed` drains it at once). */
export const HELD_LONG_RECHECK_MS = 30 * 60_000;
/** Every request in flight taken: each such answer in a row doubles the wait the worker named, up to a minute. */
export const IN_FLIGHT_WAIT_MAX_MS = 60_000;

/** Lanes of one merchant's budget, in priority order: first attempts, then retries, then approved replays. */
export type Lane = 'first' | 'retry' | 'replay';

/** What holds a delivery back without spending an attempt: its merchant's status, or the region's paused sends. */
export type HeldBy = 'paused' | 'disabled' | 'sends_paused';

/** `not_subscribed`: written for a merchant whose endpoint does not take its event type; never sent. */
export type DeliveryStatus = 'pending' | 'delivered' | 'quarantined' | 'discarded' | 'abandoned' | 'not_subscribed';

/** Every status a webhook's row can have, in the order operators list them by. */
export const DELIVERY_STATUSES: readonly DeliveryStatus[] = [
  'pending',
  'quarantined',
  'delivered',
  'discarded',
  'abandoned',
  'not_subscribed',
];

/**
 * What one call of `deliverWebhook` answers when it does not fail (the attempt contract, src/workflows/webhook-
 * delivery.ts): an attempt that delivered, or nothing sent and why. A failed attempt is a typed failure instead:
 * `WebhookAttemptFailed` (retryable, its delay chosen by the activity) or one of DELIVERY_FAILURE_TYPES (quarantine).
 */
export type DeliverWebhookResult =
  | { status: 'delivered'; attempts: number; statusCode: number }
  /** Already terminal (a retry after success was recorded, or a duplicate workflow): nothing sent. */
  | { status: 'already_terminal'; deliveryStatus: DeliveryStatus; attempts: number }
  /**
   * The merchant is paused or disabled, or the region's sends are paused (`sends_paused`, an operator's
   * `ops sends pause`): nothing sent, nothing spent; the workflow waits and asks again.
   */
  | { status: 'held'; merchantStatus: HeldBy }
  /**
   * Nothing sent, nothing spent: ask again in `waitMs`. `budget`: no slot this soon in the merchant's budget (with
   * `reservedSlotMs`, a queue place is held for the next call); `in_flight`: every request the merchant may have open
   * is open; `earlier`: an earlier webhook of the same hold (`after`) is still being delivered, and goes first.
   */
  | {
      status: 'wait';
      why: 'budget' | 'in_flight' | 'earlier';
      lane: Lane;
      waitMs: number;
      reservedSlotMs?: number;
      after?: string;
    }
  /** The fast path is full on this worker (its share of local-activity slots): the regular activity sends it. */
  | { status: 'hand_over' };

/**
 * The details of a `WebhookAttemptFailed` (the retryable failure of one attempt): what the workflow and the Web UI show
 * of the attempt, and when it is tried again.
 */
export interface AttemptFailedDetails {
  merchantId: string;
  attemptNumber: number;
  /** "HTTP 503", "AttemptTimeout", "ConnectionError (ECONNRESET)" */
  outcome: string;
  statusCode: number | null;
  /** "Retry-After 120 s" or "backoff attempt 3" */
  reason: string;
  /** The delay before the next attempt, as the activity chose it (0: at once). */
  delayMs: number;
}

/**
 * What a resend's workflow claims when it reopens its webhook (`reopenForResend`). The worker checks it against the
 * ledger: the webhook must be at an end; a request must be an approved resend request covering it, approved by
 * `approvedBy` (never its requester), and where four eyes rule a resend needs one.
 */
export interface ResendClaim {
  resendId: string;
  webhookId: string;
  requestedBy: string;
  reason: string;
  ticket?: string;
  requestId?: string;
  approvedBy?: string;
  /**
   * A merchant's own request through the merchant API (merchant_resend_requests): the worker checks it names this
   * webhook, of that merchant, asked with a key that was live, and this resend. No second person: the merchant asks
   * for its own webhook again.
   */
  merchantRequestId?: string;
}

export type ResendOutcome =
  | {
      status: 'reopened';
      holdId: string;
      merchantId: string;
      /** The policy run the resend is: the replay lane, and its own attempts. */
      policyRun: number;
      fromStatus: DeliveryStatus;
      /** The merchant's delivery policy's horizon for this run. */
      retryHorizonMs: number;
    }
  | { status: 'refused'; why: string };

/** What `quarantineDelivery` answers: the rules a decision on this quarantine must meet, set by the worker. */
export interface QuarantineRecorded {
  /**
   * An `approveReplay` applies only with a `replayRequestId` (a reviewed request, approved by a second person, checked
   * against the ledger). Production workers say true.
   */
  fourEyes: boolean;
  /** Nobody decided within this long (QUARANTINE_DECISION_TIMEOUT): the workflow abandons the webhook. */
  decideWithinMs: number;
}

/** The abandon is the workflow's own decision, made when a quarantine timed out: the ledger records it by this name. */
export const ABANDONED_BY = 'hold-sweeper';
/** Two weeks: long enough to span a holiday on the operator side, short enough that alerts keep meaning. */
export const DEFAULT_QUARANTINE_TIMEOUT_MS = 14 * 86_400_000;

export interface QuarantineDecision {
  webhookId: string;
  policyRun: number;
  decision: 'replay' | 'discard' | 'abandon';
  by: string;
  reason: string;
  ticket?: string;
  /** The operator's decision as the ledger recorded it before it was sent (operator_decisions). */
  decisionId?: string;
  /** The approved replay request a replay carries out (replay_requests). */
  replayRequestId?: string;
}

/**
 * What `decideQuarantine` answers: the decision the ledger holds for the policy run, by whom and why (the operator's
 * recorded decision, the approved request, or the workflow's own abandon; the one recorded first, if another was), or
 * refused: nothing in the ledger stands behind the one asked for.
 */
export type QuarantineDecisionAnswer =
  | { recorded: true; decision: QuarantineDecision['decision']; by: string; reason: string }
  | { recorded: false; why: string };

export interface DeliverWebhookInput {
  webhookId: string;
  /** 1 for the first policy run; each approved replay (and each resend) is a new run. */
  policyRun: number;
  /** A send slot reserved by an earlier call that answered `wait` with one. */
  reservedSlotMs?: number;
}

/**
 * The workflow task timeout of every workflow that delivers a webhook: the SDK heartbeats a task whose local
 * activities outlast 80 % of it, so a task holds at most 2 s of local-activity time, however slow the merchant.
 */
export const DELIVERY_WORKFLOW_TASK_TIMEOUT_MS = 2_500;
