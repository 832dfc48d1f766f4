/**
 * Pacing per destination on the real stack: the budget belongs to the endpoint's origin, not to the merchant row. Two
 * merchants on one endpoint share it at the strictest rate either publishes (at most that rate + burst in any second at
 * the receiver); a region told to use half of each destination's rate (DESTINATION_RATE_SHARE) sends at most half.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maxInAnyWindow } from '../../bench/invariants.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { seedNight } from '../support/ledger.js';
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

describe('pacing per destination', () => {
  it('the ledger names an endpoint’s destination by its origin: scheme, host and port, as a URL parser reads them', async () => {
    const us = await harness.region('us');
    const { rows } = await us.pool.query<{ origin: string }>(
      `SELECT endpoint_origin(u) AS origin FROM unnest($1::text[]) WITH ORDINALITY AS t(u, i) ORDER BY i`,
      [
        [
          'HTTPS://Shop.Example.COM./hooks?a=1',
          'https://shop.example.com:443/other',
          'https://shop.example.com:0443',
          'http://127.0.0.1:8080/webhooks/m_1',
          'https://[2001:DB8::1]/x',
          'https://shop.example.com:8443/x',
        ],
      ],
    );
    expect(rows.map((r) => r.origin)).toEqual([
      'https://shop.example.com:443',
      'https://shop.example.com:443',
      'https://shop.example.com:443',
      'http://127.0.0.1:8080',
      'https://[2001:db8::1]:443',
      'https://shop.example.com:8443',
    ]);
  });

  it('two merchants on one endpoint share one budget at the strictest rate: at most rate + burst in any second', async () => {
    const us = await harness.region('us');
    await harness.startWorker(us);
    const holds = 36;
    const n = await night(us, 'pd', holds, 2);
    const [fast, slow] = n.merchantIds as [string, string];
    // One endpoint (an aggregator): both rows point at the same origin; one publishes 10/s, the other 6/s.
    for (const [id, rate] of [
      [fast, 10],
      [slow, 6],
    ] as const) {
      await us.pool.query('UPDATE merchants SET endpoint_url = $2, rate_per_second = $3, burst = 1 WHERE id = $1', [
        id,
        harness.merchants.endpointFor(id, { sharedOrigin: true }),
        rate,
      ]);
    }
    await sweepAndDeliver(us, holds);
    const times = [fast, slow].flatMap((id) => harness.merchants.requests(id).map((r) => r.receivedAt));
    expect(times).toHaveLength(holds);
    // Per merchant, each would have been inside its own limit; together they are inside the strictest one.
    expect(maxInAnyWindow(times)).toBeLessThanOrEqual(6 + 1);
    const { rows } = await us.pool.query<{ n: number }>(
      `SELECT count(DISTINCT endpoint_origin)::integer AS n FROM merchants WHERE id = ANY($1)`,
      [[fast, slow]],
    );
    expect(rows[0]!.n).toBe(1);
  });

  it('a region told to use half of each destination’s rate (DESTINATION_RATE_SHARE 0.5) sends at most half', async () => {
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
    const times = harness.merchants.requests(merchantId).map((r) => r.receivedAt);
    expect(times).toHaveLength(holds);
    expect(maxInAnyWindow(times)).toBeLessThanOrEqual(5);
  });
});
