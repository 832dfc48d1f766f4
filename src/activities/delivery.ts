/**
 * Webhook delivery activities. One call of `deliverWebhook` is one HTTP attempt, and it ends one of two ways (the
 * attempt contract, src/workflows/webhook-delivery.ts): a result the workflow acts on (delivered; held, or wait as
 * long as it says: nothing sent), or a typed failure. The retryable one, `WebhookAttemptFailed`, carries the delay this
 * activity computes (jittered backoff, Retry-After as a floor) as `nextRetryDelay` to Temporal's retry policy
 * (src/workflows/activity-profiles.ts), which drives the next attempt; the named non-retryable ones quarantine. On the
 * workflow's local fast path the attempt has the policy's whole timeout too (never cut short and sent again); when
 * this worker's fast-path slots are taken, or the merchant answered it slowly of late, it answers `hand_over` at once
 * and the regular activity sends it, so releases always find a workflow task and a local-activity slot.
 *
 * Every request is aborted when its attempt times out or the activity is cancelled, and holds one of its merchant's
 * leases on requests in flight (WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT) from admission until its attempt is recorded.
 *
 * The merchant's secret is read here from the ledger by merchant id, sealed, opened right before the request is signed
 * and used only to sign: it never enters an activity argument, a result, a failure message or a log line.
 */
import { SpanKind, trace } from '@opentelemetry/api';
import { activityInfo, ApplicationFailure, cancellationSignal, getClient, log, sleep } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/client';
import { noopMetricMeter, type MetricMeter } from '@temporalio/common';
import type pg from 'pg';
import type { Region } from '../contracts/regions.js';
import { InvalidEndpointUrl, guardedLookup, parseEndpoint, type EndpointRules } from '../delivery/endpoint.js';
import { createAgents, sendWebhookRequest, type HttpAttempt } from '../delivery/http-sender.js';
import {
  createMerchantBudget,
  LANE_HORIZON_MS,
  type LimitedBy,
  MAX_PUSHBACK_WITHOUT_RETRY_AFTER_MS,
} from '../sql/merchant-budget.js';
import {
  ATTEMPT_LEDGER_SLACK_MS,
  DEFAULT_QUARANTINE_TIMEOUT_MS,
  FAST_PATH_WAIT_MAX_MS,
  HELD_LONG_RECHECK_MS,
  IN_ACTIVITY_WAIT_MAX_MS,
  IN_FLIGHT_WAIT_MAX_MS,
  type AttemptFailedDetails,
  type DeliverWebhookInput,
  type DeliverWebhookResult,
  type DeliveryPolicy,
  type Lane,
  type QuarantineDecision,
  type QuarantineDecisionAnswer,
  type QuarantineRecorded,
  type ResendClaim,
} from '../contracts/delivery.js';
import { DEFAULT_MAX_IN_FLIGHT_PER_MERCHANT } from '../config.js';
import { deliveryWorkflowId } from '../contracts/ids.js';
import {
  classifyAttempt,
  InvalidDeliveryPolicyError,
  parseRetryAfter,
  resolveDeliveryPolicy,
  retryDelay,
  type DeliveryAction,
} from '../delivery/policy.js';
import { RETRYABLE_DELIVERY_FAILURE, type QuarantineReason } from '../contracts/failures.js';
import { MissingSigningSecret, openSigningKeys, signedHeaders } from '../delivery/standard-webhooks.js';
import type { SecretSealer, SecretsAtRest } from '../delivery/secret-box.js';
import { deliveryMetrics, statusClass } from '../observability/metrics.js';
import { inSpan } from '../observability/spans.js';
import * as deliveries from '../sql/deliveries.js';
import { disableMerchant } from '../sql/merchants.js';
import { reopenForResend, type ResendContext } from './resend.js';

export interface DeliveryDeps {
  region: Region;
  pool: pg.Pool;
  endpointRules: EndpointRules;
  /** Opens the merchants' sealed signing secrets: the region's MERCHANT_SECRET_KEYS (src/delivery/secret-box.ts). */
  sealer: SecretSealer;
  /** Where product metrics go (the runtime's Prometheus meter in workers); a no-op by default. */
  meter?: MetricMeter;
  agents?: ReturnType<typeof createAgents>;
  /**
   * Four eyes (production): a replay approval counts only with a replay request approved by a second person
   * (`replayRequestId`). The workflow learns it from `quarantineDelivery`'s answer, so a caller cannot say otherwise.
   */
  fourEyes?: boolean;
  /** How long a quarantine waits for a human before the workflow abandons it (QUARANTINE_DECISION_TIMEOUT). */
  quarantineTimeoutMs?: number;
  /**
   * At most this many of one merchant's requests open at once, across every worker
   * (WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT).
   */
  maxInFlightPerMerchant?: number;
  /** The share of each destination's rate this region uses (DESTINATION_RATE_SHARE). */
  destinationRateShare?: number;
  /**
   * Fast-path attempts (local activities) this worker runs at once, at most: the rest of its local-activity slots stay
   * free for releases, whatever the merchants' latency. Half its local-activity slots in a worker.
   */
  fastPathSlots?: number;
  /** Injected for tests; Date.now and Math.random otherwise. */
  clock?: () => number;
  random?: () => number;
}

/**
 * How soon a webhook waiting behind an earlier one of its hold asks again: half the earlier one's age, between these
 * (its first attempt is usually done in well under a second; one in backoff for hours is not polled every second).
 */
const EARLIER_RECHECK_MIN_MS = 1_000;
const EARLIER_RECHECK_MAX_MS = 10 * 60_000;
/**
 * An earlier webhook whose delivery workflow Temporal does not know yet is about to be delivered, not orphaned, for
 * this long after it was written: a processor event's webhook is written by the apply's transaction and its workflow
 * started by the event workflow's next command, seconds later on a loaded cluster. Past it, nothing will start one
 * but the outbox reconciler or an operator.
 */
const EARLIER_START_GRACE_MS = 5 * 60_000;
/**
 * A merchant with every request in flight taken is asked again after 1 to 2 s (spread, so the waiting do not stampede);
 * the workflow doubles it for each such answer in a row (src/workflows/delivery-rules.ts).
 */
const IN_FLIGHT_RECHECK_MIN_MS = 1_000;
const IN_FLIGHT_RECHECK_SPREAD_MS = 1_000;
/**
 * Fast-path attempts a worker runs at once unless told: half its workflow task slots (the SDK's 40), since a workflow
 * task waiting on its local activity keeps its slot, and the sweep's releases need the others.
 */
const DEFAULT_FAST_PATH_SLOTS = 20;
/**
 * A merchant whose fast-path request took longer than this is sent through the regular activity for the next
 * FAST_PATH_SLOW_FOR_MS, in this worker: its attempts would otherwise keep workflow tasks open (and heartbeated) for
 * seconds each, time the releases of the same workflows wait for.
 */
const FAST_PATH_SLOW_MS = 1_000;
const FAST_PATH_SLOW_FOR_MS = 5 * 60_000;

function failure(type: string, message: string, details: Record<string, unknown>): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: true, details: [details] });
}

type Throttle = Extract<DeliverWebhookResult, { status: 'wait' | 'held' }>;

/** Nothing to send now: the delivery is already terminal, its merchant is not active, or an earlier webhook goes first. */
type NotSendable = Extract<DeliverWebhookResult, { status: 'already_terminal' | 'held' | 'wait' }>;

/** A pending delivery of an active merchant, with everything its attempt needs, checked before any request. */
interface Sendable {
  delivery: deliveries.DeliveryForSending;
  policy: DeliveryPolicy;
  url: URL;
  /** The current signing key first, the previous one during a rotation. */
  keys: Buffer[];
}

/** One attempt that went out, and where it stands in its delivery. */
interface SentAttempt {
  webhookId: string;
  policyRun: number;
  attemptNumber: number;
  /**
   * When the merchant's budget admitted it, on the ledger's clock (the gate's own time, `admit_attempt`): the attempt
   * log's start, so that its pacing reads there as the gate kept it, whatever this worker's event loop did next.
   */
  admittedAt: number;
  sendable: Sendable;
  attempt: HttpAttempt;
  /** Set once the attempt is recorded, which gives its lease on a request in flight back in the same statement. */
  leaseReturned?: boolean;
}

/**
 * Checks the merchant's policy, endpoint and signing secrets (opened here: missing, undecodable or not opening with
 * the region's key ring is MissingSigningSecret); a bad one is a named, non-retryable failure (quarantine), before
 * anything is sent or a turn in the budget is taken.
 */
async function sendableDelivery(
  delivery: deliveries.DeliveryForSending,
  endpointRules: EndpointRules,
  secrets: SecretsAtRest,
): Promise<Sendable> {
  const { merchantId } = delivery;
  try {
    const policy = resolveDeliveryPolicy(merchantId, delivery.deliveryPolicy);
    const url = parseEndpoint(merchantId, delivery.endpointUrl, endpointRules);
    const keys = await openSigningKeys(
      secrets,
      merchantId,
      delivery.sealedSigningSecret,
      delivery.sealedPreviousSigningSecret,
    );
    return { delivery, policy, url, keys };
  } catch (err) {
    if (
      err instanceof InvalidDeliveryPolicyError ||
      err instanceof InvalidEndpointUrl ||
      err instanceof MissingSigningSecret
    ) {
      throw failure(err.name, err.message, { merchantId });
    }
    throw err;
  }
}

/** First attempts, then retries, then approved replays, within the merchant's one budget. */
function laneOf(policyRun: number, runAttempts: number): Lane {
  return policyRun > 1 ? 'replay' : runAttempts === 0 ? 'first' : 'retry';
}

/** How the attempt's failure reads in messages: the HTTP status, or the error class and its detail. */
function describeAttempt(attempt: HttpAttempt): string {
  return attempt.result.kind === 'response'
    ? `HTTP ${attempt.result.status}`
    : `${attempt.result.errorClass}${attempt.errorDetail ? ` (${attempt.errorDetail})` : ''}`;
}

const statusCodeOf = (attempt: HttpAttempt) => (attempt.result.kind === 'response' ? attempt.result.status : null);

/** What the delivery activities share, resolved once per worker from its DeliveryDeps. */
interface DeliveryContext extends ResendContext {
  endpointRules: EndpointRules;
  sealer: SecretSealer;
  agents: ReturnType<typeof createAgents>;
  quarantineTimeoutMs: number;
  clock: () => number;
  random: () => number;
  maxInFlightPerMerchant: number;
  budget: ReturnType<typeof createMerchantBudget>;
  metrics: ReturnType<typeof deliveryMetrics>;
  fastPath: { slots: number; running: number; slowUntil: Map<string, number> };
}

export function createDeliveryActivities({
  region,
  pool,
  endpointRules,
  sealer,
  agents = createAgents(),
  fourEyes = false,
  quarantineTimeoutMs = DEFAULT_QUARANTINE_TIMEOUT_MS,
  clock = Date.now,
  random = Math.random,
  meter = noopMetricMeter,
  maxInFlightPerMerchant = DEFAULT_MAX_IN_FLIGHT_PER_MERCHANT,
  destinationRateShare = 1,
  fastPathSlots = DEFAULT_FAST_PATH_SLOTS,
}: DeliveryDeps) {
  const ctx: DeliveryContext = {
    region,
    pool,
    endpointRules,
    sealer,
    agents,
    fourEyes,
    quarantineTimeoutMs,
    clock,
    random,
    maxInFlightPerMerchant,
    budget: createMerchantBudget(pool, { rateShare: destinationRateShare }),
    metrics: deliveryMetrics(meter),
    resends: meter.createCounter(
      'hold_sweeper_webhook_resends',
      '1',
      'webhooks at an end reopened by a resend, by where they stood',
    ),
    fastPath: { slots: fastPathSlots, running: 0, slowUntil: new Map() },
  };
  return {
    /** One signed HTTP attempt under the delivery policy; see the module comment. */
    deliverWebhook: (input: DeliverWebhookInput): Promise<DeliverWebhookResult> => deliverWebhook(ctx, input),

    /**
     * Records the decision on a quarantined delivery and moves it on: `replay` back to pending (same webhook id,
     * a new policy run), `discard` and `abandon` to their terminal states; only when the ledger says who made it
     * (`decisionAuthority`: the operator's recorded decision for this webhook and run, or an approved replay request
     * covering it), and as the ledger says. One decision per policy run: a retried call, or one after another decision
     * was recorded, answers with the decision the ledger holds, which the workflow follows.
     */
    async decideQuarantine(input: QuarantineDecision): Promise<QuarantineDecisionAnswer> {
      const authority = await deliveries.decisionAuthority(pool, input, { fourEyes });
      if (!authority.ok) {
        log.warn('decision refused: the ledger does not stand behind it', {
          region,
          webhookId: input.webhookId,
          policyRun: input.policyRun,
          decision: input.decision,
          why: authority.why,
        });
        return { recorded: false, why: authority.why };
      }
      return { recorded: true, ...(await deliveries.decideQuarantine(pool, input, authority)) };
    },

    reopenForResend: (claim: ResendClaim) => reopenForResend(ctx, claim),

    /**
     * Marks a pending delivery quarantined with its reason (a no-op for one already terminal), and tells the workflow
     * the worker's rules for deciding it: four eyes (an approval needs an approved replay request) and how long it
     * waits for a human. Every delivery (a release's, an event's, a resend's) learns them here, as this worker is
     * configured.
     */
    async quarantineDelivery({
      webhookId,
      reason,
      detail,
    }: {
      webhookId: string;
      reason: QuarantineReason;
      detail: string;
    }): Promise<QuarantineRecorded> {
      await deliveries.quarantineDelivery(pool, webhookId, reason, detail);
      return { fourEyes, decideWithinMs: quarantineTimeoutMs };
    },
  };
}

/** A wait for the merchant's budget, in its metrics, naming the bucket and the limit that held it back. */
function waited(
  { metrics }: DeliveryContext,
  merchantId: string,
  lane: Lane,
  { bucket, limit }: LimitedBy,
  ms: number,
): void {
  const tags = { merchant_id: merchantId, lane, bucket, limit };
  metrics.throttleWaits.add(1, tags);
  metrics.limiterWaitSeconds.record(Math.max(0, ms) / 1000, tags);
}

/** One signed HTTP attempt under the delivery policy; see the module comment. */
async function deliverWebhook(ctx: DeliveryContext, input: DeliverWebhookInput): Promise<DeliverWebhookResult> {
  const result = await attemptHere(ctx, input);
  // Nothing sent: the workflow comes back to the webhook within this long, and the outbox reconciler leaves it alone.
  if (result.status === 'held' || result.status === 'wait') {
    const within =
      result.status === 'held'
        ? HELD_LONG_RECHECK_MS
        : result.why === 'in_flight'
          ? IN_FLIGHT_WAIT_MAX_MS
          : result.waitMs;
    await deliveries.markAwaited(ctx.pool, input.webhookId, within);
  }
  return result;
}

/** The attempt, unless this worker's fast path is full. */
async function attemptHere(ctx: DeliveryContext, input: DeliverWebhookInput): Promise<DeliverWebhookResult> {
  if (!activityInfo().isLocal) return attemptOnce(ctx, input);
  const { fastPath } = ctx;
  if (fastPath.running >= fastPath.slots) return { status: 'hand_over' };
  fastPath.running++;
  try {
    return await attemptOnce(ctx, input);
  } finally {
    fastPath.running--;
  }
}

async function attemptOnce(
  ctx: DeliveryContext,
  { webhookId, policyRun, reservedSlotMs }: DeliverWebhookInput,
): Promise<DeliverWebhookResult> {
  const sendable = await loadDelivery(ctx, webhookId, policyRun);
  if ('status' in sendable) return sendable;
  const { merchantId, runAttempts } = sendable.delivery;
  const { isLocal } = activityInfo();
  const { slowUntil } = ctx.fastPath;
  if (isLocal && (slowUntil.get(merchantId) ?? 0) > ctx.clock()) return { status: 'hand_over' };
  // A reserved queue place belongs to the call that was woken for it; Temporal's retry of that call (same
  // input, attempt > 1) is a new turn and queues again in the retry lane.
  const lane = laneOf(policyRun, runAttempts);
  const turn = await inSpan('merchant budget wait', { 'hold_sweeper.lane': lane }, async (span) => {
    const reserved = activityInfo().attempt === 1 ? reservedSlotMs : undefined;
    const decided = await awaitSendSlot(ctx, webhookId, merchantId, lane, reserved, sendable.policy);
    span?.setAttribute('hold_sweeper.budget', 'attemptNumber' in decided ? 'admitted' : decided.status);
    return decided;
  });
  if (!('attemptNumber' in turn)) return turn;
  let sent: SentAttempt | undefined;
  try {
    sent = await sendSignedAttempt(ctx, webhookId, policyRun, turn, sendable);
    if (isLocal && sent.attempt.durationMs > FAST_PATH_SLOW_MS)
      slowUntil.set(merchantId, ctx.clock() + FAST_PATH_SLOW_FOR_MS);
    const { action } = classifyAttempt(sent.attempt.result);
    noteAttempt(ctx, sent, action);
    return await applyPolicyAction(ctx, sent, action);
  } finally {
    // Not recorded (the request threw, or the ledger did): the lease goes back here, or expires on its own.
    if (!sent?.leaseReturned) await ctx.budget.releaseLease(webhookId, turn.attemptNumber).catch(() => undefined);
  }
}

/** The delivery, if it is to be sent now; see `sendableDelivery` for what makes it fail instead. */
async function loadDelivery(
  ctx: DeliveryContext,
  webhookId: string,
  policyRun: number,
): Promise<Sendable | NotSendable> {
  const { region, pool, endpointRules, sealer } = ctx;
  const delivery = await deliveries.deliveryForSending(pool, webhookId, policyRun);
  if (!delivery) throw new Error(`webhook ${webhookId} has no delivery record`);
  if (delivery.status !== 'pending')
    return { status: 'already_terminal', deliveryStatus: delivery.status, attempts: delivery.attemptCount };
  if (delivery.merchantStatus !== 'active') return { status: 'held', merchantStatus: delivery.merchantStatus };
  if (delivery.earlierPending && (await isBeingDelivered(ctx, delivery.earlierPending, delivery.holdId))) {
    // The hold's earlier webhook goes first. Re-check soon after a young one, seldom after one long in retries.
    const { webhookId: after, ageMs } = delivery.earlierPending;
    const waitMs = Math.round(Math.min(Math.max(ageMs / 2, EARLIER_RECHECK_MIN_MS), EARLIER_RECHECK_MAX_MS));
    return { status: 'wait', why: 'earlier', lane: laneOf(policyRun, delivery.runAttempts), waitMs, after };
  }
  return sendableDelivery(delivery, endpointRules, { region, sealer });
}

/**
 * Whether an earlier pending webhook of the hold is being delivered: its workflow (the hold's release for a
 * `hold.released`, its own for an event's) is running. One whose workflow was terminated or timed out is orphaned: it
 * stays pending until a new delivery run is started for it (`ops events redeliver`), and must not hold back the hold's
 * later webhooks meanwhile. Unsure (the server unreachable), or too young for its workflow to have started: it is
 * taken as being delivered, and asked again later.
 */
async function isBeingDelivered(
  ctx: DeliveryContext,
  earlier: deliveries.EarlierPending,
  holdId: string,
): Promise<boolean> {
  const { region } = ctx;
  const workflowId = deliveryWorkflowId(region, { ...earlier, holdId });
  try {
    const { status } = await getClient().workflow.getHandle(workflowId).describe();
    if (status.name === 'RUNNING') return true;
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError) || earlier.ageMs < EARLIER_START_GRACE_MS) return true;
  }
  log.warn('earlier webhook orphaned: its delivery workflow is not running; not waiting for it', {
    region,
    holdId,
    webhookId: earlier.webhookId,
    workflowId,
  });
  return false;
}

/**
 * Waits for this delivery's turn in the merchant's budget without spending an attempt: up to 2 s here (1 s on the fast
 * path) (measured on the database clock that issued the turn), longer as a durable timer in the workflow, which then
 * calls again holding its queue place (`reservedSlotMs`).
 */
async function awaitSendSlot(
  ctx: DeliveryContext,
  webhookId: string,
  merchantId: string,
  lane: Lane,
  reservedSlotMs: number | undefined,
  policy: DeliveryPolicy,
): Promise<{ attemptNumber: number; admittedAt: number } | Throttle> {
  const { random, maxInFlightPerMerchant, budget } = ctx;
  let reserved = reservedSlotMs !== undefined;
  // Admission takes a lease on one of the merchant's requests in flight, held until the attempt is recorded: the
  // merchant's own cap (its policy), else the workers'.
  const lease = {
    cap: policy.maxInFlight ?? maxInFlightPerMerchant,
    leaseMs: policy.attemptTimeoutMs + ATTEMPT_LEDGER_SLACK_MS,
  };
  for (;;) {
    const decision = await budget.acquire(merchantId, lane, reserved, webhookId, lease);
    if (decision.outcome === 'send') {
      if (decision.attemptNumber === undefined) throw new Error(`webhook ${webhookId} has no delivery record`);
      return { attemptNumber: decision.attemptNumber, admittedAt: decision.nowMs };
    }
    if (decision.outcome === 'paused') {
      // An operator paused every send of the region: wait, held, like a paused merchant (nothing sent, nothing spent).
      return { status: 'held', merchantStatus: 'sends_paused' };
    }
    if (decision.outcome === 'busy') {
      // As many requests in flight as the merchant may have (one hangs, or answers slowly): nothing sent, nothing
      // spent, and no row held while it waits.
      const waitMs = IN_FLIGHT_RECHECK_MIN_MS + Math.round(random() * IN_FLIGHT_RECHECK_SPREAD_MS);
      waited(ctx, merchantId, lane, decision.limitedBy, waitMs);
      return { status: 'wait', why: 'in_flight', lane, waitMs };
    }
    // Every wait is a duration on the database clock that issued the turn: the workflow's clock is another one.
    if (decision.outcome === 'denied') {
      // Spread the denied over the lane's horizon so that they do not all come back in the same instant.
      const waitMs = Math.max(
        decision.atMs - LANE_HORIZON_MS[lane] + Math.round(random() * LANE_HORIZON_MS[lane]) - decision.nowMs,
        1,
      );
      waited(ctx, merchantId, lane, decision.limitedBy, waitMs);
      return { status: 'wait', why: 'budget', lane, waitMs };
    }
    reserved = true;
    const waitMs = decision.atMs - decision.nowMs;
    waited(ctx, merchantId, lane, decision.limitedBy, waitMs);
    if (waitMs > (activityInfo().isLocal ? FAST_PATH_WAIT_MAX_MS : IN_ACTIVITY_WAIT_MAX_MS))
      return { status: 'wait', why: 'budget', lane, waitMs, reservedSlotMs: decision.atMs };
    await sleep(waitMs);
  }
}

/** One signed HTTP request: the payload as fixed at release, signed with every current key. */
async function sendSignedAttempt(
  ctx: DeliveryContext,
  webhookId: string,
  policyRun: number,
  { attemptNumber, admittedAt }: { attemptNumber: number; admittedAt: number },
  sendable: Sendable,
): Promise<SentAttempt> {
  const { endpointRules, agents, clock } = ctx;
  const { delivery, policy, url, keys } = sendable;
  try {
    const request = { 'http.request.method': 'POST', 'server.address': url.hostname };
    const attempt = await inSpan(
      'POST',
      request,
      async (span) => {
        const answered = await sendWebhookRequest({
          url,
          body: delivery.payload,
          headers: { ...signedHeaders(keys, webhookId, Math.floor(clock() / 1000), delivery.payload) },
          timeoutMs: policy.attemptTimeoutMs,
          lookup: guardedLookup(delivery.merchantId, endpointRules),
          agents,
          signal: cancellationSignal(),
        });
        span?.setAttributes(attemptAttributes(answered));
        return answered;
      },
      SpanKind.CLIENT,
    );
    return { webhookId, policyRun, attemptNumber, admittedAt, sendable, attempt };
  } catch (err) {
    if (err instanceof InvalidEndpointUrl) throw failure(err.name, err.message, { merchantId: delivery.merchantId });
    throw err;
  }
}

/**
 * The attempt's metric, log line and span attributes: its class, status and size, never the merchant's words (those
 * stay in the ledger's attempt log, which the failure messages do not quote either).
 */
function noteAttempt(
  ctx: DeliveryContext,
  { webhookId, policyRun, attemptNumber, sendable: { delivery }, attempt }: SentAttempt,
  action: DeliveryAction,
): void {
  const { region, metrics } = ctx;
  const status_class = statusClass(attempt.result);
  metrics.attempts.add(1, { merchant_id: delivery.merchantId, status_class });
  metrics.attemptSeconds.record(attempt.durationMs / 1000, { merchant_id: delivery.merchantId, status_class });
  if (attempt.result.kind === 'error' && attempt.result.errorClass === 'AttemptTimeout')
    metrics.outcomeUnknown.add(1, { merchant_id: delivery.merchantId });
  log.info('webhook attempt', {
    region,
    holdId: delivery.holdId,
    webhookId,
    merchantId: delivery.merchantId,
    attemptNumber,
    policyRun,
    outcome: action,
    statusClass: status_class,
    statusCode: statusCodeOf(attempt),
    responseBytes: attempt.responseBytes,
    durationMs: attempt.durationMs,
  });
  trace.getActiveSpan()?.setAttributes(attemptAttributes(attempt));
}

/** An attempt's span attributes: its class, status and size, never the merchant's words. */
const attemptAttributes = (attempt: HttpAttempt) => ({
  'webhook.status_class': statusClass(attempt.result),
  ...(attempt.result.kind === 'response' ? { 'http.response.status_code': attempt.result.status } : {}),
  ...(attempt.responseBytes !== undefined ? { 'webhook.response_bytes': attempt.responseBytes } : {}),
});

/** The attempt in the attempt log and on its delivery (see src/sql/deliveries.ts). */
async function recordAttempt(
  ctx: DeliveryContext,
  sent: SentAttempt,
  outcome: 'delivered' | 'retry' | 'quarantine',
  next?: { delayMs: number; reason: string },
) {
  const { pool, metrics } = ctx;
  const { webhookId, attemptNumber, policyRun, admittedAt, attempt } = sent;
  const recorded = await deliveries.recordAttempt(pool, {
    webhookId,
    attemptNumber,
    policyRun,
    scheduledAtMs: activityInfo().currentAttemptScheduledTimestampMs,
    startedAtMs: admittedAt,
    durationMs: attempt.durationMs,
    statusCode: statusCodeOf(attempt),
    errorClass: attempt.result.kind === 'error' ? attempt.result.errorClass : null,
    responseExcerpt: attempt.responseExcerpt,
    outcome,
    next,
  });
  sent.leaseReturned = true;
  // The SLO's measure: a release's webhook from the release to the 2xx, on its first policy run (a replay's or a
  // resend's time includes a human's).
  if (recorded.releaseToDeliveredSeconds !== null && policyRun === 1)
    metrics.releaseToDelivered.record(recorded.releaseToDeliveredSeconds, {
      merchant_id: sent.sendable.delivery.merchantId,
    });
}

/** The policy table's action for the attempt's result: record it, then answer, fail, or fail to be retried. */
async function applyPolicyAction(
  ctx: DeliveryContext,
  sent: SentAttempt,
  action: DeliveryAction,
): Promise<DeliverWebhookResult> {
  switch (action) {
    case 'delivered':
      await recordAttempt(ctx, sent, 'delivered');
      return {
        status: 'delivered',
        attempts: sent.attemptNumber,
        statusCode: (sent.attempt.result as { status: number }).status,
      };
    case 'retry':
      return retryLater(ctx, sent);
    case 'disable_endpoint':
    case 'reject':
      return quarantineAtOnce(ctx, sent, action);
  }
}

/**
 * A retryable failure: the next attempt's delay (backoff, Retry-After as a floor), a merchant-wide push-back on
 * 429 (or 503 with Retry-After), then the failure that carries the delay to Temporal's retry policy.
 */
async function retryLater(ctx: DeliveryContext, sent: SentAttempt): Promise<never> {
  const { clock, random, budget, metrics } = ctx;
  const {
    webhookId,
    attemptNumber,
    attempt,
    sendable: { delivery, policy },
  } = sent;
  const { merchantId } = delivery;
  const what = describeAttempt(attempt);
  const retryAfterMs =
    attempt.result.kind === 'response' ? parseRetryAfter(attempt.result.retryAfter, clock()) : undefined;
  // The n-th failure of this policy run, counted in the ledger: throttled calls are new activity
  // executions (Temporal's attempt counter restarts), but they sent nothing and do not count.
  const next = retryDelay(policy, delivery.runAttempts + 1, random, retryAfterMs);
  // Honoured either way: as the delay itself, or under a longer backoff step (it is a floor).
  if (retryAfterMs !== undefined) metrics.retryAfterHonoured.add(1, { merchant_id: merchantId });
  await recordAttempt(ctx, sent, 'retry', next);
  const status = attempt.result.kind === 'response' ? attempt.result.status : 0;
  if (status === 429 || (status === 503 && retryAfterMs !== undefined)) {
    // The merchant is telling every worker to slow down, not just this one.
    const pushBackMs =
      retryAfterMs !== undefined
        ? Math.min(retryAfterMs, policy.retryAfterCapMs)
        : Math.min(next.delayMs, MAX_PUSHBACK_WITHOUT_RETRY_AFTER_MS);
    await budget.pushBack(merchantId, pushBackMs, `HTTP ${status} on webhook ${webhookId}`);
  }
  throw ApplicationFailure.create({
    type: RETRYABLE_DELIVERY_FAILURE,
    message: `${what} from merchant ${merchantId} on attempt ${attemptNumber}; next in ${(next.delayMs / 1000).toFixed(1)} s (${next.reason})`,
    // A local attempt is never retried by Temporal (one attempt): the workflow waits out `delayMs` itself.
    ...(next.delayMs > 0 && !activityInfo().isLocal ? { nextRetryDelay: next.delayMs } : {}),
    details: [
      {
        merchantId,
        attemptNumber,
        statusCode: statusCodeOf(attempt),
        outcome: what,
        reason: next.reason,
        delayMs: next.delayMs,
      } satisfies AttemptFailedDetails,
    ],
  });
}

/**
 * What the policy table does not retry: quarantine at once. On 410 Gone ('disable_endpoint') the merchant said the
 * endpoint is gone, so sending to it stops at all; its backlog waits (held), intact.
 */
async function quarantineAtOnce(
  ctx: DeliveryContext,
  sent: SentAttempt,
  action: 'disable_endpoint' | 'reject',
): Promise<never> {
  const {
    webhookId,
    attemptNumber,
    attempt,
    sendable: { delivery },
  } = sent;
  const { merchantId } = delivery;
  await recordAttempt(ctx, sent, 'quarantine');
  const what = `${describeAttempt(attempt)} from merchant ${merchantId}`;
  if (action === 'reject')
    throw failure('WebhookRejected', `${what} (not retryable)`, {
      merchantId,
      statusCode: statusCodeOf(attempt),
      attemptNumber,
    });
  await disableMerchant(ctx.pool, merchantId, `410 Gone on webhook ${webhookId}`);
  throw failure('EndpointGone', `${what}: endpoint disabled`, { merchantId, statusCode: 410, attemptNumber });
}
