/**
 * The image's runtime, proved where it can be without Docker: what `npm run build` compiles (dist/bin/worker.js,
 * dist/bin/receiver.js and the workflow bundle beside them) run as processes of this suite's Node (24, the image's),
 * without tsx. A short night: expired holds
 * swept and released, every webhook delivered and verified by its merchant, a processor callback recorded by the
 * receiver and applied by the worker. Dev mode: production's TLS and tokens are test/integration/cluster.test.ts's.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { checkLedgerInvariants, checkProcessorEventInvariants } from '../../bench/invariants.js';
import { FakeProcessor } from '../../dev/fake-processor.js';
import { startReceiverProcess, type ReceiverProcess } from '../../dev/receiver-process.js';
import { startWorkerProcesses, workerEnvironment, type WorkerProcesses } from '../../dev/worker-processes.js';
import { generateSigningSecret } from '../../src/delivery/standard-webhooks.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { holdStates, seedNight } from '../support/ledger.js';
import { waitUntil } from '../support/wait.js';

const run = promisify(execFile);
const REPO = path.resolve(import.meta.dirname, '../..');
const PROCESSOR_SECRET = generateSigningSecret();

let harness: Harness;
let us: TestRegion;
let workers: WorkerProcesses;
let receiver: ReceiverProcess;

beforeAll(async () => {
  // tsc, then webpack for the bundle.
  await run('npm', ['run', 'build'], { cwd: REPO, timeout: 300_000 });
  harness = await openHarness();
  us = await harness.region('us');
  workers = await startWorkerProcesses(
    1,
    workerEnvironment([us.config], harness.address, path.join(REPO, 'dist/workflow-bundle.js')),
    {
      entry: path.join(REPO, 'dist/bin/worker.js'),
      // Its own deployment: the compiled bundle is another build, and must not become the current one of the shared
      // namespace's.
      extraEnv: () => ({ WORKER_DEPLOYMENT_NAME: `t-${harness.id}-compiled` }),
    },
  );
  receiver = await startReceiverProcess({
    region: us.config,
    databaseUrl: us.databaseUrl,
    temporalAddress: harness.address,
    secret: PROCESSOR_SECRET,
    entry: path.join(REPO, 'dist/bin/receiver.js'),
  });
}, 600_000);
afterAll(async () => {
  await receiver?.stop();
  await workers?.stop();
  await harness?.close();
});

it('a night, compiled: expired holds released, webhooks delivered and verified, a processor callback applied', async () => {
  // The worker says which Node runs it: this suite's, the image's major.
  expect(workers.output()[0]).toContain(`"node":"${process.version}"`);

  const night = await seedNight(
    us.pool,
    'us',
    `${harness.id}n`,
    { expired: 8, future: 1, merchants: 2 },
    harness.merchants,
  );
  // The processor captures the hold that has not expired yet, through the compiled receiver.
  const captured = night.future[0]!;
  const processor = new FakeProcessor(receiver.url, PROCESSOR_SECRET);
  const callback = await processor.send({
    eventId: `evt_${captured.id}_1`,
    holdId: captured.id,
    sequence: 1,
    type: 'hold.captured',
    amountMinor: captured.amountMinor,
    currency: 'USD',
  });
  expect(callback.status).toBe(202);
  await us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: us.config.taskQueue,
    workflowId: `sweep-us-${harness.id}-compiled`,
    args: [{ region: 'us', releaseWaitMs: 60_000 }],
  });
  // A webhook for each release and one for the capture.
  await waitUntil(
    async () =>
      (await us.pool.query(`SELECT count(*)::integer AS n FROM webhook_deliveries WHERE status = 'delivered'`)).rows[0]
        .n === 9,
    'every webhook of the night is delivered',
  );

  const states = await holdStates(us.pool);
  for (const hold of night.expired)
    expect(states.get(hold.id), hold.id).toEqual({ state: 'released', rejectCode: null });
  const { rows: events } = await us.pool.query<{ outcome: string | null; applied: boolean }>(
    'SELECT outcome, applied_at IS NOT NULL AS applied FROM processor_events WHERE hold_id = $1',
    [captured.id],
  );
  expect(events).toEqual([{ outcome: 'captured', applied: true }]);
  const received = harness.merchants.requests().filter((r) => night.merchantIds.includes(r.merchantId));
  expect(received).toHaveLength(9);
  expect(received.every((r) => r.verified)).toBe(true);
  expect(await checkLedgerInvariants(us.pool)).toEqual([]);
  expect(await checkProcessorEventInvariants(us.pool)).toEqual([]);
});
