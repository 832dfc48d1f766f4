/**
 * Records the golden histories of the current release: `npm run golden:record` (a vitest project of its own, not
 * part of `npm test`). One real night on the shared dev server drives a hold workflow into every state a deploy can
 * meet it in, and a sweep through several pages with a concurrent duplicate, then writes each run's history (as
 * `temporal workflow show --output json` does) to test/golden/histories/<release>/, named after its state.
 * test/integration/golden-histories.test.ts replays every committed set against the current code.
 */
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { approveReplaySignal, discardSignal, statusQuery, type HoldStage } from '../../src/contracts/messages.js';
import { isoUtc } from '../../src/db/sql.js';
import { releaseExpiredHold } from '../../src/workflows/release-expired-hold.js';
import type { ReleaseExpiredHoldResult } from '../../src/contracts/domain.js';
import { holdEventsWorkflowId } from '../../src/contracts/ids.js';
import { holdEventsStatusQuery } from '../../src/contracts/processor.js';
import type { ProcessorEvent } from '../../dev/fake-processor.js';
import { startTestReceiver } from '../support/processor.js';
import type { HoldSeed } from '../../dev/seed.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { addRecording, goldenRelease, goldenSetDir } from '../support/golden.js';
import { openHarness, type Harness } from '../support/harness.js';
import { holdWorkflowIdOf, recordedDecision, seedNight } from '../support/ledger.js';

/** The release these histories belong to: the git revision they were recorded from (or GOLDEN_RELEASE). */
const RELEASE = goldenRelease();
const OUT = goldenSetDir(RELEASE);

let harness: Harness;
beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await harness?.close();
});

it('records the golden histories of this release in every waiting state', async () => {
  const us = await harness.region('us');
  await harness.startWorker(us);
  const night = await seedNight(
    us.pool,
    'us',
    `${harness.id}g`,
    { expired: 24, future: 8, merchants: 8 },
    harness.merchants,
  );
  const m = night.merchantIds;
  const script = (merchant: string, responses: Parameters<Harness['merchants']['script']>[1]['responses']) =>
    harness.merchants.script(merchant, { secrets: [night.secrets.get(merchant)!], responses });
  // m0: 200 (the fast path). m1: 503 twice, then 200 (Temporal's retries). m2: 503 forever (backing off). m3: 400
  // (quarantined: one approved, one discarded, one approved into a second run that backs off, none left waiting
  // but by m7's). m4: paused (held). m5: 429 with Retry-After (honouring it). m6: 1 per 20 s (waiting for budget).
  script(m[1]!, [{ status: 503 }, { status: 503 }, { status: 200 }]);
  script(m[2]!, [{ status: 503 }]);
  script(m[3]!, [{ status: 400 }]);
  script(m[5]!, [{ status: 429, retryAfter: '600' }]);
  script(m[7]!, [{ status: 422 }]);
  await us.pool.query(`UPDATE merchants SET status = 'paused' WHERE id = $1`, [m[4]]);
  await us.pool.query(`UPDATE merchants SET rate_per_second = 0.05, burst = 1 WHERE id = $1`, [m[6]]);
  // Two sweeps at once, 7 holds a page: several continue-as-new runs, and children the other sweep already started.
  const sweep = (n: number) =>
    us.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-golden-${n}`,
      args: [{ region: 'us', pageSize: 7, releaseWaitMs: 60_000 }],
    });
  const sweeps = await Promise.all([sweep(1), sweep(2)]);
  expect(sweeps[0].alreadyStarted + sweeps[1].alreadyStarted).toBeGreaterThan(0);

  const holdsOf = async (merchantId: string) =>
    (
      await us.pool.query<{ id: string }>(
        'SELECT id FROM auth_holds WHERE merchant_id = $1 AND expires_at <= now() ORDER BY id',
        [merchantId],
      )
    ).rows.map((r) => r.id);
  const handleOf = async (holdId: string) =>
    us.client.workflow.getHandle(await holdWorkflowIdOf(us.pool, 'us', holdId));
  const statusOf = async (holdId: string) => (await handleOf(holdId)).query(statusQuery);
  const reaches = async (holdIds: string[], stage: HoldStage['stage']) =>
    expect
      .poll(async () => (await Promise.all(holdIds.map(async (id) => (await statusOf(id)).stage))).includes(stage), {
        timeout: 30_000,
      })
      .toBe(true);

  const [approved, discarded, replayedAgain] = (await holdsOf(m[3]!)) as [string, string, string];
  for (const id of [approved, discarded, replayedAgain]) await reaches([id], 'quarantined');
  script(m[3]!, [{ status: 200 }]);
  // Decisions as signals, each recorded in the ledger first (what the operator CLI does before it sends one).
  const decided = <K extends 'approveReplay' | 'discard'>(holdId: string, kind: K, by: string, reason: string) =>
    recordedDecision(us.pool, holdId, kind, by, reason);
  await (
    await handleOf(approved)
  ).signal(approveReplaySignal, await decided(approved, 'approveReplay', 'alice', 'merchant fixed its parser'));
  await (
    await handleOf(discarded)
  ).signal(discardSignal, await decided(discarded, 'discard', 'bob', 'merchant offboarded'));
  await (await handleOf(approved)).result();
  await (await handleOf(discarded)).result();
  script(m[3]!, [{ status: 503 }]);
  await (
    await handleOf(replayedAgain)
  ).signal(approveReplaySignal, await decided(replayedAgain, 'approveReplay', 'carol', 'try again'));
  await expect
    .poll(async () => (await statusOf(replayedAgain)).stage === 'backing_off' && (await statusOf(replayedAgain)), {
      timeout: 30_000,
    })
    .toMatchObject({ policyRun: 2 });

  // Abandoned: a hold workflow started directly on a worker whose quarantines wait 2 s (a 422 merchant quarantines it).
  const rejectedBySweep = await holdsOf(m[7]!);
  const [abandonedHold] = rejectedBySweep as [string];
  const copy = `${abandonedHold}_ab`;
  await us.pool.query(
    `INSERT INTO auth_holds (id, account_id, merchant_id, amount_minor, currency, state, expires_at)
     SELECT $2, account_id, merchant_id, amount_minor, currency, 'active', now() - interval '1 minute' FROM auth_holds WHERE id = $1`,
    [abandonedHold, copy],
  );
  await us.pool.query(
    'UPDATE accounts SET held_minor = held_minor + h.amount_minor FROM auth_holds h WHERE h.id = $1 AND accounts.id = h.account_id',
    [copy],
  );
  const expiresAt = (
    await us.pool.query<{ e: string }>(`SELECT ${isoUtc('expires_at')} AS e FROM auth_holds WHERE id = $1`, [copy])
  ).rows[0]!.e;
  const abandoning = await harness.abandoningAfter(us, 2_000);
  await us.client.workflow.execute(releaseExpiredHold, {
    taskQueue: abandoning.config.taskQueue,
    workflowId: `hold-abandoned-${harness.id}`,
    args: [{ region: 'us', holdId: copy, expiresAt, merchantId: m[7]! }],
  });

  // Failed and retrying (m2): past the fast path's backoff, in Temporal's retries of the regular activity.
  await expect
    .poll(
      async () =>
        (await Promise.all((await holdsOf(m[2]!)).map(statusOf))).some((s) => s.lastAttempt?.outcome === 'HTTP 503'),
      {
        timeout: 30_000,
      },
    )
    .toBe(true);
  await reaches(await holdsOf(m[5]!), 'honouring_retry_after');
  await reaches(await holdsOf(m[6]!), 'waiting_for_budget');
  await reaches(rejectedBySweep, 'quarantined');
  // Held, and re-checked at least twice (two fired timers) so the history shows the re-check loop.
  const [held] = (await holdsOf(m[4]!)) as [string];
  await expect
    .poll(
      async () =>
        ((await (await handleOf(held)).fetchHistory()).events ?? []).filter((e) => e.timerFiredEventAttributes).length,
      {
        timeout: 30_000,
      },
    )
    .toBeGreaterThanOrEqual(2);

  // Processor events (docs/processor-events.md): a hold's event workflow up to date and one stopped at a gap; the
  // webhooks they write,
  // delivered and quarantined (m7 answers 422); a late capture of a released hold.
  const { processor, close: closeReceiver } = await startTestReceiver(us, { gapWaitMs: 2_000 });
  const [upToDate, gapped, , , , , , quarantinedEvent] = night.future as HoldSeed[];
  const lateCaptured = night.expired.find((h) => h.merchantId === m[0])!.id;
  const event = (
    holdId: string,
    sequence: number,
    type: ProcessorEvent['type'],
    amountMinor?: number,
  ): ProcessorEvent => ({
    eventId: `evt_${holdId}_${sequence}`,
    holdId,
    sequence,
    type,
    ...(amountMinor === undefined ? {} : { amountMinor, currency: 'USD' }),
  });
  for (const e of [
    event(upToDate!.id, 1, 'hold.incremented', 100),
    event(upToDate!.id, 2, 'hold.captured', 50),
    event(gapped!.id, 2, 'hold.reversed'),
    event(quarantinedEvent!.id, 1, 'hold.captured', 10),
    event(lateCaptured, 1, 'hold.captured', 10),
  ])
    expect((await processor.send(e)).status).toBe(202);
  const eventsOf = (holdId: string) => us.client.workflow.getHandle(holdEventsWorkflowId('us', holdId));
  await expect
    .poll(async () => (await eventsOf(upToDate!.id).query(holdEventsStatusQuery)).stage.stage, { timeout: 30_000 })
    .toBe('idle');
  await expect
    .poll(async () => (await eventsOf(gapped!.id).query(holdEventsStatusQuery)).stage.stage, { timeout: 30_000 })
    .toBe('stopped_for_human');
  const undelivered = async () =>
    (
      await us.pool.query(
        `SELECT count(*)::integer AS n FROM webhook_deliveries WHERE event_type <> 'hold.released' AND status = 'pending'`,
      )
    ).rows[0].n;
  await expect.poll(undelivered, { timeout: 30_000 }).toBe(0);
  await closeReceiver();

  const written: string[] = [];
  const taskQueues = `TaskQueue = '${us.config.taskQueue}' OR TaskQueue = '${abandoning.config.taskQueue}'`;
  for await (const execution of us.client.workflow.list({ query: taskQueues })) {
    const handle = us.client.workflow.getHandle(execution.workflowId, execution.runId);
    let state = execution.status.name.toLowerCase();
    if (execution.type === 'applyHoldEvents') {
      state = execution.status.name === 'RUNNING' ? (await handle.query(holdEventsStatusQuery)).stage.stage : state;
    } else if (execution.type === 'releaseExpiredHold' || execution.type === 'deliverHoldEvent') {
      if (execution.status.name === 'RUNNING') {
        const status = await handle.query(statusQuery);
        state = `${status.stage}${'policyRun' in status && status.policyRun > 1 ? `-run-${status.policyRun}` : ''}`;
      } else {
        const result = (await handle.result()) as {
          delivery?: ReleaseExpiredHoldResult['delivery'];
          release?: { status: string };
        };
        state = `${state}-${result.delivery?.status ?? result.release?.status}${result.delivery && 'policyRuns' in result.delivery && result.delivery.policyRuns > 1 ? '-replayed' : ''}`;
      }
    }
    written.push(
      await addRecording(OUT, `${execution.type}-${state}`, execution.workflowId, await handle.fetchHistory()),
    );
  }
  console.log(`[golden] ${written.length} histories of release ${RELEASE} in ${path.relative(process.cwd(), OUT)}`);
  expect(written.length).toBeGreaterThan(20);
});
