/**
 * Order and pacing on a machine kept busy: a CPU hog on every core beside the worker, and a night where each hold's
 * processor event (its webhook, ordinal 1) is written just before the sweep releases the hold (ordinal 2), so the
 * release's webhook looks for the event's delivery while the event workflow is still starting it. Each hold's webhooks
 * reach the merchant in order; no merchant's budget admits more than its rate in any second. How long a workflow task
 * takes here is the hogs' to decide, not the product's, so it is not asserted (test/integration/delivery-edges.test.ts
 * asserts the SDK's 5 s warning on an unloaded worker). And the moment that race turns on, made to last: an event's
 * webhook written, its delivery workflow not started yet; the release's webhook waits for it instead of taking it for
 * orphaned.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { maxInAnyWindow } from '../../bench/invariants.js';
import { statusQuery } from '../../src/contracts/messages.js';
import { eventDeliveryStart } from '../../src/contracts/starts.js';
import { startFromOutside } from '../../src/delivery/starts.js';
import { retryHorizonFor } from '../../src/delivery/policy.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { holdWorkflowIdOf, loggedAttempts, seedNight } from '../support/ledger.js';
import { startTestReceiver, type TestReceiver } from '../support/processor.js';
import { waitUntil } from '../support/wait.js';

let harness: Harness;
let us: TestRegion;
let receiver: TestReceiver;
const hogs: ChildProcess[] = [];

beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
  await harness.startWorker(us);
  receiver = await startTestReceiver(us);
});
afterAll(async () => {
  for (const hog of hogs) hog.kill('SIGKILL');
  await receiver?.close();
  await harness?.close();
});

/** A process that spins one core until killed. */
const hog = () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });

it("under a CPU hog on every core: each hold's webhooks in order, every merchant's admissions paced within its rate", async () => {
  const holds = 24;
  const night = await seedNight(
    us.pool,
    'us',
    `${harness.id}load`,
    { expired: 0, future: holds, merchants: 2 },
    harness.merchants,
  );
  await us.pool.query('UPDATE merchants SET rate_per_second = 5, burst = 1 WHERE id = ANY($1::text[])', [
    night.merchantIds,
  ]);
  for (let i = 0; i < os.availableParallelism(); i++) hogs.push(hog());

  // Each hold's event, then at once its expiry and the sweep: the release's webhook meets the event's while the event's
  // delivery workflow is being started.
  for (const hold of night.future) {
    const sent = await receiver.processor.send({
      eventId: `evt_${hold.id}_1`,
      holdId: hold.id,
      sequence: 1,
      type: 'hold.incremented',
      amountMinor: 5,
      currency: 'USD',
    });
    expect(sent.status).toBe(202);
  }
  await us.pool.query(`UPDATE auth_holds SET expires_at = now() - interval '1 second' WHERE id = ANY($1::text[])`, [
    night.future.map((h) => h.id),
  ]);
  await us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: us.config.taskQueue,
    workflowId: `sweep-us-${harness.id}-load`,
    args: [{ region: 'us', releaseWaitMs: 60_000 }],
  });
  await waitUntil(
    async () =>
      (await us.pool.query(`SELECT 1 FROM webhook_deliveries WHERE status = 'delivered'`)).rowCount === 2 * holds,
    'every webhook delivered',
    // 48 webhooks paced at 5 req/s take seconds; the bound is for a machine the hogs and the suite's other files share.
    240_000,
  );
  for (const h of hogs.splice(0)) h.kill('SIGKILL');

  const { rows } = await us.pool.query<{ webhook_id: string; hold_id: string; hold_ordinal: number; admitted: number }>(
    'SELECT webhook_id, hold_id, hold_ordinal, attempt_count AS admitted FROM webhook_deliveries',
  );
  const ofWebhook = new Map(rows.map((r) => [r.webhook_id, r]));
  const requests = night.merchantIds.flatMap((m) => harness.merchants.requests(m));
  // Per hold: the first request of each webhook, in the order the merchant received them.
  const firstSeen = new Map<string, { ordinal: number; at: number }[]>();
  for (const r of requests) {
    const w = ofWebhook.get(r.webhookId ?? '')!;
    const seen = firstSeen.get(w.hold_id) ?? [];
    if (!seen.some((s) => s.ordinal === w.hold_ordinal)) seen.push({ ordinal: w.hold_ordinal, at: r.receivedAt });
    firstSeen.set(w.hold_id, seen);
  }
  const outOfOrder = [...firstSeen].filter(([, seen]) =>
    seen.some((s, i) => i > 0 && (s.ordinal < seen[i - 1]!.ordinal || s.at < seen[i - 1]!.at)),
  );
  expect(firstSeen.size).toBe(holds);
  expect(outOfOrder.map(([holdId]) => holdId)).toEqual([]);
  // Every hold's event, then its release. Each merchant answers 200 at once, so one request each, but for one a
  // machine this busy cuts on the wire and sends again: never a request the gate did not admit and count.
  for (const [, seen] of firstSeen) expect(seen.map((s) => s.ordinal)).toEqual([1, 2]);
  expect(
    rows
      .filter((w) => requests.filter((r) => r.webhookId === w.webhook_id).length > w.admitted)
      .map((w) => w.webhook_id),
  ).toEqual([]);

  // Paced by the gate, which a late timer or a starved worker cannot bunch: at most the rate in any second of
  // admissions, by the gate's own clock in the attempt log (what reaches the merchant is that plus a busy machine's
  // delays, and the burst and the 10 % margin are its headroom for them).
  for (const m of night.merchantIds) {
    // Every admission counts, a failed one too (a request cut on the wire by a machine this busy is retried).
    const times = (await loggedAttempts(us.pool, [m])).map((a) => a.admittedAt);
    expect(times.length).toBeGreaterThanOrEqual(holds);
    expect(maxInAnyWindow(times), `${m}: at most its rate admitted in any second`).toBeLessThanOrEqual(5);
  }
}, 300_000);

it("a release's webhook waits for an earlier one of its hold whose delivery workflow is not started yet, then follows it", async () => {
  const night = await seedNight(us.pool, 'us', `${harness.id}gate`, { expired: 1, merchants: 1 }, harness.merchants);
  const hold = night.expired[0]!;
  // The event applied and its webhook written (ordinal 1); the event workflow has not started its delivery yet.
  const earlier = `wh_${hold.id}_ev1`;
  await us.pool.query(
    `INSERT INTO webhook_deliveries (webhook_id, hold_id, merchant_id, event_type, payload, hold_ordinal)
     VALUES ($1, $2, $3, 'hold.incremented', $4, 1)`,
    [earlier, hold.id, hold.merchantId, JSON.stringify({ type: 'hold.incremented', data: { hold_id: hold.id } })],
  );
  await us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: us.config.taskQueue,
    workflowId: `sweep-us-${harness.id}-gate`,
    args: [{ region: 'us', releaseWaitMs: 60_000 }],
  });
  const release = us.client.workflow.getHandle(await holdWorkflowIdOf(us.pool, 'us', hold.id));
  await expect
    .poll(async () => (await release.query(statusQuery)) as { stage: string; after?: string }, { timeout: 30_000 })
    .toMatchObject({ stage: 'waiting_for_budget', after: earlier });
  expect(harness.merchants.requests(hold.merchantId)).toEqual([]);

  // The event workflow's next command: the event's delivery starts, and the release's webhook follows it.
  await startFromOutside(
    us.client,
    us.config.taskQueue,
    'deliverHoldEvent',
    eventDeliveryStart('us', {
      webhookId: earlier,
      holdId: hold.id,
      merchantId: hold.merchantId,
      eventType: 'hold.incremented',
      retryHorizonMs: retryHorizonFor(hold.merchantId, {}),
    }),
  );
  await waitUntil(
    async () =>
      (await us.pool.query(`SELECT 1 FROM webhook_deliveries WHERE hold_id = $1 AND status = 'delivered'`, [hold.id]))
        .rowCount === 2,
    "both of the hold's webhooks delivered",
    60_000,
  );
  const { rows } = await us.pool.query<{ webhook_id: string }>(
    'SELECT webhook_id FROM webhook_deliveries WHERE hold_id = $1 ORDER BY hold_ordinal',
    [hold.id],
  );
  expect(harness.merchants.requests(hold.merchantId).map((r) => r.webhookId)).toEqual(rows.map((r) => r.webhook_id));
});
