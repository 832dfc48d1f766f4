/**
 * A swept hold's trace is sampled at TRACE_SAMPLE_RATIO (src/observability/tracing.ts): about that share of the holds
 * get a root span and the carrier their workflow's input holds; the rest get nothing, and cost no span.
 */
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { expect, it } from 'vitest';
import { startTracing, sweptHoldTrace } from '../../src/observability/tracing.js';

it('samples about the ratio of the swept holds, each sampled one a root span its carrier names', async () => {
  const exporter = new InMemorySpanExporter();
  const tracing = startTracing('test', { processor: new SimpleSpanProcessor(exporter), sampleRatio: 0.25 });
  try {
    const carriers = Array.from({ length: 2_000 }, (_, i) => sweptHoldTrace(`h_${i}`, 'm_1'));
    const sampled = carriers.filter((c) => c !== undefined);
    // 500 expected; 400 and 600 are more than five standard deviations (19.4) away.
    expect(sampled.length).toBeGreaterThan(400);
    expect(sampled.length).toBeLessThan(600);
    const spans = exporter.getFinishedSpans();
    expect(spans).toHaveLength(sampled.length);
    expect(sampled.map((c) => c.traceparent)).toEqual(
      spans.map((s) => `00-${s.spanContext().traceId}-${s.spanContext().spanId}-01`),
    );
    expect(spans.every((s) => s.name === 'hold swept' && s.parentSpanId === undefined)).toBe(true);
  } finally {
    await tracing.shutdown();
  }
});
