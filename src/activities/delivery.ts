/**
 * Webhook delivery activities. One call of `deliverWebhook` is one HTTP attempt; Temporal's retry policy
 * (src/workflows/activity-profiles.ts) drives the next one, at the delay this activity computes and passes as
 * `nextRetryDelay` (jittered backoff, Retry-After as a floor), and stops on the named non-retryable failures.
 *
 * The merchant's secret is read here from the ledger by merchant id and used only to sign: it never enters an
 * activity argument, a result, a failure message or a log line.
 */
import { activityInfo, ApplicationFailure, getClient, log, sleep } from '@temporalio/activity';
import { noopMetricMeter, type MetricMeter } from '@temporalio/common';
import type pg from 'pg';
import type { Region } from '../contracts/regions.js';
import { InvalidEndpointUrl, guardedLookup, parseEndpoint, type EndpointRules } from '../delivery/endpoint.js';
import { createAgents, sendWebhookRequest, type HttpAttempt } from '../delivery/http-sender.js';
import { createMerchantBudget, IN_ACTIVITY_WAIT_MAX_MS, LANE_HORIZON_MS, MAX_PUSHBACK_WITHOUT_RETRY_AFTER_MS } from '../delivery/merchant-budget.js';
import type { Lane } from '../contracts/delivery.js';
import { classifyAttempt, InvalidDeliveryPolicyError, parseRetryAfter, resolveDeliveryPolicy, retryDelay } from '../delivery/policy.js';
import { RETRYABLE_DELIVERY_FAILURE, type QuarantineReason } from '../contracts/failures.js';
import { decodeSigningSecret, MissingSigningSecret, signedHeaders } from '../delivery/signing.js';
import { deliveryMetrics, statusClass } from '../observability/metrics.js';
import { deliveryAttemptFailedSignal, type DeliveryAttemptFailed } from '../contracts/messages.js';
import type { DeliverWebhookInput, DeliverWebhookResult, DeliveryStatus, QuarantineDecision } from '../contracts/delivery.js';

export interface DeliveryDeps {
  region: Region;
  pool: pg.Pool;
  endpointRules: EndpointRules;
  /** Where product metrics go (the runtime's Prometheus meter in workers); a no-op by default. */
  meter?: MetricMeter;
  agents?: ReturnType<typeof createAgents>;
  /** Injected for tests; Date.now and Math.random otherwise. */
  clock?: () => number;
  random?: () => number;
}


/** A failure's excerpt in an error message: short, single-line. */
const MESSAGE_EXCERPT_CHARS = 200;

/** Merchant response excerpts are stored as text: strip NUL, which Postgres text cannot hold. */
const storable = (text: string | undefined) => (text === undefined ? null : text.replace(/\u0000/g, ''));

function failure(type: string, message: string, details: Record<string, unknown>): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: true, details: [details] });
}

type Throttle = Extract<DeliverWebhookResult, { status: 'throttled' | 'scheduled' }>;

/**
 * Tells the hold's workflow that this attempt failed and when Temporal will retry it, so its status query can
 * say "honouring Retry-After until T" or "backing off until T" (Temporal's own retries are invisible to the
 * workflow). Best effort: a lost report costs a less precise answer, never a delivery.
 */
async function reportRetryToWorkflow(report: DeliveryAttemptFailed): Promise<void> {
  const workflowId = activityInfo().workflowExecution?.workflowId;
  if (!workflowId) return;
  try {
    await getClient().workflow.getHandle(workflowId).signal(deliveryAttemptFailedSignal, report);
  } catch {
    // The workflow may be gone (terminated) or the server briefly unreachable; the retry goes on regardless.
  }
}

export function createDeliveryActivities({
  region,
  pool,
  endpointRules,
  agents = createAgents(),
  clock = Date.now,
  random = Math.random,
  meter = noopMetricMeter,
}: DeliveryDeps) {
  const budget = createMerchantBudget(pool);
  const metrics = deliveryMetrics(meter);
  const waited = (merchantId: string, lane: Lane, ms: number) => {
    metrics.throttleWaits.add(1, { merchant_id: merchantId, lane });
    metrics.throttleWaitMs.add(Math.max(0, Math.round(ms)), { merchant_id: merchantId, lane });
  };

  /**
   * Waits for this delivery's turn in the merchant's budget without spending an attempt: up to 2 s here
   * (measured on the database clock that issued the turn), longer as a durable timer in the workflow, which then
   * calls again holding its queue place (`reservedSlotMs`).
   */
  async function awaitSendSlot(webhookId: string, merchantId: string, lane: Lane, reservedSlotMs: number | undefined): Promise<{ attemptNumber: number } | Throttle> {
    let reserved = reservedSlotMs !== undefined;
    for (;;) {
      const decision = await budget.acquire(merchantId, lane, reserved, webhookId);
      if (decision.outcome === 'send') {
        if (decision.attemptNumber === undefined) throw new Error(`webhook ${webhookId} has no delivery record`);
        return { attemptNumber: decision.attemptNumber };
      }
      if (decision.outcome === 'denied') {
        // Spread the denied over the lane's horizon so that they do not all come back in the same instant.
        const retryAt = Math.max(decision.atMs - LANE_HORIZON_MS[lane] + Math.round(random() * LANE_HORIZON_MS[lane]), decision.nowMs + 1);
        waited(merchantId, lane, retryAt - decision.nowMs);
        return { status: 'throttled', lane, retryAt };
      }
      reserved = true;
      const waitMs = decision.atMs - decision.nowMs;
      waited(merchantId, lane, waitMs);
      if (waitMs > IN_ACTIVITY_WAIT_MAX_MS) return { status: 'scheduled', lane, sendAt: decision.atMs };
      await sleep(waitMs);
    }
  }

  async function recordAttempt(
    webhookId: string,
    attemptNumber: number,
    policyRun: number,
    startedAt: number,
    attempt: HttpAttempt,
    outcome: 'delivered' | 'retry' | 'quarantine',
    next?: { delayMs: number; reason: string },
  ) {
    const statusCode = attempt.result.kind === 'response' ? attempt.result.status : null;
    const errorClass = attempt.result.kind === 'error' ? attempt.result.errorClass : null;
    await pool.query(
      `WITH attempt AS (
         INSERT INTO delivery_attempts (webhook_id, attempt_number, policy_run, scheduled_at, started_at, duration_ms,
                                        status_code, error_class, response_excerpt, outcome, next_retry_delay_ms, retry_reason)
         VALUES ($1::text, $2::integer, $3::integer, to_timestamp($12::double precision / 1000),
                 to_timestamp($4::double precision / 1000), $5::integer, $6::integer,
                 $7::text, $8::text, $9::text, $10::bigint, $11::text)
       )
       UPDATE webhook_deliveries
          SET last_status_code = $6::integer,
              last_error = CASE WHEN $9::text = 'delivered' THEN NULL ELSE coalesce($7::text, 'HTTP ' || $6::integer) END,
              status = CASE WHEN $9::text = 'delivered' THEN 'delivered' ELSE status END,
              delivered_at = CASE WHEN $9::text = 'delivered' THEN now() ELSE delivered_at END,
              updated_at = now()
        WHERE webhook_id = $1::text`,
      [webhookId, attemptNumber, policyRun, startedAt, attempt.durationMs, statusCode, errorClass,
        storable(attempt.responseExcerpt), outcome, next?.delayMs ?? null, next?.reason ?? null,
        activityInfo().currentAttemptScheduledTimestampMs],
    );
  }

  return {
    /** One signed HTTP attempt under the delivery policy; see the module comment. */
    async deliverWebhook({ webhookId, policyRun, reservedSlotMs }: DeliverWebhookInput): Promise<DeliverWebhookResult> {
      const { rows } = await pool.query<{
        status: DeliveryStatus;
        attempt_count: number;
        payload: string;
        merchant_id: string;
        endpoint_url: string;
        signing_secret: string | null;
        previous_signing_secret: string | null;
        merchant_status: 'active' | 'paused' | 'disabled';
        delivery_policy: unknown;
        run_attempts: number;
        hold_id: string;
      }>(
        `SELECT d.status, d.attempt_count, d.payload, d.merchant_id, d.hold_id, m.endpoint_url, m.signing_secret,
                m.previous_signing_secret, m.status AS merchant_status, m.delivery_policy,
                (SELECT count(*) FROM delivery_attempts a WHERE a.webhook_id = d.webhook_id AND a.policy_run = $2::integer)::integer
                  AS run_attempts
           FROM webhook_deliveries d JOIN merchants m ON m.id = d.merchant_id
          WHERE d.webhook_id = $1::text`,
        [webhookId, policyRun],
      );
      const delivery = rows[0];
      if (!delivery) throw new Error(`webhook ${webhookId} has no delivery record`);
      if (delivery.status !== 'pending') {
        return { status: 'already_terminal', deliveryStatus: delivery.status, attempts: delivery.attempt_count };
      }
      if (delivery.merchant_status !== 'active') return { status: 'held', merchantStatus: delivery.merchant_status };

      const merchantId = delivery.merchant_id;
      let url: URL;
      let keys: Buffer[];
      let policy;
      try {
        policy = resolveDeliveryPolicy(merchantId, delivery.delivery_policy);
        url = parseEndpoint(merchantId, delivery.endpoint_url, endpointRules);
        keys = [decodeSigningSecret(merchantId, delivery.signing_secret)];
        if (delivery.previous_signing_secret) keys.push(decodeSigningSecret(merchantId, delivery.previous_signing_secret));
      } catch (err) {
        if (err instanceof InvalidDeliveryPolicyError || err instanceof InvalidEndpointUrl || err instanceof MissingSigningSecret) {
          throw failure(err.name, err.message, { merchantId });
        }
        throw err;
      }

      // First attempts, then retries, then approved replays, within the merchant's one budget.
      const lane: Lane = policyRun > 1 ? 'replay' : delivery.run_attempts === 0 ? 'first' : 'retry';
      // A reserved queue place belongs to the call that was woken for it; Temporal's retry of that call (same
      // input, attempt > 1) is a new turn and queues again in the retry lane.
      const turn = await awaitSendSlot(webhookId, merchantId, lane, activityInfo().attempt === 1 ? reservedSlotMs : undefined);
      if (!('attemptNumber' in turn)) return turn;
      const { attemptNumber } = turn;
      const startedAt = clock();
      let attempt: HttpAttempt;
      try {
        attempt = await sendWebhookRequest({
          url,
          body: delivery.payload,
          headers: { ...signedHeaders(keys, webhookId, Math.floor(startedAt / 1000), delivery.payload) },
          timeoutMs: policy.attemptTimeoutMs,
          lookup: guardedLookup(merchantId, endpointRules),
          agents,
        });
      } catch (err) {
        if (err instanceof InvalidEndpointUrl) throw failure(err.name, err.message, { merchantId });
        throw err;
      }

      const rule = classifyAttempt(attempt.result);
      metrics.attempts.add(1, { merchant_id: merchantId, status_class: statusClass(attempt.result) });
      log.info('webhook attempt', {
        region,
        holdId: delivery.hold_id,
        webhookId,
        merchantId,
        attemptNumber,
        policyRun,
        outcome: rule.action,
        statusClass: statusClass(attempt.result),
        durationMs: attempt.durationMs,
      });
      const what =
        attempt.result.kind === 'response' ? `HTTP ${attempt.result.status}` : `${attempt.result.errorClass}${attempt.errorDetail ? ` (${attempt.errorDetail})` : ''}`;
      const excerpt = (attempt.responseExcerpt ?? '').slice(0, MESSAGE_EXCERPT_CHARS).replace(/\s+/g, ' ');
      switch (rule.action) {
        case 'delivered':
          await recordAttempt(webhookId, attemptNumber, policyRun, startedAt, attempt, 'delivered');
          return { status: 'delivered', attempts: attemptNumber, statusCode: (attempt.result as { status: number }).status };
        case 'retry': {
          const retryAfterMs = attempt.result.kind === 'response' ? parseRetryAfter(attempt.result.retryAfter, clock()) : undefined;
          // The n-th failure of this policy run, counted in the ledger: throttled calls are new activity
          // executions (Temporal's attempt counter restarts), but they sent nothing and do not count.
          const next = retryDelay(policy, delivery.run_attempts + 1, random, retryAfterMs);
          // Honoured either way: as the delay itself, or under a longer backoff step (it is a floor).
          if (retryAfterMs !== undefined) metrics.retryAfterHonoured.add(1, { merchant_id: merchantId });
          await recordAttempt(webhookId, attemptNumber, policyRun, startedAt, attempt, 'retry', next);
          const status = attempt.result.kind === 'response' ? attempt.result.status : 0;
          if (status === 429 || (status === 503 && retryAfterMs !== undefined)) {
            // The merchant is telling every worker to slow down, not just this one.
            const pushBackMs = retryAfterMs !== undefined ? Math.min(retryAfterMs, policy.retryAfterCapMs) : Math.min(next.delayMs, MAX_PUSHBACK_WITHOUT_RETRY_AFTER_MS);
            await budget.pushBack(merchantId, pushBackMs, `HTTP ${status} on webhook ${webhookId}`);
          }
          const failed = { attemptNumber, outcome: what, nextAttemptAt: new Date(clock() + next.delayMs).toISOString(), reason: next.reason };
          // Run locally, the workflow is waiting on this very call: it gets the failure as the result.
          if (activityInfo().isLocal) return { status: 'failed_attempt', failed };
          await reportRetryToWorkflow(failed);
          throw ApplicationFailure.create({
            type: RETRYABLE_DELIVERY_FAILURE,
            message: `${what} from merchant ${merchantId} on attempt ${attemptNumber}; next in ${(next.delayMs / 1000).toFixed(1)} s (${next.reason})`,
            nextRetryDelay: next.delayMs,
            details: [{ merchantId, attemptNumber, statusCode: attempt.result.kind === 'response' ? attempt.result.status : null, retryReason: next.reason }],
          });
        }
        case 'disable_endpoint':
          await recordAttempt(webhookId, attemptNumber, policyRun, startedAt, attempt, 'quarantine');
          // The merchant said the endpoint is gone: stop sending to it at all. Its backlog waits (held), intact.
          await pool.query(
            `UPDATE merchants SET status = 'disabled', disabled_reason = $2::text, disabled_at = now(), updated_at = now()
              WHERE id = $1::text AND status <> 'disabled'`,
            [merchantId, `410 Gone on webhook ${webhookId}`],
          );
          throw failure('EndpointGone', `${what} from merchant ${merchantId}: endpoint disabled; ${excerpt}`, { merchantId, statusCode: 410, attemptNumber });
        case 'reject':
          await recordAttempt(webhookId, attemptNumber, policyRun, startedAt, attempt, 'quarantine');
          throw failure('WebhookRejected', `${what} from merchant ${merchantId} (not retryable): ${excerpt}`, {
            merchantId,
            statusCode: attempt.result.kind === 'response' ? attempt.result.status : null,
            attemptNumber,
          });
      }
    },

    /**
     * Records the decision on a quarantined delivery and moves it on: `replay` back to pending (same webhook id,
     * a new policy run), `discard` and `abandon` to their terminal states. Idempotent per policy run, so a
     * retried activity records one decision.
     */
    async decideQuarantine(input: QuarantineDecision): Promise<void> {
      const status = { replay: 'pending', discard: 'discarded', abandon: 'abandoned' }[input.decision];
      await pool.query(
        `WITH decided AS (
           INSERT INTO delivery_decisions (webhook_id, policy_run, decision, decided_by, reason, ticket)
           VALUES ($1::text, $2::integer, $3::text, $4::text, $5::text, $6::text)
           ON CONFLICT (webhook_id, policy_run) DO NOTHING
           RETURNING webhook_id
         )
         UPDATE webhook_deliveries
            SET status = $7::text,
                quarantine_reason = CASE WHEN $7::text = 'pending' THEN NULL ELSE quarantine_reason END,
                updated_at = now()
          WHERE webhook_id IN (SELECT webhook_id FROM decided) AND status = 'quarantined'`,
        [input.webhookId, input.policyRun, input.decision, input.by, input.reason, input.ticket ?? null, status],
      );
    },

    /** Marks a pending delivery quarantined with its reason; a no-op for one already terminal. */
    async quarantineDelivery({ webhookId, reason, detail }: { webhookId: string; reason: QuarantineReason; detail: string }): Promise<void> {
      await pool.query(
        `UPDATE webhook_deliveries
            SET status = 'quarantined', quarantine_reason = $2::text, quarantined_at = now(),
                last_error = $3::text, updated_at = now()
          WHERE webhook_id = $1::text AND status = 'pending'`,
        [webhookId, reason, detail],
      );
    },
  };
}

export type DeliveryActivities = ReturnType<typeof createDeliveryActivities>;
