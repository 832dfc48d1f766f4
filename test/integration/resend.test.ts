/**
 * Resend on the real stack: a delivered, a discarded and an abandoned webhook are sent again with their original
 * webhook id and payload and a fresh signature the Standard Webhooks reference verifier accepts (the fake merchants
 * verify every request with it), once per resend, in the replay lane, recorded (who, why, when) and shown by `status`;
 * a bulk resend goes through a frozen request and a second person's approval; a claim the ledger does not back is
 * refused by the worker with nothing sent; a resend whose workflow was terminated is finished by the outbox reconciler.
 */
import { WorkflowIdReusePolicy } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resendWorkflowId } from '../../src/contracts/ids.js';
import type { ReceivedWebhook } from '../../dev/fake-merchants.js';
import { discardHold, holdStatus, type OpsContext } from '../../src/operations/operations.js';
import { resendWebhookNow } from '../../src/operations/resends.js';
import { pauseMerchant, resumeMerchant } from '../../src/sql/merchants.js';
import { statusQuery } from '../../src/contracts/messages.js';
import { reconcileOutbox } from '../../src/workflows/reconcile-outbox.js';
import type { ResendWebhookResult } from '../../src/contracts/domain.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { seedNight, type Night } from '../support/ledger.js';
import { withOps } from '../support/ops.js';
import { waitUntil } from '../support/wait.js';

let harness: Harness;
let us: TestRegion;
let ops: OpsContext;
let nights = 0;

beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
  await harness.startWorker(us);
  ops = { region: us.config, pool: us.pool, client: us.client };
});
afterAll(async () => {
  await harness?.close();
});

/** Holds released by a sweep on `on`'s task queue (its worker's rules). */
async function night(holds: number, responses: { status: number }[], on: TestRegion = us): Promise<Night> {
  const n = await seedNight(
    us.pool,
    'us',
    `${harness.id}r${++nights}`,
    { expired: holds, merchants: 1 },
    harness.merchants,
  );
  const [merchantId] = n.merchantIds as [string];
  harness.merchants.script(merchantId, { secrets: [n.secrets.get(merchantId)!], responses });
  await us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: on.config.taskQueue,
    workflowId: `sweep-us-${harness.id}-r${nights}`,
    args: [{ region: 'us', releaseWaitMs: 60_000 }],
  });
  return n;
}

async function webhookOf(holdId: string): Promise<{ webhookId: string; status: string; payload: string }> {
  const { rows } = await us.pool.query<{ webhook_id: string; status: string; payload: string }>(
    'SELECT webhook_id, status, payload FROM webhook_deliveries WHERE hold_id = $1',
    [holdId],
  );
  return { webhookId: rows[0]!.webhook_id, status: rows[0]!.status, payload: rows[0]!.payload };
}

const statusOf = async (holdId: string) => (await webhookOf(holdId)).status;
const ok = (merchantId: string) => harness.merchants.requests(merchantId).filter((r) => r.answer === 200);

/** The next whole second: a signature covers its timestamp (seconds), so a resend's differs from the send before it. */
async function nextSecondAfter(request: ReceivedWebhook): Promise<void> {
  await waitUntil(async () => Math.floor(Date.now() / 1000) > Number(request.timestamp), 'the next second');
}

describe('resend', () => {
  it('sends a delivered webhook again: same id and payload, a fresh verified signature, once per resend, recorded and shown', async () => {
    const n = await night(1, [{ status: 200 }]);
    const [merchantId] = n.merchantIds as [string];
    const holdId = n.expired[0]!.id;
    await waitUntil(async () => (await statusOf(holdId)) === 'delivered', 'the release webhook delivered');
    const { webhookId, payload } = await webhookOf(holdId);
    const [first] = harness.merchants.requests(merchantId) as [ReceivedWebhook];
    await nextSecondAfter(first);

    await withOps(us, 'dev', async (run, lines) => {
      expect(
        await run(
          'resend',
          webhookId,
          '--by',
          'alice',
          '--reason',
          'merchant restored from a backup',
          '--ticket',
          'OPS-7',
        ),
      ).toBe(0);
      expect(lines.pop()).toMatch(
        new RegExp(`^resend rs_\\w+ of ${webhookId}: policy run 2, delivered by hold-resend-us-rs_\\w+$`),
      );
    });
    await waitUntil(
      async () => ok(merchantId).length === 2 && (await statusOf(holdId)) === 'delivered',
      'the resend delivered',
    );
    const [, again] = harness.merchants.requests(merchantId) as [ReceivedWebhook, ReceivedWebhook];
    expect(again).toMatchObject({ webhookId, body: payload, verified: true });
    expect(again.signature).not.toBe(first.signature);
    expect(again.timestamp).not.toBe(first.timestamp);

    // A second resend is one more request, and only one.
    await nextSecondAfter(again);
    const second = await resendWebhookNow(ops, webhookId, 'bob', 'merchant asked again');
    expect(second.policyRun).toBe(3);
    await waitUntil(
      async () => ok(merchantId).length === 3 && (await statusOf(holdId)) === 'delivered',
      'the second resend delivered',
    );
    const handle = us.client.workflow.getHandle<() => Promise<ResendWebhookResult>>(second.workflowId);
    expect(await handle.result()).toMatchObject({ status: 'resent', policyRun: 3, delivery: { status: 'delivered' } });
    const requests = harness.merchants.requests(merchantId);
    expect(requests).toHaveLength(3);
    expect(requests.every((r) => r.verified && r.webhookId === webhookId && r.body === payload)).toBe(true);
    expect(new Set(requests.map((r) => r.signature)).size).toBe(3);

    // Each resend is its own policy run (the replay lane), recorded with who, why and when, and shown by `status`.
    const attempts = await us.pool.query<{ policy_run: number; outcome: string }>(
      'SELECT policy_run, outcome FROM delivery_attempts WHERE webhook_id = $1 ORDER BY attempt_number',
      [webhookId],
    );
    expect(attempts.rows).toEqual([
      { policy_run: 1, outcome: 'delivered' },
      { policy_run: 2, outcome: 'delivered' },
      { policy_run: 3, outcome: 'delivered' },
    ]);
    const report = await holdStatus(ops, holdId);
    expect(report.resends).toMatchObject([
      {
        webhook_id: webhookId,
        policy_run: 2,
        from_status: 'delivered',
        requested_by: 'alice',
        reason: 'merchant restored from a backup',
        ticket: 'OPS-7',
      },
      {
        webhook_id: webhookId,
        policy_run: 3,
        from_status: 'delivered',
        requested_by: 'bob',
        workflow_id: second.workflowId,
      },
    ]);
    expect((report.resends[0] as { from_delivered_at: Date | null }).from_delivered_at).toBeInstanceOf(Date);
    await withOps(us, 'dev', async (run, lines) => {
      expect(await run('status', holdId)).toBe(0);
      expect(lines.pop()).toMatch(/resends:[\s\S]*alice[\s\S]*bob/);
    });
  });

  it('resends discarded and abandoned webhooks in bulk: a frozen request, a second person, each once, resumable', async () => {
    const n = await night(2, [{ status: 400 }], await harness.abandoningAfter(us, 8_000));
    const [merchantId] = n.merchantIds as [string];
    const [discarded, abandoned] = n.expired.map((h) => h.id) as [string, string];
    await waitUntil(async () => (await statusOf(discarded)) === 'quarantined', 'quarantined');
    expect((await discardHold(ops, discarded, 'carol', 'merchant said it does not want it')).outcome).toBe('applied');
    await waitUntil(
      async () => (await statusOf(abandoned)) === 'abandoned',
      'abandoned after its quarantine timeout',
      30_000,
    );
    const before = harness.merchants.requests(merchantId).length;
    harness.merchants.script(merchantId, { secrets: [n.secrets.get(merchantId)!], responses: [{ status: 200 }] });

    await withOps(us, 'dev', async (run, lines) => {
      expect(await run('webhooks', 'list', '--status', 'abandoned', '--merchant', merchantId, '--json')).toBe(0);
      expect(JSON.parse(lines.pop()!)).toMatchObject([
        { hold_id: abandoned, quarantine_reason: 'rejected', attempt_count: 1 },
      ]);
      await expect(run('webhooks', 'list', '--status', 'lost')).rejects.toThrow(/--status/);
      expect(await run('resend', 'preview', '--merchant', merchantId, '--requested-by', 'dana')).toBe(0);
      const id = /^resend request (rq_\w+): 2 webhook\(s\) at an end frozen/.exec(lines.pop()!)![1]!;
      await expect(run('resend', 'approve', id, '--by', 'DANA')).rejects.toMatchObject({ code: 'SelfApprovalRefused' });
      await expect(run('replay', 'approve', id, '--by', 'erin')).rejects.toMatchObject({
        code: 'ReplayRequestNotFound',
      });
      expect(await run('resend', 'approve', id, '--by', 'erin')).toBe(0);
      expect(lines.pop()).toMatch(
        `resend request ${id} approved: 2 resend(s) started, 0 no longer where the preview froze them`,
      );
      await waitUntil(
        async () => (await statusOf(discarded)) === 'delivered' && (await statusOf(abandoned)) === 'delivered',
        'both resent and delivered',
      );
      // Run again by the approver: nothing more is started.
      expect(await run('resend', 'approve', id, '--by', 'erin')).toBe(0);
      expect(lines.pop()).toMatch(
        '0 resend(s) started, 0 no longer where the preview froze them, 2 done by an earlier run of this approval',
      );
    });
    const resent = harness.merchants.requests(merchantId).slice(before);
    const ids = await Promise.all([discarded, abandoned].map(async (h) => (await webhookOf(h)).webhookId));
    expect(resent.map((r) => r.webhookId).sort()).toEqual(ids.sort());
    expect(resent.every((r) => r.verified && r.answer === 200)).toBe(true);
    const { rows } = await us.pool.query<{ from_status: string; requested_by: string; approved_by: string }>(
      `SELECT r.from_status, r.requested_by, r.approved_by FROM webhook_resends r
         JOIN webhook_deliveries d ON d.webhook_id = r.webhook_id WHERE d.merchant_id = $1 ORDER BY r.from_status`,
      [merchantId],
    );
    expect(rows).toEqual([
      { from_status: 'abandoned', requested_by: 'dana', approved_by: 'erin' },
      { from_status: 'discarded', requested_by: 'dana', approved_by: 'erin' },
    ]);
  });

  it('refuses what the ledger does not back: a webhook not at an end, one person under four eyes, a claimed request', async () => {
    const n = await night(1, [{ status: 400 }]);
    const [merchantId] = n.merchantIds as [string];
    const holdId = n.expired[0]!.id;
    await waitUntil(async () => (await statusOf(holdId)) === 'quarantined', 'quarantined');
    const { webhookId } = await webhookOf(holdId);
    await expect(resendWebhookNow(ops, webhookId, 'alice', 'again')).rejects.toMatchObject({ code: 'NotAtAnEnd' });
    await expect(resendWebhookNow(ops, 'wh_nope', 'alice', 'again')).rejects.toMatchObject({ code: 'NoDelivery' });
    expect((await discardHold(ops, holdId, 'carol', 'test')).outcome).toBe('applied');
    await waitUntil(async () => (await statusOf(holdId)) === 'discarded', 'discarded');
    await expect(resendWebhookNow({ ...ops, fourEyes: true }, webhookId, 'alice', 'again')).rejects.toMatchObject({
      code: 'FourEyesRequired',
    });
    const before = harness.merchants.requests(merchantId).length;

    // A client that starts the workflow itself, claiming an approval that does not exist: the worker refuses it.
    const claimed = await us.client.workflow.execute('resendWebhook', {
      taskQueue: us.config.taskQueue,
      workflowId: resendWorkflowId('us', `rs_${harness.id}_claimed`),
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      args: [
        {
          region: 'us',
          webhookId,
          claim: {
            resendId: `rs_${harness.id}_claimed`,
            requestedBy: 'mallory',
            reason: 'x',
            requestId: 'rq_nope',
            approvedBy: 'eve',
          },
        },
      ],
    });
    expect(claimed).toEqual({
      webhookId,
      resendId: `rs_${harness.id}_claimed`,
      status: 'refused',
      why: 'resend request rq_nope does not exist',
    });
    expect(await statusOf(holdId)).toBe('discarded');
    expect(harness.merchants.requests(merchantId)).toHaveLength(before);
    expect((await us.pool.query('SELECT 1 FROM webhook_resends WHERE webhook_id = $1', [webhookId])).rowCount).toBe(0);
  });

  it('where four eyes rule, the worker refuses a resend without an approved request, whoever starts it', async () => {
    const eu = await harness.region('eu');
    await harness.startWorker(eu, undefined, undefined, { fourEyes: true });
    const n = await seedNight(eu.pool, 'eu', `${harness.id}r4e`, { expired: 1, merchants: 1 }, harness.merchants);
    const [merchantId] = n.merchantIds as [string];
    await eu.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: eu.config.taskQueue,
      workflowId: `sweep-eu-${harness.id}-r4e`,
      args: [{ region: 'eu', releaseWaitMs: 60_000 }],
    });
    const delivered = async () =>
      (
        await eu.pool.query<{ webhook_id: string }>(
          `SELECT webhook_id FROM webhook_deliveries WHERE status = 'delivered'`,
        )
      ).rows;
    await waitUntil(async () => (await delivered()).length === 1, 'delivered');
    const [{ webhook_id: webhookId }] = (await delivered()) as [{ webhook_id: string }];
    const resendId = `rs_${harness.id}_one_person`;
    const result = await eu.client.workflow.execute('resendWebhook', {
      taskQueue: eu.config.taskQueue,
      workflowId: resendWorkflowId('eu', resendId),
      args: [{ region: 'eu', webhookId, claim: { resendId, requestedBy: 'alice', reason: 'one person' } }],
    });
    expect(result).toMatchObject({
      status: 'refused',
      why: expect.stringMatching(/^four eyes: a resend needs a request approved by a second person/),
    });
    // Nor does an input that claims the webhook was reopened already: a first run asks the worker whatever it says.
    const claimedId = `rs_${harness.id}_claims_reopened`;
    const claimed = await eu.client.workflow.execute('resendWebhook', {
      taskQueue: eu.config.taskQueue,
      workflowId: resendWorkflowId('eu', claimedId),
      args: [
        {
          region: 'eu',
          webhookId,
          claim: { resendId: claimedId, requestedBy: 'mallory', reason: 'says it is reopened' },
          reopened: { holdId: n.expired[0]!.id, policyRun: 2, retryHorizonMs: 60_000 },
        },
      ],
    });
    expect(claimed).toMatchObject({ status: 'refused', why: expect.stringMatching(/^four eyes/) });
    expect(harness.merchants.requests(merchantId)).toHaveLength(1);
    expect((await delivered()).length).toBe(1);
  });

  it('a resend whose workflow was terminated is finished by the outbox reconciler, once, with the original id', async () => {
    const n = await night(1, [{ status: 200 }]);
    const [merchantId] = n.merchantIds as [string];
    const holdId = n.expired[0]!.id;
    await waitUntil(async () => (await statusOf(holdId)) === 'delivered', 'delivered');
    const { webhookId } = await webhookOf(holdId);
    // Paused: the resend waits, held, so its workflow can be terminated before it sends.
    await pauseMerchant(us.pool, merchantId, 'test: hold the resend');
    const started = await resendWebhookNow(ops, webhookId, 'alice', 'lost by the merchant');
    expect(started.policyRun).toBe(2);
    const resend = us.client.workflow.getHandle(started.workflowId);
    await expect.poll(async () => (await resend.query(statusQuery)).stage, { timeout: 30_000 }).toBe('held');
    await resend.terminate('test: strand the resend');
    await resumeMerchant(us.pool, merchantId);
    expect(await statusOf(holdId)).toBe('pending');
    // Its workflow had said when it would re-check the held merchant; that time has passed.
    await us.pool.query(
      `UPDATE webhook_deliveries SET awaited_until = now() - interval '1 hour' WHERE webhook_id = $1`,
      [webhookId],
    );

    const report = await us.client.workflow.execute(reconcileOutbox, {
      taskQueue: us.config.taskQueue,
      workflowId: `outbox-us-${harness.id}-resend`,
      args: [{ region: 'us', graceMs: 0 }],
    });
    expect(report.restartedWebhooks).toContain(webhookId);
    await waitUntil(
      async () => (await statusOf(holdId)) === 'delivered',
      'the resend delivered by its restarted workflow',
    );
    const result = await us.client.workflow.getHandle<() => Promise<ResendWebhookResult>>(started.workflowId).result();
    expect(result).toMatchObject({ status: 'resent', policyRun: 2, delivery: { status: 'delivered' } });
    const requests = harness.merchants.requests(merchantId);
    expect(requests.map((r) => [r.webhookId, r.answer])).toEqual([
      [webhookId, 200],
      [webhookId, 200],
    ]);
  });
});
