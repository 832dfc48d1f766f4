/**
 * Workflow determinism: histories recorded here, on the real server, replay cleanly with the current code.
 * The scenario touches every workflow path of the sweep: several pages with continue-as-new, a duplicate
 * child start (two concurrent sweeps), rejected rows and released holds.
 */
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { sweepExpiredHolds } from '../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness } from './support/harness.js';
import { seedNight } from './support/ledger.js';

let harness: Harness;
beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await harness?.close();
});

it('histories recorded from real sweeps replay with the current workflow code', async () => {
  const us = await harness.region('us');
  await harness.startWorker(us);
  await seedNight(us.pool, 'us', `${harness.id}rp`, { expired: 25, defective: true }, harness.merchants);
  const sweep = (n: number) =>
    us.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-replay-${n}`,
      args: [{ region: 'us', pageSize: 8, releaseWaitMs: 60_000 }],
    });
  const results = await Promise.all([sweep(1), sweep(2)]);
  expect(results[0].started + results[1].started).toBe(25);
  expect(results[0].alreadyStarted + results[1].alreadyStarted).toBeGreaterThan(0);

  const query = `TaskQueue = '${us.config.taskQueue}'`;
  const listed = async () => {
    const types: string[] = [];
    for await (const execution of us.client.workflow.list({ query })) types.push(execution.type);
    return { children: types.filter((t) => t === 'releaseExpiredHold').length, sweepRuns: types.filter((t) => t === 'sweepExpiredHolds').length };
  };
  // Visibility is eventually consistent: wait until every child and at least one run per page is listed.
  await expect.poll(listed, { timeout: 30_000 }).toMatchObject({ children: 25 });
  const { sweepRuns } = await listed();
  expect(sweepRuns).toBe(results[0].pages + results[1].pages);

  const outcomes: { workflowId: string; error?: unknown }[] = [];
  const histories = us.client.workflow.list({ query }).intoHistories();
  for await (const outcome of Worker.runReplayHistories({ workflowBundle: { code: inject('workflowBundleCode') } }, histories)) {
    outcomes.push(outcome);
  }
  expect(outcomes).toHaveLength(25 + sweepRuns);
  expect(outcomes.filter((o) => o.error)).toEqual([]);
});
