/**
 * Workflow determinism: histories recorded here, on the real server, replay cleanly with the current code.
 * The scenario touches every workflow path of the sweep: several pages with continue-as-new, a duplicate
 * child start (two concurrent sweeps), rejected rows and released holds.
 */
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { approveReplaySignal, discardSignal } from '../../src/contracts/messages.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness } from '../support/harness.js';
import { holdWorkflowIdOf, recordedDecision, seedNight } from '../support/ledger.js';

let harness: Harness;
beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await harness?.close();
});
import { workflowSinks } from '../../src/observability/tracing.js';

it('histories recorded from real sweeps replay with the current workflow code', async () => {
  const us = await harness.region('us');
  await harness.startWorker(us);
  const night = await seedNight(us.pool, 'us', `${harness.id}rp`, { expired: 25, defective: true }, harness.merchants);
  // Quarantine paths too: merchant 0 refuses its first webhook (then accepts the replay), merchant 1 refuses all.
  const [m0, m1] = night.merchantIds as [string, string];
  harness.merchants.script(m0, { secrets: [night.secrets.get(m0)!], responses: [{ status: 400 }, { status: 200 }] });
  harness.merchants.script(m1, { secrets: [night.secrets.get(m1)!], responses: [{ status: 400 }] });
  const sweep = (n: number) =>
    us.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-replay-${n}`,
      args: [{ region: 'us', pageSize: 8, releaseWaitMs: 60_000 }],
    });
  const results = await Promise.all([sweep(1), sweep(2)]);
  expect(results[0].started + results[1].started).toBe(25);
  expect(results[0].alreadyStarted + results[1].alreadyStarted).toBeGreaterThan(0);

  const quarantined = async () =>
    (
      await us.pool.query<{ hold_id: string; merchant_id: string }>(
        "SELECT hold_id, merchant_id FROM webhook_deliveries WHERE status = 'quarantined'",
      )
    ).rows;
  await expect.poll(async () => (await quarantined()).length, { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
  await expect
    .poll(async () => (await us.pool.query("SELECT 1 FROM webhook_deliveries WHERE status = 'pending'")).rowCount, {
      timeout: 30_000,
    })
    .toBe(0);
  for (const { hold_id, merchant_id } of await quarantined()) {
    const handle = us.client.workflow.getHandle(await holdWorkflowIdOf(us.pool, 'us', hold_id));
    if (merchant_id === m0)
      await handle.signal(
        approveReplaySignal,
        await recordedDecision(us.pool, hold_id, 'approveReplay', 'alice', 'merchant fixed parser'),
      );
    else
      await handle.signal(
        discardSignal,
        await recordedDecision(us.pool, hold_id, 'discard', 'bob', 'merchant offboarded'),
      );
  }
  await expect.poll(async () => (await quarantined()).length, { timeout: 30_000 }).toBe(0);

  const query = `TaskQueue = '${us.config.taskQueue}' AND ExecutionStatus != 'Running'`;
  const listed = async () => {
    const types: string[] = [];
    for await (const execution of us.client.workflow.list({ query })) types.push(execution.type);
    return {
      children: types.filter((t) => t === 'releaseExpiredHold').length,
      sweepRuns: types.filter((t) => t === 'sweepExpiredHolds').length,
      batches: types.filter((t) => t === 'startHoldBatch').length,
    };
  };
  // Visibility is eventually consistent: wait until every child and at least one run per page is listed.
  await expect.poll(listed, { timeout: 30_000 }).toMatchObject({ children: 25 });
  const { sweepRuns, batches } = await listed();
  // One run per page and a final one per sweep that waits for the releases; one batch (≤ 50 holds) per page of 8
  // that listed any valid hold: at least the 4 pages 25 holds take in the first sweep to list them.
  expect(sweepRuns).toBe(results[0].pages + results[1].pages + 2);
  expect(batches).toBeGreaterThanOrEqual(4);
  expect(batches).toBeLessThanOrEqual(results[0].pages + results[1].pages);

  const outcomes: { workflowId: string; error?: unknown }[] = [];
  const histories = us.client.workflow.list({ query }).intoHistories();
  for await (const outcome of Worker.runReplayHistories(
    { workflowBundle: { code: inject('workflowBundleCode') }, sinks: workflowSinks() },
    histories,
  )) {
    outcomes.push(outcome);
  }
  expect(outcomes).toHaveLength(25 + sweepRuns + batches);
  expect(outcomes.filter((o) => o.error)).toEqual([]);
});
