/**
 * Records a held delivery that is sent `merchantResumed` while the attempt before its held wait runs, as a build writes
 * it: `GOLDEN_BUILD=<revision> GOLDEN_RELEASE=<release> npx vitest run --project golden
 * test/golden/record-wakeups.test.ts` (that revision's workflow code, today's activities); without GOLDEN_BUILD, the
 * working tree's. Added to test/golden/histories/<release>/ as `releaseExpiredHold-wakeups-<n>`.
 *
 * The merchant answers 503 (the fast path fails, so every later attempt is the regular activity), then is paused: the
 * delivery waits held. The next re-check is stalled in the ledger (the merchants table locked, in this recorder's own
 * database) until the signal has landed; it then answers held again. A build that ends the wait for that resume
 * re-checks at once, one that does not waits its timer; either way the merchant is then resumed, signalled, and the
 * webhook is delivered, so the whole story is in one history.
 */
import path from 'node:path';
import type { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { merchantResumedSignal, statusQuery } from '../../src/contracts/messages.js';
import { isoUtc } from '../../src/db/sql.js';
import { pauseMerchant, resumeMerchant } from '../../src/sql/merchants.js';
import { releaseExpiredHold } from '../../src/workflows/release-expired-hold.js';
import { addRecording, goldenRelease, goldenSetDir } from '../support/golden.js';
import { openHarness, type Harness } from '../support/harness.js';
import { holdWorkflowIdOf, seedNight } from '../support/ledger.js';
import { recordingBuild } from '../support/variant.js';

const BUILD = process.env.GOLDEN_BUILD;
const OUT = goldenSetDir(goldenRelease(BUILD));

let harness: Harness;
beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await harness?.close();
});

type Event = temporal.api.history.v1.IHistoryEvent;

it(`records a merchantResumed sent during the attempt before a held wait, as build ${BUILD ?? 'HEAD (working tree)'} writes it`, async () => {
  const us = await harness.region('us');
  await harness.startWorker(us, undefined, undefined, await recordingBuild(BUILD));
  const night = await seedNight(us.pool, 'us', `${harness.id}wk`, { expired: 1, merchants: 1 }, harness.merchants);
  const merchant = night.merchantIds[0]!;
  const secrets = [night.secrets.get(merchant)!];
  harness.merchants.script(merchant, { secrets, responses: [{ status: 503 }] });
  const hold = night.expired[0]!.id;
  const expiresAt = (
    await us.pool.query<{ e: string }>(`SELECT ${isoUtc('expires_at')} AS e FROM auth_holds WHERE id = $1`, [hold])
  ).rows[0]!.e;
  const handle = await us.client.workflow.start(releaseExpiredHold, {
    taskQueue: us.config.taskQueue,
    workflowId: await holdWorkflowIdOf(us.pool, 'us', hold),
    args: [{ region: 'us', holdId: hold, expiresAt, merchantId: merchant }],
  });
  const events = async (): Promise<Event[]> => (await handle.fetchHistory()).events ?? [];

  await expect
    .poll(
      async () =>
        (await us.pool.query(`SELECT 1 FROM delivery_attempts WHERE status_code = 503 LIMIT 1`)).rowCount ?? 0,
      { timeout: 30_000, interval: 50 },
    )
    .toBe(1);
  await pauseMerchant(us.pool, merchant, 'maintenance');
  await expect.poll(async () => (await handle.query(statusQuery)).stage, { timeout: 60_000 }).toBe('held');

  // The next re-check blocks on the merchants table until the signal is in the history.
  const lock = await us.pool.connect();
  let signalledAt: number;
  try {
    await lock.query('BEGIN');
    await lock.query('LOCK TABLE merchants IN ACCESS EXCLUSIVE MODE');
    await expect
      .poll(
        async () =>
          (
            await us.pool.query<{ n: number }>(
              `SELECT count(*)::integer AS n FROM pg_stat_activity
                WHERE wait_event_type = 'Lock' AND datname = current_database()`,
            )
          ).rows[0]!.n,
        { timeout: 60_000, interval: 50 },
      )
      .toBeGreaterThan(0);
    await handle.signal(merchantResumedSignal);
    await expect
      .poll(async () => (await events()).findIndex((e) => e.workflowExecutionSignaledEventAttributes), {
        timeout: 30_000,
      })
      .toBeGreaterThanOrEqual(0);
    const history = await events();
    signalledAt = history.findIndex((e) => e.workflowExecutionSignaledEventAttributes);
    // Sent during the attempt: no wait began between its scheduling and the signal.
    const attemptAt = history
      .slice(0, signalledAt)
      .map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name)
      .lastIndexOf('deliverWebhook');
    expect(attemptAt).toBeGreaterThanOrEqual(0);
    expect(history.slice(attemptAt, signalledAt).some((e) => e.timerStartedEventAttributes)).toBe(false);
  } finally {
    await lock.query('COMMIT').catch(() => undefined);
    lock.release();
  }

  // Held again; the next re-check is scheduled, at once or after the wait's timer.
  const recheckAfter = (history: Event[]) =>
    history
      .slice(signalledAt + 1)
      .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'deliverWebhook').length;
  await expect.poll(async () => recheckAfter(await events()), { timeout: 60_000 }).toBeGreaterThanOrEqual(1);
  const timerFired = (await events()).slice(signalledAt + 1).some((e) => e.timerFiredEventAttributes);
  console.log(`[golden] a resume sent during the attempt: ${timerFired ? 'the wait ran its timer' : 'ended the wait'}`);

  await resumeMerchant(us.pool, merchant);
  harness.merchants.script(merchant, { secrets, responses: [{ status: 200 }] });
  await handle.signal(merchantResumedSignal);
  expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered' } });

  const file = await addRecording(OUT, 'releaseExpiredHold-wakeups', handle.workflowId, await handle.fetchHistory());
  console.log(`[golden] ${file} of build ${BUILD ?? 'HEAD'} in ${path.relative(process.cwd(), OUT)}`);
});
