/**
 * "A stuck sweep blocks the schedule forever", unless bounded: the schedule starts sweeps with overlap SKIP, so a sweep
 * that never ends would make every later one skip. Each sweep the schedule starts carries a workflow execution timeout
 * (the whole continue-as-new chain); these run a stuck sweep into it on the real server and watch the next scheduled
 * sweep release what is left, each hold once.
 */
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type SweepConfig } from '../../src/config.js';
import { ensureSweepSchedule, sweepNow, sweepScheduleOptions } from '../../src/schedules.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { holdStates, holdWorkflowIdOf, ledgerEntryCount, seedNight } from '../support/ledger.js';

let harness: Harness;
beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await harness?.close();
});

/**
 * A sweep every 2 s, each bounded at 5 s: a stuck sweep is ended well within a test, and the schedule's next tick
 * follows at once. The final wait keeps its production length (10 min), so a sweep that waits for a release that
 * cannot happen is ended by the bound, not by its own wait.
 */
const tinyBound: SweepConfig = {
  intervalMs: 2_000,
  catchupWindowMs: 600_000,
  pageSize: 2,
  timeoutMs: 5_000,
};

async function statusOf(client: Client, workflowId: string): Promise<string | undefined> {
  return (await client.workflow.getHandle(workflowId).describe()).status.name;
}

/** The completed sweeps the ledger recorded (finishSweep's `sweep_runs` rows), oldest first. */
async function completedSweeps(region: TestRegion) {
  const { rows } = await region.pool.query<{
    sweep_id: string;
    found: number;
    started: number;
    already_started: number;
    unreleased_at_end: number;
  }>('SELECT sweep_id, found, started, already_started, unreleased_at_end FROM sweep_runs ORDER BY finished_at');
  return rows;
}

/**
 * The region's schedule exactly as `sweepScheduleOptions` builds it (its execution timeout, overlap SKIP), with one
 * change: its sweeps are named `sweep-us-<file id>-<time>`. Every test file's schedule in a namespace names its
 * sweeps `sweep-us-<time>`; ticking every 2 s, this one would take a second another file triggers in. Runs
 * `body`, then always deletes the schedule.
 */
async function withSchedule(
  region: TestRegion,
  sweep: SweepConfig,
  body: (sweepIdPrefix: string) => Promise<void>,
): Promise<void> {
  const options = sweepScheduleOptions(region.config, sweep);
  const sweepIdPrefix = `${options.action.workflowId}-${harness.id}`;
  await region.client.schedule.create({ ...options, action: { ...options.action, workflowId: sweepIdPrefix } });
  try {
    await body(sweepIdPrefix);
  } finally {
    await region.client.schedule.getHandle(region.config.scheduleId).delete();
  }
}

describe('a bounded sweep', () => {
  it('the schedule’s action carries the sweep’s execution timeout (2 h by default), also once a schedule from before the bound is updated', async () => {
    const us = await harness.region('us');
    expect(loadConfig({}).sweep.timeoutMs).toBe(2 * 3_600_000);
    // The defaults but a day's interval, so that the schedule does not fire during the test.
    const defaults = { ...loadConfig({}).sweep, intervalMs: 86_400_000 };
    // A schedule as it was created before the bound existed: same spec and action, no execution timeout.
    const unbounded = sweepScheduleOptions(us.config, defaults);
    await us.client.schedule.create({
      ...unbounded,
      action: { ...unbounded.action, workflowExecutionTimeout: undefined },
    });
    const handle = us.client.schedule.getHandle(us.config.scheduleId);
    try {
      expect((await handle.describe()).action.workflowExecutionTimeout).toBeUndefined();
      // Every worker start-up ensures the schedule: the update brings the bound.
      expect(await ensureSweepSchedule(us.client, us.config, defaults)).toBe('updated');
      const described = await handle.describe();
      expect(described.action).toMatchObject({
        type: 'startWorkflow',
        workflowType: 'sweepExpiredHolds',
        workflowExecutionTimeout: 7_200_000,
      });
      expect(described.policies).toMatchObject({ overlap: 'SKIP' });
    } finally {
      await handle.delete();
    }
  });

  it('a sweep stuck on its ledger query (as in a Postgres outage) is ended by the timeout and the next scheduled sweep releases every hold once', async () => {
    const us = await harness.region('us');
    await harness.startWorker(us);
    const night = await seedNight(us.pool, 'us', `${harness.id}st`, { expired: 6 }, harness.merchants);

    // An exclusive lock on auth_holds: the page query waits, as it would on a ledger that does not answer.
    const blocker = await us.pool.connect();
    await blocker.query('BEGIN');
    await blocker.query('LOCK TABLE auth_holds IN ACCESS EXCLUSIVE MODE');
    let blockerOpen = true;
    try {
      await withSchedule(us, tinyBound, async (sweepIdPrefix) => {
        // "Sweep now" goes through the schedule's action, so the run it answers with carries the bound too.
        const stuck = await sweepNow(us.client, us.config);
        await expect.poll(() => statusOf(us.client, stuck), { timeout: 30_000, interval: 250 }).toBe('TIMED_OUT');
        const schedule = us.client.schedule.getHandle(us.config.scheduleId);
        // While it was stuck the schedule's ticks were skipped (overlap SKIP): exactly what the bound ends.
        expect((await schedule.describe()).info.numActionsSkippedOverlap).toBeGreaterThanOrEqual(1);

        await blocker.query('ROLLBACK');
        blockerOpen = false;
        await expect
          .poll(async () => (await completedSweeps(us)).some((s) => s.unreleased_at_end === 0), {
            timeout: 60_000,
            interval: 250,
          })
          .toBe(true);
        const completed = await completedSweeps(us);
        expect(completed.map((s) => s.sweep_id)).not.toContain(stuck);
        // A later run of the same schedule: its id carries its (later) start time.
        expect(completed[0]!.sweep_id.startsWith(sweepIdPrefix) && completed[0]!.sweep_id > stuck).toBe(true);
      });
    } finally {
      if (blockerOpen) await blocker.query('ROLLBACK');
      blocker.release();
    }
    const states = await holdStates(us.pool);
    for (const hold of night.expired) expect(states.get(hold.id)?.state).toBe('released');
    expect(await ledgerEntryCount(us.pool)).toBe(night.expired.length);
  });

  it('a sweep ended by its bound while a release is still running loses nothing: its child runs on, and the next sweep starts no hold twice', async () => {
    const us = await harness.region('us');
    await harness.startWorker(us);
    const night = await seedNight(us.pool, 'us', `${harness.id}cut`, { expired: 6 }, harness.merchants);
    const slow = night.expired[0]!;

    // One hold's row stays locked: its release waits, so the sweep's final wait for releases cannot end in time.
    const blocker = await us.pool.connect();
    await blocker.query('BEGIN');
    await blocker.query('SELECT 1 FROM auth_holds WHERE id = $1 FOR UPDATE', [slow.id]);
    let blockerOpen = true;
    try {
      // One page: the sweep has started every child before it reaches its final wait, whatever the machine's load.
      await withSchedule(us, { ...tinyBound, pageSize: 100 }, async () => {
        const cut = await sweepNow(us.client, us.config);
        // Ended by the bound: the server times it out, or its final wait, which stops at the bound, returns first
        // and the sweep completes reporting the unreleased hold, recording no sweep run (a busy server fires the
        // timeout late). Either way nothing is lost, as below.
        await expect
          .poll(() => statusOf(us.client, cut), { timeout: 30_000, interval: 250 })
          .toMatch(/^(TIMED_OUT|COMPLETED)$/);
        if ((await statusOf(us.client, cut)) === 'COMPLETED')
          expect(await us.client.workflow.getHandle(cut).result()).toMatchObject({ unreleasedAtEnd: 1 });
        // Children are started with ABANDON: the bound ends the sweep, never a release in flight.
        expect(await statusOf(us.client, await holdWorkflowIdOf(us.pool, 'us', slow.id))).toBe('RUNNING');
        expect((await holdStates(us.pool)).get(slow.id)?.state).toBe('active');

        await blocker.query('ROLLBACK');
        blockerOpen = false;
        await expect
          .poll(async () => (await completedSweeps(us)).some((s) => s.unreleased_at_end === 0), {
            timeout: 60_000,
            interval: 250,
          })
          .toBe(true);
        const completed = await completedSweeps(us);
        expect(completed.map((s) => s.sweep_id)).not.toContain(cut);
        // The cut sweep had started every hold's child; whatever a later sweep found, it collided on the ids.
        for (const sweep of completed) expect(sweep.started).toBe(0);
      });
    } finally {
      if (blockerOpen) await blocker.query('ROLLBACK');
      blocker.release();
    }
    const slowWorkflow = await holdWorkflowIdOf(us.pool, 'us', slow.id);
    await expect.poll(() => statusOf(us.client, slowWorkflow), { timeout: 30_000, interval: 250 }).toBe('COMPLETED');
    expect(await ledgerEntryCount(us.pool)).toBe(night.expired.length);
  });
});
