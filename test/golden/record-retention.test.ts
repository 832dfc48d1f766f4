/**
 * Records the retention job (`pruneLedger`) of this release into test/golden/histories/<release>/
 * (`npm run golden:record`): one run that deletes a webhook past its retention. Its only waiting point is its
 * activity (src/workflows/waiting-points.ts).
 */
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { pruneLedger } from '../../src/workflows/prune-ledger.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { addRecording, goldenRelease, goldenSetDir } from '../support/golden.js';
import { openHarness, type Harness } from '../support/harness.js';
import { seedNight } from '../support/ledger.js';
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

it('records a retention run that deletes a webhook past its retention', async () => {
  const us = await harness.region('us');
  await harness.startWorker(us);
  await seedNight(us.pool, 'us', `${harness.id}gr`, { expired: 1, merchants: 1 }, harness.merchants);
  await us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: us.config.taskQueue,
    workflowId: `sweep-us-${harness.id}-golden-retention`,
    args: [{ region: 'us', releaseWaitMs: 60_000 }],
  });
  await waitUntil(
    async () => (await us.pool.query(`SELECT 1 FROM webhook_deliveries WHERE status = 'delivered'`)).rowCount === 1,
    'the webhook delivered',
  );
  await us.pool.query(`UPDATE webhook_deliveries SET updated_at = now() - interval '401 days'`);

  const workflowId = `retention-us-${harness.id}-golden`;
  const report = await us.client.workflow.execute(pruneLedger, {
    taskQueue: us.config.taskQueue,
    workflowId,
    args: [{ region: 'us', budgetMs: 60_000 }],
  });
  expect(report).toMatchObject({ caughtUp: true, pruned: { webhook_deliveries: 1 } });
  const written = await addRecording(
    OUT,
    'pruneLedger-prune',
    workflowId,
    await us.client.workflow.getHandle(workflowId).fetchHistory(),
  );
  console.log(`[golden] ${written} in ${path.relative(process.cwd(), OUT)}`);
}, 180_000);
