/**
 * Records a quarantine sent decision signals that are not decisions (a bare string, as any client can send), until its
 * wait continues as new, as a build writes it: `GOLDEN_BUILD=<revision> GOLDEN_RELEASE=<release> npx vitest run
 * --project golden test/golden/record-signals.test.ts` bundles that revision's workflow code (today's activities). A
 * build that quotes what it ignores carries the quotes in its next run's input: the current code must replay that run
 * (its input read, bounded) and its first (tag `signals-quoted`). And a decision sent as that wait continues as new,
 * which the server gives to the new run's first task (tag `signals-first-task`). On a server of its own that suggests
 * continuing as new after a few dozen events (the product's own budget is 2,000). The histories are added to
 * test/golden/histories/<release>/.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadDevConfig } from '../../dev/dev-config.js';
import { startDevServer, type DevServer } from '../../dev/temporal-dev-server.js';
import { temporal } from '@temporalio/proto';
import { approveReplaySignal, discardSignal, statusQuery } from '../../src/contracts/messages.js';
import { isoUtc } from '../../src/db/sql.js';
import { releaseExpiredHold } from '../../src/workflows/release-expired-hold.js';
import { addRecording, addRecordings, goldenRelease, goldenSetDir } from '../support/golden.js';
import { openHarness, type Harness } from '../support/harness.js';
import { holdWorkflowIdOf, recordedDecision, seedNight } from '../support/ledger.js';
import { recordingBuild } from '../support/variant.js';
import { TEST_NAMESPACES } from '../integration/global-setup.js';

const BUILD = process.env.GOLDEN_BUILD;
const OUT = goldenSetDir(goldenRelease(BUILD));
/** What each signal is: a string, not a decision, big enough that a build quoting it shows it. */
const NOT_A_DECISION = 'x'.repeat(20_000);

let shared: Harness | undefined;
let server: DevServer | undefined;
let harness: Harness | undefined;
beforeAll(async () => {
  // The shared server's harness first: it installs the tests' runtime, which the server's start would otherwise take.
  shared = await openHarness();
  const dev = loadDevConfig();
  server = await startDevServer({
    namespaces: TEST_NAMESPACES,
    dataDir: await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-golden-signals-')),
    explicitCliPath: dev.temporalCliPath,
    cacheDir: dev.cacheDir,
    extraArgs: ['--dynamic-config-value', 'limit.historyCount.suggestContinueAsNew=40'],
  });
  harness = await openHarness({ address: server.address });
});
afterAll(async () => {
  await harness?.close();
  await server?.stop();
  await shared?.close();
});

/** A hold quarantined by a 400 and sent strings until its wait continued as new: waiting in its second run. */
async function floodedIntoItsSecondRun(build: Awaited<ReturnType<typeof recordingBuild>>) {
  const us = await harness!.region('us');
  const worker = await harness!.startWorker(us, undefined, undefined, build);
  const night = await seedNight(us.pool, 'us', `${harness!.id}sig`, { expired: 1, merchants: 1 }, harness!.merchants);
  const merchant = night.merchantIds[0]!;
  harness!.merchants.script(merchant, { secrets: [night.secrets.get(merchant)!], responses: [{ status: 400 }] });
  const holdId = night.expired[0]!.id;
  const expiresAt = (
    await us.pool.query<{ e: string }>(`SELECT ${isoUtc('expires_at')} AS e FROM auth_holds WHERE id = $1`, [holdId])
  ).rows[0]!.e;
  const handle = await us.client.workflow.start(releaseExpiredHold, {
    taskQueue: us.config.taskQueue,
    workflowId: await holdWorkflowIdOf(us.pool, 'us', holdId),
    args: [{ region: 'us', holdId, expiresAt, merchantId: merchant }],
  });
  await expect.poll(async () => (await handle.query(statusQuery)).stage, { timeout: 30_000 }).toBe('quarantined');
  const runs = async () => (await us.client.workflow.count(`WorkflowId = '${handle.workflowId}'`)).count;
  await expect
    .poll(
      async () => {
        await handle.signal(approveReplaySignal, NOT_A_DECISION).catch(() => undefined);
        return runs();
      },
      { timeout: 120_000, interval: 200 },
    )
    .toBeGreaterThanOrEqual(2);
  await expect.poll(async () => (await handle.query(statusQuery)).stage, { timeout: 30_000 }).toBe('quarantined');
  return { us, worker, holdId, handle };
}

it(`records a quarantine flooded with strings continuing as new, as build ${BUILD ?? 'HEAD (working tree)'} writes it`, async () => {
  const { us, holdId, handle } = await floodedIntoItsSecondRun(await recordingBuild(BUILD));
  await handle.signal(
    discardSignal,
    await recordedDecision(us.pool, holdId, 'discard', 'erin', 'flooded, then decided'),
  );
  expect(await handle.result()).toMatchObject({ delivery: { status: 'discarded' } });

  const written = await addRecordings(us.client, us.config.taskQueue, OUT, 'signals-quoted');
  console.log(`[golden] ${written.join(', ')} of build ${BUILD ?? 'HEAD'} in ${path.relative(process.cwd(), OUT)}`);
}, 300_000);

it(`records a decision in the first task of a run continued from a quarantine, as build ${BUILD ?? 'HEAD (working tree)'} writes it`, async () => {
  const build = await recordingBuild(BUILD);
  const { us, worker, holdId, handle } = await floodedIntoItsSecondRun(build);
  // That run's first task is taken again with a decision in it: no worker, the run reset to the task, the signal sent.
  await worker.stop();
  const { runId } = await handle.describe();
  const second = (await us.client.workflow.getHandle(handle.workflowId, runId).fetchHistory()).events ?? [];
  const { runId: resetRunId } = await us.client.workflowService.resetWorkflowExecution({
    namespace: us.client.options.namespace,
    workflowExecution: { workflowId: handle.workflowId, runId },
    reason: "golden recording: a decision in a continued run's first task",
    workflowTaskFinishEventId: second.find((e) => e.workflowTaskCompletedEventAttributes)!.eventId!,
    requestId: randomUUID(),
    resetReapplyExcludeTypes: [temporal.api.enums.v1.ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL],
  });
  const run = us.client.workflow.getHandle(handle.workflowId, resetRunId);
  const discard = await recordedDecision(us.pool, holdId, 'discard', 'erin', 'decided as it continued');
  await run.signal(discardSignal, discard);
  await harness!.startWorker(us, undefined, undefined, build);

  // A build that takes it there ends discarded; one that refuses it keeps it as ignored, and takes it sent again.
  const refused = async () => (await run.query(statusQuery)).ignoredSignals.some((i) => i.signal === 'discard');
  const closed = async () => (await run.describe()).status.name !== 'RUNNING';
  await expect.poll(async () => (await closed()) || (await refused()), { timeout: 30_000 }).toBe(true);
  if (!(await closed())) await run.signal(discardSignal, discard);
  expect(await run.result()).toMatchObject({ delivery: { status: 'discarded' } });

  const name = 'releaseExpiredHold-signals-first-task';
  const written = await addRecording(OUT, name, handle.workflowId, await run.fetchHistory());
  console.log(`[golden] ${written} of build ${BUILD ?? 'HEAD'} in ${path.relative(process.cwd(), OUT)}`);
}, 300_000);
