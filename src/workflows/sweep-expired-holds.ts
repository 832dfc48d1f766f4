import {
  continueAsNew,
  executeChild,
  log,
  metricMeter,
  ParentClosePolicy,
  proxyActivities,
  setCurrentDetails,
  setWorkflowOptions,
  startChild,
  workflowInfo,
  WorkflowIdReusePolicy,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { Activities } from '../activities/index.js';
import type {
  HoldBatchInput,
  HoldBatchResult,
  HoldRef,
  SweepInput,
  SweepResult,
  SweepTotals,
} from '../contracts/domain.js';
import type { Region } from '../contracts/regions.js';
import { sweepFinishActivity, sweepPageActivity } from './activity-profiles.js';
import { holdReleaseStart } from '../contracts/starts.js';
import { sweepCurrentDetails } from '../contracts/story.js';
import { releaseExpiredHold } from './release-expired-hold.js';

/** Matches SWEEP_PAGE_SIZE's default: 500 children per run is a quarter of the 2,000 pending-children cap. */
const DEFAULT_PAGE_SIZE = 500;
/**
 * Holds per batch: a page's children are started by batch workflows of this many holds each, all at once. Every
 * child start and every child completion updates its parent's execution under that execution's lock, so a page of
 * 500 started by one parent queued 500 start tasks behind one lock (measured: 7 s each in the server's queue,
 * thousands of failed lock acquisitions; bench/README.md). Ten parents of 50 share the work out.
 */
const DEFAULT_BATCH_SIZE = 50;
/** How long the last run waits for children to release before reporting leftovers to the next sweep. */
export const DEFAULT_RELEASE_WAIT_MS = 10 * 60_000;

/**
 * The regional sweep: pages through expired active holds and starts one child workflow per hold.
 *
 * - One page per run, then continue-as-new: history stays small and pending children stay under the cap
 *   however many holds a night brings.
 * - With `maxUnreleased` (the schedule's, SWEEP_MAX_UNRELEASED), a page waits, in its listing activity, until the
 *   holds of the earlier pages still unreleased leave room for it: the night starts holds as the workers release
 *   them, instead of queueing all its first workflow tasks at once.
 * - The cutoff is fixed on the first run, so a sweep has a definite set of holds to answer for. It is the one
 *   clock "expired" is decided by: each child gets it and its release checks the hold against it, never against
 *   the database clock, so a lagging database cannot make a child skip a hold this sweep found expired.
 * - Children are started with ABANDON, because the parent-close policy also fires on continue-as-new and a
 *   child may wait days for a human; and with ids derived from hold + expiry, so a second sweep (concurrent,
 *   late or repeated) collides on the id and counts the hold as already handled instead of starting it twice.
 *   A hold an earlier, finished sweep already answered for and left active is the exception: its child ended
 *   without releasing it, so its id may be started again (see `holdChildOptions`).
 * - A final run of its own (no children, so no completion events) waits, bounded, until the ledger shows
 *   every hold up to the cutoff released, and records what the sweep did in `sweep_runs`.
 */
export async function sweepExpiredHolds(input: SweepInput): Promise<SweepResult> {
  const { region } = input;
  const pageSize = input.pageSize ?? DEFAULT_PAGE_SIZE;
  const releaseWaitMs = input.releaseWaitMs ?? DEFAULT_RELEASE_WAIT_MS;
  const progress = input.progress ?? {
    cutoff: new Date().toISOString(),
    totals: { found: 0, started: 0, alreadyStarted: 0, rejected: 0, pages: 0 },
  };

  const { finishSweep } = proxyActivities<Activities>({
    ...sweepFinishActivity(releaseWaitMs),
    summary: 'wait for the last releases, then record the sweep',
  });
  const sweepId = workflowInfo().workflowId;
  if (progress.finishing) {
    setCurrentDetails(sweepCurrentDetails(sweepId, progress.cutoff, progress.totals, { finishing: true }));
    const expires = workflowInfo().executionExpirationTime;
    return finishSweep({
      sweepId,
      cutoff: progress.cutoff,
      totals: progress.totals,
      releaseWaitMs,
      ...(expires ? { sweepExpiresAt: expires.toISOString() } : {}),
    });
  }

  const pageNumber = progress.totals.pages + 1;
  const { maxUnreleased } = input;
  const { listExpiredHolds } = proxyActivities<Activities>({
    ...sweepPageActivity,
    summary:
      `list page ${pageNumber}: up to ${pageSize} expired holds` +
      (maxUnreleased === undefined ? '' : `, once at most ${maxUnreleased} are started and unreleased`),
  });
  const page = await listExpiredHolds({
    cutoff: progress.cutoff,
    after: progress.after,
    limit: pageSize,
    ...(maxUnreleased === undefined ? {} : { maxUnreleased }),
  });
  setCurrentDetails(
    sweepCurrentDetails(sweepId, progress.cutoff, progress.totals, { page: pageNumber, listed: page.holds.length }),
  );
  const batches = await Promise.all(
    batchesOf(page.holds, Math.max(1, input.batchSize ?? DEFAULT_BATCH_SIZE)).map((holds, i) =>
      executeChild(startHoldBatch, {
        // Unique per sweep, page and batch: a replayed run starts the same ids, a later sweep its own.
        workflowId: `${sweepId}/page-${pageNumber}/batch-${i + 1}`,
        staticSummary: `page ${pageNumber}, batch ${i + 1}: starts ${holds.length} hold workflows`,
        args: [{ region, holds, cutoff: progress.cutoff }],
      }),
    ),
  );
  const started = batches.reduce((n, b) => n + b.started, 0);
  const alreadyStarted = batches.reduce((n, b) => n + b.alreadyStarted, 0);
  for (const rejected of page.rejected)
    log.warn('hold rejected: cannot be released as written', { region, holdId: rejected.holdId, code: rejected.code });
  log.info('sweep page', {
    region,
    page: pageNumber,
    holds: page.holds.length,
    started,
    rejected: page.rejected.length,
  });
  const totals: SweepTotals = {
    found: progress.totals.found + page.holds.length + page.rejected.length,
    started: progress.totals.started + started,
    alreadyStarted: progress.totals.alreadyStarted + alreadyStarted,
    rejected: progress.totals.rejected + page.rejected.length,
    pages: pageNumber,
  };

  if (page.next) {
    await continueAsNew<typeof sweepExpiredHolds>({
      ...input,
      progress: { cutoff: progress.cutoff, after: page.next, totals },
    });
  }
  // The wait for releases gets a run of its own: children report their completion to the run that started
  // them while it is open, an event (and often a workflow task) each, for nothing this sweep needs.
  return continueAsNew<typeof sweepExpiredHolds>({
    ...input,
    progress: { cutoff: progress.cutoff, totals, finishing: true },
  });
}

// A sweep finishes on the build that started it: a deploy changes the sweep freely, with no patch, and a new build's
// sweeps start once it is current while the old build's finish on the old workers (docs/deploys.md).
setWorkflowOptions({ versioningBehavior: 'PINNED' }, sweepExpiredHolds);

/**
 * One batch of a sweep page: starts a child workflow per hold and returns what it started. It closes as soon as
 * its starts are recorded, so the children's completions do not land in an open run. The sweep waits for its
 * batches before the next page (one page in flight, pending children well under the cap).
 *
 * AUTO_UPGRADE, unlike the sweep: a child of a Pinned parent on the same task queue runs its first workflow task on
 * the parent's version (Temporal 1.29's transfer-queue start of a child: `inheritedPinnedVersion` when the parent's
 * effective behaviour is Pinned), and a healthy hold's first task is its whole life. The batch's own first task still
 * inherits the sweep's build; by the time its child starts are processed that task has completed as AUTO_UPGRADE, so
 * the holds inherit nothing and start on the deployment's current build (test/integration/cluster.test.ts proves it on
 * the 1.29 cluster). A change to the batch is therefore a deploy contract, like a hold's.
 */
export async function startHoldBatch(input: HoldBatchInput): Promise<HoldBatchResult> {
  const starts = await Promise.all(input.holds.map((hold) => startHoldWorkflow(input.region, hold, input.cutoff)));
  const started = starts.filter((s) => s === 'started').length;
  return { started, alreadyStarted: starts.length - started };
}
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, startHoldBatch);

/** `items` in consecutive batches of `size` (the last one shorter). */
export function batchesOf<T>(items: readonly T[], size: number): T[][] {
  const batches: T[][] = [];
  for (let i = 0; i < items.length; i += size) batches.push(items.slice(i, i + size));
  return batches;
}

/**
 * What the sweep adds to a hold's start (src/contracts/starts.ts) as its parent; the benchmark's bare fan-out starts
 * its no-op children with these and the same basics.
 */
export function holdChildOptions(hold: HoldRef) {
  return {
    parentClosePolicy: ParentClosePolicy.ABANDON,
    // A running hold workflow is never started twice (the start fails: already handled), nor, as a rule, a completed
    // one: a concurrent sweep may have listed the hold a moment before its child released it. Except for a hold an
    // earlier, finished sweep left active: its child completed without releasing it (not expired by the clock it
    // was judged by, or rejected and fixed upstream since), so a new run is started rather than the hold stranded.
    // Two concurrent sweeps may then both start it; the ledger's row lock and idempotency key keep the release
    // exactly-once, and the later run finds it released and its webhook's state in the ledger.
    workflowIdReusePolicy: hold.leftActiveByEarlierSweep
      ? WorkflowIdReusePolicy.ALLOW_DUPLICATE
      : WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
  };
}

async function startHoldWorkflow(region: Region, hold: HoldRef, cutoff: string): Promise<'started' | 'already'> {
  try {
    await startChild(releaseExpiredHold, { ...holdReleaseStart(region, hold, cutoff), ...holdChildOptions(hold) });
    log.info('hold workflow started', { region, holdId: hold.holdId, merchantId: hold.merchantId });
    return 'started';
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    // The workflow meter is replay-safe: a replayed history does not count again.
    metricMeter.createCounter('hold_sweeper_duplicate_suppressions').add(1, { kind: 'child_already_started' });
    log.info('hold workflow already started: counted as handled', { region, holdId: hold.holdId });
    return 'already';
  }
}
