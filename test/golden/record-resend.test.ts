/**
 * Records resends (`resendWebhook`) of this release into test/golden/histories/<release>/ (`npm run golden:record`):
 * one that reopens a delivered webhook and delivers it again, and one the worker refuses (a claimed request that does
 * not exist). Its own waiting point is its first activity (test/support/waiting-points.ts, `resendWebhook.reopen`);
 * the delivery's points it shares with the hold and event workflows, whose recordings cover them.
 */
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { resendWorkflowId } from '../../src/contracts/ids.js';
import { resendWebhookNow } from '../../src/operations/resends.js';
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

it('records a resend that delivers again, and one the worker refuses', async () => {
  const us = await harness.region('us');
  await harness.startWorker(us);
  await seedNight(us.pool, 'us', `${harness.id}gr`, { expired: 1, merchants: 1 }, harness.merchants);
  await us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: us.config.taskQueue,
    workflowId: `sweep-us-${harness.id}-golden-resend`,
    args: [{ region: 'us', releaseWaitMs: 60_000 }],
  });
  const delivered = async () =>
    (
      await us.pool.query<{ webhook_id: string }>(
        `SELECT webhook_id FROM webhook_deliveries WHERE status = 'delivered'`,
      )
    ).rows;
  await waitUntil(async () => (await delivered()).length === 1, 'the release webhook delivered');
  const [{ webhook_id: webhookId }] = (await delivered()) as [{ webhook_id: string }];

  const resent = await resendWebhookNow(
    { region: us.config, pool: us.pool, client: us.client },
    webhookId,
    'golden',
    'record a resend',
  );
  const handle = us.client.workflow.getHandle(resent.workflowId);
  expect(await handle.result()).toMatchObject({ status: 'resent', delivery: { status: 'delivered' } });
  console.log(
    `[golden] ${await addRecording(OUT, 'resendWebhook-resent', resent.workflowId, await handle.fetchHistory())}`,
  );

  const resendId = `rs_${harness.id}_refused`;
  const refusedId = resendWorkflowId('us', resendId);
  const refused = await us.client.workflow.execute('resendWebhook', {
    taskQueue: us.config.taskQueue,
    workflowId: refusedId,
    args: [
      {
        region: 'us',
        webhookId,
        claim: { resendId, requestedBy: 'golden', reason: 'x', requestId: 'rq_nope', approvedBy: 'other' },
      },
    ],
  });
  expect(refused).toMatchObject({ status: 'refused' });
  const history = await us.client.workflow.getHandle(refusedId).fetchHistory();
  console.log(
    `[golden] ${await addRecording(OUT, 'resendWebhook-refused', refusedId, history)} in ${path.relative(process.cwd(), OUT)}`,
  );
}, 180_000);
