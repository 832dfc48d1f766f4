/**
 * A deploy in the middle of a night (docs/deploys.md). Build A's workers get hold workflows into every waiting state
 * and a sweep mid-pages. Build B (its hold workflow changed behind `patched()`, its sweep changed outright) starts,
 * and the operator makes it current with `temporal worker deployment set-current-version`. A's sweep finishes on A
 * (PINNED: on B's code it would fail with a non-determinism error), a new sweep runs B's; A is stopped once nothing
 * is pinned to it, while holds still wait; every workflow completes on B, every invariant of docs/invariants.md holds,
 * and no worker failed a workflow task (the server's own UNHANDLED_COMMAND, a child's completion arriving while a sweep
 * page continues as new, is Temporal's protocol, not a failure).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { failedWorkflowTasks } from '../../bench/chaos-run.js';
import { checkInvariants } from '../../bench/invariants.js';
import {
  approveReplaySignal,
  merchantResumedSignal,
  statusQuery,
  type HoldStage,
} from '../../src/contracts/messages.js';
import { DeploymentError } from '../../src/errors.js';
import { currentBuildId, pinnedToVersionQuery, setCurrentVersionIfWanted } from '../../src/workers/deployment.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness } from '../support/harness.js';
import { holdWorkflowIdOf, recordedDecision, seedNight } from '../support/ledger.js';
import { bundleVariant, type Edit } from '../support/variant.js';

const SWEEP = 'workflows/sweep-expired-holds.ts';
const HOLD = 'workflows/webhook-delivery.ts';
const BUILD_B_PATCH = 'deploy-test-build-b';
/**
 * Build B: a sweep that starts with a timer (no patch: pinning keeps A's sweeps off it), a hold workflow with a timer
 * after delivery behind a patch.
 */
const BUILD_B: Edit[] = [
  { file: SWEEP, from: '  setWorkflowOptions,\n', to: '  setWorkflowOptions,\n  sleep,\n' },
  {
    file: SWEEP,
    from: 'export async function sweepExpiredHolds(input: SweepInput): Promise<SweepResult> {\n',
    to: 'export async function sweepExpiredHolds(input: SweepInput): Promise<SweepResult> {\n  await sleep(1);\n',
  },
  // `patched` is among the module's own imports.
  { file: HOLD, from: '  proxyLocalActivities,\n', to: '  proxyLocalActivities,\n  sleep,\n' },
  {
    file: HOLD,
    from: '        return step.end;\n',
    to: `        if (patched('${BUILD_B_PATCH}')) await sleep(1);\n        return step.end;\n`,
  },
];

const run = promisify(execFile);
let harness: Harness;
let dir: string;
beforeAll(async () => {
  harness = await openHarness();
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-deploy-'));
});
afterAll(async () => {
  await harness?.close();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

type History = temporal.api.history.v1.IHistory;
const events = (history: History) => history.events ?? [];
const firstCommandOf = (history: History) =>
  events(history).find(
    (e) => e.timerStartedEventAttributes || e.activityTaskScheduledEventAttributes || e.markerRecordedEventAttributes,
  );

it('a deploy mid-night: the sweep finishes on its build, waiting holds move to the new one, nothing fails', async () => {
  const us = await harness.region('us');
  const { namespace, taskQueue } = us.config;
  const deploymentName = `t-${harness.id}-deploy`;
  const buildA = { deploymentName, buildId: 'build-a' };
  const buildB = { deploymentName, buildId: 'build-b' };
  const bundleB = await bundleVariant(dir, BUILD_B);
  const workerA = await harness.startWorker(us, undefined, undefined, { version: buildA, setCurrent: 'always' });

  // The night, on A. m0: 200. m1: 503 (backing off). m2: 429, Retry-After 30 s. m3: 400 (quarantined). m4: paused
  // (held). m5: 1 per 40 s (the second hold waits for budget).
  const night = await seedNight(us.pool, 'us', `${harness.id}d`, { expired: 12, merchants: 6 }, harness.merchants);
  const m = night.merchantIds;
  const script = (merchant: string, responses: Parameters<Harness['merchants']['script']>[1]['responses']) =>
    harness.merchants.script(merchant, { secrets: [night.secrets.get(merchant)!], responses });
  script(m[1]!, [{ status: 503 }]);
  script(m[2]!, [{ status: 429, retryAfter: '30' }, { status: 200 }]);
  script(m[3]!, [{ status: 400 }]);
  await us.pool.query(`UPDATE merchants SET status = 'paused' WHERE id = $1`, [m[4]]);
  await us.pool.query(`UPDATE merchants SET rate_per_second = 0.025, burst = 1 WHERE id = $1`, [m[5]]);
  const sweepInput = { region: 'us' as const, pageSize: 5, releaseWaitMs: 1000 };
  await us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue,
    workflowId: `sweep-${harness.id}-a`,
    args: [sweepInput],
  });

  const holdsOf = async (merchantId: string) =>
    (
      await us.pool.query<{ id: string }>('SELECT id FROM auth_holds WHERE merchant_id = $1 ORDER BY id', [merchantId])
    ).rows.map((r) => r.id);
  const handleOf = async (holdId: string) =>
    us.client.workflow.getHandle(await holdWorkflowIdOf(us.pool, 'us', holdId));
  const stagesOf = async (merchantId: string) =>
    Promise.all((await holdsOf(merchantId)).map(async (id) => (await (await handleOf(id)).query(statusQuery)).stage));
  const reaches = (merchantId: string, stage: HoldStage['stage']) =>
    expect.poll(async () => (await stagesOf(merchantId)).includes(stage), { timeout: 30_000 }).toBe(true);
  // Failed and retrying: waiting out the fast path's backoff, or in Temporal's retries of the regular activity.
  await expect
    .poll(
      async () =>
        (await Promise.all((await holdsOf(m[1]!)).map(async (id) => (await handleOf(id)).query(statusQuery)))).some(
          (s) => s.lastAttempt?.outcome === 'HTTP 503',
        ),
      {
        timeout: 30_000,
      },
    )
    .toBe(true);
  await reaches(m[2]!, 'honouring_retry_after');
  await reaches(m[3]!, 'quarantined');
  await reaches(m[4]!, 'held');
  await reaches(m[5]!, 'waiting_for_budget');

  // A second sweep starts on A and is held mid-page (its paging query waits on a table lock) while B is deployed.
  const late = await seedNight(us.pool, 'us', `${harness.id}l`, { expired: 8, merchants: 1 }, harness.merchants);
  const lock = await us.pool.connect();
  await lock.query('BEGIN');
  await lock.query('LOCK TABLE auth_holds IN ACCESS EXCLUSIVE MODE');
  const sweepA = await us.client.workflow.start(sweepExpiredHolds, {
    taskQueue,
    workflowId: `sweep-${harness.id}-mid`,
    args: [{ ...sweepInput, pageSize: 3 }],
  });
  await expect
    .poll(async () => (await sweepA.describe()).raw.pendingActivities?.length ?? 0, { timeout: 10_000 })
    .toBe(1);
  const workerB = await harness.startWorker(us, undefined, undefined, {
    workflowBundle: bundleB,
    version: buildB,
    setCurrent: 'never',
  });
  // A's build is current: a starting build in production's default mode leaves it so (the operator promotes).
  expect(await setCurrentVersionIfWanted(us.client, namespace, buildB, 'if-none')).toEqual({
    status: 'left',
    current: 'build-a',
  });
  // The rollout's promotion (docs/deploys.md): started right after B's worker, it replays the waiting holds on B's
  // code (the pinned sweep, whose change is not patched, finishes on A: not replayed), waits until B polls every task
  // queue A does, then makes B current.
  const bundleFileB = path.join(dir, 'build-b.js');
  await fs.writeFile(bundleFileB, bundleB.code);
  const promoted = await run(
    process.execPath,
    ['--import', 'tsx', 'src/bin/promote.ts', '--bundle', bundleFileB, '--build-id', 'build-b', '--deadline', '2m'],
    {
      env: {
        ...process.env,
        HOLD_SWEEPER_MODE: 'dev',
        HOLD_SWEEPER_REGIONS: 'us',
        TEMPORAL_ADDRESS: harness.address,
        TEMPORAL_NAMESPACE_US: namespace,
        TASK_QUEUE_US: taskQueue,
        WORKER_DEPLOYMENT_NAME: deploymentName,
      },
    },
  );
  expect(promoted.stdout).toMatch(/"replayed":([1-9]\d+),/);
  expect(promoted.stdout).toContain('"msg":"promoted"');
  expect(await currentBuildId(us.client, namespace, deploymentName)).toBe('build-b');
  // What the operator's drain check counts (docs/deploys.md): A's sweep is pinned to A.
  const pinnedToA = pinnedToVersionQuery(buildA);
  await expect.poll(async () => (await us.client.workflow.count(pinnedToA)).count, { timeout: 10_000 }).toBe(1);
  await lock.query('COMMIT');
  lock.release();

  // A's sweep is pinned to A and runs A's code to the end; a sweep started now runs B's.
  const pinned = (await sweepA.describe()).raw.workflowExecutionInfo?.versioningInfo;
  expect(pinned?.deploymentVersion?.buildId).toBe('build-a');
  expect(String(pinned?.behavior)).toMatch(/PINNED|1/);
  await sweepA.result();
  // Every run of it, its continue-as-new runs included (they inherit the pin), began with A's first command.
  const closedRunsOfA = `WorkflowId = '${sweepA.workflowId}' AND ExecutionStatus != 'Running'`;
  await expect
    .poll(async () => (await us.client.workflow.count(closedRunsOfA)).count, { timeout: 10_000 })
    .toBeGreaterThanOrEqual(4);
  const runsOfA: string[] = [];
  for await (const { runId } of us.client.workflow.list({ query: closedRunsOfA })) runsOfA.push(runId);
  for (const runId of runsOfA) {
    const history = await us.client.workflow.getHandle(sweepA.workflowId, runId).fetchHistory();
    expect(
      firstCommandOf(history)?.activityTaskScheduledEventAttributes,
      `run ${runId} ran build A's sweep`,
    ).toBeTruthy();
  }
  const sweepB = await us.client.workflow.start(sweepExpiredHolds, {
    taskQueue,
    workflowId: `sweep-${harness.id}-b`,
    args: [sweepInput],
  });
  await sweepB.result();
  expect(firstCommandOf(await sweepB.fetchHistory())?.timerStartedEventAttributes).toBeTruthy();

  // Nothing left pinned to A (what `temporal worker deployment describe-version` reports as drained): stop all of A
  // while holds still wait.
  await expect.poll(async () => (await us.client.workflow.count(pinnedToA)).count, { timeout: 30_000 }).toBe(0);
  await workerA.stop();
  const waiting = `TaskQueue = '${taskQueue}' AND WorkflowType = 'releaseExpiredHold' AND ExecutionStatus = 'Running'`;
  expect((await us.client.workflow.count(waiting)).count).toBeGreaterThanOrEqual(4);

  // The merchants recover and the humans decide; every waiting hold finishes on B.
  script(m[1]!, [{ status: 200 }]);
  script(m[3]!, [{ status: 200 }]);
  for (const id of await holdsOf(m[3]!)) {
    await (
      await handleOf(id)
    ).signal(approveReplaySignal, await recordedDecision(us.pool, id, 'approveReplay', 'alice', 'parser fixed'));
  }
  await us.pool.query(`UPDATE merchants SET status = 'active' WHERE id = $1`, [m[4]]);
  for (const id of await holdsOf(m[4]!)) await (await handleOf(id)).signal(merchantResumedSignal);
  const running = `TaskQueue = '${taskQueue}' AND ExecutionStatus = 'Running'`;
  await expect
    .poll(async () => (await us.client.workflow.count(running)).count, { timeout: 120_000, interval: 1000 })
    .toBe(0);

  const { rows } = await us.pool.query<{ status: string; n: number }>(
    'SELECT status, count(*)::integer AS n FROM webhook_deliveries GROUP BY 1',
  );
  expect(rows).toEqual([{ status: 'delivered', n: night.expired.length + late.expired.length }]);
  // Failed by a worker (a non-determinism error, workflow code that threw): none. Failed by the server itself and
  // rescheduled (UNHANDLED_COMMAND: a signal arrived while a task completed the workflow) is Temporal's own protocol;
  // counted, and named with the worker-side ones if any.
  const workflowTaskFailures: { workflowId: string; cause: string; message: string }[] = [];
  const serverFailed: string[] = [];
  let finishedOnB = 0;
  const texts: { source: string; text: string }[] = [];
  for await (const execution of us.client.workflow.list({ query: `TaskQueue = '${taskQueue}'` }).intoHistories()) {
    const { workflowId } = execution;
    const history = execution.history as History;
    for (const failed of failedWorkflowTasks(history)) {
      if (failed.serverSide) serverFailed.push(`${workflowId}: ${failed.cause}`);
      else workflowTaskFailures.push({ workflowId, cause: failed.cause, message: failed.message });
    }
    const patches = events(history).map(
      (e) => e.markerRecordedEventAttributes?.details?.['patch-data']?.payloads?.[0]?.data,
    );
    if (patches.some((data) => data && Buffer.from(data).toString().includes(BUILD_B_PATCH))) finishedOnB++;
    texts.push({ source: `history ${workflowId}`, text: JSON.stringify(history) });
  }
  expect(workflowTaskFailures, `failed by the server: ${serverFailed.join('; ') || 'none'}`).toEqual([]);
  // Every hold that was still waiting when A stopped took B's patched path.
  expect(finishedOnB).toBeGreaterThanOrEqual(4);
  const violations = await checkInvariants({
    regions: [{ region: 'us', pool: us.pool, secretKeys: us.config.secretKeys }],
    requests: harness.merchants.requests(),
    texts,
  });
  expect(violations).toEqual([]);
  await workerB.stop();
}, 240_000);

it('a build no worker polls cannot be made current: a named error, not a worker polling a version nothing routes to', async () => {
  const us = await harness.region('us');
  const ghost = { deploymentName: `t-${harness.id}-ghost`, buildId: 'never-started' };
  const err = await setCurrentVersionIfWanted(us.client, us.config.namespace, ghost, 'always', 1_000).catch(
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(DeploymentError);
  expect((err as Error).message).toContain(`t-${harness.id}-ghost.never-started`);
  expect((err as Error).message).toContain('set-current-version');
});
