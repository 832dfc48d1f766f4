/**
 * A quarantine stays bounded under a flood of decision signals that do not apply (src/workflows/delivery-tracker.ts,
 * webhook-delivery.ts): the status keeps the newest 50, and once the run's history reaches its budget (2,000 events)
 * the run continues as new, waiting for the same decision, which it then accepts.
 */
import type { WorkflowHandle } from '@temporalio/client';
import { expect, it } from 'vitest';
import { approveReplaySignal, discardUpdate, statusQuery, type HoldStatus } from '../../src/contracts/messages.js';
import {
  delivered,
  deliveryStatusOf,
  eventually,
  failsWith,
  HOUR,
  withWorkflowEnv,
  reachesStage,
  released,
  runWorker,
  startHold,
  stubActivities,
  type WorkflowEnv,
} from '../support/workflow-env.js';

let w: WorkflowEnv;
withWorkflowEnv((env) => (w = env));

/** The run budget of src/workflows/webhook-delivery.ts (RUN_HISTORY_BUDGET). */
const RUN_HISTORY_BUDGET = 2_000;
const KEPT_IGNORED_SIGNALS = 50;
const QUARANTINE_TIMEOUT_MS = 24 * HOUR;

const status = (handle: WorkflowHandle) => handle.query(statusQuery);
/** A malformed approval (empty approvedBy), told apart by its reason. */
const junk = (i: number) => ({ approvedBy: '', reason: `flood ${i}` });

it('a flood of ignored signals: the status keeps the newest 50, the run continues as new and still takes the decision', async () => {
  const release = released();
  const { activities, calls } = stubActivities(w, {
    release,
    decideWithinMs: QUARANTINE_TIMEOUT_MS,
    deliver: [failsWith('WebhookRejected', 1, 'HTTP 400'), delivered(1)],
  });
  await runWorker(w, activities, async (taskQueue) => {
    const handle = await startHold(w, taskQueue, release);
    const quarantined = (await reachesStage(handle, 'quarantined')) as Extract<HoldStatus, { stage: 'quarantined' }>;
    const { runId: firstRunId } = await handle.describe();

    // 60 first: the status keeps the newest 50.
    let sent = 0;
    const send = async (n: number) => {
      await Promise.all(Array.from({ length: n }, (_, k) => handle.signal(approveReplaySignal, junk(sent + k))));
      sent += n;
    };
    // One at a time, so that they arrive in order (concurrent signals may not).
    for (let i = 0; i < 60; i++) await send(1);
    const capped = await eventually(
      () => status(handle),
      (s) => s.ignoredSignals.at(-1)?.reason === 'flood 59',
      'the 60th signal ignored',
    );
    expect(capped.ignoredSignals).toHaveLength(KEPT_IGNORED_SIGNALS);
    expect(capped.ignoredSignals.map((s) => s.reason)).toEqual(Array.from({ length: 50 }, (_, k) => `flood ${10 + k}`));
    expect(capped.ignoredSignals[0]).toMatchObject({
      signal: 'approveReplay',
      stage: 'quarantined',
      why: 'malformed approveReplay: "approvedBy" must be a non-empty string of at most 500 characters',
    });

    // Then in batches until the run's history reaches its budget (concurrent signals share workflow tasks: about one
    // event each), then quiet. A run cannot complete its continue-as-new while new signals keep arriving (the server
    // refuses a closing command while events are unhandled): on the test server, a flood that never paused held it off.
    let described = await handle.describe();
    while (described.runId === firstRunId && described.historyLength < RUN_HISTORY_BUDGET) {
      await send(50);
      described = await handle.describe();
    }
    await eventually(
      () => handle.describe(),
      (d) => d.runId !== firstRunId,
      'continued as new',
    );
    const firstRun = w.env.client.workflow.getHandle(handle.workflowId, firstRunId);
    expect((await firstRun.describe()).status.name).toBe('CONTINUED_AS_NEW');
    // It continued in the first workflow task that started at or past the budget (no task completed after it but the
    // one that continued).
    const events = (await firstRun.fetchHistory()).events ?? [];
    const firstPast = events.find(
      (e) => e.workflowTaskStartedEventAttributes && Number(e.eventId) >= RUN_HISTORY_BUDGET,
    )!;
    expect(firstPast).toBeDefined();
    const completedAfter = events.filter(
      (e) => e.workflowTaskCompletedEventAttributes && Number(e.eventId) > Number(firstPast.eventId),
    );
    expect(completedAfter).toHaveLength(1);
    expect(events.at(-1)?.workflowExecutionContinuedAsNewEventAttributes).toBeTruthy();
    console.log(`[workflow] ${sent} ignored signals, continued as new at ${events.length} events`);

    // The new run waits for the same decision: same run, reason and since; the status still bounded; DeliveryStatus
    // kept.
    const next = await reachesStage(handle, 'quarantined');
    expect(next).toMatchObject({
      stage: 'quarantined',
      policyRun: 1,
      reason: 'rejected',
      since: quarantined.since,
      detail: 'HTTP 400',
    });
    expect(next.ignoredSignals.length).toBeGreaterThanOrEqual(20);
    expect(next.ignoredSignals.length).toBeLessThanOrEqual(KEPT_IGNORED_SIGNALS);
    expect(await deliveryStatusOf(handle)).toBe('quarantined');
    // It abandons at the same moment as the first run would have: its wait is what was left, not a fresh timeout.
    const wait = ((await handle.fetchHistory()).events ?? []).find(
      (e) => e.timerStartedEventAttributes,
    )?.timerStartedEventAttributes;
    expect(Number(wait?.startToFireTimeout?.seconds) * 1000).toBeLessThan(QUARANTINE_TIMEOUT_MS);

    expect(
      await handle.executeUpdate(discardUpdate, {
        args: [{ by: 'bob', reason: 'flooded', policyRun: 1, decisionId: `dc_${'f'.repeat(32)}` }],
      }),
    ).toEqual({
      decision: 'discard',
      policyRun: 1,
      stage: 'discarded',
    });
    expect(await handle.result()).toEqual({ release, delivery: { status: 'discarded', policyRuns: 1 } });
    expect(await deliveryStatusOf(handle)).toBe('discarded');
  });
  // Quarantined once (the new run did not quarantine again), decided once.
  expect(calls.quarantine).toHaveLength(1);
  expect(calls.release).toHaveLength(1);
  expect(calls.deliver).toHaveLength(1);
  expect(calls.decide).toEqual([
    {
      webhookId: release.webhookId,
      policyRun: 1,
      decision: 'discard',
      by: 'bob',
      reason: 'flooded',
      decisionId: `dc_${'f'.repeat(32)}`,
    },
  ]);
});
