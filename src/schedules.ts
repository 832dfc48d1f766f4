/**
 * Three Temporal Schedules per region: one starts the regional sweep, one the outbox reconciler, one the retention
 * job. Creating them is idempotent: an existing schedule is updated to the configured spec instead, so every deploy
 * can apply them (`applySchedules`: `npm run promote` in production, each worker's start-up in dev mode).
 */
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client, type ScheduleOptions } from '@temporalio/client';
import type { Config, OutboxConfig, RegionConfig, RetentionConfig, SweepConfig } from './config.js';
import { outboxWorkflowIdPrefix, retentionWorkflowIdPrefix, sweepWorkflowIdPrefix } from './contracts/ids.js';
import type { SweepInput } from './contracts/domain.js';
import type { ReconcileOutboxWorkflowInput } from './contracts/outbox.js';
import type { PruneLedgerWorkflowInput } from './contracts/retention.js';

/**
 * One of a region's schedules: a run of `action`'s workflow every `everyMs` on the region's task queue, never two at a
 * time (overlap SKIP: a run still going when the next is due is not given a concurrent twin), and a run missed for
 * longer than `catchupWindow` not caught up.
 */
function regionSchedule(
  region: RegionConfig,
  scheduleId: string,
  everyMs: number,
  catchupWindow: number,
  action: { workflowType: string; workflowId: string; args: unknown[]; workflowExecutionTimeout: number },
): ScheduleOptions {
  return {
    scheduleId,
    spec: { intervals: [{ every: everyMs }] },
    action: { type: 'startWorkflow', taskQueue: region.taskQueue, ...action },
    policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow },
  };
}

export function sweepScheduleOptions(region: RegionConfig, sweep: SweepConfig): ScheduleOptions {
  const { pageSize, batchSize, maxUnreleased } = sweep;
  const args: [SweepInput] = [
    { region: region.region, pageSize, batchSize, ...(maxUnreleased === undefined ? {} : { maxUnreleased }) },
  ];
  return regionSchedule(region, region.scheduleId, sweep.intervalMs, sweep.catchupWindowMs, {
    workflowType: 'sweepExpiredHolds',
    // The server appends the nominal time, so each run's id is `sweep-us-2026-11-30T02:00:00Z`.
    workflowId: sweepWorkflowIdPrefix(region.region),
    args,
    // Spans the whole continue-as-new chain. Without it a stuck sweep (an activity retrying while the ledger is
    // down, a wedged workflow task) would make every later one skip (overlap SKIP) forever. A sweep ended by it
    // loses nothing: its children run on (ABANDON), and the next scheduled sweep pages from the start, where
    // released holds are gone and a hold whose child exists collides on its id (hold + expiry), never started twice.
    workflowExecutionTimeout: sweep.timeoutMs,
  });
}

export const ensureSweepSchedule = (client: Client, region: RegionConfig, sweep: SweepConfig) =>
  ensureSchedule(client, sweepScheduleOptions(region, sweep));

/** The region's outbox reconciler schedule: `<SCHEDULE_ID>-outbox`. */
export const outboxScheduleId = (region: RegionConfig) => `${region.scheduleId}-outbox`;

/** A missed reconcile is not caught up: the next does the same work. */
export function ensureOutboxSchedule(client: Client, region: RegionConfig, outbox: OutboxConfig) {
  const args: [ReconcileOutboxWorkflowInput] = [{ region: region.region, graceMs: outbox.graceMs }];
  return ensureSchedule(
    client,
    regionSchedule(region, outboxScheduleId(region), outbox.intervalMs, 60_000, {
      workflowType: 'reconcileOutbox',
      workflowId: outboxWorkflowIdPrefix(region.region),
      args,
      // A run holds nothing: one that hangs is ended and the next starts over.
      workflowExecutionTimeout: Math.max(outbox.intervalMs * 4, 30 * 60_000),
    }),
  );
}

/** The region's retention job schedule: `<SCHEDULE_ID>-retention`. */
export const retentionScheduleId = (region: RegionConfig) => `${region.scheduleId}-retention`;

/** A missed run is not caught up: the next deletes the same rows. */
export function ensureRetentionSchedule(client: Client, region: RegionConfig, retention: RetentionConfig) {
  const args: [PruneLedgerWorkflowInput] = [{ region: region.region, budgetMs: retention.budgetMs }];
  return ensureSchedule(
    client,
    regionSchedule(region, retentionScheduleId(region), retention.intervalMs, 60_000, {
      workflowType: 'pruneLedger',
      workflowId: retentionWorkflowIdPrefix(region.region),
      args,
      // Its activity's three attempts of 30 minutes at most, and their backoff.
      workflowExecutionTimeout: 2 * 60 * 60_000,
    }),
  );
}

/** The region's three schedules as `config` says, each created or updated. */
export async function applySchedules(
  client: Client,
  region: RegionConfig,
  config: Pick<Config, 'sweep' | 'outbox' | 'retention'>,
): Promise<void> {
  await ensureSweepSchedule(client, region, config.sweep);
  await ensureOutboxSchedule(client, region, config.outbox);
  await ensureRetentionSchedule(client, region, config.retention);
}

async function ensureSchedule(client: Client, options: ScheduleOptions): Promise<'created' | 'updated'> {
  try {
    await client.schedule.create(options);
    return 'created';
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
  }
  await client.schedule.getHandle(options.scheduleId).update((previous) => ({
    ...previous,
    spec: options.spec,
    action: options.action,
    policies: { ...previous.policies, ...options.policies },
  }));
  return 'updated';
}

/**
 * "Sweep now": a manual trigger of the region's schedule. The SDK's default overlap for trigger() is
 * ALLOW_ALL, which would start a second sweep beside a running one; SKIP makes it a no-op instead. The run it
 * starts is the schedule's action, so it carries the same execution timeout as a scheduled sweep.
 */
async function triggerSweep(client: Client, region: RegionConfig): Promise<void> {
  await client.schedule.getHandle(region.scheduleId).trigger(ScheduleOverlapPolicy.SKIP);
}

/** How often `sweepNow` looks at the schedule for the run it triggered. */
const SCHEDULE_POLL_MS = 200;

/**
 * Triggers the region's sweep (overlap SKIP) and returns the workflow id of the sweep that is now
 * answering for "now": the one just started, or the one already running that made the trigger a no-op.
 */
export async function sweepNow(client: Client, region: RegionConfig, timeoutMs = 30_000): Promise<string> {
  const handle = client.schedule.getHandle(region.scheduleId);
  const requestedAt = Date.now();
  await triggerSweep(client, region);
  const deadline = requestedAt + timeoutMs;
  while (Date.now() < deadline) {
    const { info } = await handle.describe();
    const running = info.runningActions[0];
    if (running) return running.workflow.workflowId;
    // Server and client clocks can differ slightly; a second of slack still excludes earlier schedule runs.
    const recent = info.recentActions.find((a) => a.takenAt.getTime() >= requestedAt - 1000);
    if (recent) return recent.action.workflow.workflowId;
    await new Promise((resolve) => setTimeout(resolve, SCHEDULE_POLL_MS));
  }
  throw new Error(`schedule ${region.scheduleId} started no sweep within ${timeoutMs} ms of the trigger`);
}
