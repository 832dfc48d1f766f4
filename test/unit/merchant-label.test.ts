/**
 * The merchant_id label of the delivery metrics is bounded unless a deployment opts in (METRICS_MERCHANT_LABEL), so
 * 100,000 merchants do not make 100,000 series per counter.
 */
import type { MetricMeter, MetricTags } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { deliveryMetrics, withMerchantLabel } from '../../src/observability/metrics.js';

/** A meter that records every (metric, tags) it is given, as the Prometheus exporter would see them. */
function recordingMeter(series: Set<string>, base: MetricTags = {}): MetricMeter {
  const metric = <K extends string>(
    name: string,
    method: K,
    tags: MetricTags,
  ): Record<K, (value: number, extra?: MetricTags) => void> & object => {
    const m = {
      name,
      kind: 'counter' as const,
      valueType: 'int' as const,
      [method]: (_value: number, extra: MetricTags = {}) =>
        void series.add(`${name}${JSON.stringify({ ...tags, ...extra })}`),
      withTags: (more: MetricTags) => metric(name, method, { ...tags, ...more }),
    };
    return m as Record<K, (value: number, extra?: MetricTags) => void> & object;
  };
  return {
    createCounter: (name) => metric(name, 'add', base) as never,
    createHistogram: (name) => metric(name, 'record', base) as never,
    createGauge: (name) => metric(name, 'set', base) as never,
    withTags: (tags) => recordingMeter(series, { ...base, ...tags }),
  };
}

/** A night's worth of attempts over `merchants` merchants, through the activities' own metric definitions. */
function recordAttempts(meter: MetricMeter, merchants: number): void {
  const metrics = deliveryMetrics(meter);
  for (let i = 0; i < merchants; i++) {
    const merchant_id = `m_${i}`;
    metrics.attempts.add(1, { merchant_id, status_class: i % 10 === 0 ? '429' : '2xx' });
    const bucket = i % 2 === 0 ? `merchant:${merchant_id}` : 'destination:platform';
    metrics.throttleWaits.add(1, { merchant_id, lane: 'first', bucket, limit: 'rate' });
    metrics.retryAfterHonoured.withTags({ merchant_id }).add(1);
  }
}

describe('the merchant_id label', () => {
  it('by default every merchant counts under merchant_id="all", and its own budget as bucket="merchant": 10,000 merchants, five series', () => {
    const series = new Set<string>();
    recordAttempts(withMerchantLabel(recordingMeter(series), loadConfig({}).observability.merchantLabel), 10_000);
    expect([...series].sort()).toEqual([
      'hold_sweeper_retry_after_honoured{"merchant_id":"all"}',
      'hold_sweeper_throttle_waits{"merchant_id":"all","lane":"first","bucket":"destination:platform","limit":"rate"}',
      'hold_sweeper_throttle_waits{"merchant_id":"all","lane":"first","bucket":"merchant","limit":"rate"}',
      'hold_sweeper_webhook_attempts{"merchant_id":"all","status_class":"2xx"}',
      'hold_sweeper_webhook_attempts{"merchant_id":"all","status_class":"429"}',
    ]);
  });

  it('METRICS_MERCHANT_LABEL=per-merchant gives each merchant its own series', () => {
    const series = new Set<string>();
    const config = loadConfig({ METRICS_MERCHANT_LABEL: 'per-merchant' });
    recordAttempts(withMerchantLabel(recordingMeter(series), config.observability.merchantLabel), 20);
    expect(series.size).toBe(20 * 3);
    expect(series).toContain('hold_sweeper_webhook_attempts{"merchant_id":"m_10","status_class":"429"}');
    expect(series).toContain(
      'hold_sweeper_throttle_waits{"merchant_id":"m_10","lane":"first","bucket":"merchant:m_10","limit":"rate"}',
    );
  });

  it('METRICS_MERCHANT_LABEL accepts all or per-merchant, and names itself otherwise', () => {
    expect(loadConfig({ METRICS_MERCHANT_LABEL: 'all' }).observability.merchantLabel).toBe('all');
    expect(() => loadConfig({ METRICS_MERCHANT_LABEL: 'top-100' })).toThrow(ConfigError);
    expect(() => loadConfig({ METRICS_MERCHANT_LABEL: 'top-100' })).toThrow(
      /METRICS_MERCHANT_LABEL="top-100" is invalid: expected "all" .* or "per-merchant"/,
    );
  });
});
