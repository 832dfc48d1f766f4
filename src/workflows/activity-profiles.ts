/**
 * Named activity option profiles, each retry policy written out in full.
 *
 * Ledger work retries without an attempt limit: a hold must not be lost because Postgres was down for an hour, and the
 * release is idempotent, so retrying it is always safe. What can never succeed by retrying (the named release
 * failures) is not retried.
 */
import type { ActivityOptions, LocalActivityOptions } from '@temporalio/workflow';
import {
  ATTEMPT_LEDGER_SLACK_MS,
  DEFAULT_DELIVERY_POLICY,
  FAST_PATH_WAIT_MAX_MS,
  IN_ACTIVITY_WAIT_MAX_MS,
  MAX_ATTEMPT_TIMEOUT_MS,
} from '../contracts/delivery.js';
import { SWEEP_ROOM_WAIT_MAX_MS } from '../contracts/domain.js';
import { NON_RETRYABLE_DELIVERY_ERRORS, NON_RETRYABLE_LEDGER_ERRORS } from '../contracts/failures.js';

/** The release's transaction as a local activity, and a fast-path attempt's: its whole attempt timeout and a margin. */
const LEDGER_LOCAL_TIMEOUT_MS = 3_000;
const FAST_ATTEMPT_TIMEOUT_MS = MAX_ATTEMPT_TIMEOUT_MS + FAST_PATH_WAIT_MAX_MS + ATTEMPT_LEDGER_SLACK_MS;

export const ledgerActivity: ActivityOptions = {
  // One short transaction; the ledger pool's statement timeout (10 s, src/workers/region-worker.ts) ends it first.
  startToCloseTimeout: '30s',
  retry: {
    // First retry soon (a failover or a dropped connection heals in seconds), then back off to once a minute.
    initialInterval: '1s',
    backoffCoefficient: 2,
    maximumInterval: '1m',
    // No maximumAttempts: unlimited, see the module comment.
    nonRetryableErrorTypes: NON_RETRYABLE_LEDGER_ERRORS,
  },
};

/**
 * A sweep's page: the ledger read, after waiting (heartbeating) for room under the sweep's bound on unreleased holds.
 */
export const sweepPageActivity: ActivityOptions = {
  ...ledgerActivity,
  startToCloseTimeout: SWEEP_ROOM_WAIT_MAX_MS + 60_000,
  heartbeatTimeout: '30s',
};

/**
 * The release as a local activity: one idempotent transaction in the workflow task (one marker event, not three). A
 * blip is retried in the worker (1 s, 2 s); from the 4 s backoff on each retry waits on a durable timer, so an outage
 * holds no task and survives a restart. Its lock and statement give up after 1 s and 2 s (src/activities/ledger.ts).
 */
export const ledgerLocalActivity: LocalActivityOptions = {
  startToCloseTimeout: LEDGER_LOCAL_TIMEOUT_MS,
  retry: ledgerActivity.retry,
  localRetryThreshold: '1s',
};

/**
 * The outbox reconciler's one activity: pages through the region's pending webhooks within a time budget,
 * heartbeating its cursor (a dead worker is noticed within a minute, and a retry goes on from the cursor).
 */
export const outboxActivity: ActivityOptions = {
  startToCloseTimeout: '10m',
  heartbeatTimeout: '1m',
  retry: { initialInterval: '5s', backoffCoefficient: 2, maximumInterval: '1m', maximumAttempts: 3 },
};

/** The retention job: its run budget (RETENTION_RUN_BUDGET, at most 20 minutes) fits inside the start-to-close. */
export const retentionActivity: ActivityOptions = {
  startToCloseTimeout: '30m',
  heartbeatTimeout: '1m',
  retry: { initialInterval: '5s', backoffCoefficient: 2, maximumInterval: '1m', maximumAttempts: 3 },
};

/** finishSweep polls the ledger while children release; it heartbeats so a dead worker is noticed quickly. */
export function sweepFinishActivity(releaseWaitMs: number): ActivityOptions {
  return { ...ledgerActivity, startToCloseTimeout: releaseWaitMs + 60_000, heartbeatTimeout: '30s' };
}

/**
 * One webhook attempt per activity attempt: its start-to-close covers the longest attempt timeout, a short wait for the
 * budget and the ledger work around it, so an attempt ends before Temporal starts the next. The activity picks each
 * retry's delay (`nextRetryDelay`: jittered backoff, Retry-After as a floor); the intervals below apply only to a
 * crashed attempt. The horizon is the schedule-to-close timeout: past it the workflow quarantines as `exhausted`.
 */
export function webhookActivity(retryHorizonMs: number): ActivityOptions {
  return {
    startToCloseTimeout: MAX_ATTEMPT_TIMEOUT_MS + IN_ACTIVITY_WAIT_MAX_MS + ATTEMPT_LEDGER_SLACK_MS,
    scheduleToCloseTimeout: Math.max(1, retryHorizonMs),
    retry: {
      initialInterval: DEFAULT_DELIVERY_POLICY.initialBackoffMs,
      backoffCoefficient: DEFAULT_DELIVERY_POLICY.backoffMultiplier,
      maximumInterval: DEFAULT_DELIVERY_POLICY.maxBackoffMs,
      nonRetryableErrorTypes: NON_RETRYABLE_DELIVERY_ERRORS,
    },
  };
}

/**
 * The fast path: a policy run's first attempt as a local activity (one marker event, not three and a second task). It
 * has the whole attempt timeout, never a shorter cut: a merchant that answers inside it gets the webhook once.
 */
export const webhookLocalActivity: LocalActivityOptions = {
  startToCloseTimeout: FAST_ATTEMPT_TIMEOUT_MS,
  retry: { maximumAttempts: 1 },
};

/**
 * A hold's release and its webhook's first attempt as one local activity (`releaseAndDeliver`): the time of both, and
 * one try. A failure (the ledger's, since the attempt's is part of the answer) or a timeout sends the workflow to the
 * release on its own, which retries as `ledgerLocalActivity` does, and then to the fast path as usual.
 */
export const releaseAndDeliverLocalActivity: LocalActivityOptions = {
  startToCloseTimeout: LEDGER_LOCAL_TIMEOUT_MS + FAST_ATTEMPT_TIMEOUT_MS,
  retry: { maximumAttempts: 1 },
};
