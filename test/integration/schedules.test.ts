import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_SWEEP_TIMEOUT_MS, type SweepConfig } from '../../src/config.js';
import type { SweepResult } from '../../src/contracts/domain.js';
import { pauseSweeps, resumeSweeps, sweepNowUnlessPaused, sweepsStatus } from '../../src/operations/sweep-pauses.js';
import { ensureSweepSchedule, sweepNow } from '../../src/schedules.js';
import { openHarness, type Harness } from '../support/harness.js';
import { ledgerEntryCount, seedNight } from '../support/ledger.js';

let harness: Harness;
beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await harness?.close();
});

// An hour between scheduled runs: within a test only explicit triggers start sweeps.
const sweep: SweepConfig = {
  intervalMs: 3_600_000,
  catchupWindowMs: 600_000,
  pageSize: 100,
  maxUnreleased: 200,
  timeoutMs: DEFAULT_SWEEP_TIMEOUT_MS,
};

async function schedulesWithId(client: import('@temporalio/client').Client, id: string): Promise<string[]> {
  const ids: string[] = [];
  for await (const s of client.schedule.list()) if (s.scheduleId === id) ids.push(s.scheduleId);
  return ids;
}

describe('sweep schedules', () => {
  it('set-up run twice leaves exactly one schedule per region with the configured spec', async () => {
    const us = await harness.region('us');
    const eu = await harness.region('eu');
    expect(await ensureSweepSchedule(us.client, us.config, sweep)).toBe('created');
    expect(await ensureSweepSchedule(eu.client, eu.config, sweep)).toBe('created');
    const changed = { ...sweep, intervalMs: 1_800_000 };
    expect(await ensureSweepSchedule(us.client, us.config, changed)).toBe('updated');
    expect(await ensureSweepSchedule(eu.client, eu.config, changed)).toBe('updated');

    for (const region of [us, eu]) {
      // Visibility of schedules is eventually consistent: wait for the listing to catch up.
      await expect
        .poll(() => schedulesWithId(region.client, region.config.scheduleId), { timeout: 15_000 })
        .toEqual([region.config.scheduleId]);
      const described = await region.client.schedule.getHandle(region.config.scheduleId).describe();
      expect(described.spec.intervals?.map((i) => i.every)).toEqual([1_800_000]);
      expect(described.policies).toMatchObject({ overlap: 'SKIP', catchupWindow: 600_000 });
      expect(described.action).toMatchObject({
        type: 'startWorkflow',
        workflowType: 'sweepExpiredHolds',
        taskQueue: region.config.taskQueue,
        args: [{ region: region.config.region, pageSize: 100, maxUnreleased: 200 }],
      });
    }
  });

  it('a manual trigger while a sweep runs does not start a second one', async () => {
    const us = await harness.region('us');
    await harness.startWorker(us);
    const night = await seedNight(us.pool, 'us', `${harness.id}tr`, { expired: 10 }, harness.merchants);
    await ensureSweepSchedule(us.client, us.config, sweep);

    // Hold one hold's row lock so its release (and so the sweep's final wait) cannot finish yet.
    const blocker = await us.pool.connect();
    await blocker.query('BEGIN');
    await blocker.query('SELECT 1 FROM auth_holds WHERE id = $1 FOR UPDATE', [night.expired[0]!.id]);
    let first: string;
    try {
      first = await sweepNow(us.client, us.config);
      const second = await sweepNow(us.client, us.config);
      expect(second).toBe(first);
      const described = await us.client.schedule.getHandle(us.config.scheduleId).describe();
      expect(described.info.runningActions.map((a) => a.workflow.workflowId)).toEqual([first]);
      expect(described.info.numActionsSkippedOverlap).toBeGreaterThanOrEqual(1);
    } finally {
      await blocker.query('ROLLBACK');
      blocker.release();
    }
    const result = await us.client.workflow.getHandle<() => Promise<SweepResult>>(first).result();
    expect(result).toMatchObject({ found: 10, started: 10, unreleasedAtEnd: 0 });
    expect(await ledgerEntryCount(us.pool)).toBe(10);
    const described = await us.client.schedule.getHandle(us.config.scheduleId).describe();
    expect(described.info.recentActions).toHaveLength(1);
  });

  it('sweeps pause: no sweep starts, sweep-now is refused, a worker start-up keeps the pause; resume sweeps again', async () => {
    const eu = await harness.region('eu');
    await harness.startWorker(eu);
    await seedNight(eu.pool, 'eu', `${harness.id}ps`, { expired: 3 }, harness.merchants);
    await ensureSweepSchedule(eu.client, eu.config, sweep);
    const ops = { region: eu.config, pool: eu.pool, client: eu.client };

    const paused = await pauseSweeps(ops, 'Alice', 'a bad release of the upstream authoriser');
    expect(paused).toMatchObject({
      paused: true,
      note: 'paused by Alice: a bad release of the upstream authoriser',
      nextSweeps: [],
    });
    await expect(pauseSweeps(ops, 'Bob', 'again')).rejects.toMatchObject({ code: 'SweepsAlreadyPaused' });
    await expect(sweepNowUnlessPaused(ops)).rejects.toMatchObject({
      code: 'SweepsPaused',
      message: 'sweeps in region eu are paused by Alice: a bad release of the upstream authoriser: resume them first',
    });
    // A worker starting (or a deploy) updates the schedule's spec and keeps its pause.
    expect(await ensureSweepSchedule(eu.client, eu.config, { ...sweep, intervalMs: 1_800_000 })).toBe('updated');
    expect(await sweepsStatus(ops)).toMatchObject({ paused: true, note: paused.note });
    const described = await eu.client.schedule.getHandle(eu.config.scheduleId).describe();
    expect(described.info.recentActions).toEqual([]);
    expect(await ledgerEntryCount(eu.pool)).toBe(0);

    const resumed = await resumeSweeps(ops, 'Bob', 'the authoriser is fixed');
    expect(resumed).toMatchObject({ paused: false, note: 'resumed by Bob: the authoriser is fixed' });
    expect(resumed.nextSweeps.length).toBeGreaterThan(0);
    await expect(resumeSweeps(ops, 'Bob', 'again')).rejects.toMatchObject({ code: 'SweepsNotPaused' });
    const { workflowId } = await sweepNowUnlessPaused(ops);
    await expect(eu.client.workflow.getHandle<() => Promise<SweepResult>>(workflowId).result()).resolves.toMatchObject({
      found: 3,
      unreleasedAtEnd: 0,
    });
    expect((await sweepsStatus(ops)).recentSweeps.map((r) => r.workflowId)).toEqual([workflowId]);
  });
});
