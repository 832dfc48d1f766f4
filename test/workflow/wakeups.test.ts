/**
 * When a waiting delivery wakes, on Temporal's time-skipping test server with stubbed activities: a `merchantResumed`
 * sent while an attempt is answering `held` ends the held wait after it, and the status query while held says when
 * the next re-check is due.
 */
import { Context } from '@temporalio/activity';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { HELD_LONG_RECHECK_MS } from '../../src/contracts/delivery.js';
import { merchantResumedSignal, statusQuery } from '../../src/contracts/messages.js';
import { HELD_LONG_AFTER_MS, HELD_RECHECK_FIRST_MS } from '../../src/workflows/delivery-rules.js';
import {
  crashes,
  delivered,
  gate,
  held,
  HOUR,
  released,
  runWorker,
  startHold,
  stubActivities,
  withWorkflowEnv,
  type DeliverStep,
  type WorkflowEnv,
} from '../support/workflow-env.js';

let w: WorkflowEnv;
withWorkflowEnv((env) => (w = env));

it('a merchantResumed sent while a regular attempt answers held, an hour into the hold: the next re-check within seconds, not 30 minutes later', async () => {
  const release = released({ retryHorizonMs: HOUR });
  let startedAt: number | undefined;
  let resumedAt: number | undefined;
  const at: number[] = [];
  // Disabled for over an hour (re-checks every 30 minutes by then); the first re-check after that is resumed from ops
  // while it is answering, and the merchant is back for the one after.
  const heldUntilResumed: DeliverStep = async (c) => {
    const now = await c.serverNow();
    at.push(now);
    startedAt ??= now;
    if (resumedAt !== undefined) return { status: 'delivered', attempts: 1, statusCode: 200 };
    if (now - startedAt >= HELD_LONG_AFTER_MS + HELD_LONG_RECHECK_MS) {
      const { workflowId } = Context.current().info.workflowExecution!;
      await w.env.client.workflow.getHandle(workflowId).signal(merchantResumedSignal);
      resumedAt = now;
    }
    return { status: 'held', merchantStatus: 'disabled' };
  };
  const { activities, calls } = stubActivities(w, { release, deliver: [crashes(), heldUntilResumed] });
  await runWorker(w, activities, async (taskQueue) => {
    const handle = await startHold(w, taskQueue, release);
    expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered', policyRuns: 1 } });
  });
  // The fast path crashed: every re-check is the regular activity.
  expect(calls.deliver.slice(1).every((c) => !c.isLocal)).toBe(true);
  const afterResume = at[at.length - 1]! - resumedAt!;
  console.log(`[workflow] next re-check ${Math.round(afterResume / 1000)} s after a resume sent during an attempt`);
  expect(afterResume).toBeLessThan(60_000);
});

it("a merchantResumed sent while a hold's first attempt (with its release) answers held: the re-check at once, not after the held wait", async () => {
  const release = released();
  const at: number[] = [];
  // The attempt outlasts the task's heartbeat (2 s): the signal reaches the workflow in the next task, while the local
  // activity still runs, before what came of it.
  const heldThenResumed: DeliverStep = async (c) => {
    const { workflowId } = Context.current().info.workflowExecution!;
    await w.env.client.workflow.getHandle(workflowId).signal(merchantResumedSignal);
    await sleep(3_500);
    at.push(await c.serverNow());
    return { status: 'held', merchantStatus: 'paused' };
  };
  const recheck: DeliverStep = async (c) => {
    at.push(await c.serverNow());
    return { status: 'delivered', attempts: 1, statusCode: 200 };
  };
  const { activities, calls } = stubActivities(w, { release, deliver: [heldThenResumed, recheck] });
  await runWorker(w, activities, async (taskQueue) => {
    const handle = await startHold(w, taskQueue, release);
    expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered', policyRuns: 1 } });
  });
  expect(calls.deliver[0]!.isLocal).toBe(true);
  // From the answer to the re-check, by the test server's clock (skipped): the held wait would have taken 5 s.
  expect(at[1]! - at[0]!).toBeLessThan(HELD_RECHECK_FIRST_MS);
});

it('while held, the status query says when the next re-check is due, during a re-check too', async () => {
  const release = released();
  const checking = gate();
  const answer = gate();
  let checkedAt = 0;
  // The second call is the first re-check: it waits for the test to read the status while it runs.
  const recheck: DeliverStep = async (c) => {
    checkedAt = await c.serverNow();
    checking.open();
    await answer.promise;
    return { status: 'held', merchantStatus: 'paused' };
  };
  const { activities } = stubActivities(w, { release, deliver: [held('paused'), recheck, delivered(1)] });
  await runWorker(w, activities, async (taskQueue) => {
    const handle = await startHold(w, taskQueue, release);
    const result = handle.result();
    await checking.promise;
    const stage = await handle.query(statusQuery);
    answer.open();
    expect(stage).toMatchObject({ stage: 'held', merchantStatus: 'paused' });
    const dueIn = Date.parse((stage as { until: string }).until) - checkedAt;
    console.log(`[workflow] during a re-check, held until ${dueIn} ms after it began`);
    // The wait after a 5 s one: 10 s from the re-check's start (the stub reads the clock a moment later).
    expect(dueIn).toBeGreaterThan(5_000);
    expect(dueIn).toBeLessThanOrEqual(10_000);
    await handle.signal(merchantResumedSignal);
    expect(await result).toMatchObject({ delivery: { status: 'delivered' } });
  });
});
