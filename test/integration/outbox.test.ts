/**
 * The outbox reconciler on the real stack: webhooks whose delivery workflow was terminated after the release (a hold's
 * own, and a processor event's) are delivered once each, with their original ids, by the reconciler's schedule; a
 * webhook whose workflow completed without delivering it is reported, not repeated; a backlog larger than a run's
 * budget is worked through run by run, each going on where the last stopped; a quarantined webhook whose workflow was
 * terminated waits for its decision again in a new run, which takes it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { temporal } from '@temporalio/proto';
import { eventDeliveryWorkflowId } from '../../src/contracts/ids.js';
import { statusQuery, type HoldStatus } from '../../src/contracts/messages.js';
import { discardHold } from '../../src/operations/operations.js';
import { ensureOutboxSchedule, outboxScheduleId } from '../../src/schedules.js';
import { pauseMerchant, resumeMerchant } from '../../src/sql/merchants.js';
import type { OutboxReport } from '../../src/contracts/outbox.js';
import { reconcileOutbox } from '../../src/workflows/reconcile-outbox.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { backdate, holdWorkflowIdOf, seedNight } from '../support/ledger.js';
import { startTestReceiver, type TestReceiver } from '../support/processor.js';
import { terminateOnceRunning, waitUntil } from '../support/wait.js';

let harness: Harness;
let us: TestRegion;
let receiver: TestReceiver;

beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
  await harness.startWorker(us);
  receiver = await startTestReceiver(us);
});
afterAll(async () => {
  await us?.client.schedule
    .getHandle(outboxScheduleId(us.config))
    .delete()
    .catch(() => undefined);
  await receiver?.close();
  await harness?.close();
});

const statusOf = async (webhookId: string, region: TestRegion = us) =>
  (
    await region.pool.query<{ status: string }>('SELECT status FROM webhook_deliveries WHERE webhook_id = $1', [
      webhookId,
    ])
  ).rows[0]?.status;

describe('the outbox reconciler', () => {
  it('delivers stranded webhooks once, with their original ids, within the grace period and one interval; reports what it cannot fix', async () => {
    const n = await seedNight(
      us.pool,
      'us',
      `${harness.id}o`,
      { expired: 2, future: 1, merchants: 1 },
      harness.merchants,
    );
    const [merchantId] = n.merchantIds as [string];
    // The merchant paused: every delivery waits (held) after its release, so its workflow can be ended before it sends.
    await pauseMerchant(us.pool, merchantId, 'test: hold every delivery');
    await us.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-outbox`,
      args: [{ region: 'us', releaseWaitMs: 60_000 }],
    });
    const futureHold = n.future[0]!.id;
    expect(
      (
        await receiver.processor.send({
          eventId: `evt_${futureHold}_1`,
          holdId: futureHold,
          sequence: 1,
          type: 'hold.incremented',
          amountMinor: 100,
          currency: 'USD',
        })
      ).status,
    ).toBe(202);
    const webhooks = async () =>
      (
        await us.pool.query<{ webhook_id: string; hold_id: string; event_type: string }>(
          'SELECT webhook_id, hold_id, event_type FROM webhook_deliveries ORDER BY webhook_id',
        )
      ).rows;
    await waitUntil(async () => (await webhooks()).length === 3, 'two releases and one event, each with its webhook');
    const stranded = await webhooks();

    // Their workflows ended without finishing them (an operator terminated them): nothing drives the webhooks now.
    const workflowIds = await Promise.all(
      stranded.map(async (w) =>
        w.event_type === 'hold.released'
          ? holdWorkflowIdOf(us.pool, 'us', w.hold_id)
          : eventDeliveryWorkflowId('us', w.webhook_id),
      ),
    );
    const terminatedRuns = await terminateOnceRunning(us.client, workflowIds, 'test: strand its webhook');
    await resumeMerchant(us.pool, merchantId);
    for (const w of stranded) expect(await statusOf(w.webhook_id)).toBe('pending');
    // Their workflows had said when they would come back to them (a held re-check); that time has passed.
    await us.pool.query(`UPDATE webhook_deliveries SET awaited_until = now() - interval '1 hour'`);

    const outbox = { intervalMs: 2_000, graceMs: 1_000 };
    const scheduledAt = Date.now();
    await ensureOutboxSchedule(us.client, us.config, outbox);
    // Within the grace period (long past) and one interval, plus the deliveries themselves (one request each).
    await waitUntil(
      async () => (await Promise.all(stranded.map((w) => statusOf(w.webhook_id)))).every((s) => s === 'delivered'),
      'every stranded webhook delivered',
      30_000,
    );
    console.log(
      `[outbox] ${stranded.length} stranded webhooks delivered ${Date.now() - scheduledAt} ms after the schedule (grace ${outbox.graceMs} ms, interval ${outbox.intervalMs} ms)`,
    );

    // Once each, with its original id (and signed: the fake merchant verifies every request).
    const received = harness.merchants.requests(merchantId);
    expect(received.map((r) => r.webhookId).sort()).toEqual(stranded.map((w) => w.webhook_id).sort());
    for (const workflowId of workflowIds) {
      // The ledger says delivered a moment before the new run's last task completes, and a result() without a run id
      // reads whichever run is current when it asks: wait until the current run is a new one, completed.
      const handle = us.client.workflow.getHandle(workflowId);
      const current = async () => {
        const run = await handle.describe();
        return { restarted: run.runId !== terminatedRuns.get(workflowId), status: run.status.name };
      };
      await expect.poll(current, { timeout: 30_000 }).toEqual({ restarted: true, status: 'COMPLETED' });
    }
    const { rows: runs } = await us.pool.query<{
      restarted: number;
      unfixable: number;
      details: { restarted: string[] };
    }>('SELECT restarted, unfixable, details FROM outbox_reconciliations ORDER BY id');
    expect(runs.flatMap((r) => r.details.restarted).sort()).toEqual(stranded.map((w) => w.webhook_id).sort());
    expect(runs.reduce((n, r) => n + r.unfixable, 0)).toBe(0);

    // A webhook pending whose workflow completed (the ledger and the workflow disagree): reported, never repeated.
    const [odd] = stranded;
    await backdate(
      us.pool,
      `UPDATE webhook_deliveries SET status = 'pending', delivered_at = NULL, updated_at = now() - interval '1 hour' WHERE webhook_id = $1`,
      [odd!.webhook_id],
    );
    const lastRun = (await us.pool.query<{ id: string }>('SELECT max(id) AS id FROM outbox_reconciliations')).rows[0]!
      .id;
    await waitUntil(
      async () =>
        (await us.pool.query('SELECT 1 FROM outbox_reconciliations WHERE id > $1::bigint AND unfixable = 1', [lastRun]))
          .rowCount! > 0,
      'a reconcile reports it unfixable',
    );
    const { rows: latest } = await us.pool.query<{ details: { unfixable: { webhookId: string; why: string }[] } }>(
      'SELECT details FROM outbox_reconciliations WHERE unfixable = 1 ORDER BY id DESC LIMIT 1',
    );
    expect(latest[0]!.details.unfixable).toEqual([
      { webhookId: odd!.webhook_id, why: expect.stringMatching(/is COMPLETED and its webhook still pending/) },
    ]);
    expect(harness.merchants.requests(merchantId)).toHaveLength(3);
    await us.pool.query(
      `UPDATE webhook_deliveries SET status = 'delivered', delivered_at = now() WHERE webhook_id = $1`,
      [odd!.webhook_id],
    );
    await us.client.schedule.getHandle(outboxScheduleId(us.config)).delete();
  });

  it("works through a backlog larger than a run's budget run by run, each going on where the last stopped", async () => {
    // A ledger of its own, whose worker's reconciler looks at 2 webhooks a run.
    const small = await harness.region('us');
    await harness.startWorker(small, undefined, undefined, { outboxBudget: { webhooks: 2, ms: 60_000 } });
    const n = await seedNight(small.pool, 'us', `${harness.id}ob`, { expired: 5, merchants: 1 }, harness.merchants);
    // Paused: every delivery held, before and after its workflow is started again (its webhook stays pending).
    await pauseMerchant(small.pool, n.merchantIds[0]!, 'test: hold every delivery');
    await small.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: small.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-outbox-budget`,
      args: [{ region: 'us', releaseWaitMs: 60_000 }],
    });
    for (const hold of n.expired) {
      const handle = small.client.workflow.getHandle(await holdWorkflowIdOf(small.pool, 'us', hold.id));
      // Held, and on the record as held (when it comes back): terminated any earlier, its webhook would be a stranded
      // one the first run must look at.
      await waitUntil(
        async () =>
          (
            await small.pool.query(
              'SELECT 1 FROM webhook_deliveries WHERE hold_id = $1 AND awaited_until IS NOT NULL',
              [hold.id],
            )
          ).rowCount === 1,
        `${hold.id}'s delivery held, with when it comes back`,
      );
      await handle.terminate('test: strand its webhook');
    }
    const run = async (i: number): Promise<OutboxReport> =>
      small.client.workflow.execute(reconcileOutbox, {
        taskQueue: small.config.taskQueue,
        workflowId: `outbox-budget-${harness.id}-${i}`,
        args: [{ region: 'us', graceMs: 0 }],
      });
    // Each held delivery's workflow said it would be back within its re-check: not looked at before then.
    expect((await run(0)).checked).toBe(0);
    await small.pool.query(`UPDATE webhook_deliveries SET awaited_until = now() - interval '1 hour'`);
    const reports = [];
    for (let i = 1; i <= 3; i++) reports.push(await run(i));
    // The end of the backlog: the next run starts over, and looks at none of them once each restarted workflow, held
    // again, has said when it comes back.
    await waitUntil(
      async () =>
        (await small.pool.query('SELECT 1 FROM webhook_deliveries WHERE awaited_until > now()')).rowCount ===
        n.expired.length,
      'every restarted delivery held again, with when it comes back',
    );
    reports.push(await run(4));
    expect(reports.map((r) => [r.checked, r.restarted, r.running, r.resumeAfter !== undefined])).toEqual([
      [2, 2, 0, true],
      [2, 2, 0, true],
      [1, 1, 0, false],
      [0, 0, 0, false],
    ]);
    expect(new Set(reports.slice(0, 3).flatMap((r) => r.restartedWebhooks)).size).toBe(5);
  });

  it('a quarantined webhook whose workflow was terminated: a new run waits for its decision (same reason, since and deadline) and takes it; one whose workflow runs is left alone', async () => {
    const own = await harness.region('us');
    await harness.startWorker(own);
    const n = await seedNight(own.pool, 'us', `${harness.id}oq`, { expired: 1, merchants: 1 }, harness.merchants);
    const [merchantId] = n.merchantIds as [string];
    harness.merchants.script(merchantId, { secrets: [n.secrets.get(merchantId)!], responses: [{ status: 400 }] });
    await own.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: own.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-outbox-quarantine`,
      args: [{ region: 'us', releaseWaitMs: 60_000 }],
    });
    const holdId = n.expired[0]!.id;
    const handle = own.client.workflow.getHandle(await holdWorkflowIdOf(own.pool, 'us', holdId));
    const quarantinedStatus = () => handle.query(statusQuery).then((s) => (s.stage === 'quarantined' ? s : undefined));
    await waitUntil(async () => (await quarantinedStatus().catch(() => undefined)) !== undefined, 'quarantined');
    const before = (await quarantinedStatus())!;
    const { rows } = await own.pool.query<{ webhook_id: string; since: string }>(
      `SELECT webhook_id, to_char(quarantined_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS since
         FROM webhook_deliveries WHERE hold_id = $1 AND status = 'quarantined'`,
      [holdId],
    );
    const [{ webhook_id: webhookId, since: ledgerSince }] = rows as [{ webhook_id: string; since: string }];
    const run = async (i: number): Promise<OutboxReport> =>
      own.client.workflow.execute(reconcileOutbox, {
        taskQueue: own.config.taskQueue,
        workflowId: `outbox-quarantine-${harness.id}-${i}`,
        args: [{ region: 'us', graceMs: 0 }],
      });

    // Its workflow waits for a human: nothing to fix.
    const firstRunId = (await handle.describe()).runId;
    expect(await run(0)).toMatchObject({ checked: 1, running: 1, restarted: 0, unfixable: 0 });
    expect((await handle.describe()).runId).toBe(firstRunId);

    // Terminated: nobody would ever take its decision. The reconciler starts a run that waits for it again.
    await handle.terminate('test: strand its quarantine');
    expect(await run(1)).toMatchObject({ checked: 1, running: 0, restarted: 1, restartedWebhooks: [webhookId] });
    const restarted = await handle.describe();
    expect(restarted.runId).not.toBe(firstRunId);
    await waitUntil(async () => (await quarantinedStatus().catch(() => undefined)) !== undefined, 'waiting again');
    const after = (await quarantinedStatus())!;
    expect(after).toMatchObject({ policyRun: 1, reason: before.reason, since: ledgerSince });
    // The same deadline: the ledger's since plus the worker's timeout, as the first run's wait said it.
    const deadlineOf = async (runId: string) => {
      const events = (await own.client.workflow.getHandle(handle.workflowId, runId).fetchHistory()).events ?? [];
      const labels = events.map((e: temporal.api.history.v1.IHistoryEvent) =>
        e.timerStartedEventAttributes ? Buffer.from(e.userMetadata?.summary?.data ?? []).toString() : '',
      );
      const label = labels.find((l) => l.includes('waiting for a human'));
      return Date.parse(/abandons at ([^"]+)/.exec(label ?? '')?.[1] ?? '');
    };
    const timeoutMs =
      (await deadlineOf(firstRunId)) - Date.parse((before as Extract<HoldStatus, { since: string }>).since);
    expect(timeoutMs).toBeGreaterThan(0);
    expect(await deadlineOf(restarted.runId)).toBe(Date.parse(ledgerSince) + timeoutMs);
    expect(await statusOf(webhookId, own)).toBe('quarantined');
    expect((await own.pool.query('SELECT 1 FROM delivery_attempts WHERE webhook_id = $1', [webhookId])).rowCount).toBe(
      1,
    );

    // Running again: the next reconcile leaves it alone (no second run).
    expect(await run(2)).toMatchObject({ checked: 1, running: 1, restarted: 0 });
    expect((await handle.describe()).runId).toBe(restarted.runId);

    // And the decision is taken, by the new run, and recorded.
    const ops = { region: own.config, pool: own.pool, client: own.client };
    expect(await discardHold(ops, holdId, 'erin@example.com', 'merchant retired the endpoint')).toMatchObject({
      outcome: 'applied',
      answer: { decision: 'discard', policyRun: 1, stage: 'discarded' },
    });
    expect(await handle.result()).toMatchObject({ delivery: { status: 'discarded', policyRuns: 1 } });
    expect(await statusOf(webhookId, own)).toBe('discarded');
    expect(harness.merchants.requests(merchantId)).toHaveLength(1);
  });
});
