/**
 * Named activity option profiles, each retry policy written out in full.
 *
 * Ledger work retries without an attempt limit: a hold must not be lost because Postgres was down for an
 * hour, and the release is idempotent, so retrying it is always safe. What can never succeed by retrying (the
 * named release failures) is not retried.
 */
import type { ActivityOptions, LocalActivityOptions } from '@temporalio/workflow';
import {
  ATTEMPT_LEDGER_SLACK_MS,
  DEFAULT_DELIVERY_POLICY,
  FAST_PATH_ATTEMPT_TIMEOUT_MS,
  FAST_PATH_WAIT_MAX_MS,
  IN_ACTIVITY_WAIT_MAX_MS,
  MAX_ATTEMPT_TIMEOUT_MS,
} from '../contracts/delivery.js';
import { NON_RETRYABLE_DELIVERY_ERRORS, NON_RETRYABLE_LEDGER_ERRORS } from '../contracts/failures.js';

export const ledgerActivity: ActivityOptions = {
  // One short transaction; the ledger pool's statement timeout (10 s, src/workers/region-worker.ts) ends it well
  // before.
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
 * The release as a local activity: one short, idempotent transaction, run inside the workflow task instead of
 * through the task queue. It records one marker event instead of three activity events and saves a matching
 * round trip, on the hot path of every hold. Retries are the same policy.
 *
 * Only a blip is retried inside the worker: a backoff longer than `localRetryThreshold` waits on a durable timer
 * instead. With the policy above, the retries 1 s and 2 s after a failure stay in the worker (3 s: a dropped
 * connection or a restarted pooler heals in the same workflow task, which stays under the SDK's 5 s slow-task
 * warning and well under the 10 s workflow task timeout); from the 4 s backoff on, each retry is a marker for the
 * failed attempt and a timer (about 6 events a minute at the 1 min maximum interval). An outage then holds no
 * workflow task, local activity slot or cache entry, survives a worker restart, and shows in the history as the
 * wait it is. The SDK's default threshold (1 min) is never exceeded by this policy (its backoff stops at 1 min), so
 * without this an outage kept every release retrying in the worker for as long as it lasted, heartbeating its
 * workflow task every 8 s (3 events each, ~22 a minute: the 51,200-event limit in ~38 h instead of ~6 days).
 */
export const ledgerLocalActivity: LocalActivityOptions = {
  // A few seconds at most, retries included: the release's transaction gives up a row lock after 1 s and a statement
  // after 2 s (src/activities/ledger.ts); whatever still runs 3 s after the first attempt started (the SDK core counts
  // a
  // local activity's start-to-close across its in-worker retries) is cancelled, its statement with it, and retried on a
  // durable timer. The workflow task waits 3 s for the release at the very worst.
  startToCloseTimeout: '3s',
  retry: ledgerActivity.retry,
  localRetryThreshold: '1s',
};

/**
 * The outbox reconciler's one activity: pages through the region's pending webhooks, asking Temporal about each. It
 * heartbeats per slice of webhooks, so a dead worker is noticed within a minute; a few retries, then the run fails
 * and the schedule's next one starts over (it holds no state of its own).
 */
export const outboxActivity: ActivityOptions = {
  startToCloseTimeout: '10m',
  heartbeatTimeout: '1m',
  retry: { initialInterval: '5s', backoffCoefficient: 2, maximumInterval: '1m', maximumAttempts: 3 },
};

/** finishSweep polls the ledger while children release; it heartbeats so a dead worker is noticed quickly. */
export function sweepFinishActivity(releaseWaitMs: number): ActivityOptions {
  return {
    ...ledgerActivity,
    // The wait itself plus one ordinary ledger call's worth of slack.
    startToCloseTimeout: releaseWaitMs + 60_000,
    heartbeatTimeout: '30s',
  };
}

/**
 * One webhook attempt per activity attempt: its start-to-close covers the longest attempt timeout a policy may set, a
 * wait for the merchant's budget and the ledger work around it, so an attempt always ends (its request aborted) before
 * Temporal starts the next. The activity picks each retry's delay itself (jittered backoff,
 * Retry-After as a floor) and passes it as `nextRetryDelay`; the intervals below apply only when an attempt
 * dies without choosing (a worker crash), and mirror the default policy. The horizon is the schedule-to-close
 * timeout: a retry that would land past it ends the run with TIMEOUT, which the workflow quarantines as
 * `exhausted`.
 */
export function webhookActivity(retryHorizonMs: number): ActivityOptions {
  return {
    startToCloseTimeout: MAX_ATTEMPT_TIMEOUT_MS + IN_ACTIVITY_WAIT_MAX_MS + ATTEMPT_LEDGER_SLACK_MS,
    scheduleToCloseTimeout: retryHorizonMs,
    retry: {
      initialInterval: DEFAULT_DELIVERY_POLICY.initialBackoffMs,
      backoffCoefficient: DEFAULT_DELIVERY_POLICY.backoffMultiplier,
      maximumInterval: DEFAULT_DELIVERY_POLICY.maxBackoffMs,
      nonRetryableErrorTypes: NON_RETRYABLE_DELIVERY_ERRORS,
    },
  };
}

/**
 * The delivery's fast path: the first call of a policy run (and a call that comes back for a reserved slot) runs
 * as a local activity, inside the workflow task that released the hold. A healthy merchant's webhook then costs
 * one marker event instead of three activity events and a second workflow task. One attempt only, of a few seconds at
 * most: a failed one fails with the same typed failure as the regular activity (the workflow waits out its delay; a
 * merchant slower than the fast path is sent again at once), and anything unexpected (the ledger down, a crash) hands
 * the delivery to the regular activity above, whose retry policy applies from there.
 */
export const webhookLocalActivity: LocalActivityOptions = {
  // The fast path's attempt (2.5 s) after a wait for the merchant's budget (1 s at most), and the ledger's writes.
  startToCloseTimeout: FAST_PATH_ATTEMPT_TIMEOUT_MS + FAST_PATH_WAIT_MAX_MS + 1_000,
  retry: { maximumAttempts: 1 },
};
