/**
 * Records the rulebook rows the other recorders' nights do not reach (test/support/waiting-points.ts, keyed exits),
 * as a build writes them: for the released build, `GOLDEN_BUILD=<its commit> GOLDEN_RELEASE=<its version> npx vitest
 * run --project golden test/golden/record-rows.test.ts`, which bundles that revision's workflow code (today's
 * activities). The histories are added to test/golden/histories/<release>/, tagged `rows-four-eyes` and `rows-regular`:
 *
 * - a worker with four eyes on (production's QUARANTINE_FOUR_EYES): its quarantines are decided under that rule; a
 *   replay naming a request the ledger does not have is refused, and waits for a human again; a discard the ledger
 *   overrules (it holds an abandon for the run already) ends as the ledger says;
 * - each named failure of a delivery, from the fast path (the four-eyes worker) and from the regular activity (a worker
 *   with no fast-path slot, so every first attempt is handed over): a 400, a 410, an endpoint URL the rules refuse, no
 *   signing secret, a delivery policy that cannot be used;
 * - a hold's event workflow started with a trace context in its header, as a newer receiver's signal-with-start
 *   reaches a released build's workers during a deploy;
 * - a sweep whose pages each start several batches.
 *
 * The overruling abandon is written into this recorder's own ledger database: a race no merchant can cause.
 */
import path from 'node:path';
import { Client } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { holdEventsWorkflowId } from '../../src/contracts/ids.js';
import { approveReplaySignal, discardSignal, statusQuery, type HoldStage } from '../../src/contracts/messages.js';
import { addRecordings, goldenRelease, goldenSetDir } from '../support/golden.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { holdWorkflowIdOf, recordedDecision, seedNight } from '../support/ledger.js';
import { startTestReceiver } from '../support/processor.js';
import { recordingBuild } from '../support/variant.js';

const BUILD = process.env.GOLDEN_BUILD;
const RELEASE = goldenRelease(BUILD);
const OUT = goldenSetDir(RELEASE);

let harness: Harness;
beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await harness?.close();
});

/** A night of `merchants` merchants, each made to fail its deliveries one named way (the last answers 200). */
async function failingNight(region: TestRegion, prefix: string, expired: number) {
  const night = await seedNight(
    region.pool,
    region.config.region,
    `${harness.id}${prefix}`,
    { expired, future: 2, merchants: 6 },
    harness.merchants,
  );
  const [rejects, gone, badUrl, noSecret, badPolicy] = night.merchantIds as [string, string, string, string, string];
  const script = (merchant: string, status: number) =>
    harness.merchants.script(merchant, { secrets: [night.secrets.get(merchant)!], responses: [{ status }] });
  const set = (merchant: string, sql: string) =>
    region.pool.query(`UPDATE merchants SET ${sql} WHERE id = $1`, [merchant]);
  script(rejects, 400);
  script(gone, 410);
  await set(badUrl, `endpoint_url = 'ftp://127.0.0.1/hooks'`);
  await set(noSecret, `signing_secret = NULL, previous_signing_secret = NULL`);
  await set(badPolicy, `delivery_policy = '{"initialBackoffMs": -1}'`);
  const holdsOf = (merchant: string) => night.expired.filter((h) => h.merchantId === merchant).map((h) => h.id);
  return { night, rejects: holdsOf(rejects), failing: [rejects, gone, badUrl, noSecret, badPolicy] };
}

it(`records the rows the other nights miss, as build ${BUILD ?? 'HEAD (working tree)'} writes them`, async () => {
  const version = await recordingBuild(BUILD);
  const fourEyes = await harness.region('us');
  const regular = await harness.region('us');
  await harness.startWorker(fourEyes, undefined, undefined, { ...version, fourEyes: true });
  await harness.startWorker(regular, undefined, undefined, { ...version, fastPathSlots: 0 });

  const stageOf = async (region: TestRegion, holdId: string) =>
    (await region.client.workflow.getHandle(await holdWorkflowIdOf(region.pool, 'us', holdId)).query(statusQuery))
      .stage;
  const reaches = (region: TestRegion, holdId: string, stage: HoldStage['stage']) =>
    expect.poll(() => stageOf(region, holdId).catch(() => undefined), { timeout: 90_000 }).toBe(stage);
  // Each failing merchant has a webhook quarantined for its failure (a merchant's later webhooks may be held instead:
  // a 410 disables it).
  const quarantinedFor = (region: TestRegion, merchants: readonly string[]) =>
    expect
      .poll(
        async () =>
          (
            await region.pool.query<{ n: number }>(
              `SELECT count(DISTINCT merchant_id)::int AS n FROM webhook_deliveries
                WHERE status = 'quarantined' AND merchant_id = ANY($1)`,
              [merchants],
            )
          ).rows[0]!.n,
        { timeout: 90_000 },
      )
      .toBe(merchants.length);
  const sweep = (region: TestRegion, id: string, sizes: { pageSize?: number; batchSize?: number }) =>
    region.client.workflow.execute('sweepExpiredHolds', {
      taskQueue: region.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-rows-${id}`,
      args: [{ region: 'us', releaseWaitMs: 2_000, ...sizes }],
    });

  // Four eyes, on the fast path.
  const a = await failingNight(fourEyes, 'fe', 12);
  await sweep(fourEyes, 'four-eyes', {});
  await quarantinedFor(fourEyes, a.failing);
  for (const id of a.rejects) await reaches(fourEyes, id, 'quarantined');
  const [refused, overruled] = a.rejects as [string, string];
  const handleOf = async (holdId: string) =>
    fourEyes.client.workflow.getHandle(await holdWorkflowIdOf(fourEyes.pool, 'us', holdId));
  const decisionsOf = async (holdId: string) =>
    (
      await fourEyes.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM delivery_decisions d JOIN webhook_deliveries w USING (webhook_id)
          WHERE w.hold_id = $1`,
        [holdId],
      )
    ).rows[0]!.n;
  // A replay naming a request the ledger does not have: taken (four eyes asks for a request), refused by the ledger.
  await (
    await handleOf(refused)
  ).signal(approveReplaySignal, { approvedBy: 'alice', reason: 'request lost', replayRequestId: 'rr_nowhere' });
  await expect
    .poll(async () => (await (await handleOf(refused)).query(statusQuery)).ignoredSignals.length, { timeout: 30_000 })
    .toBeGreaterThan(0);
  await (
    await handleOf(refused)
  ).signal(discardSignal, await recordedDecision(fourEyes.pool, refused, 'discard', 'bob', 'refused, then decided'));
  expect(await (await handleOf(refused)).result()).toMatchObject({ delivery: { status: 'discarded' } });
  // An abandon of the same run already in the ledger: the discard asked for is overruled, and the abandon stands.
  await fourEyes.pool.query(
    `INSERT INTO delivery_decisions (webhook_id, policy_run, decision, decided_by, reason)
     SELECT webhook_id, 1, 'abandon', 'hold-sweeper', 'decided by another run' FROM webhook_deliveries WHERE hold_id = $1`,
    [overruled],
  );
  expect(await decisionsOf(overruled)).toBe(1);
  await (
    await handleOf(overruled)
  ).signal(discardSignal, await recordedDecision(fourEyes.pool, overruled, 'discard', 'bob', 'too late'));
  expect(await (await handleOf(overruled)).result()).toMatchObject({ delivery: { status: 'abandoned' } });

  // A trace reaching the event workflow: signal-with-start by a client that carries one.
  const traced = new Client({
    connection: fourEyes.client.connection,
    namespace: fourEyes.config.namespace,
    interceptors: { workflow: [new OpenTelemetryWorkflowClientInterceptor()] },
  });
  const receiver = await startTestReceiver(fourEyes, { client: traced, workflowIdleMs: 1_000 });
  try {
    const holdId = a.night.future[0]!.id;
    const sent = await receiver.processor.send({
      eventId: `evt_${holdId}_1`,
      holdId,
      sequence: 1,
      type: 'hold.incremented',
      amountMinor: 5,
      currency: 'USD',
    });
    expect(sent.status).toBe(202);
    const events = fourEyes.client.workflow.getHandle(holdEventsWorkflowId('us', holdId));
    await expect.poll(async () => (await events.describe()).status.name, { timeout: 60_000 }).toBe('COMPLETED');
  } finally {
    await receiver.close();
  }

  // The regular activity's named failures; a sweep of several pages, each of several batches.
  const b = await failingNight(regular, 're', 10);
  await sweep(regular, 'batches', { pageSize: 4, batchSize: 2 });
  await quarantinedFor(regular, b.failing);

  const written = [
    ...(await addRecordings(fourEyes.client, fourEyes.config.taskQueue, OUT, 'rows-four-eyes')),
    ...(await addRecordings(regular.client, regular.config.taskQueue, OUT, 'rows-regular')),
  ];
  console.log(
    `[golden] ${written.length} histories of build ${BUILD ?? 'HEAD'} in ${path.relative(process.cwd(), OUT)}`,
  );
}, 600_000);
