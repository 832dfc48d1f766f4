/**
 * A quarantined delivery and the human decision on it (src/workflows/webhook-delivery.ts: the loop and
 * `DeliveryState`), on Temporal's time-skipping test server with stubbed activities: approveReplay and discard
 * as signals and as Updates, two decisions in one workflow task, nobody deciding (abandoned), decisions that do not
 * apply, four eyes, and the races between the quarantine's timeout and an approval.
 */
import { WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import type { QuarantineDecisionAnswer } from '../../src/contracts/delivery.js';
import type { DeliveryResume } from '../../src/contracts/domain.js';
import { releaseExpiredHold } from '../../src/workflows/release-expired-hold.js';
import {
  approveReplaySignal,
  approveReplayUpdate,
  discardSignal,
  discardUpdate,
  statusQuery,
  type DecisionAnswer,
  type HoldStatus,
} from '../../src/contracts/messages.js';
import {
  delivered,
  deliveryStatusHistory,
  deliveryStatusOf,
  eventually,
  failsWith,
  gate,
  held,
  HOUR,
  withWorkflowEnv,
  reachesStage,
  ownTaskQueue,
  released,
  runWorker,
  startHold,
  stubActivities,
  type DeliverStep,
  type Released,
  type StubScript,
  type WorkflowEnv,
} from '../support/workflow-env.js';

let w: WorkflowEnv;
withWorkflowEnv((env) => (w = env));

const QUARANTINE_TIMEOUT_MS = 6 * HOUR;

const status = (handle: WorkflowHandle) => handle.query(statusQuery);
const untilQuarantined = (handle: WorkflowHandle, policyRun = 1) =>
  eventually(
    () => status(handle),
    (s) => s.stage === 'quarantined' && s.policyRun === policyRun,
    `quarantined (policy run ${policyRun})`,
  );

/** Updates the server accepted (each one's validator passed): a refused one never enters history. */
async function acceptedUpdates(handle: WorkflowHandle): Promise<string[]> {
  const history = await handle.fetchHistory();
  return (history.events ?? []).flatMap((e) => {
    const name = e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name;
    return name ? [name] : [];
  });
}

/** The refusal an Update met: its failure's message (the validator's or the handler's why). */
async function refusal(update: Promise<unknown>): Promise<string> {
  const err = await update.then(
    () => {
      throw new Error('the update was answered, not refused');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WorkflowUpdateFailedError);
  return (err as WorkflowUpdateFailedError).cause?.message ?? '';
}

/** A release whose first attempt is rejected (quarantined at once), then whatever `after` says. */
function rejectedFirst(after: DeliverStep[] = [delivered(1)], extra: Omit<StubScript, 'deliver' | 'release'> = {}) {
  const release = released();
  return {
    release,
    ...stubActivities(w, {
      release,
      deliver: [failsWith('WebhookRejected', 1, 'HTTP 400 from merchant m-1 (not retryable)'), ...after],
      decideWithinMs: QUARANTINE_TIMEOUT_MS,
      ...extra,
    }),
  };
}

/**
 * Quarantined on a worker of its own, which then stops: what the test sends next waits for the next worker (started
 * with `runWorker(..., { taskQueue })`), whose first workflow task carries all of it, as a busy worker's task would.
 */
async function quarantinedThenNoWorker(
  release: Released,
  activities: object,
): Promise<{ handle: WorkflowHandle; taskQueue: string }> {
  const taskQueue = ownTaskQueue();
  const handle = await runWorker(
    w,
    activities,
    async (tq) => {
      const started = await startHold(w, tq, release);
      await untilQuarantined(started);
      return started;
    },
    { taskQueue },
  );
  return { handle, taskQueue };
}

/** Decisions as `npm run ops` sends them, naming what it recorded in the ledger (the stubbed ledger takes each). */
const approval = {
  approvedBy: 'alice@example.com',
  reason: 'endpoint fixed',
  ticket: 'OPS-1',
  decisionId: `dc_${'a'.repeat(32)}`,
};
const discarding = { by: 'bob@example.com', reason: 'merchant closed', decisionId: `dc_${'b'.repeat(32)}` };

describe('approveReplay', () => {
  it('as a signal: recorded, then a new policy run (the fast path again) delivers', async () => {
    const { release, activities, calls } = rejectedFirst();
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      await untilQuarantined(handle);
      expect(await deliveryStatusOf(handle)).toBe('quarantined');
      await handle.signal(approveReplaySignal, approval);
      expect(await handle.result()).toEqual({ release, delivery: { status: 'delivered', attempts: 1, policyRuns: 2 } });
      expect(await deliveryStatusHistory(w.env, handle.workflowId)).toEqual(['quarantined', 'pending', 'delivered']);
      expect((await status(handle)).ignoredSignals).toEqual([]);
    });
    expect(calls.quarantine).toEqual([
      { webhookId: release.webhookId, reason: 'rejected', detail: 'HTTP 400 from merchant m-1 (not retryable)' },
    ]);
    expect(calls.decide).toEqual([
      {
        webhookId: release.webhookId,
        policyRun: 1,
        decision: 'replay',
        by: approval.approvedBy,
        reason: approval.reason,
        ticket: 'OPS-1',
        decisionId: approval.decisionId,
      },
    ]);
    expect(calls.deliver.map((c) => [c.isLocal, c.input.policyRun])).toEqual([
      [true, 1],
      [true, 2],
    ]);
  });

  it("as an Update: answered once recorded, with the replay's stage; the new run delivers", async () => {
    const { release, activities, calls } = rejectedFirst();
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      await untilQuarantined(handle);
      const answer: DecisionAnswer = await handle.executeUpdate(approveReplayUpdate, {
        args: [{ ...approval, policyRun: 1 }],
      });
      expect(answer).toEqual({ decision: 'replay', policyRun: 1, stage: 'delivering' });
      // Answered after the ledger recorded it.
      expect(calls.decide).toHaveLength(1);
      expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered', policyRuns: 2 } });
      expect(await acceptedUpdates(handle)).toEqual(['approveReplay']);
      expect(await deliveryStatusHistory(w.env, handle.workflowId)).toEqual(['quarantined', 'pending', 'delivered']);
    });
    expect(calls.decide).toMatchObject([{ policyRun: 1, decision: 'replay', by: approval.approvedBy }]);
    expect(calls.deliver.map((c) => c.input.policyRun)).toEqual([1, 2]);
  });

  it('a replay that is quarantined again: the second quarantine is policy run 2, an approval for run 1 is stale', async () => {
    const { release, activities, calls } = rejectedFirst([
      failsWith('EndpointGone', 2, 'HTTP 410 from merchant m-1'),
      delivered(3),
    ]);
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      await untilQuarantined(handle);
      await handle.executeUpdate(approveReplayUpdate, { args: [approval] });
      expect(await untilQuarantined(handle, 2)).toMatchObject({
        reason: 'endpoint_gone',
        detail: 'HTTP 410 from merchant m-1',
      });
      expect(await refusal(handle.executeUpdate(approveReplayUpdate, { args: [{ ...approval, policyRun: 1 }] }))).toBe(
        'stale: for policy run 1, but the quarantine is policy run 2',
      );
      expect(await handle.executeUpdate(approveReplayUpdate, { args: [{ ...approval, policyRun: 2 }] })).toEqual({
        decision: 'replay',
        policyRun: 2,
        stage: 'delivering',
      });
      expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered', attempts: 3, policyRuns: 3 } });
      expect(await deliveryStatusHistory(w.env, handle.workflowId)).toEqual([
        'quarantined',
        'pending',
        'quarantined',
        'pending',
        'delivered',
      ]);
    });
    expect(calls.quarantine.map((q) => q.reason)).toEqual(['rejected', 'endpoint_gone']);
    expect(calls.decide.map((d) => [d.policyRun, d.decision])).toEqual([
      [1, 'replay'],
      [2, 'replay'],
    ]);
  });
});

describe('discard', () => {
  it('as a signal: discarded, nothing sent again', async () => {
    const { release, activities, calls } = rejectedFirst();
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      await untilQuarantined(handle);
      await handle.signal(discardSignal, discarding);
      expect(await handle.result()).toEqual({ release, delivery: { status: 'discarded', policyRuns: 1 } });
      expect(await status(handle)).toMatchObject({ stage: 'discarded', by: discarding.by, reason: discarding.reason });
      expect(await deliveryStatusOf(handle)).toBe('discarded');
      expect(await deliveryStatusHistory(w.env, handle.workflowId)).toEqual(['quarantined', 'discarded']);
    });
    expect(calls.decide).toEqual([{ webhookId: release.webhookId, policyRun: 1, decision: 'discard', ...discarding }]);
    expect(calls.deliver).toHaveLength(1);
  });

  it("sent as a quarantine continues as new: taken in the new run's first task, with the run it carries", async () => {
    const { release, activities, calls } = rejectedFirst();
    const now = await w.env.currentTimeMs();
    const since = new Date(now - HOUR).toISOString();
    const carried: DeliveryResume = {
      facts: {
        ...{ policyRun: 1, horizonMs: 72 * HOUR, leftMs: 71 * HOUR, local: false, busy: 0, attempt: 1, stepAt: now },
        quarantine: { reason: 'rejected', since, detail: 'HTTP 400', fourEyes: false, abandonsAt: now + 5 * HOUR },
      },
      deliveryStatus: 'quarantined',
      ignoredSignals: [],
    };
    await runWorker(w, activities, async (taskQueue) => {
      // A signal sent as a run continues as new is given to the new run's first task, with its input: as here.
      const handle = await w.env.client.workflow.signalWithStart(releaseExpiredHold, {
        taskQueue,
        workflowId: `hold-${release.holdId}-continued`,
        args: [
          {
            region: 'us',
            holdId: release.holdId,
            expiresAt: since,
            merchantId: 'm-1',
            resume: { release, delivery: carried },
          },
        ],
        signal: discardSignal,
        signalArgs: [discarding],
      });
      expect(await handle.result()).toEqual({ release, delivery: { status: 'discarded', policyRuns: 1 } });
      expect((await status(handle)).ignoredSignals).toEqual([]);
    });
    expect(calls.decide).toEqual([{ webhookId: release.webhookId, policyRun: 1, decision: 'discard', ...discarding }]);
    expect(calls.deliver).toHaveLength(0);
  });

  it('as an Update: answered with the discarded stage before the workflow closes', async () => {
    const { release, activities, calls } = rejectedFirst();
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      await untilQuarantined(handle);
      expect(await handle.executeUpdate(discardUpdate, { args: [discarding] })).toEqual({
        decision: 'discard',
        policyRun: 1,
        stage: 'discarded',
      });
      expect(await handle.result()).toMatchObject({ delivery: { status: 'discarded', policyRuns: 1 } });
      expect(await deliveryStatusOf(handle)).toBe('discarded');
    });
    expect(calls.decide).toMatchObject([{ decision: 'discard', by: discarding.by }]);
  });
});

describe('a decision the ledger does not hold', () => {
  it('is refused with why (an Update answers DecisionRefused; a signal, which nobody waits on, is kept as ignored) and the wait goes on: the decision the ledger holds then applies, as the ledger says', async () => {
    const refused = new Set(['lifted', 'minted']);
    const { release, activities, calls } = rejectedFirst([delivered(1)], {
      decide: (d): QuarantineDecisionAnswer =>
        refused.has(d.reason)
          ? { recorded: false, why: `decision ${d.decisionId} is for another webhook` }
          : { recorded: true, decision: d.decision, by: 'carol (verified)', reason: 'merchant confirmed' },
    });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      await untilQuarantined(handle);
      expect(await refusal(handle.executeUpdate(discardUpdate, { args: [{ ...discarding, reason: 'lifted' }] }))).toBe(
        `decision ${discarding.decisionId} is for another webhook`,
      );
      const minted = { ...discarding, reason: 'minted' };
      await handle.signal(discardSignal, minted);
      await eventually(
        () => status(handle),
        (s) => s.ignoredSignals.length === 1,
        "the signal's refusal kept",
      );
      const waiting = await status(handle);
      expect(waiting).toMatchObject({ stage: 'quarantined', policyRun: 1 });
      // Kept by its shape: the caller's words stay out of the status.
      const shape = { type: 'object', bytes: Buffer.byteLength(JSON.stringify(minted)) };
      expect(waiting.ignoredSignals.map((i) => [i.signal, i.payload, i.why])).toEqual([
        ['discard', shape, `decision ${discarding.decisionId} is for another webhook`],
      ]);
      expect(await deliveryStatusOf(handle)).toBe('quarantined');
      // The decision the ledger holds applies, and the workflow tells it as the ledger recorded it.
      expect(
        await handle.executeUpdate(discardUpdate, {
          args: [{ ...discarding, reason: 'held', decisionId: `dc_${'a'.repeat(32)}` }],
        }),
      ).toEqual({ decision: 'discard', policyRun: 1, stage: 'discarded' });
      expect(await handle.result()).toMatchObject({ delivery: { status: 'discarded', policyRuns: 1 } });
      expect(await status(handle)).toMatchObject({
        stage: 'discarded',
        by: 'carol (verified)',
        reason: 'merchant confirmed',
      });
    });
    expect(calls.decide.map((d) => [d.reason, d.decisionId])).toEqual([
      ['lifted', discarding.decisionId],
      ['minted', discarding.decisionId],
      ['held', `dc_${'a'.repeat(32)}`],
    ]);
  });
});

describe('two decisions in one workflow task', () => {
  it('two Updates: one applies, the other is refused (never both answered and one of them dropped)', async () => {
    const { release, activities, calls } = rejectedFirst();
    const { handle, taskQueue } = await quarantinedThenNoWorker(release, activities);
    const outcomes = Promise.allSettled([
      handle.executeUpdate(discardUpdate, { args: [discarding] }),
      handle.executeUpdate(approveReplayUpdate, { args: [approval] }),
    ]);
    await runWorker(
      w,
      activities,
      async () => {
        const settled = await outcomes;
        const answers = settled.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
        const refusals = settled.flatMap((o) =>
          o.status === 'rejected' ? [(o.reason as WorkflowUpdateFailedError).cause?.message] : [],
        );
        const result = await handle.result();
        expect(answers).toHaveLength(1);
        expect(refusals).toEqual([expect.stringMatching(/^already decided: (discard|replay) by /)]);
        // What the one answer said is what happened.
        expect(calls.decide.map((d) => d.decision)).toEqual([answers[0]!.decision]);
        expect(result.delivery?.status).toBe(answers[0]!.decision === 'discard' ? 'discarded' : 'delivered');
      },
      { taskQueue },
    );
  });

  it('two signals: the first applies, the second is kept as ignored with why (not silently dropped)', async () => {
    const { release, activities, calls } = rejectedFirst();
    const { handle, taskQueue } = await quarantinedThenNoWorker(release, activities);
    await handle.signal(discardSignal, discarding);
    await handle.signal(approveReplaySignal, approval);
    await runWorker(
      w,
      activities,
      async () => {
        const result = await handle.result();
        expect(calls.decide.map((d) => d.decision)).toEqual(['discard']);
        expect(result.delivery?.status).toBe('discarded');
        expect((await status(handle)).ignoredSignals).toMatchObject([
          { signal: 'approveReplay', why: `already decided: discard by ${discarding.by}` },
        ]);
      },
      { taskQueue },
    );
  });
});

describe('nobody decides', () => {
  it('abandoned once the quarantine timeout has passed (time skipped), DeliveryStatus abandoned', async () => {
    const { release, activities, calls } = rejectedFirst();
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      const quarantined = await untilQuarantined(handle);
      const start = await w.env.currentTimeMs();
      expect(await handle.result()).toEqual({ release, delivery: { status: 'abandoned', policyRuns: 1 } });
      expect(await w.env.currentTimeMs()).toBeGreaterThanOrEqual(start + QUARANTINE_TIMEOUT_MS - 60_000);
      expect(await status(handle)).toMatchObject({
        stage: 'abandoned',
        reason: 'rejected',
        since: (quarantined as { since: string }).since,
      });
      expect(await deliveryStatusHistory(w.env, handle.workflowId)).toEqual(['quarantined', 'abandoned']);
    });
    expect(calls.decide).toEqual([
      {
        webhookId: release.webhookId,
        policyRun: 1,
        decision: 'abandon',
        by: 'hold-sweeper',
        reason: expect.any(String),
      },
    ]);
  });
});

describe('decisions that do not apply', () => {
  it('malformed, stale, or while not quarantined: an Update is refused by its validator, a signal is kept with why', async () => {
    const release = released();
    const { activities, calls } = stubActivities(w, {
      release,
      decideWithinMs: QUARANTINE_TIMEOUT_MS,
      deliver: [held('paused'), failsWith('WebhookRejected', 1, 'HTTP 400')],
    });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      // Held (time not skipped): not waiting for a decision.
      await reachesStage(handle, 'held');
      expect(await refusal(handle.executeUpdate(approveReplayUpdate, { args: [approval] }))).toBe(
        'not waiting for a decision (stage held)',
      );
      await handle.signal(discardSignal, discarding);
      const heldStatus = await eventually(
        () => status(handle),
        (s) => s.ignoredSignals.length === 1,
        'the signal ignored',
      );
      expect(heldStatus.ignoredSignals).toEqual([
        {
          signal: 'discard',
          payload: { type: 'object', bytes: Buffer.byteLength(JSON.stringify(discarding)) },
          at: expect.any(String),
          stage: 'held',
          why: 'not waiting for a decision (stage held)',
        },
      ]);

      // Re-checked (time skipped to the re-check: the stub rejects it), and quarantined.
      await w.env.sleep(60_000);
      await untilQuarantined(handle);
      expect(
        await refusal(handle.executeUpdate(approveReplayUpdate, { args: [{ approvedBy: 'alice' } as never] })),
      ).toMatch(/^malformed approveReplay: "reason" must be/);
      expect(await refusal(handle.executeUpdate(discardUpdate, { args: [{ ...discarding, policyRun: 2 }] }))).toBe(
        'stale: for policy run 2, but the quarantine is policy run 1',
      );
      await handle.signal(approveReplaySignal, null);
      await handle.signal(approveReplaySignal, { ...approval, policyRun: 0 });
      const after = await eventually(
        () => status(handle),
        (s) => s.ignoredSignals.length === 3,
        'both signals ignored',
      );
      expect(after.ignoredSignals.slice(1).map(({ signal, stage, why }) => ({ signal, stage, why }))).toEqual([
        {
          signal: 'approveReplay',
          stage: 'quarantined',
          why: 'malformed approveReplay: expected a JSON object, got null',
        },
        {
          signal: 'approveReplay',
          stage: 'quarantined',
          why: 'malformed approveReplay: "policyRun", when given, must be a positive integer',
        },
      ]);
      // None of them entered history as an accepted Update, and the quarantine still waits: a valid one applies.
      expect(await acceptedUpdates(handle)).toEqual([]);
      expect(await handle.executeUpdate(discardUpdate, { args: [discarding] })).toMatchObject({ decision: 'discard' });
      await handle.result();
    });
    expect(calls.decide).toMatchObject([{ decision: 'discard' }]);
  });
});

describe('four eyes (quarantineDelivery answers fourEyes: true)', () => {
  const FOUR_EYES = /^four eyes: an approval needs a replay request approved by a second person/;

  it('an approval without a replay request is refused (Update) or ignored (signal); one naming a request is recorded as the ledger says', async () => {
    const { release, activities, calls } = rejectedFirst([delivered(1)], { fourEyes: true });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      await untilQuarantined(handle);
      expect(await refusal(handle.executeUpdate(approveReplayUpdate, { args: [approval] }))).toMatch(FOUR_EYES);
      await handle.signal(approveReplaySignal, approval);
      const ignored = await eventually(
        () => status(handle),
        (s) => s.ignoredSignals.length === 1,
        'the signal ignored',
      );
      expect(ignored.ignoredSignals[0]).toMatchObject({
        signal: 'approveReplay',
        payload: { type: 'object', bytes: Buffer.byteLength(JSON.stringify(approval)) },
        stage: 'quarantined',
        why: expect.stringMatching(FOUR_EYES),
      });
      expect(calls.decide).toEqual([]);

      const answer = await handle.executeUpdate(approveReplayUpdate, {
        args: [{ approvedBy: approval.approvedBy, reason: approval.reason, replayRequestId: 'rr-1' }],
      });
      expect(answer).toEqual({ decision: 'replay', policyRun: 1, stage: 'delivering' });
      expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered', policyRuns: 2 } });
      expect(await acceptedUpdates(handle)).toEqual(['approveReplay']);
    });
    expect(calls.decide).toMatchObject([
      { policyRun: 1, decision: 'replay', by: approval.approvedBy, replayRequestId: 'rr-1' },
    ]);
  });

  it('a replay request the ledger does not confirm: the Update fails with why, the quarantine keeps waiting', async () => {
    const { release, activities, calls } = rejectedFirst([delivered(1)], {
      fourEyes: true,
      decide: (d) =>
        d.replayRequestId
          ? { recorded: false, why: `replay request ${d.replayRequestId} was approved by its own requester` }
          : undefined,
    });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      await untilQuarantined(handle);
      expect(
        await refusal(
          handle.executeUpdate(approveReplayUpdate, {
            args: [{ approvedBy: approval.approvedBy, reason: approval.reason, replayRequestId: 'rr-2' }],
          }),
        ),
      ).toBe('replay request rr-2 was approved by its own requester');
      expect((await status(handle)).stage).toBe('quarantined');
      await handle.signal(discardSignal, discarding);
      expect(await handle.result()).toMatchObject({ delivery: { status: 'discarded', policyRuns: 1 } });
    });
    expect(calls.decide).toMatchObject([{ decision: 'replay' }, { decision: 'discard' }]);
  });
});

describe('the abandon race', () => {
  it.each(['Update', 'signal'])(
    'an approval (%s) in the same workflow task as the timeout wins over the abandon, and is carried out',
    async (via) => {
      const { release, activities, calls } = rejectedFirst();
      const { handle, taskQueue } = await quarantinedThenNoWorker(release, activities);
      // No worker: the timeout fires and its workflow task waits, then the approval arrives; the next worker's first
      // task carries both.
      await w.env.sleep(QUARANTINE_TIMEOUT_MS + 1_000);
      const answer =
        via === 'Update'
          ? handle.executeUpdate(approveReplayUpdate, { args: [approval] })
          : handle.signal(approveReplaySignal, approval);
      await runWorker(
        w,
        activities,
        async () => {
          if (via === 'Update') expect(await answer).toEqual({ decision: 'replay', policyRun: 1, stage: 'delivering' });
          else await answer;
          expect(await handle.result()).toEqual({
            release,
            delivery: { status: 'delivered', attempts: 1, policyRuns: 2 },
          });
          expect(await deliveryStatusHistory(w.env, handle.workflowId)).toEqual([
            'quarantined',
            'pending',
            'delivered',
          ]);
          // The one task took both: the signal came in before it started, the Update was accepted as it completed.
          const events = (await handle.fetchHistory()).events ?? [];
          const fired = events.findIndex((e) => e.timerFiredEventAttributes);
          const message = events.findIndex(
            (e) => e.workflowExecutionSignaledEventAttributes ?? e.workflowExecutionUpdateAcceptedEventAttributes,
          );
          expect(message).toBeGreaterThan(fired);
          expect(events.slice(fired, message).filter((e) => e.workflowTaskCompletedEventAttributes)).toHaveLength(
            via === 'Update' ? 1 : 0,
          );
        },
        { taskQueue },
      );
      expect(calls.decide.map((d) => d.decision)).toEqual(['replay']);
    },
  );

  it('an approval that arrives while the abandon is being recorded is refused, never answered and dropped', async () => {
    const abandonRecorded = gate();
    const { release, activities, calls } = rejectedFirst([delivered(1)], {
      decide: (d) => (d.decision === 'abandon' ? abandonRecorded.promise : undefined),
    });
    await runWorker(w, activities, async (taskQueue) => {
      const handle = await startHold(w, taskQueue, release);
      await untilQuarantined(handle);
      // Skip exactly past the timeout: the abandon is settled, and decideQuarantine('abandon') holds in the stub.
      await w.env.sleep(QUARANTINE_TIMEOUT_MS + 1_000);
      await eventually(
        async () => calls.decide.length,
        (n) => n === 1,
        'decideQuarantine(abandon) in flight',
      );

      expect(await refusal(handle.executeUpdate(approveReplayUpdate, { args: [approval] }))).toBe(
        'already decided: abandon by hold-sweeper',
      );
      await handle.signal(approveReplaySignal, approval);
      const during: HoldStatus = await eventually(
        () => status(handle),
        (s) => s.ignoredSignals.length === 1,
        'the late signal ignored',
      );
      expect(during.ignoredSignals[0]).toMatchObject({
        signal: 'approveReplay',
        why: 'already decided: abandon by hold-sweeper',
      });

      abandonRecorded.open();
      // Let the activity's completion reach the server before time may skip again (its start-to-close is 30 s).
      await reachesStage(handle, 'abandoned');
      expect(await handle.result()).toEqual({ release, delivery: { status: 'abandoned', policyRuns: 1 } });
      expect(await acceptedUpdates(handle)).toEqual([]);
      expect(await deliveryStatusHistory(w.env, handle.workflowId)).toEqual(['quarantined', 'abandoned']);
    });
    expect(calls.decide.map((d) => d.decision)).toEqual(['abandon']);
    expect(calls.deliver).toHaveLength(1);
  });
});
