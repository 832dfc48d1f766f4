/**
 * Records what record.test.ts's night does not reach, so that every cell of test/support/waiting-points.ts has a
 * recording of this release (`npm run golden:record`; the histories are added to test/golden/histories/<release>/):
 *
 * - a hold's release answering each way (not expired, not found, rejected, settled by the processor, already
 *   released with its webhook delivered or discarded elsewhere), and retrying on durable timers while the ledger fails;
 * - a delivery's rarer turns: behind an earlier webhook of its hold, the fast path failing unexpectedly, the regular
 *   activity answering scheduled, throttled or held, its retries running out, a paused merchant resumed by signal,
 *   decisions by Update, a decision naming a replay request, a signal that did not apply;
 * - a hold's event workflow woken from idle, told of an event the ledger does not have, skipped by Update;
 * - continue-as-new of a held delivery and of an event workflow, on a server of its own that suggests continuing as new
 *   after a few dozen events (the product's own budget is 2,000: hours of a real night).
 *
 * Faults the night needs and a merchant cannot cause (the ledger failing one hold's writes) are injected with a
 * trigger in this recorder's own ledger database, never in the product.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadDevConfig } from '../../dev/dev-config.js';
import type { ProcessorEvent } from '../../dev/fake-processor.js';
import { startDevServer, type DevServer } from '../../dev/temporal-dev-server.js';
import type { HoldSeed } from '../../dev/seed.js';
import { holdEventsWorkflowId } from '../../src/contracts/ids.js';
import {
  approveReplaySignal,
  discardSignal,
  merchantResumedSignal,
  statusQuery,
  type HoldStage,
} from '../../src/contracts/messages.js';
import { holdEventsStatusQuery, processorEventSignal, type HoldEventsStage } from '../../src/contracts/processor.js';
import { isoUtc } from '../../src/db/sql.js';
import {
  approveHold,
  approveReplayRequest,
  discardHold,
  previewReplay,
  type OpsContext,
} from '../../src/operations/operations.js';
import { skipMissingEvent } from '../../src/operations/processor-events.js';
import { pauseMerchant, resumeMerchant } from '../../src/sql/merchants.js';
import { releaseExpiredHold } from '../../src/workflows/release-expired-hold.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { addRecordings, goldenRelease, goldenSetDir } from '../support/golden.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { holdWorkflowIdOf, recordedDecision, seedNight } from '../support/ledger.js';
import { startTestReceiver } from '../support/processor.js';
import { TEST_NAMESPACES } from '../integration/global-setup.js';

const RELEASE = goldenRelease();
const OUT = goldenSetDir(RELEASE);

let harness: Harness;
let ownServer: DevServer | undefined;
let ownHarness: Harness | undefined;
beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await ownHarness?.close();
  await ownServer?.stop();
  await harness?.close();
});

type Responses = NonNullable<Parameters<Harness['merchants']['script']>[1]['responses']>;

/**
 * Injected ledger faults: a hold listed in `golden_faults` with `table` fails every update of that table's rows of the
 * hold (`auth_holds`: its release; `webhook_deliveries`: its webhooks' admission to the merchant's budget).
 */
async function installFaults(region: TestRegion) {
  await region.pool.query(`
    CREATE TABLE golden_faults (hold_id text, table_name text, PRIMARY KEY (hold_id, table_name));
    CREATE FUNCTION golden_fault() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF EXISTS (SELECT 1 FROM golden_faults f
                    WHERE f.table_name = TG_TABLE_NAME
                      AND f.hold_id = coalesce(to_jsonb(NEW) ->> 'hold_id', to_jsonb(NEW) ->> 'id')) THEN
          RAISE EXCEPTION 'golden recorder: injected ledger fault on %', TG_TABLE_NAME;
        END IF;
        RETURN NEW;
      END $$;
    CREATE TRIGGER golden_fault_holds BEFORE UPDATE ON auth_holds FOR EACH ROW EXECUTE FUNCTION golden_fault();
    CREATE TRIGGER golden_fault_deliveries BEFORE UPDATE ON webhook_deliveries FOR EACH ROW EXECUTE FUNCTION golden_fault();`);
  return {
    fail: async (holdId: string, table: 'auth_holds' | 'webhook_deliveries') =>
      void (await region.pool.query('INSERT INTO golden_faults VALUES ($1, $2)', [holdId, table])),
    heal: async (holdId: string) =>
      void (await region.pool.query('DELETE FROM golden_faults WHERE hold_id = $1', [holdId])),
  };
}

it('records every waiting point the night does not reach, each way out of it', async () => {
  const us = await harness.region('us');
  const ctx: OpsContext = { region: us.config, pool: us.pool, client: us.client };
  await harness.startWorker(us);
  const faults = await installFaults(us);
  const night = await seedNight(
    us.pool,
    'us',
    `${harness.id}cov`,
    { expired: 24, future: 8, merchants: 8, defective: true },
    harness.merchants,
  );
  const m = night.merchantIds;
  const script = (merchant: string, responses: Responses) =>
    harness.merchants.script(merchant, { secrets: [night.secrets.get(merchant)!], responses });
  const setMerchant = (merchant: string, sql: string) =>
    us.pool.query(`UPDATE merchants SET ${sql} WHERE id = $1`, [merchant]);
  const holdsOf = (merchant: string, list: HoldSeed[]) =>
    list.filter((h) => h.merchantId === merchant).map((h) => h.id);
  const expiryOf = async (holdId: string) =>
    (await us.pool.query<{ e: string }>(`SELECT ${isoUtc('expires_at')} AS e FROM auth_holds WHERE id = $1`, [holdId]))
      .rows[0]!.e;
  const handleOf = async (holdId: string) =>
    us.client.workflow.getHandle(await holdWorkflowIdOf(us.pool, 'us', holdId));
  const stageOf = async (holdId: string) => (await (await handleOf(holdId)).query(statusQuery)).stage;
  const reaches = async (holdId: string, stage: HoldStage['stage']) =>
    expect.poll(() => stageOf(holdId), { timeout: 60_000 }).toBe(stage);
  const byHand = (holdId: string, merchantId: string, expiresAt: string, suffix: string) =>
    us.client.workflow.execute(releaseExpiredHold, {
      taskQueue: us.config.taskQueue,
      workflowId: `hold-by-hand-${suffix}-${harness.id}`,
      args: [{ region: 'us', holdId, expiresAt, merchantId }],
    });
  const sweep = (n: number) =>
    us.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-cov-${n}`,
      args: [{ region: 'us', releaseWaitMs: 5_000 }],
    });

  // m0 answers 200. m1 rejects (400). m2 503s forever within a 3 s horizon. m3 1 request per 20 s, 503 then 200.
  // m4 503 once, then 200 (paused during the retry). m5 503 once then 200 (the event before the release). m6 200,
  // 1 per 20 s. m7 200 (the ledger faults).
  script(m[1]!, [{ status: 400 }]);
  script(m[2]!, [{ status: 503 }]);
  await setMerchant(m[2]!, `delivery_policy = '{"retryHorizonMs": 3000, "initialBackoffMs": 500}'`);
  script(m[3]!, [{ status: 503 }, { status: 200 }]);
  await setMerchant(m[3]!, `rate_per_second = 0.05, burst = 0, delivery_policy = '{"initialBackoffMs": 1000}'`);
  script(m[4]!, [{ status: 503 }, { status: 200 }]);
  await setMerchant(m[4]!, `delivery_policy = '{"initialBackoffMs": 10000}'`);
  script(m[5]!, [{ status: 503 }, { status: 200 }]);
  await setMerchant(m[5]!, `delivery_policy = '{"initialBackoffMs": 3000}'`);
  await setMerchant(m[6]!, `rate_per_second = 0.05, burst = 0`);

  // The ledger fails m7's first hold: its release retries in the worker, then on durable timers, until healed. And m6's
  // webhooks' admission: the fast path fails unexpectedly and the regular activity takes over (then, healed, one of
  // the two waits for its slot: the regular activity answers scheduled).
  const [faulty] = holdsOf(m[7]!, night.expired) as [string];
  await faults.fail(faulty, 'auth_holds');
  const slow = holdsOf(m[6]!, night.expired);
  for (const id of slow) await faults.fail(id, 'webhook_deliveries');
  // m5: an increment of an expired hold reaches the merchant first and is answered 503: the release's webhook waits
  // behind it (after-earlier) until it is delivered.
  const receiver = await startTestReceiver(us, { gapWaitMs: 60_000, workflowIdleMs: 3_000 });
  const [behind] = holdsOf(m[5]!, night.expired) as [string];
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
  try {
    expect((await receiver.processor.send(event(behind, 1, 'hold.incremented', 5))).status).toBe(202);
    await expect
      .poll(
        async () =>
          (await us.pool.query(`SELECT attempt_count FROM webhook_deliveries WHERE hold_id = $1`, [behind])).rows[0]
            ?.attempt_count,
        {
          timeout: 30_000,
        },
      )
      .toBe(1);

    // m4: paused while its first retry waits (10 s): the regular activity answers held; resumed, and told so by signal.
    // Watched from the start, since the sweep below takes seconds. (The merchant's first request is the one answered
    // 503: whichever of its holds sent it.)
    const failedFirst = async () =>
      (
        await us.pool.query<{ hold_id: string }>(
          `SELECT d.hold_id FROM delivery_attempts a JOIN webhook_deliveries d ON d.webhook_id = a.webhook_id
            WHERE d.merchant_id = $1 AND a.status_code = 503`,
          [m[4]],
        )
      ).rows[0]?.hold_id;
    const pausing = (async () => {
      await expect.poll(failedFirst, { timeout: 30_000, interval: 50 }).toBeDefined();
      await pauseMerchant(us.pool, m[4]!, 'maintenance');
      return (await failedFirst())!;
    })();
    await sweep(1);
    const historyShows = async (holdId: string, test: (events: temporal.api.history.v1.IHistoryEvent[]) => boolean) =>
      expect
        .poll(async () => test((await (await handleOf(holdId)).fetchHistory()).events ?? []), { timeout: 30_000 })
        .toBe(true);
    await historyShows(faulty, (events) => events.some((e) => e.timerStartedEventAttributes));
    await faults.heal(faulty);
    for (const id of slow)
      await historyShows(id, (events) =>
        events.some((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'deliverWebhook'),
      );
    for (const id of slow) await faults.heal(id);

    const paused = await pausing;
    await reaches(paused, 'held');
    await resumeMerchant(us.pool, m[4]!);
    await (await handleOf(paused)).signal(merchantResumedSignal);

    // m1: quarantined; decided by Update (approve, discard), one by a reviewed request, one ignored signal first.
    const [approvedByUpdate, discardedByUpdate, approvedByRequest] = holdsOf(m[1]!, night.expired) as [
      string,
      string,
      string,
    ];
    for (const id of [approvedByUpdate, discardedByUpdate, approvedByRequest]) await reaches(id, 'quarantined');
    await (
      await handleOf(approvedByUpdate)
    ).signal(approveReplaySignal, { approvedBy: 'alice', reason: 'stale', policyRun: 9 });
    script(m[1]!, [{ status: 200 }]);
    expect(await approveHold(ctx, approvedByUpdate, 'alice', 'merchant fixed its parser')).toMatchObject({
      outcome: 'applied',
    });
    expect(await discardHold(ctx, discardedByUpdate, 'bob', 'merchant offboarded')).toMatchObject({
      outcome: 'applied',
    });
    const request = await previewReplay(us.pool, { holdId: approvedByRequest }, 'carol');
    expect(await approveReplayRequest(ctx, request.id, 'dave')).toMatchObject({ applied: 1 });

    // The release answering each way but `released`: started by hand, as an operator or a later run would.
    const future = night.future;
    expect(
      await byHand(future[0]!.id, future[0]!.merchantId, await expiryOf(future[0]!.id), 'not-expired'),
    ).toMatchObject({
      release: { status: 'not_expired' },
    });
    expect(await byHand(`h_${harness.id}_gone`, m[0]!, new Date().toISOString(), 'not-found')).toMatchObject({
      release: { status: 'not_found' },
    });
    const defective = night.defective[0]!;
    expect(await byHand(defective.id, defective.merchantId, await expiryOf(defective.id), 'rejected')).toMatchObject({
      release: { status: 'rejected' },
    });
    expect((await receiver.processor.send(event(future[1]!.id, 1, 'hold.captured', 10))).status).toBe(202);
    await expect
      .poll(
        async () => (await us.pool.query('SELECT state FROM auth_holds WHERE id = $1', [future[1]!.id])).rows[0].state,
      )
      .toBe('captured');
    expect(await byHand(future[1]!.id, future[1]!.merchantId, await expiryOf(future[1]!.id), 'settled')).toMatchObject({
      release: { status: 'settled' },
    });
    const [delivered] = holdsOf(m[0]!, night.expired) as [string];
    await (await handleOf(delivered)).result();
    expect(await byHand(delivered, m[0]!, await expiryOf(delivered), 'already-delivered')).toMatchObject({
      release: { status: 'already_released' },
      delivery: { status: 'delivered' },
    });
    await (await handleOf(discardedByUpdate)).result();
    expect(
      await byHand(discardedByUpdate, m[1]!, await expiryOf(discardedByUpdate), 'discarded-elsewhere'),
    ).toMatchObject({
      delivery: { status: 'handled_elsewhere' },
    });

    // m2: its retries run out (a 3 s horizon): quarantined as exhausted.
    for (const id of holdsOf(m[2]!, night.expired)) await reaches(id, 'quarantined');
    // m3, m6: 1 per 20 s; m3's retries are throttled in the retry lane, m6's second hold waits for its slot.
    for (const id of [...holdsOf(m[3]!, night.expired), ...holdsOf(m[6]!, night.expired)])
      await expect.poll(() => stageOf(id), { timeout: 90_000 }).toBe('delivered');

    // The event workflow: woken from idle by the next event, told of an event the ledger does not have.
    const idle = future[2]!.id;
    expect((await receiver.processor.send(event(idle, 1, 'hold.incremented', 3))).status).toBe(202);
    const eventsOf = (holdId: string) => us.client.workflow.getHandle(holdEventsWorkflowId('us', holdId));
    const eventStage = async (holdId: string) =>
      (
        await eventsOf(holdId)
          .query(holdEventsStatusQuery)
          .catch(() => undefined)
      )?.stage.stage;
    await expect.poll(() => eventStage(idle), { timeout: 30_000 }).toBe('idle' satisfies HoldEventsStage['stage']);
    await eventsOf(idle).signal(processorEventSignal, { eventId: `evt_${idle}_nowhere`, sequence: 7 });
    expect((await receiver.processor.send(event(idle, 2, 'hold.incremented', 4))).status).toBe(202);
    // Skipped by Update: once while it waits for the missing event, once after it stopped.
    const gapWaiting = future[3]!.id;
    expect((await receiver.processor.send(event(gapWaiting, 2, 'hold.incremented', 2))).status).toBe(202);
    await expect.poll(() => eventStage(gapWaiting), { timeout: 30_000 }).toBe('waiting_for_predecessor');
    expect(await skipMissingEvent(ctx, gapWaiting, 1, 'ops@example.com', 'never issued')).toMatchObject({
      skipped: true,
    });
  } finally {
    await receiver.close();
  }
  const stopping = await startTestReceiver(us, { gapWaitMs: 1_000, workflowIdleMs: 1_000 });
  try {
    const gapStopped = night.future[4]!.id;
    expect((await stopping.processor.send(event(gapStopped, 2, 'hold.incremented', 2))).status).toBe(202);
    const handle = us.client.workflow.getHandle(holdEventsWorkflowId('us', gapStopped));
    await expect
      .poll(async () => (await handle.query(holdEventsStatusQuery).catch(() => undefined))?.stage.stage, {
        timeout: 30_000,
      })
      .toBe('stopped_for_human');
    expect(await skipMissingEvent(ctx, gapStopped, 1, 'ops@example.com', 'never issued')).toMatchObject({
      skipped: true,
    });
    // Every event workflow idles out and completes, every delivery settles.
    await expect
      .poll(
        async () =>
          (await us.pool.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'pending'`)).rows[0].n,
        {
          timeout: 90_000,
        },
      )
      .toBe(0);
  } finally {
    await stopping.close();
  }

  // A merchant answering in 3 s that takes one request at a time: the first hold's fast path holds the one request in
  // flight while the others wait for room (in-flight waits); marked slow, the next first attempts are handed over to
  // the regular activity, which waits for room too.
  const slowNight = await seedNight(
    us.pool,
    'us',
    `${harness.id}slow`,
    { expired: 3, merchants: 1 },
    harness.merchants,
  );
  const slowMerchant = slowNight.merchantIds[0]!;
  harness.merchants.script(slowMerchant, {
    secrets: [slowNight.secrets.get(slowMerchant)!],
    responses: [{ status: 200, delayMs: 3_000 }],
  });
  await setMerchant(slowMerchant, `delivery_policy = '{"maxInFlight": 1}'`);
  await sweep(2);
  for (const hold of slowNight.expired)
    await expect.poll(() => stageOf(hold.id), { timeout: 90_000 }).toBe('delivered');

  const written = await addRecordings(us.client, us.config.taskQueue, OUT, 'cov');
  console.log(`[golden] ${written.length} histories of the coverage night in ${path.relative(process.cwd(), OUT)}`);
}, 600_000);

it('records continue-as-new of a held delivery and of an event workflow, on a server that suggests it after a few dozen events', async () => {
  const dev = loadDevConfig();
  ownServer = await startDevServer({
    namespaces: TEST_NAMESPACES,
    dataDir: await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-golden-can-')),
    explicitCliPath: dev.temporalCliPath,
    cacheDir: dev.cacheDir,
    extraArgs: ['--dynamic-config-value', 'limit.historyCount.suggestContinueAsNew=40'],
  });
  ownHarness = await openHarness({ address: ownServer.address });
  const us = await ownHarness.region('us');
  await ownHarness.startWorker(us);
  const night = await seedNight(
    us.pool,
    'us',
    `${ownHarness.id}can`,
    { expired: 2, future: 1, merchants: 2 },
    ownHarness.merchants,
  );
  const merchant = night.merchantIds[0]!;
  await pauseMerchant(us.pool, merchant, 'maintenance');
  const held = night.expired[0]!.id;
  const expiresAt = (
    await us.pool.query<{ e: string }>(`SELECT ${isoUtc('expires_at')} AS e FROM auth_holds WHERE id = $1`, [held])
  ).rows[0]!.e;
  const handle = await us.client.workflow.start(releaseExpiredHold, {
    taskQueue: us.config.taskQueue,
    workflowId: await holdWorkflowIdOf(us.pool, 'us', held),
    args: [{ region: 'us', holdId: held, expiresAt, merchantId: merchant }],
  });
  // Each merchantResumed re-checks at once (the merchant still paused): a few dozen events, then continue-as-new.
  const runs = async () => (await us.client.workflow.count(`WorkflowId = '${handle.workflowId}'`)).count;
  await expect
    .poll(
      async () => {
        await handle.signal(merchantResumedSignal).catch(() => undefined);
        return runs();
      },
      { timeout: 120_000, interval: 300 },
    )
    .toBeGreaterThanOrEqual(2);
  await resumeMerchant(us.pool, merchant);
  await handle.signal(merchantResumedSignal);
  expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered' } });

  // A quarantine flooded with signals that do not apply: its wait continues as new, and the next run waits on for the
  // same decision (twice), which then applies.
  const rejecting = night.merchantIds[1]!;
  ownHarness.merchants.script(rejecting, { secrets: [night.secrets.get(rejecting)!], responses: [{ status: 400 }] });
  const flooded = night.expired[1]!.id;
  const floodedExpiry = (
    await us.pool.query<{ e: string }>(`SELECT ${isoUtc('expires_at')} AS e FROM auth_holds WHERE id = $1`, [flooded])
  ).rows[0]!.e;
  const quarantined = await us.client.workflow.start(releaseExpiredHold, {
    taskQueue: us.config.taskQueue,
    workflowId: await holdWorkflowIdOf(us.pool, 'us', flooded),
    args: [{ region: 'us', holdId: flooded, expiresAt: floodedExpiry, merchantId: rejecting }],
  });
  await expect.poll(async () => (await quarantined.query(statusQuery)).stage, { timeout: 30_000 }).toBe('quarantined');
  const floodedRuns = async () => (await us.client.workflow.count(`WorkflowId = '${quarantined.workflowId}'`)).count;
  await expect
    .poll(
      async () => {
        await quarantined
          .signal(approveReplaySignal, { approvedBy: '', reason: 'not a decision' } as never)
          .catch(() => undefined);
        return floodedRuns();
      },
      { timeout: 120_000, interval: 200 },
    )
    .toBeGreaterThanOrEqual(3);
  await expect.poll(async () => (await quarantined.query(statusQuery)).stage, { timeout: 30_000 }).toBe('quarantined');
  await quarantined.signal(
    discardSignal,
    await recordedDecision(us.pool, flooded, 'discard', 'erin', 'flooded, then decided'),
  );
  expect(await quarantined.result()).toMatchObject({ delivery: { status: 'discarded' } });

  // An event workflow applying one event after another continues as new when the server suggests it.
  const receiver = await startTestReceiver(us, { workflowIdleMs: 2_000 });
  try {
    const busy = night.future[0]!.id;
    for (let sequence = 1; sequence <= 12; sequence++) {
      const sent = await receiver.processor.send({
        eventId: `evt_${busy}_${sequence}`,
        holdId: busy,
        sequence,
        type: 'hold.incremented',
        amountMinor: sequence,
        currency: 'USD',
      });
      expect(sent.status).toBe(202);
    }
    await expect
      .poll(
        async () =>
          (
            await us.pool.query(
              `SELECT count(*)::int AS n FROM processor_events WHERE hold_id = $1 AND applied_at IS NOT NULL`,
              [busy],
            )
          ).rows[0].n,
        {
          timeout: 60_000,
        },
      )
      .toBe(12);
    await expect
      .poll(
        async () =>
          (await us.pool.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'pending'`)).rows[0].n,
        {
          timeout: 60_000,
        },
      )
      .toBe(0);
    const events = us.client.workflow.getHandle(holdEventsWorkflowId('us', busy));
    await expect.poll(async () => (await events.describe()).status.name, { timeout: 30_000 }).toBe('COMPLETED');
  } finally {
    await receiver.close();
  }
  const written = await addRecordings(us.client, us.config.taskQueue, OUT, 'can');
  console.log(`[golden] ${written.length} histories of continue-as-new in ${path.relative(process.cwd(), OUT)}`);
}, 600_000);
