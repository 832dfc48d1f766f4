/**
 * The invariant checker finds what it is there to find: each invariant broken on purpose, each reported with
 * the offending id. (Its passing side is exercised by every test that asserts "no violations".)
 */
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createLedgerActivities } from '../../src/activities/ledger.js';
import type { ReceivedWebhook } from '../../dev/fake-merchants.js';
import type { ReleaseOutcome } from '../../src/contracts/domain.js';
import { checkInvariants, maxInAnyWindow, windowHeadroomMs } from '../../bench/invariants.js';
import { openHarness, type Harness } from '../support/harness.js';
import { seedNight } from '../support/ledger.js';

let harness: Harness;
beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await harness?.close();
});

it('reports a violation of each invariant with the offending ids', async () => {
  const us = await harness.region('us');
  const eu = await harness.region('eu');
  const night = await seedNight(us.pool, 'us', `${harness.id}inv`, { expired: 3, merchants: 1 }, harness.merchants);
  await seedNight(eu.pool, 'eu', `${harness.id}inve`, { expired: 1, merchants: 1 }, harness.merchants);
  const release = (holdId: string) =>
    new MockActivityEnvironment().run(createLedgerActivities({ region: 'us', pool: us.pool }).releaseHold, {
      holdId,
    }) as Promise<ReleaseOutcome>;
  const released = await release(night.expired[0]!.id);
  if (released.status !== 'released') throw new Error('setup: expected a release');
  await release(night.expired[1]!.id);
  const merchantId = night.merchantIds[0]!;
  const payload = (
    await us.pool.query('SELECT payload FROM webhook_deliveries WHERE webhook_id = $1', [released.webhookId])
  ).rows[0].payload as string;
  const request = (over: Partial<ReceivedWebhook>): ReceivedWebhook => ({
    merchantId,
    receivedAt: 1_000_000,
    webhookId: released.webhookId,
    timestamp: '1',
    signature: 'v1,x',
    idempotencyKey: released.webhookId,
    body: payload,
    verified: true,
    answer: 200,
    ...over,
  });
  // Broken on purpose: a second ledger entry's worth of held balance (1), hold 3 left active (2), a changed body (3),
  // 7 attempts admitted inside one second to a 5 + 1 merchant (4), a webhook for no committed release (5), a US
  // webhook at an EU merchant (6), a secret in a log (7).
  await us.pool.query('UPDATE accounts SET held_minor = held_minor + 1 WHERE id = $1', [night.expired[0]!.accountId]);
  await us.pool.query(
    `INSERT INTO delivery_attempts (webhook_id, attempt_number, policy_run, scheduled_at, started_at, duration_ms, status_code, outcome)
     SELECT $1, n, 1, t, t, 5, 500, 'retry'
       FROM generate_series(1, 7) n, LATERAL (SELECT timestamptz '2026-12-01 02:00:00Z' + n * interval '140 ms' AS t) s`,
    [released.webhookId],
  );
  const euMerchant = (await eu.pool.query('SELECT id FROM merchants LIMIT 1')).rows[0].id as string;
  const requests = [
    ...Array.from({ length: 6 }, (_, i) => request({ receivedAt: 1_000_000 + i * 100 })),
    request({ receivedAt: 1_000_650, body: payload.replace('"type"', '"typ"') }),
    request({ webhookId: 'wh_never_released', receivedAt: 5_000_000 }),
    request({ merchantId: euMerchant, receivedAt: 9_000_000 }),
  ];
  const secret = night.secrets.get(merchantId)!;
  const violations = await checkInvariants({
    regions: [
      { region: 'us', pool: us.pool, secretKeys: us.config.secretKeys },
      { region: 'eu', pool: eu.pool, secretKeys: eu.config.secretKeys },
    ],
    requests,
    texts: [
      { source: 'worker 0 logs', text: `{"msg":"oops","secret":"${secret}"}` },
      { source: 'clean', text: 'nothing here' },
    ],
  });
  const byInvariant = (n: number) => violations.filter((v) => v.invariant === n);
  expect(byInvariant(1)).toMatchObject([{ ids: [night.expired[0]!.accountId] }]);
  expect(byInvariant(2).flatMap((v) => v.ids)).toEqual(expect.arrayContaining([night.expired[2]!.id]));
  expect(byInvariant(3)).toMatchObject([
    { message: 'webhook body differs from the payload fixed at release', ids: [released.webhookId] },
  ]);
  expect(byInvariant(4)).toMatchObject([{ ids: [`${merchantId} (7 > 6)`] }]);
  expect(byInvariant(5)).toMatchObject([{ ids: ['wh_never_released'] }]);
  expect(byInvariant(6)).toMatchObject([{ ids: [released.webhookId] }]);
  expect(byInvariant(7)).toMatchObject([{ ids: ['worker 0 logs'] }]);
});

it('measures how close a merchant came to its 1-second limit', () => {
  // Paced at 220 ms (5 req/s with the 10 % margin): 7 requests span 1,320 ms, so the 7th may arrive 320 ms early.
  const paced = Array.from({ length: 20 }, (_, i) => 1_000 + i * 220);
  expect(maxInAnyWindow(paced)).toBe(5);
  expect(windowHeadroomMs(paced, 6)).toBe(320);
  // Two at once, then paced: the 7th is only 100 ms away from making 7 in one second.
  const bursty = [1_000, ...paced];
  expect(windowHeadroomMs(bursty, 6)).toBe(100);
  // A violation is negative headroom, and agrees with the window count.
  const late = [...bursty.slice(0, 2).map((t) => t + 150), ...bursty.slice(2)];
  expect(maxInAnyWindow(late)).toBe(7);
  expect(windowHeadroomMs(late, 6)).toBe(-50);
  expect(windowHeadroomMs([1, 2, 3], 6)).toBe(Infinity);
});
