/**
 * Records the scheduled jobs of this release into test/golden/histories/<release>/ (`npm run golden:record`): the
 * outbox reconciler (`reconcileOutbox`), one run that finds a stranded webhook (its hold's workflow terminated after the
 * release) and starts its delivery again; and the retention job (`pruneLedger`), one run that deletes a webhook past
 * its retention. The only waiting point of each is its activity (test/support/waiting-points.ts).
 */
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { pauseMerchant, resumeMerchant } from '../../src/sql/merchants.js';
import { pruneLedger } from '../../src/workflows/prune-ledger.js';
import { reconcileOutbox } from '../../src/workflows/reconcile-outbox.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { addRecording, goldenRelease, goldenSetDir } from '../support/golden.js';
import { openHarness, type Harness } from '../support/harness.js';
import { backdate, holdWorkflowIdOf, seedNight } from '../support/ledger.js';
import { waitUntil } from '../support/wait.js';

const RELEASE = goldenRelease();
const OUT = goldenSetDir(RELEASE);

let harness: Harness;
beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await harness?.close();
});

it('records an outbox reconcile that starts a stranded webhook’s delivery again', async () => {
  const us = await harness.region('us');
  await harness.startWorker(us);
  const n = await seedNight(us.pool, 'us', `${harness.id}go`, { expired: 1, merchants: 1 }, harness.merchants);
  const [merchantId] = n.merchantIds as [string];
  await pauseMerchant(us.pool, merchantId, 'golden: hold the delivery');
  await us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: us.config.taskQueue,
    workflowId: `sweep-us-${harness.id}-golden-outbox`,
    args: [{ region: 'us', releaseWaitMs: 60_000 }],
  });
  const hold = us.client.workflow.getHandle(await holdWorkflowIdOf(us.pool, 'us', n.expired[0]!.id));
  await waitUntil(
    () =>
      hold.describe().then(
        (d) => d.status.name === 'RUNNING',
        () => false,
      ),
    'the hold workflow running',
  );
  await hold.terminate('golden: strand its webhook');
  await resumeMerchant(us.pool, merchantId);
  // Its workflow had said when it would come back to it (a held re-check): let that time have passed.
  await us.pool.query(`UPDATE webhook_deliveries SET awaited_until = now() - interval '1 hour'`);

  const workflowId = `outbox-us-${harness.id}-golden`;
  const report = await us.client.workflow.execute(reconcileOutbox, {
    taskQueue: us.config.taskQueue,
    workflowId,
    args: [{ region: 'us', graceMs: 0 }],
  });
  expect(report).toMatchObject({ restarted: 1, unfixable: 0 });
  await waitUntil(
    async () => (await us.pool.query(`SELECT 1 FROM webhook_deliveries WHERE status = 'delivered'`)).rowCount === 1,
    'the stranded webhook delivered',
  );
  const written = await addRecording(
    OUT,
    'reconcileOutbox-outbox',
    workflowId,
    await us.client.workflow.getHandle(workflowId).fetchHistory(),
  );
  console.log(`[golden] ${written} in ${path.relative(process.cwd(), OUT)}`);
}, 180_000);

it('records a retention run that deletes a webhook past its retention', async () => {
  const eu = await harness.region('eu');
  await harness.startWorker(eu);
  await seedNight(eu.pool, 'eu', `${harness.id}gr`, { expired: 1, merchants: 1 }, harness.merchants);
  await eu.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: eu.config.taskQueue,
    workflowId: `sweep-eu-${harness.id}-golden-retention`,
    args: [{ region: 'eu', releaseWaitMs: 60_000 }],
  });
  await waitUntil(
    async () => (await eu.pool.query(`SELECT 1 FROM webhook_deliveries WHERE status = 'delivered'`)).rowCount === 1,
    'the webhook delivered',
  );
  await backdate(eu.pool, `UPDATE webhook_deliveries SET updated_at = now() - interval '401 days'`);

  const workflowId = `retention-eu-${harness.id}-golden`;
  const report = await eu.client.workflow.execute(pruneLedger, {
    taskQueue: eu.config.taskQueue,
    workflowId,
    args: [{ region: 'eu', budgetMs: 60_000 }],
  });
  expect(report).toMatchObject({ caughtUp: true, pruned: { webhook_deliveries: 1 } });
  const written = await addRecording(
    OUT,
    'pruneLedger-prune',
    workflowId,
    await eu.client.workflow.getHandle(workflowId).fetchHistory(),
  );
  console.log(`[golden] ${written} in ${path.relative(process.cwd(), OUT)}`);
}, 180_000);
