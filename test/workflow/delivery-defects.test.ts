/**
 * The delivery's defects found before 1.0, each as the behaviour that replaces it, on Temporal's time-skipping test
 * server with stubbed activities: an approval taken while the run's history grows long is recorded and answered, never
 * dropped at continue-as-new; waiting for a free request backs off and keeps each run's history bounded; a merchant
 * slower than a workflow task is sent one request, in a task the SDK heartbeats; every delivery's quarantine waits as
 * long as the worker says; a failure type that is an Object property is no named failure.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { expect, it } from 'vitest';
import { IN_FLIGHT_WAIT_MAX_MS } from '../../src/contracts/delivery.js';
import { approveReplaySignal, approveReplayUpdate, type DecisionAnswer } from '../../src/contracts/messages.js';
import { RUN_HISTORY_BUDGET } from '../../src/workflows/history-budget.js';
import {
  busy,
  crashes,
  delivered,
  failsWith,
  gate,
  HOUR,
  reachesStage,
  released,
  runsOf,
  runWorker,
  startEventDelivery,
  startHold,
  stubActivities,
  withWorkflowEnv,
  type DeliverStep,
  type WorkflowEnv,
} from '../support/workflow-env.js';

let w: WorkflowEnv;
withWorkflowEnv((env) => (w = env));

const decisionId = `dc_${'a'.repeat(32)}`;

it('an approval taken while the run’s history grows past its budget is recorded and answered, then delivered: never dropped at continue-as-new, never hung', async () => {
  const release = released();
  const recording = gate();
  const { activities, calls } = stubActivities(w, {
    release,
    deliver: [failsWith('WebhookRejected', 1, 'HTTP 400'), delivered(1)],
    decide: async () => {
      await recording.promise;
    },
  });
  await runWorker(w, activities, async (taskQueue) => {
    const handle = await startHold(w, taskQueue, release);
    await reachesStage(handle, 'quarantined');
    const answer = handle.executeUpdate(approveReplayUpdate, {
      args: [{ approvedBy: 'alice', reason: 'merchant fixed', policyRun: 1, decisionId }],
    });
    await expect.poll(() => calls.decide.length).toBe(1);
    // While the ledger records it, signals that do not apply (already decided) push the run past its budget.
    const { runId } = await handle.describe();
    for (let sent = 0; (await handle.describe()).historyLength < RUN_HISTORY_BUDGET + 50; sent += 50) {
      await Promise.all(
        Array.from({ length: 50 }, (_, k) =>
          handle.signal(approveReplaySignal, { approvedBy: 'mallory', reason: `flood ${sent + k}`, decisionId }),
        ),
      );
    }
    recording.open();
    expect(await answer).toEqual({ decision: 'replay', policyRun: 1, stage: 'delivering' } satisfies DecisionAnswer);
    expect(await handle.result()).toEqual({ release, delivery: { status: 'delivered', attempts: 1, policyRuns: 2 } });
    // The decision was the run's: it ended by delivering, in the run that took it.
    expect((await handle.describe()).runId).toBe(runId);
  });
  expect(calls.decide).toMatchObject([{ decision: 'replay', by: 'alice', policyRun: 1, decisionId }]);
  expect(calls.deliver.map((c) => c.input.policyRun)).toEqual([1, 2]);
});

it('every request to the merchant in flight: the wait backs off from 1 s to a minute, and six hours of it keep each run under its history budget', async () => {
  const release = released({ retryHorizonMs: 72 * HOUR });
  const { activities, calls } = stubActivities(w, { release, deliver: [busy(1_000)] });
  let handle!: WorkflowHandle;
  await runWorker(w, activities, async (taskQueue) => {
    handle = await startHold(w, taskQueue, release);
    await w.env.sleep(6 * HOUR);
    await handle.terminate('measured');
  });
  const runs = await runsOf(w.env, handle.workflowId);
  const waits = runs.flat().flatMap((e) => {
    const t = e.timerStartedEventAttributes?.startToFireTimeout;
    return t ? [Number(t.seconds ?? 0) * 1000 + Math.round((t.nanos ?? 0) / 1e6)] : [];
  });
  expect(waits.slice(0, 8)).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]);
  expect(Math.max(...waits)).toBe(IN_FLIGHT_WAIT_MAX_MS);
  // One call a minute once backed off: ~360 in six hours (a 1–5 s poll made ~7,000), over more than one run.
  expect(calls.deliver.length).toBeGreaterThan(300);
  expect(calls.deliver.length).toBeLessThan(380);
  expect(runs.length).toBeGreaterThan(1);
  for (const run of runs) expect(run.length).toBeLessThan(RUN_HISTORY_BUDGET + 20);
});

it('a merchant answering 200 in 3 s, inside its attempt timeout: one request, on the fast path, in a workflow task the SDK heartbeats, a second only with a lost task', async () => {
  const release = released();
  const slowOk: DeliverStep = async () => {
    await sleep(3_000);
    return { status: 'delivered', attempts: 1, statusCode: 200 };
  };
  const { activities, calls } = stubActivities(w, { release, deliver: [slowOk] });
  let lostTasks = 0;
  await runWorker(w, activities, async (taskQueue) => {
    const handle = await startHold(w, taskQueue, release);
    expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered', attempts: 1 } });
    const events = (await handle.fetchHistory()).events ?? [];
    // The release and the attempt ran as one local activity in the first task, held past its 2.5 s timeout by the
    // SDK's heartbeat: that task completed at 2 s and a new one recorded the marker. Unheartbeated, the first task
    // would have completed with it.
    const markers = events.flatMap((e, i) => (e.markerRecordedEventAttributes ? [i] : []));
    expect(markers).toHaveLength(1);
    const tasksBefore = events.slice(0, markers[0]).filter((e) => e.workflowTaskCompletedEventAttributes);
    expect(tasksBefore.length).toBeGreaterThanOrEqual(1);
    // A machine too busy to heartbeat in time loses the task; the next one runs the local activity again (the fast
    // path's at-least-once, the same webhook id). Only that.
    lostTasks = events.filter(
      (e) => e.workflowTaskTimedOutEventAttributes || e.workflowTaskFailedEventAttributes,
    ).length;
  });
  expect(calls.deliver.length).toBeGreaterThanOrEqual(1);
  expect(calls.deliver.length - 1).toBeLessThanOrEqual(lostTasks);
  expect(calls.deliver.every((c) => c.isLocal)).toBe(true);
});

it("a processor event's webhook waits for a human as long as the worker's quarantine rule says, then is abandoned", async () => {
  const { activities, calls } = stubActivities(w, {
    deliver: [failsWith('WebhookRejected', 1, 'HTTP 400')],
    decideWithinMs: 3 * HOUR,
  });
  const webhookId = `wh-ev-${randomUUID().slice(0, 8)}`;
  await runWorker(w, activities, async (taskQueue) => {
    const handle = await startEventDelivery(w, taskQueue, webhookId);
    expect(await handle.result()).toEqual({ webhookId, delivery: { status: 'abandoned', policyRuns: 1 } });
    const human = ((await handle.fetchHistory()).events ?? []).find((e) => e.timerStartedEventAttributes);
    expect(Number(human?.timerStartedEventAttributes?.startToFireTimeout?.seconds) * 1000).toBe(3 * HOUR);
  });
  expect(calls.decide).toMatchObject([{ decision: 'abandon', reason: 'no decision within 3 hours' }]);
});

it('a failure whose type is an Object property (constructor) is no named failure: the horizon’s quarantine, as for any unknown failure', async () => {
  const release = released({ retryHorizonMs: HOUR });
  const typedLikeAProperty: DeliverStep = () => {
    throw ApplicationFailure.create({ type: 'constructor', message: 'not a policy failure', nonRetryable: true });
  };
  const { activities, calls } = stubActivities(w, { release, deliver: [crashes(), typedLikeAProperty] });
  await runWorker(w, activities, async (taskQueue) => {
    const handle = await startHold(w, taskQueue, release);
    await reachesStage(handle, 'quarantined');
    await handle.terminate('seen');
  });
  expect(calls.quarantine).toMatchObject([{ reason: 'exhausted' }]);
});
