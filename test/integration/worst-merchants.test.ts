/**
 * Per-merchant signals without per-merchant series, on a ledger of 100,000 merchants: the workers' worst-merchant
 * gauges (src/observability/metrics.ts) name exactly the METRICS_WORST_MERCHANTS merchants with the highest 429 share,
 * error share (at least 10 attempts in 15 minutes) and backlog age, read from the ledger; a merchant that leaves the
 * worst reads 0; the series stay that few.
 */
import type { MetricMeter, MetricTags } from '@temporalio/common';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { insertAccounts, insertHolds } from '../../dev/seed.js';
import { startLedgerGauges } from '../../src/observability/metrics.js';
import { ledgerGaugeSource } from '../../src/sql/gauges.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';

let harness: Harness;
let us: TestRegion;

beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
});
afterAll(async () => {
  await harness?.close();
});

/** A meter that keeps the last value set for each (gauge, tags), as the Prometheus exporter would show it. */
function lastValueMeter(values: Map<string, number>, base: MetricTags = {}): MetricMeter {
  const metric = (name: string, tags: MetricTags) => ({
    name,
    kind: 'gauge' as const,
    valueType: 'float' as const,
    set: (value: number, extra: MetricTags = {}) =>
      void values.set(`${name}${JSON.stringify({ ...tags, ...extra })}`, value),
    add: () => undefined,
    record: () => undefined,
    withTags: (more: MetricTags) => metric(name, { ...tags, ...more }),
  });
  return {
    createCounter: (name) => metric(name, base) as never,
    createHistogram: (name) => metric(name, base) as never,
    createGauge: (name) => metric(name, base) as never,
    withTags: (tags) => lastValueMeter(values, { ...base, ...tags }),
  };
}

const series = (values: Map<string, number>, gauge: string) =>
  new Map(
    [...values]
      .filter(([key]) => key.startsWith(`${gauge}{`))
      .map(([key, value]) => [(JSON.parse(key.slice(gauge.length)) as { merchant_id: string }).merchant_id, value]),
  );

it('names the 10 worst of 100,000 merchants for each signal, and reads 0 for one that left', async () => {
  const prefix = `m_${harness.id}`;
  await us.pool.query(
    `INSERT INTO merchants (id, name, endpoint_url, rate_per_second, burst)
     SELECT $1::text || '_' || i, 'Merchant ' || i, 'https://m' || i || '.example/hooks', 5, 1 FROM generate_series(1, 100000) i`,
    [prefix],
  );
  // Merchants 1..15 each have 20 attempts in the window: merchant i failed i of them (503) and was answered 429 for
  // 15 - i; merchant 16 failed all of its 5 (too few to say anything). Each has one pending webhook, merchant i's i
  // minutes old.
  const ids = Array.from({ length: 16 }, (_, i) => `${prefix}_${i + 1}`);
  await insertAccounts(us.pool, [{ id: `a_${harness.id}`, currency: 'USD', availableMinor: 1_000_000 }]);
  await insertHolds(
    us.pool,
    ids.map((merchantId, i) => ({
      id: `h_${harness.id}_${i + 1}`,
      accountId: `a_${harness.id}`,
      merchantId,
      amountMinor: 100,
      currency: 'USD',
      expiresInSeconds: -60,
    })),
  );
  await us.pool.query(
    `INSERT INTO webhook_deliveries (webhook_id, hold_id, merchant_id, event_type, payload, hold_ordinal, created_at)
     SELECT 'wh_' || h.id, h.id, h.merchant_id, 'hold.released', '{}', 1, now() - make_interval(mins => split_part(h.id, '_', 3)::integer)
       FROM auth_holds h WHERE h.id LIKE $1::text`,
    [`h_${harness.id}_%`],
  );
  await us.pool.query(
    `INSERT INTO delivery_attempts (webhook_id, attempt_number, policy_run, scheduled_at, started_at, duration_ms, status_code, outcome)
     SELECT 'wh_h_' || $1::text || '_' || m, n, 1, now() - interval '1 minute', now() - interval '1 minute', 10,
            CASE WHEN n <= m THEN 503 WHEN m <= 15 AND n <= 15 THEN 429 ELSE 200 END, 'retry'
       FROM generate_series(1, 16) m, generate_series(1, 20) n WHERE m <= 15 OR n <= 5`,
    [harness.id],
  );

  const values = new Map<string, number>();
  const gauges = startLedgerGauges({
    region: 'us',
    source: ledgerGaugeSource(us.pool),
    meter: lastValueMeter(values),
    intervalMs: 3_600_000,
    quarantinePageAfterMs: 3_600_000,
    sweepIntervalMs: 900_000,
  });
  try {
    await gauges.refresh();
    const errors = series(values, 'hold_sweeper_worst_merchant_error_share');
    expect([...errors.keys()].sort()).toEqual(ids.slice(5, 15).sort());
    expect(errors.get(`${prefix}_15`)).toBeCloseTo(15 / 20);
    expect(errors.get(`${prefix}_6`)).toBeCloseTo(6 / 20);
    const throttled = series(values, 'hold_sweeper_worst_merchant_429_share');
    expect([...throttled.keys()].sort()).toEqual(ids.slice(0, 10).sort());
    expect(throttled.get(`${prefix}_1`)).toBeCloseTo(14 / 20);
    const backlog = series(values, 'hold_sweeper_worst_merchant_backlog_age_seconds');
    expect([...backlog.keys()].sort()).toEqual(ids.slice(6, 16).sort());
    expect(backlog.get(`${prefix}_16`)).toBeGreaterThanOrEqual(16 * 60);

    // Merchant 15 recovers: it leaves the worst error shares (reads 0); merchant 5 takes its place.
    await us.pool.query(`UPDATE delivery_attempts SET status_code = 200 WHERE webhook_id = $1`, [
      `wh_h_${harness.id}_15`,
    ]);
    await gauges.refresh();
    const after = series(values, 'hold_sweeper_worst_merchant_error_share');
    expect(after.get(`${prefix}_15`)).toBe(0);
    expect(after.get(`${prefix}_5`)).toBeCloseTo(5 / 20);
    expect(after.size).toBe(11);
    // 100,000 merchants, a few dozen series in all.
    expect([...values.keys()].filter((k) => k.startsWith('hold_sweeper_worst_merchant_')).length).toBe(31);
  } finally {
    gauges.stop();
  }
}, 120_000);
