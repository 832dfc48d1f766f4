/**
 * A quarantine stays bounded under a flood of decision signals that do not apply (src/workflows/webhook-delivery.ts,
 * `DeliveryState`): the status keeps the newest 50, and once the run's history reaches its budget (2,000 events)
 * the run continues as new, waiting for the same decision, which it then accepts. What is kept of a signal is its
 * shape, never its payload: the status answer stays under 64 KB and the carried state under 16 KB, whatever callers
 * send, and whatever a run continued by 1.0.0 (which quoted payloads) carries in.
 */
import type { WorkflowHandle } from '@temporalio/client';
import { expect, it, vi } from 'vitest';
import { DELIVERY_WORKFLOW_TASK_TIMEOUT_MS } from '../../src/contracts/delivery.js';
import type { DeliveryResume } from '../../src/contracts/domain.js';
import {
  approveReplaySignal,
  discardSignal,
  discardUpdate,
  statusQuery,
  type HoldStatus,
  type IgnoredSignal,
} from '../../src/contracts/messages.js';
import { DeliveryStatusKey } from '../../src/contracts/search-attributes.js';
import { CARRIED_STATE_BYTES, IGNORED_ENTRY_TEXT, STATUS_ANSWER_BYTES } from '../../src/workflows/webhook-delivery.js';
import { releaseExpiredHold } from '../../src/workflows/release-expired-hold.js';
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
// The shared dev server: the time-skipping test server holds a signal that races the continue-as-new this file drives
// (test/support/workflow-env.ts), and a flood resent after that is what the concurrent flood must not see.
withWorkflowEnv((env) => (w = env), 'dev-server');
// The time-skipping test server, for the big signals, sent one at a time (nothing of theirs in flight to be resent).
let ts: WorkflowEnv;
withWorkflowEnv((env) => (ts = env));

/** The run budget of src/workflows/webhook-delivery.ts (RUN_HISTORY_BUDGET). */
const RUN_HISTORY_BUDGET = 2_000;
const KEPT_IGNORED_SIGNALS = 50;
const QUARANTINE_TIMEOUT_MS = 24 * HOUR;

const status = (handle: WorkflowHandle) => handle.query(statusQuery);
/** A malformed approval (empty approvedBy), told apart by its size (the status keeps no caller's text). */
const junk = (i: number) => ({ approvedBy: '', reason: 'f'.repeat((i % 100) + 1) });
const bytesOf = (value: unknown) => Buffer.byteLength(JSON.stringify(value));
/** A flood's test: bounded by the slowest machine's pace, not by anything it waits for on the workflow clock. */
const FLOOD_TEST_MS = 300_000;
vi.setConfig({ testTimeout: FLOOD_TEST_MS });

/**
 * Malformed approvals, `batch` at a time, until the run's history reaches `events` (concurrent signals share workflow
 * tasks: about one event each; one at a time, about four) or the run has continued. Returns how many it sent
 * (numbered from `from`).
 *
 * Each batch is handled before the next is sent (a query waits for the workflow task in flight): every signal costs
 * the SDK a few promises, each with a captured stack, and a task of thousands of signals that a loaded worker cannot
 * finish within the delivery workflows' task timeout is retried from the whole history, and times out again.
 */
async function floodTo(handle: WorkflowHandle, firstRunId: string, events: number, from: number, batch = 50) {
  let sent = 0;
  let described = await handle.describe();
  while (described.runId === firstRunId && described.historyLength < events) {
    await Promise.all(
      Array.from({ length: batch }, (_, k) => handle.signal(approveReplaySignal, junk(from + sent + k))),
    );
    sent += batch;
    await status(handle);
    described = await handle.describe();
  }
  return sent;
}

/**
 * A flood until the run's history reaches its budget, then quiet until the run has continued as new. A run cannot
 * complete its continue-as-new while new signals keep arriving (the server refuses a closing command while events are
 * unhandled): on the test server, a flood that never paused held it off. Returns how many it sent.
 */
async function floodUntilContinued(handle: WorkflowHandle, firstRunId: string, from: number): Promise<number> {
  const sent = await floodTo(handle, firstRunId, RUN_HISTORY_BUDGET, from);
  await eventually(
    () => handle.describe(),
    (d) => d.runId !== firstRunId,
    'continued as new',
    FLOOD_TEST_MS / 2,
  );
  return sent;
}

/**
 * The input a run continued as new with, read from the run it started (the first run's history may pass gRPC's 4 MB
 * page): its size in bytes, and its delivery's carried state (`resume.delivery`).
 */
async function continuedWith(handle: WorkflowHandle, firstRunId: string) {
  const { runId } = await handle.describe();
  const events = (await handle.client.getHandle(handle.workflowId, runId).fetchHistory()).events ?? [];
  const started = events[0]?.workflowExecutionStartedEventAttributes;
  expect(started?.continuedExecutionRunId).toBe(firstRunId);
  const payload = started?.input?.payloads?.[0];
  expect(payload?.data).toBeDefined();
  const input = JSON.parse(Buffer.from(payload!.data!).toString()) as { resume: { delivery: DeliveryResume } };
  return { inputBytes: payload!.data!.length, delivery: input.resume.delivery };
}

/**
 * The workflow's result, read from the run it continued as (its last): following the runs from the first, as
 * `handle.result()` does, waited forever on the test server once an earlier test in the file had flooded a workflow.
 */
async function resultOf(handle: WorkflowHandle<typeof releaseExpiredHold>) {
  const { runId } = await handle.describe();
  return handle.client.getHandle<typeof releaseExpiredHold>(handle.workflowId, runId).result();
}

/** The decision a flood test ends its quarantine with, as the ledger is asked to record it (its id marked by `mark`). */
const bobsDiscard = (webhookId: string, mark: string) => ({
  webhookId,
  policyRun: 1,
  decision: 'discard',
  by: 'bob',
  reason: 'flooded',
  decisionId: `dc_${mark.repeat(32)}`,
});

/** Characters of text in an ignored decision, all its fields together. */
const textOf = (i: IgnoredSignal) => [i.signal, i.at, i.stage, i.why, i.payload?.type ?? ''].join('').length;

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
    // One at a time, so that they arrive in order (concurrent signals may not).
    let sent = 0;
    for (; sent < 60; sent++) await handle.signal(approveReplaySignal, junk(sent));
    const capped = await eventually(
      () => status(handle),
      (s) => s.ignoredSignals.at(-1)?.payload?.bytes === bytesOf(junk(59)),
      'the 60th signal ignored',
    );
    expect(capped.ignoredSignals).toHaveLength(KEPT_IGNORED_SIGNALS);
    expect(capped.ignoredSignals.map((s) => s.payload?.bytes)).toEqual(
      Array.from({ length: 50 }, (_, k) => bytesOf(junk(10 + k))),
    );
    expect(capped.ignoredSignals[0]).toEqual({
      signal: 'approveReplay',
      payload: { type: 'object', bytes: bytesOf(junk(10)) },
      at: expect.any(String),
      stage: 'quarantined',
      why: 'malformed approveReplay: "approvedBy" must be a non-empty string of at most 500 characters',
    });

    sent += await floodUntilContinued(handle, firstRunId, sent);
    const firstRun = w.env.client.workflow.getHandle(handle.workflowId, firstRunId);
    expect((await firstRun.describe()).status.name).toBe('CONTINUED_AS_NEW');
    // It continued in the first workflow task that started at or past the budget and completed: no other task that
    // started there completed (one that timed out on a loaded machine did not, and its retry is the one). A task's
    // start is found by its scheduled event (the test server leaves a completion's startedEventId unset).
    const events = (await firstRun.fetchHistory()).events ?? [];
    const startOf = new Map(
      events.flatMap((e) => {
        const started = e.workflowTaskStartedEventAttributes;
        return started ? [[String(started.scheduledEventId), Number(e.eventId)] as const] : [];
      }),
    );
    const completedPastBudget = events.filter((e) => {
      const completed = e.workflowTaskCompletedEventAttributes;
      return completed && (startOf.get(String(completed.scheduledEventId)) ?? 0) >= RUN_HISTORY_BUDGET;
    });
    const tail = events
      .filter((e) => Number(e.eventId) >= RUN_HISTORY_BUDGET - 10)
      .map((e) => `${String(e.eventId)} ${Object.keys(e).find((k) => k.endsWith('EventAttributes')) ?? '?'}`);
    expect(completedPastBudget, tail.join('\n')).toHaveLength(1);
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
    expect(await resultOf(handle)).toEqual({ release, delivery: { status: 'discarded', policyRuns: 1 } });
    expect(await deliveryStatusOf(handle)).toBe('discarded');
  });
  // Quarantined once (the new run did not quarantine again), decided once.
  expect(calls.quarantine).toHaveLength(1);
  expect(calls.release).toHaveLength(1);
  expect(calls.deliver).toHaveLength(1);
  expect(calls.decide).toEqual([bobsDiscard(release.webhookId, 'f')]);
});

it('malformed signals of 150 KB each: kept by their shape only, the status answer and the carried state stay small, and a valid decision still applies', async () => {
  const release = released();
  const { activities, calls } = stubActivities(ts, {
    release,
    decideWithinMs: QUARANTINE_TIMEOUT_MS,
    deliver: [failsWith('WebhookRejected', 1, 'HTTP 400')],
  });
  await runWorker(ts, activities, async (taskQueue) => {
    const handle = await startHold(ts, taskQueue, release);
    await reachesStage(handle, 'quarantined');
    const { runId: firstRunId } = await handle.describe();

    // Small ones first, to just short of the run's budget, so that the big ones are the newest when it continues: in
    // batches while a batch (up to 4 events a signal) cannot reach it, then one at a time. Ten big ones are 1.5 MB of
    // history, far past what the status and the carried state may hold, and far below gRPC's 4 MB message (a
    // worker that lost the run from its cache fetches the whole history again).
    const bigSignals = 10;
    let sent = await floodTo(handle, firstRunId, RUN_HISTORY_BUDGET - 400, 0);
    sent += await floodTo(handle, firstRunId, RUN_HISTORY_BUDGET - bigSignals * 4 + 4, sent, 1);
    // A bare string is not a decision: the workflow refuses it, and keeps what it was, not what it said. One at a
    // time, each in its own workflow task (the query after it waits for it).
    const big = 'x'.repeat(150 * 1024);
    for (let i = 0; i < bigSignals; i++) {
      await handle.signal(approveReplaySignal, big);
      await status(handle);
    }
    const flooded = await status(handle);
    console.log(`[workflow] ${bigSignals} signals of 150 KB: the status answer is ${bytesOf(flooded)} bytes`);
    // Soft: on a build that quotes payloads, the run still goes on to show what it carries.
    expect.soft(bytesOf(flooded)).toBeLessThan(STATUS_ANSWER_BYTES);
    expect
      .soft(flooded.ignoredSignals.filter((i) => i.payload?.type === 'string').map(({ at: _, ...rest }) => rest))
      .toEqual(
        Array.from({ length: bigSignals }, () => ({
          signal: 'approveReplay',
          payload: { type: 'string', bytes: bytesOf(big) },
          stage: 'quarantined',
          why: 'malformed approveReplay: expected a JSON object, got string',
        })),
      );

    await floodUntilContinued(handle, firstRunId, sent);
    const { inputBytes, delivery } = await continuedWith(handle, firstRunId);
    console.log(`[workflow] continued as new with an input of ${inputBytes} bytes (${bytesOf(delivery)} carried)`);
    expect.soft(bytesOf(delivery)).toBeLessThanOrEqual(CARRIED_STATE_BYTES);
    expect.soft(delivery.ignoredSignals.every((i) => !JSON.stringify(i).includes('xxx'))).toBe(true);

    // The next run waits for the same decision, its status as small, and takes a valid one: the ledger records it.
    const next = await reachesStage(handle, 'quarantined');
    expect(bytesOf(next)).toBeLessThan(STATUS_ANSWER_BYTES);
    await handle.signal(discardSignal, { by: 'bob', reason: 'flooded', decisionId: `dc_${'e'.repeat(32)}` });
    expect(await resultOf(handle)).toEqual({ release, delivery: { status: 'discarded', policyRuns: 1 } });
  });
  expect(calls.quarantine).toHaveLength(1);
  expect(calls.decide).toEqual([bobsDiscard(release.webhookId, 'e')]);
});

it("a run continued by 1.0.0, carrying its callers' text: bounded on read, and its next run's input at the 16 KB bound, newest kept", async () => {
  const release = released();
  const { activities, calls } = stubActivities(w, { release, deliver: [delivered(1)] });
  // What 1.0.0's continue-as-new carried: the last 20 ignored decisions with who sent them, why, and a quoted payload,
  // and a quarantine whose detail quoted the merchant (multi-byte text: its bytes count, not its characters).
  const since = new Date(await w.env.currentTimeMs()).toISOString();
  const oldEntry = (i: number) => ({
    signal: 'approveReplay',
    by: `b${i}`.padEnd(200, 'b'),
    reason: 'r'.repeat(200),
    at: since,
    stage: 'quarantined',
    why: `malformed approveReplay: expected a JSON object, got "${'y'.repeat(50_000)}"`,
  });
  const detail = `HTTP 400 from merchant m-1: ${'é'.repeat(6_000)}`;
  const resume = {
    release,
    delivery: {
      facts: {
        policyRun: 1,
        horizonMs: HOUR,
        leftMs: 0,
        local: false,
        busy: 0,
        attempt: 1,
        stepAt: Date.parse(since),
        quarantine: {
          reason: 'rejected',
          since,
          detail,
          fourEyes: false,
          abandonsAt: Date.parse(since) + QUARANTINE_TIMEOUT_MS,
        },
      },
      deliveryStatus: 'quarantined',
      lastAttempt: { attemptNumber: 1, outcome: 'HTTP 400', at: since },
      ignoredSignals: Array.from({ length: 20 }, (_, i) => oldEntry(i)),
    },
  };
  await runWorker(w, activities, async (taskQueue) => {
    const handle = await w.env.client.workflow.start(releaseExpiredHold, {
      taskQueue,
      workflowId: `hold-${release.holdId}-old`,
      typedSearchAttributes: [{ key: DeliveryStatusKey, value: 'quarantined' }],
      workflowTaskTimeout: DELIVERY_WORKFLOW_TASK_TIMEOUT_MS,
      args: [{ region: 'us', holdId: release.holdId, expiresAt: since, merchantId: 'm-1', resume } as never],
    });
    const read = await reachesStage(handle, 'quarantined');
    expect(read).toMatchObject({ reason: 'rejected', since, detail });
    expect(bytesOf(read)).toBeLessThan(STATUS_ANSWER_BYTES);
    expect(read.ignoredSignals).toHaveLength(20);
    for (const kept of read.ignoredSignals) {
      expect(Object.keys(kept).sort()).toEqual(['at', 'signal', 'stage', 'why']);
      expect(textOf(kept)).toBeLessThanOrEqual(IGNORED_ENTRY_TEXT);
    }
    const { runId: firstRunId } = await handle.describe();

    // The new run's ignored decisions and the big detail together pass 16 KB: the oldest entries are left behind.
    const sent = await floodUntilContinued(handle, firstRunId, 0);
    const { delivery } = await continuedWith(handle, firstRunId);
    console.log(`[workflow] carried ${bytesOf(delivery)} bytes, ${delivery.ignoredSignals.length} ignored decisions`);
    expect(bytesOf(delivery)).toBeLessThanOrEqual(CARRIED_STATE_BYTES);
    expect(delivery.facts.quarantine?.detail).toBe(detail);
    // The newest of what the run kept, up to the bound: the one before them would not have fit.
    const kept = (await w.env.client.workflow.getHandle(handle.workflowId, firstRunId).query(statusQuery))
      .ignoredSignals;
    const carried = delivery.ignoredSignals;
    expect(carried.length).toBeGreaterThan(0);
    expect(carried.length).toBeLessThan(kept.length);
    expect(carried).toEqual(kept.slice(-carried.length));
    expect(bytesOf(delivery) + bytesOf(kept.at(-carried.length - 1)) + 1).toBeGreaterThan(CARRIED_STATE_BYTES);
    console.log(`[workflow] ${sent} flood signals; carried ${carried.length} of ${kept.length} ignored decisions`);

    const next = await reachesStage(handle, 'quarantined');
    expect(next).toMatchObject({ reason: 'rejected', since, detail });
    await handle.signal(approveReplaySignal, {
      approvedBy: 'alice',
      reason: 'fixed',
      decisionId: `dc_${'d'.repeat(32)}`,
    });
    expect(await resultOf(handle)).toMatchObject({ delivery: { status: 'delivered', policyRuns: 2 } });
  });
  expect(calls.decide).toMatchObject([{ decision: 'replay', by: 'alice', decisionId: `dc_${'d'.repeat(32)}` }]);
});
