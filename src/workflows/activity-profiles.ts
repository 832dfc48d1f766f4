/**
 * Named activity option profiles, each retry policy written out in full.
 *
 * Ledger work retries without an attempt limit: a hold must not be lost because Postgres was down for an
 * hour, and the release is idempotent, so retrying it is always safe.
 */
import type { ActivityOptions } from '@temporalio/workflow';

export const ledgerActivity: ActivityOptions = {
  // One short transaction; 30 s leaves room for a row lock held by a concurrent release of the same hold.
  startToCloseTimeout: '30s',
  retry: {
    // First retry soon (a failover or a dropped connection heals in seconds), then back off to once a minute.
    initialInterval: '1s',
    backoffCoefficient: 2,
    maximumInterval: '1m',
    // No maximumAttempts: unlimited, see the module comment.
    nonRetryableErrorTypes: [],
  },
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
