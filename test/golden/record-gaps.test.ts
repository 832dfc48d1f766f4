/**
 * Records a hold's event workflow (`applyHoldEvents`) through every way out of a gap, as a build writes it:
 * `npm run golden:record` (with record.test.ts), or for an earlier build `GOLDEN_BUILD=<revision> npx vitest run
 * --project golden test/golden/record-gaps.test.ts`, which bundles that revision's workflow code (today's activities).
 * The histories are added to test/golden/histories/<release>/ (the release is GOLDEN_RELEASE, else GOLDEN_BUILD, else
 * HEAD), next to what record.test.ts wrote, each named after the waiting point it leaves and how:
 *
 * - waiting_for_predecessor, left by the missing event (filled), by an operator's skip, by the gap timer (stopped);
 * - stopped_for_human, left by the missing event, by a skip.
 *
 * Each workflow then goes idle and completes (a short idle wait), so its whole story is in one history.
 */
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ProcessorEvent } from '../../dev/fake-processor.js';
import { holdEventsWorkflowId } from '../../src/contracts/ids.js';
import { holdEventsStatusQuery, skipMissingEventSignal, type HoldEventsStage } from '../../src/contracts/processor.js';
import { addRecording, goldenRelease, goldenSetDir } from '../support/golden.js';
import { openHarness, type Harness } from '../support/harness.js';
import { seedNight } from '../support/ledger.js';
import { startTestReceiver } from '../support/processor.js';
import { recordingBuild } from '../support/variant.js';

const BUILD = process.env.GOLDEN_BUILD;
const RELEASE = goldenRelease(BUILD);
const OUT = goldenSetDir(RELEASE);
/** Short enough to record in seconds, long enough that a signal sent at once lands inside the wait. */
const GAP_WAIT_MS = 4_000;

let harness: Harness;
beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await harness?.close();
});

it(`records applyHoldEvents leaving each gap wait, as build ${BUILD ?? 'HEAD (working tree)'} writes it`, async () => {
  const us = await harness.region('us');
  await harness.startWorker(us, undefined, undefined, await recordingBuild(BUILD));
  const night = await seedNight(
    us.pool,
    'us',
    `${harness.id}gap`,
    { expired: 0, future: 5, merchants: 1 },
    harness.merchants,
  );
  const { processor, close } = await startTestReceiver(us, { gapWaitMs: GAP_WAIT_MS, workflowIdleMs: 1_000 });
  const event = (holdId: string, sequence: number): ProcessorEvent => ({
    eventId: `evt_${holdId}_${sequence}`,
    holdId,
    sequence,
    type: 'hold.incremented',
    amountMinor: 10 * sequence,
    currency: 'USD',
  });
  const handleOf = (holdId: string) => us.client.workflow.getHandle(holdEventsWorkflowId('us', holdId));
  const reaches = (holdId: string, stage: HoldEventsStage['stage']) =>
    expect
      .poll(
        async () =>
          (
            await handleOf(holdId)
              .query(holdEventsStatusQuery)
              .catch(() => undefined)
          )?.stage.stage,
        { timeout: 30_000 },
      )
      .toBe(stage);
  const skip = (holdId: string) =>
    handleOf(holdId).signal(skipMissingEventSignal, { sequence: 1, by: 'ops@example.com', reason: 'never issued' });

  const [filledWhileWaiting, skippedWhileWaiting, filledAfterStop, skippedAfterStop] = night.future.map(
    (h) => h.id,
  ) as [string, string, string, string];
  const scenarios: [string, string][] = [
    [filledWhileWaiting, 'applyHoldEvents-waiting_for_predecessor-filled'],
    [skippedWhileWaiting, 'applyHoldEvents-waiting_for_predecessor-skip'],
    [filledAfterStop, 'applyHoldEvents-stopped_for_human-filled'],
    [skippedAfterStop, 'applyHoldEvents-stopped_for_human-skip'],
  ];
  try {
    for (const [holdId] of scenarios) expect((await processor.send(event(holdId, 2))).status).toBe(202);
    for (const [holdId] of scenarios) await reaches(holdId, 'waiting_for_predecessor');

    // Inside the wait: the missing event for one, a skip for another (a build that does not honour a skip during the
    // wait stops at the gap all the same, and is skipped again after it).
    expect((await processor.send(event(filledWhileWaiting, 1))).status).toBe(202);
    await skip(skippedWhileWaiting);
    for (const [holdId] of [scenarios[2]!, scenarios[3]!]) await reaches(holdId, 'stopped_for_human');
    expect((await processor.send(event(filledAfterStop, 1))).status).toBe(202);
    await skip(skippedAfterStop);
    // A build that dropped the skip sent during the wait stops at the gap: skip it again there, once.
    let skippedAgain = false;
    const skipWhenStopped = async () => {
      const { status } = await handleOf(skippedWhileWaiting).describe();
      if (status.name !== 'RUNNING') return status.name;
      const { stage } = await handleOf(skippedWhileWaiting).query(holdEventsStatusQuery);
      if (stage.stage === 'stopped_for_human' && !skippedAgain) {
        skippedAgain = true;
        await skip(skippedWhileWaiting);
      }
      return stage.stage;
    };
    await expect.poll(skipWhenStopped, { timeout: 30_000 }).toBe('COMPLETED');
    console.log(
      `[golden] a skip sent during the wait was ${skippedAgain ? 'dropped: skipped again after the stop' : 'honoured'}`,
    );
    for (const [holdId] of scenarios)
      await expect
        .poll(async () => (await handleOf(holdId).describe()).status.name, { timeout: 30_000 })
        .toBe('COMPLETED');
  } finally {
    await close();
  }

  for (const [holdId, name] of scenarios) {
    const handle = handleOf(holdId);
    await addRecording(OUT, name, handle.workflowId, await handle.fetchHistory());
  }
  console.log(
    `[golden] ${scenarios.length} gap histories of build ${BUILD ?? 'HEAD'} in ${path.relative(process.cwd(), OUT)}`,
  );
});
