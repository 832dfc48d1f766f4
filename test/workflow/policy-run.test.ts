/**
 * One policy run of a webhook's delivery (src/workflows/webhook-delivery.ts, `runDeliveryPolicy`), branch by branch,
 * on Temporal's time-skipping test server with stubbed activities: the fast path and its three ways of failing, the
 * regular activity under Temporal's retry policy, the named failures, the horizon, a held merchant, the merchant's
 * budget, a delivery finished elsewhere; and `deliverHoldEvent`, which runs the same delivery from its first moment.
 */
import { randomUUID } from 'node:crypto';
import type { WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { releaseAndDeliver } from '../../src/activities/release-and-deliver.js';
import type { ReleaseExpiredHoldInput } from '../../src/contracts/domain.js';
import { DELIVERY_FAILURE_TYPES } from '../../src/contracts/failures.js';
import { merchantResumedSignal, statusQuery, type HoldStatus } from '../../src/contracts/messages.js';
import {
  alreadyTerminal,
  crashes,
  delivered,
  deliveryStatusHistory,
  deliveryStatusOf,
  eventually,
  failsRetryably,
  failsWith,
  gate,
  held,
  HOUR,
  withWorkflowEnv,
  reachesStage,
  released,
  runsOf,
  runWorker,
  scheduled,
  startEventDelivery,
  startHold,
  stubActivities,
  throttled,
  type DeliverStep,
  type WorkflowEnv,
} from '../support/workflow-env.js';

let w: WorkflowEnv;
withWorkflowEnv((env) => (w = env));

const status = (handle: WorkflowHandle) => handle.query(statusQuery);

/** The retryable type, but none of the details the workflow needs to wait it out (a malformed failure). */
const failsRetryablyWithoutDetails: DeliverStep = () => {
  throw ApplicationFailure.create({
    type: 'WebhookAttemptFailed',
    message: 'HTTP 503 (no details)',
    nextRetryDelay: 1_000,
  });
};

/** Timers the current run started (sleeps and conditions with a timeout). */
async function timersOf(handle: WorkflowHandle): Promise<number> {
  const history = await handle.fetchHistory();
  return (history.events ?? []).filter((e) => e.timerStartedEventAttributes).length;
}

/** Markers the current run recorded (each local activity's result, one per call or per failed try). */
async function markersOf(handle: WorkflowHandle): Promise<number> {
  const history = await handle.fetchHistory();
  return (history.events ?? []).filter((e) => e.markerRecordedEventAttributes).length;
}

/** How long each timer the current run started was set for, in ms. */
async function timerDurationsOf(handle: WorkflowHandle): Promise<number[]> {
  const history = await handle.fetchHistory();
  return (history.events ?? []).flatMap((e) => {
    const timeout = e.timerStartedEventAttributes?.startToFireTimeout;
    return timeout ? [Number(timeout.seconds ?? 0) * 1000 + Math.round((timeout.nanos ?? 0) / 1e6)] : [];
  });
}

/** The shape of one deliverWebhook call, for toEqual/toMatchObject. */
const call = (isLocal: boolean, attempt: number, policyRun = 1, reservedSlotMs?: number) => ({
  isLocal,
  attempt,
  input: { webhookId: expect.any(String), policyRun, ...(reservedSlotMs === undefined ? {} : { reservedSlotMs }) },
});

describe('the fast path', () => {
  it('delivers on its one local attempt: one call, no timer, DeliveryStatus delivered', async () => {
    const release = released();
    const { activities, calls } = stubActivities(w, { release, deliver: [delivered(1)] });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      expect(await handle.result()).toEqual({ release, delivery: { status: 'delivered', attempts: 1, policyRuns: 1 } });
      expect(await status(handle)).toMatchObject({
        stage: 'delivered',
        attempts: 1,
        lastAttempt: { attemptNumber: 1, outcome: 'delivered' },
        ignoredSignals: [],
      });
      expect(await deliveryStatusOf(handle)).toBe('delivered');
      expect(await deliveryStatusHistory(w.env, handle.workflowId)).toEqual(['delivered']);
      expect(await timersOf(handle)).toBe(0);
      // The release and the attempt: one local activity, one marker.
      expect(await markersOf(handle)).toBe(1);
    });
    expect(calls.release).toEqual([{ holdId: release.holdId, expiresAt: expect.any(String), cutoff: undefined }]);
    expect(calls.deliver).toMatchObject([call(true, 1)]);
    expect(calls.deliver[0]!.input).toEqual({ webhookId: release.webhookId, policyRun: 1 });
    expect(calls.quarantine).toEqual([]);
  });

  it("as 1.0.0's batch started it (no releaseDelivers): the release and the attempt apart, two markers, the same end", async () => {
    const release = released();
    const { activities, calls } = stubActivities(w, { release, deliver: [delivered(1)] });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release, { asReleased: true });
      expect(await handle.result()).toEqual({ release, delivery: { status: 'delivered', attempts: 1, policyRuns: 1 } });
      expect(await markersOf(handle)).toBe(2);
    });
    expect(calls.release).toHaveLength(1);
    expect(calls.deliver).toMatchObject([call(true, 1)]);
  });

  it('the release with its first attempt failing (the ledger down): the release on its own, then the fast path', async () => {
    const release = released();
    const { activities, calls } = stubActivities(w, { release, deliver: [delivered(1)] });
    let down = true;
    const releaseHold: typeof activities.releaseHold = async (input) => {
      if (down) {
        down = false;
        throw new Error('connection terminated unexpectedly');
      }
      return activities.releaseHold(input);
    };
    const ledgerDown = {
      ...activities,
      releaseHold,
      releaseAndDeliver: releaseAndDeliver(releaseHold, activities.deliverWebhook),
    };
    await runWorker(w, ledgerDown, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      expect(await handle.result()).toEqual({ release, delivery: { status: 'delivered', attempts: 1, policyRuns: 1 } });
      // The failed local activity's, the release's and the attempt's.
      expect(await markersOf(handle)).toBe(3);
    });
    expect(calls.release).toHaveLength(1);
    expect(calls.deliver).toMatchObject([call(true, 1)]);
  });

  it.each([
    { reason: 'backoff attempt 1', stage: 'backing_off' },
    { reason: 'Retry-After 3600 s', stage: 'honouring_retry_after' },
  ])(
    'fails retryably with the next attempt later ($reason): waits it out on a timer, then the regular activity delivers',
    async ({ reason, stage }) => {
      const release = released({ retryHorizonMs: 24 * HOUR });
      const { activities, calls } = stubActivities(w, {
        release,
        deliver: [failsRetryably({ attemptNumber: 1, inMs: HOUR, reason }), delivered(2)],
      });
      await runWorker(w, activities, async (taskQueue) => {
        const handle = await startHold(w, taskQueue, release);
        // Time is not skipped until the test awaits the result: the workflow sits in its wait, and says why.
        const waiting = await eventually(
          () => status(handle),
          (s) => s.stage === stage,
          `the status says ${stage}`,
        );
        expect(waiting).toMatchObject({
          stage,
          policyRun: 1,
          attempt: 1,
          reason,
          lastAttempt: { attemptNumber: 1, outcome: 'HTTP 503' },
        });
        expect(Date.parse((waiting as Extract<HoldStatus, { until: string }>).until)).toBeGreaterThan(
          await w.env.currentTimeMs(),
        );
        expect(calls.deliver).toHaveLength(1);
        expect(await deliveryStatusOf(handle)).toBe('pending');
        expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered', attempts: 2, policyRuns: 1 } });
        expect(await timersOf(handle)).toBe(1);
        expect(await deliveryStatusHistory(w.env, handle.workflowId)).toEqual(['delivered']);
      });
      expect(calls.deliver).toMatchObject([call(true, 1), call(false, 1)]);
    },
  );

  it('fails retryably with the next attempt due at once: the regular activity at once, no timer', async () => {
    const release = released();
    const { activities, calls } = stubActivities(w, {
      release,
      deliver: [
        failsRetryably({ attemptNumber: 1, inMs: 0, outcome: 'HTTP 503', reason: 'backoff attempt 1' }),
        delivered(2),
      ],
    });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      // Without skipping time: the regular call must come by itself.
      await eventually(
        async () => calls.deliver.length,
        (n) => n === 2,
        'the regular activity is called',
      );
      expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered', attempts: 2, policyRuns: 1 } });
      expect(await status(handle)).toMatchObject({
        stage: 'delivered',
        lastAttempt: { attemptNumber: 2, outcome: 'delivered' },
      });
      expect(await timersOf(handle)).toBe(0);
    });
    expect(calls.deliver).toMatchObject([call(true, 1), call(false, 1)]);
  });

  it.each([
    { what: 'a plain Error', step: crashes() },
    { what: 'a WebhookAttemptFailed without its details', step: failsRetryablyWithoutDetails },
  ])('fails unexpectedly ($what): handed to the regular activity at once, which delivers', async ({ step }) => {
    const release = released();
    const { activities, calls } = stubActivities(w, { release, deliver: [step, delivered(1)] });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered', attempts: 1, policyRuns: 1 } });
      expect(await timersOf(handle)).toBe(0);
    });
    expect(calls.deliver).toMatchObject([call(true, 1), call(false, 1)]);
    expect(calls.quarantine).toEqual([]);
  });
});

describe('the regular activity', () => {
  it("fails retryably three times: Temporal retries it after each attempt's nextRetryDelay, then it delivers", async () => {
    const release = released({ retryHorizonMs: 24 * HOUR });
    const delays = [10 * 60_000, 20 * 60_000, 40 * 60_000];
    const { activities, calls } = stubActivities(w, {
      release,
      decideWithinMs: QUARANTINE_TIMEOUT_MS,
      deliver: [
        failsRetryably({ attemptNumber: 1, inMs: 0 }),
        failsRetryably({ attemptNumber: 2, inMs: delays[0]! }),
        failsRetryably({ attemptNumber: 3, inMs: delays[1]! }),
        failsRetryably({ attemptNumber: 4, inMs: delays[2]! }),
        delivered(5),
      ],
    });
    const seen: number[] = [];
    const timed = activities.deliverWebhook;
    activities.deliverWebhook = async (input) => {
      seen.push(await w.env.currentTimeMs());
      return timed(input);
    };
    activities.releaseAndDeliver = releaseAndDeliver(activities.releaseHold, activities.deliverWebhook);
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered', attempts: 5, policyRuns: 1 } });
      expect(await deliveryStatusHistory(w.env, handle.workflowId)).toEqual(['delivered']);
    });
    expect(calls.deliver).toMatchObject([
      call(true, 1),
      call(false, 1),
      call(false, 2),
      call(false, 3),
      call(false, 4),
    ]);
    // Each retry came no sooner than the delay its failure asked for (the server's clock, skipped).
    for (const [i, delay] of delays.entries()) expect(seen[i + 2]! - seen[i + 1]!).toBeGreaterThanOrEqual(delay);
    expect(calls.quarantine).toEqual([]);
  });
});

/** Ends a quarantined delivery's wait: nobody decides (time skipped past the quarantine timeout). */
const QUARANTINE_TIMEOUT_MS = 2 * HOUR;

describe('quarantine by the policy', () => {
  const types = Object.entries(DELIVERY_FAILURE_TYPES);

  it.each(
    types.flatMap(([type, reason]) => [
      { type, reason, path: 'fast path' },
      { type, reason, path: 'regular activity' },
    ]),
  )('$type on the $path: quarantined as $reason, at once', async ({ type, reason, path }) => {
    const release = released();
    const failing = failsWith(type, 2, `${type}: merchant m-1 (stub)`);
    const deliver: DeliverStep[] = path === 'fast path' ? [failing] : [crashes(), failing];
    const { activities, calls } = stubActivities(w, { release, deliver, decideWithinMs: QUARANTINE_TIMEOUT_MS });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      const quarantined = await reachesStage(handle, 'quarantined');
      expect(quarantined).toMatchObject({
        stage: 'quarantined',
        policyRun: 1,
        reason,
        detail: `${type}: merchant m-1 (stub)`,
        lastAttempt: { attemptNumber: 2, outcome: `${type}: merchant m-1 (stub)` },
      });
      expect(await deliveryStatusOf(handle)).toBe('quarantined');
      expect(await handle.result()).toMatchObject({ delivery: { status: 'abandoned', policyRuns: 1 } });
      expect(await deliveryStatusHistory(w.env, handle.workflowId)).toEqual(['quarantined', 'abandoned']);
    });
    // Not retried: one call on the path that failed.
    expect(calls.deliver).toHaveLength(path === 'fast path' ? 1 : 2);
    expect(calls.deliver.at(-1)).toMatchObject(call(path === 'fast path', 1));
    expect(calls.quarantine).toEqual([
      { webhookId: release.webhookId, reason, detail: `${type}: merchant m-1 (stub)` },
    ]);
    expect(calls.decide).toMatchObject([
      { webhookId: release.webhookId, policyRun: 1, decision: 'abandon', by: 'hold-sweeper' },
    ]);
  });

  it('the retry horizon spent while the regular activity keeps failing retryably: quarantined as exhausted', async () => {
    const release = released({ retryHorizonMs: HOUR });
    const { activities, calls } = stubActivities(w, {
      release,
      decideWithinMs: QUARANTINE_TIMEOUT_MS,
      deliver: [
        failsRetryably({ attemptNumber: 1, inMs: 0 }),
        ...[2, 3, 4, 5, 6, 7, 8, 9].map((n) => failsRetryably({ attemptNumber: n, inMs: 15 * 60_000 })),
      ],
    });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      expect(await handle.result()).toMatchObject({ delivery: { status: 'abandoned', policyRuns: 1 } });
      expect(await deliveryStatusHistory(w.env, handle.workflowId)).toEqual(['quarantined', 'abandoned']);
    });
    // 15-minute retries within a 1-hour horizon: the first regular attempt and three or four more, then TIMEOUT.
    const regular = calls.deliver.filter((c) => !c.isLocal);
    expect(regular.length).toBeGreaterThanOrEqual(4);
    expect(regular.length).toBeLessThanOrEqual(5);
    expect(calls.quarantine).toMatchObject([{ webhookId: release.webhookId, reason: 'exhausted' }]);
  });

  it('the regular activity failing unexpectedly (a plain Error) every time: retried by Temporal until the horizon, then exhausted', async () => {
    const release = released({ retryHorizonMs: HOUR });
    const { activities, calls } = stubActivities(w, {
      release,
      decideWithinMs: QUARANTINE_TIMEOUT_MS,
      deliver: [crashes('bug: undefined is not a function')],
    });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      expect(await handle.result()).toMatchObject({ delivery: { status: 'abandoned', policyRuns: 1 } });
    });
    // The policy's intervals (5 s, doubling) within one hour: about ten attempts.
    const regular = calls.deliver.filter((c) => !c.isLocal);
    expect(regular.length).toBeGreaterThanOrEqual(8);
    expect(regular.length).toBeLessThanOrEqual(11);
    expect(regular.map((c) => c.attempt)).toEqual(regular.map((_, i) => i + 1));
    expect(calls.quarantine).toMatchObject([{ reason: 'exhausted' }]);
  });

  it('the retry horizon spent while waiting for the merchant (throttled past it): quarantined as exhausted, no call after', async () => {
    const release = released({ retryHorizonMs: HOUR });
    const { activities, calls } = stubActivities(w, {
      release,
      decideWithinMs: QUARANTINE_TIMEOUT_MS,
      deliver: [throttled(2 * HOUR), delivered(1)],
    });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      expect(await handle.result()).toMatchObject({ delivery: { status: 'abandoned', policyRuns: 1 } });
    });
    expect(calls.deliver).toHaveLength(1);
    expect(calls.quarantine).toEqual([
      {
        webhookId: release.webhookId,
        reason: 'exhausted',
        detail: 'retry horizon ran out while waiting for the merchant',
      },
    ]);
  });
});

/** The run budget of src/workflows/webhook-delivery.ts (RUN_HISTORY_BUDGET). */
const RUN_HISTORY_BUDGET = 2_000;

describe('a held merchant', () => {
  it('paused: waits with DeliveryStatus held; merchantResumed sends it at once, and it is delivered', async () => {
    const release = released();
    const { activities, calls } = stubActivities(w, { release, deliver: [held('paused'), delivered(1)] });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      await reachesStage(handle, 'held');
      expect(await status(handle)).toMatchObject({ stage: 'held', policyRun: 1, merchantStatus: 'paused' });
      expect(
        await eventually(
          () => deliveryStatusOf(handle),
          (s) => s === 'held',
          'DeliveryStatus held',
        ),
      ).toBe('held');
      expect(calls.deliver).toHaveLength(1);
      await handle.signal(merchantResumedSignal);
      await eventually(
        async () => calls.deliver.length,
        (n) => n === 2,
        'called again after merchantResumed',
      );
      expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered', attempts: 1, policyRuns: 1 } });
      expect(await deliveryStatusHistory(w.env, handle.workflowId)).toEqual(['held', 'delivered']);
      // The signal ended the wait, not its re-check timer (5 s): the timer was cancelled, never fired.
      const events = (await handle.fetchHistory()).events ?? [];
      expect(events.filter((e) => e.timerCanceledEventAttributes)).toHaveLength(1);
      expect(events.filter((e) => e.timerFiredEventAttributes)).toHaveLength(0);
    });
    // A pause is no failure: the next call is the fast path again.
    expect(calls.deliver).toMatchObject([call(true, 1), call(true, 1)]);
  });

  it('held for three hours (disabled) with a 1-hour horizon: re-checks on its timers, the pause not counted against the horizon', async () => {
    const release = released({ retryHorizonMs: HOUR });
    let resumesAt: number | undefined;
    const untilLater: DeliverStep = async (c) => {
      const now = await c.serverNow();
      resumesAt ??= now + 3 * HOUR;
      return now < resumesAt
        ? { status: 'held', merchantStatus: 'disabled' }
        : { status: 'delivered', attempts: 1, statusCode: 200 };
    };
    const { activities, calls } = stubActivities(w, { release, deliver: [untilLater] });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered', attempts: 1, policyRuns: 1 } });
      // held once, then delivered: no flapping on every re-check.
      expect(await deliveryStatusHistory(w.env, handle.workflowId)).toEqual(['held', 'delivered']);
    });
    // Re-checks 5 s, 10 s, ... up to every 5 minutes: a few dozen in three hours.
    expect(calls.deliver.length).toBeGreaterThan(20);
    expect(calls.deliver.length).toBeLessThan(60);
    expect(calls.quarantine).toEqual([]);
  });

  it('paused for eight days: re-checks across runs (continue-as-new), DeliveryStatus held throughout, the pause not spent from the horizon', async () => {
    const release = released({ retryHorizonMs: HOUR });
    let backAt: number | undefined;
    const pausedForDays: DeliverStep = async (c) => {
      const now = await c.serverNow();
      backAt ??= now + 8 * 24 * HOUR;
      return now < backAt
        ? { status: 'held', merchantStatus: 'paused' }
        : { status: 'delivered', attempts: 1, statusCode: 200 };
    };
    const { activities, calls } = stubActivities(w, { release, deliver: [pausedForDays] });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      expect(await handle.result()).toEqual({ release, delivery: { status: 'delivered', attempts: 1, policyRuns: 1 } });
      const runs = await runsOf(w.env, handle.workflowId);
      console.log(
        `[workflow] paused 8 days: ${calls.deliver.length} re-checks, ${runs.length} runs of ${runs.map((r) => r.length).join(', ')} events`,
      );
      // Re-checks every 30 minutes after the first hour: ~380 in eight days, ~6 events each: two runs.
      expect(runs.length).toBeGreaterThanOrEqual(2);
      for (const run of runs.slice(0, -1)) {
        expect(run.length).toBeGreaterThanOrEqual(RUN_HISTORY_BUDGET);
        expect(run.length).toBeLessThan(RUN_HISTORY_BUDGET + 50);
      }
      // held once, then delivered: no flapping on re-checks or at a new run.
      expect(await deliveryStatusHistory(w.env, handle.workflowId)).toEqual(['held', 'delivered']);
      // Every run after the first was started with the merchant's pause carried (no release again, no fresh horizon).
      for (const run of runs.slice(1)) {
        const input = run[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
        const args = JSON.parse(Buffer.from(input!.data!).toString()) as ReleaseExpiredHoldInput;
        expect(args.resume?.delivery).toMatchObject({
          deliveryStatus: 'held',
          facts: { policyRun: 1, held: { by: 'paused' } },
        });
        // Days paused, and still (nearly) the whole 1-hour horizon left: the pause was added back.
        expect(args.resume?.delivery.facts.leftMs).toBeGreaterThan(HOUR - 60_000);
        expect(args.resume?.delivery.facts.leftMs).toBeLessThanOrEqual(HOUR);
      }
    });
    expect(calls.release).toHaveLength(1);
    expect(calls.quarantine).toEqual([]);
    expect(calls.deliver.length).toBeGreaterThan(300);
    expect(calls.deliver.every((c) => c.isLocal && c.input.policyRun === 1)).toBe(true);
  });
});

describe("the merchant's budget", () => {
  it('throttled: waits for the budget on a timer, then calls again without a reserved slot', async () => {
    const release = released();
    const { activities, calls } = stubActivities(w, { release, deliver: [throttled(10 * 60_000), delivered(1)] });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      const waiting = await reachesStage(handle, 'waiting_for_budget');
      expect(waiting).toMatchObject({ stage: 'waiting_for_budget', policyRun: 1, lane: 'first', reserved: false });
      expect(waiting).not.toHaveProperty('after');
      expect(await deliveryStatusOf(handle)).toBe('pending');
      expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered', attempts: 1 } });
      expect(await timersOf(handle)).toBe(1);
    });
    expect(calls.deliver).toMatchObject([call(true, 1), call(true, 1, 1, undefined)]);
  });

  it('throttled behind an earlier webhook of the hold: the status names it', async () => {
    const release = released();
    const { activities } = stubActivities(w, { release, deliver: [throttled(60_000, 'wh-earlier'), delivered(1)] });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      const waiting = await reachesStage(handle, 'waiting_for_budget');
      expect(waiting).toMatchObject({ stage: 'waiting_for_budget', after: 'wh-earlier', reserved: false });
      expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered' } });
    });
  });

  it('scheduled: waits for its reserved slot on a timer, then calls again holding it (reservedSlotMs)', async () => {
    const release = released();
    const slots: number[] = [];
    const { activities, calls } = stubActivities(w, {
      release,
      deliver: [scheduled(10 * 60_000, slots), delivered(1)],
    });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      const waiting = await reachesStage(handle, 'waiting_for_budget');
      // The wait is the worker's duration, from the workflow's clock (never a timestamp of the database's).
      expect(waiting).toMatchObject({ stage: 'waiting_for_budget', policyRun: 1, lane: 'first', reserved: true });
      expect(await timerDurationsOf(handle)).toEqual([10 * 60_000]);
      expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered', attempts: 1 } });
    });
    expect(slots).toHaveLength(1);
    expect(calls.deliver).toMatchObject([call(true, 1), call(true, 1, 1, slots[0])]);
  });
});

describe('a delivery already terminal', () => {
  it('delivered by an earlier attempt: the workflow ends delivered, with its attempts', async () => {
    const release = released();
    const { activities, calls } = stubActivities(w, { release, deliver: [alreadyTerminal('delivered', 3)] });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      expect(await handle.result()).toEqual({ release, delivery: { status: 'delivered', attempts: 3, policyRuns: 1 } });
      expect(await deliveryStatusOf(handle)).toBe('delivered');
    });
    expect(calls.deliver).toHaveLength(1);
  });

  it.each([
    { finished: 'discarded', expected: 'discarded' },
    { finished: 'abandoned', expected: 'abandoned' },
    { finished: 'quarantined', expected: 'quarantined' },
    { finished: 'superseded', expected: 'none' },
  ])('$finished by another workflow: handled elsewhere, DeliveryStatus $expected', async ({ finished, expected }) => {
    const release = released();
    const { activities, calls } = stubActivities(w, {
      release,
      deliver: [alreadyTerminal(finished as 'discarded', 2)],
    });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      expect(await handle.result()).toEqual({
        release,
        delivery: { status: 'handled_elsewhere', deliveryStatus: finished },
      });
      expect(await status(handle)).toMatchObject({
        stage: 'not_released',
        status: `delivery ${finished} by another workflow`,
      });
      expect(await deliveryStatusOf(handle)).toBe(expected);
      expect(await deliveryStatusHistory(w.env, handle.workflowId)).toEqual([expected]);
    });
    expect(calls.deliver).toHaveLength(1);
    expect(calls.quarantine).toEqual([]);
  });
});

describe('deliverHoldEvent', () => {
  it("starts at stage delivering: the status never says 'releasing', from its start to its first call", async () => {
    // The fast path's call runs inside the first workflow task, where no query is answered; its crash hands the
    // delivery to the regular activity, which the test holds in flight while it asks.
    const inFlight = gate();
    const blocked: DeliverStep = async () => {
      await inFlight.promise;
      return { status: 'delivered', attempts: 1, statusCode: 200 };
    };
    const { activities, calls } = stubActivities(w, { deliver: [crashes(), blocked] });
    const webhookId = `wh-ev-${randomUUID().slice(0, 8)}`;
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startEventDelivery(w, taskQueue, webhookId);
      // Asked from its start (answers come once its first task is done) until the regular call is in flight.
      const seen: HoldStatus[] = [];
      await eventually(
        async () => {
          seen.push(await status(handle));
          return calls.deliver.length;
        },
        (n) => n === 2,
        'the regular call is in flight',
      );
      seen.push(await status(handle));
      expect(new Set(seen.map((s) => s.stage))).toEqual(new Set(['delivering']));
      expect(seen.at(-1)).toEqual({ stage: 'delivering', policyRun: 1, ignoredSignals: [] });
      inFlight.open();
      expect(await handle.result()).toEqual({
        webhookId,
        delivery: { status: 'delivered', attempts: 1, policyRuns: 1 },
      });
      expect(await deliveryStatusOf(handle)).toBe('delivered');
    });
    expect(calls.release).toEqual([]);
    expect(calls.deliver).toMatchObject([call(true, 1), call(false, 1)]);
    expect(calls.deliver[0]!.input).toEqual({ webhookId, policyRun: 1 });
  });
});
