/**
 * Budgets on the real stack: each merchant's is its own, at the rate it published for its endpoint, even where
 * merchants share a host; merchants share one only where a destination is declared with its own published rate (at
 * most that rate admitted in any second, by the gate's clock in the attempt log, and its cap on requests in flight over
 * all of them); a merchant
 * that hangs takes none of another's requests in flight; a region told to use half of each rate
 * (DESTINATION_RATE_SHARE) sends at most half.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maxInAnyWindow } from '../../bench/invariants.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { createMerchantBudget } from '../../src/sql/merchant-budget.js';
import { loggedAttempts, seedNight } from '../support/ledger.js';
import { waitUntil } from '../support/wait.js';

let harness: Harness;

beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await harness?.close();
});

async function night(region: TestRegion, prefix: string, holds: number, merchants: number) {
  const n = await seedNight(
    region.pool,
    region.config.region,
    `${harness.id}${prefix}`,
    { expired: holds, merchants },
    harness.merchants,
  );
  return n;
}

async function sweepAndDeliver(region: TestRegion, holds: number): Promise<void> {
  await region.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: region.config.taskQueue,
    workflowId: `sweep-${region.config.region}-${harness.id}-pace`,
    args: [{ region: region.config.region, releaseWaitMs: 60_000 }],
  });
  await waitUntil(
    async () =>
      (await region.pool.query(`SELECT 1 FROM webhook_deliveries WHERE status = 'delivered'`)).rowCount === holds,
    `${holds} webhooks delivered`,
    120_000,
  );
}

describe('budgets', () => {
  it('merchants on one host each keep their own budget: a hanging one holds its own requests, never the other’s', async () => {
    const us = await harness.region('us');
    await harness.startWorker(us);
    const n = await night(us, 'pb', 16, 2);
    const [hanging, healthy] = n.merchantIds as [string, string];
    for (const id of [hanging, healthy]) {
      await us.pool.query('UPDATE merchants SET endpoint_url = $2, rate_per_second = 10, burst = 1 WHERE id = $1', [
        id,
        harness.merchants.endpointFor(id, { sharedOrigin: true }),
      ]);
    }
    // One request in flight at a time for the hanging one: its webhooks wait for room, the healthy one's do not.
    await us.pool.query(`UPDATE merchants SET delivery_policy = '{"maxInFlight": 1}' WHERE id = $1`, [hanging]);
    harness.merchants.script(hanging, { secrets: [n.secrets.get(hanging)!], responses: [{ hang: true }] });
    const healthyHolds = n.expired.filter((h) => h.merchantId === healthy).length;
    await us.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-own`,
      args: [{ region: 'us', releaseWaitMs: 60_000 }],
    });
    await waitUntil(
      async () =>
        (
          await us.pool.query(`SELECT 1 FROM webhook_deliveries WHERE merchant_id = $1 AND status = 'delivered'`, [
            healthy,
          ])
        ).rowCount === healthyHolds,
      'the healthy merchant’s webhooks delivered',
      60_000,
    );
    // Meanwhile the hanging merchant had one request open at a time (one the sender gave up on may be followed by
    // another: how many depends on the machine's pace, the bound does not), and none of its webhooks got through.
    expect(harness.merchants.requests(hanging).length).toBeGreaterThanOrEqual(1);
    expect(harness.merchants.peakOpen(hanging).requests).toBe(1);
    const delivered = await us.pool.query(
      `SELECT 1 FROM webhook_deliveries WHERE merchant_id = $1 AND status = 'delivered'`,
      [hanging],
    );
    expect(delivered.rowCount).toBe(0);
    const { rows } = await us.pool.query<{ key: string }>(
      'SELECT key FROM unnest($1::text[]) AS m(id), budget_of(m.id) ORDER BY key',
      [[hanging, healthy]],
    );
    expect(rows.map((r) => r.key)).toEqual([`merchant:${hanging}`, `merchant:${healthy}`].sort());
  });

  it('a declared destination is one budget at its own published rate, shared by the merchants naming it', async () => {
    const us = await harness.region('us');
    await harness.startWorker(us);
    const holds = 36;
    const n = await night(us, 'pd', holds, 2);
    const [one, two] = n.merchantIds as [string, string];
    // A platform receiving for both: each publishes 10/s for itself, the platform 6/s for all of them together.
    await us.pool.query(`INSERT INTO destinations (id, rate_per_second) VALUES ('platform', 6)`);
    for (const id of [one, two]) {
      await us.pool.query(
        `UPDATE merchants SET endpoint_url = $2, rate_per_second = 10, burst = 1, destination_id = 'platform' WHERE id = $1`,
        [id, harness.merchants.endpointFor(id, { sharedOrigin: true })],
      );
    }
    await sweepAndDeliver(us, holds);
    expect(new Set([one, two].flatMap((id) => harness.merchants.requests(id).map((r) => r.webhookId))).size).toBe(
      holds,
    );
    // One gate for both: one emission interval (1.1 / 6 s) between any two of their admissions, by the gate's clock.
    // Every admission counts (a request a busy machine cut on the wire is admitted again).
    const times = (await loggedAttempts(us.pool, [one, two])).map((a) => a.admittedAt);
    expect(times.length).toBeGreaterThanOrEqual(holds);
    expect(maxInAnyWindow(times)).toBeLessThanOrEqual(6);
    // Of two turns taken one after the other, the second waits, and says whose bucket is empty: the destination's.
    const budget = createMerchantBudget(us.pool);
    const [, later] = [await budget.acquire(one, 'first'), await budget.acquire(two, 'first')];
    expect(later).toMatchObject({ outcome: 'wait', limitedBy: { bucket: 'destination:platform', limit: 'rate' } });
  });

  it('a region told to use half of each rate (DESTINATION_RATE_SHARE 0.5) sends at most half', async () => {
    const eu = await harness.region('eu');
    await harness.startWorker(eu, undefined, {
      allowInsecureHttp: true,
      allowPrivateAddresses: true,
      trustedNetworks: [],
      destinationRateShare: 0.5,
    });
    const holds = 16;
    const n = await night(eu, 'ph', holds, 1);
    const [merchantId] = n.merchantIds as [string];
    await eu.pool.query('UPDATE merchants SET rate_per_second = 10, burst = 0 WHERE id = $1', [merchantId]);
    await sweepAndDeliver(eu, holds);
    expect(new Set(harness.merchants.requests(merchantId).map((r) => r.webhookId)).size).toBe(holds);
    const times = (await loggedAttempts(eu.pool, [merchantId])).map((a) => a.admittedAt);
    expect(times.length).toBeGreaterThanOrEqual(holds);
    expect(maxInAnyWindow(times)).toBeLessThanOrEqual(5);
  });

  it('a lease on a request in flight is its attempt’s: a late give-back by an earlier attempt frees nothing of a later one', async () => {
    const us = await harness.region('us');
    const n = await seedNight(
      us.pool,
      'us',
      `${harness.id}pl`,
      { expired: 0, future: 1, merchants: 1 },
      harness.merchants,
    );
    const merchantId = n.merchantIds[0]!;
    const webhookId = `wh_${harness.id}_lease`;
    await us.pool.query(
      `INSERT INTO webhook_deliveries (webhook_id, hold_id, merchant_id, event_type, payload, hold_ordinal)
       VALUES ($1, $2, $3, 'hold.incremented', '{}', 1)`,
      [webhookId, n.future[0]!.id, merchantId],
    );
    const budget = createMerchantBudget(us.pool);
    const lease = (leaseMs: number) => ({ cap: 4, leaseMs });
    // Attempt 1's lease runs out (its worker was lost mid-request); attempt 2 takes one.
    const first = await budget.acquire(merchantId, 'first', false, webhookId, lease(1));
    await waitUntil(
      async () =>
        (await us.pool.query('SELECT 1 FROM merchant_requests_in_flight WHERE expires_at < now()')).rowCount === 1,
      "attempt 1's lease expired",
    );
    // Its turn at the gate (an emission interval after attempt 1's), as the delivery activity takes it.
    let second = await budget.acquire(merchantId, 'retry', false, webhookId, lease(60_000));
    await waitUntil(async () => {
      if (second.outcome !== 'send') second = await budget.acquire(merchantId, 'retry', true, webhookId, lease(60_000));
      return second.outcome === 'send';
    }, "attempt 2's turn");
    expect([first, second]).toMatchObject([
      { outcome: 'send', attemptNumber: 1 },
      { outcome: 'send', attemptNumber: 2 },
    ]);
    // While attempt 2's request is open, the webhook's next turn is refused by the in-flight limit, nothing reserved.
    expect(await budget.acquire(merchantId, 'retry', false, webhookId, lease(60_000))).toMatchObject({
      outcome: 'busy',
      limitedBy: { bucket: `merchant:${merchantId}`, limit: 'in_flight' },
    });
    // Attempt 1 gives its lease back late: attempt 2's stays.
    await budget.releaseLease(webhookId, 1);
    const held = async () =>
      (await us.pool.query<{ n: number }>('SELECT attempt_number AS n FROM merchant_requests_in_flight')).rows.map(
        (r) => r.n,
      );
    expect(await held()).toEqual([2]);
    await budget.releaseLease(webhookId, 2);
    expect(await held()).toEqual([]);
  });
});
