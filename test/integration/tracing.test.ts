/**
 * One trace per hold's story, on the real stack: a processor callback's span in the receiver, the signal-with-start
 * it sends, the hold's event workflow, the event's application, the child workflow that delivers its webhook and the
 * webhook attempt share one trace id (OpenTelemetry through the SDK's interceptors, src/observability/tracing.ts), as
 * an in-memory exporter receives them; the receiver's log line about the callback names that trace.
 */
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTracing, type Tracing } from '../../src/observability/tracing.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { seedNight } from '../support/ledger.js';
import { capturedLogger } from '../support/logs.js';
import { startTestReceiver, tracedClient } from '../support/processor.js';
import { waitUntil } from '../support/wait.js';

let harness: Harness;
let us: TestRegion;
let tracing: Tracing;
const exporter = new InMemorySpanExporter();

beforeAll(async () => {
  tracing = startTracing('hold-sweeper-test', { processor: new SimpleSpanProcessor(exporter) });
  harness = await openHarness();
  us = await harness.region('us');
  await harness.startWorker(us, undefined, undefined, { tracing });
});
afterAll(async () => {
  await harness?.close();
  await tracing?.shutdown();
});

it('a processor callback, the workflow it signals, the event applied and its webhook attempt share one trace', async () => {
  const night = await seedNight(
    us.pool,
    'us',
    `${harness.id}tr`,
    { expired: 0, future: 1, merchants: 1 },
    harness.merchants,
  );
  const hold = night.future[0]!;
  const receiverLog = capturedLogger('receiver');
  const { processor, close } = await startTestReceiver(us, { client: tracedClient(us), logger: receiverLog.logger });
  try {
    const sent = await processor.send({
      eventId: `evt_${hold.id}_1`,
      holdId: hold.id,
      sequence: 1,
      type: 'hold.incremented',
      amountMinor: 100,
      currency: 'USD',
    });
    expect(sent.status).toBe(202);
    await waitUntil(
      async () =>
        (await us.pool.query(`SELECT 1 FROM webhook_deliveries WHERE hold_id = $1 AND status = 'delivered'`, [hold.id]))
          .rowCount === 1,
      "the event's webhook delivered",
    );
    // The hold's event workflow runs on, waiting for its next event: its own run span ends when it does. The delivery's
    // run span ends when its workflow completes, and leaves the sandbox with that last task, after the attempt's own:
    // the trace is read once every one of these has come.
    const expected = [
      'processor event',
      'SignalWithStartWorkflow:applyHoldEvents',
      'HandleSignal:processorEvent',
      'StartActivity:applyProcessorEvent',
      'RunActivity:applyProcessorEvent',
      'StartChildWorkflow:deliverHoldEvent',
      'RunWorkflow:deliverHoldEvent',
      'StartActivity:deliverWebhook',
      'RunActivity:deliverWebhook',
    ];
    let spans: ReadableSpan[] = [];
    const callback = () => exporter.getFinishedSpans().find((s) => s.name === 'processor event');
    await waitUntil(async () => {
      const root = callback();
      spans = root
        ? exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === root.spanContext().traceId)
        : [];
      return expected.every((name) => spans.some((s) => s.name === name));
    }, 'every span of the callback’s story in its trace');
    const names = spans.map((s) => s.name);
    console.log(`[tracing] one trace, ${spans.length} spans: ${[...new Set(names)].join(', ')}`);
    expect(names).toEqual(expect.arrayContaining(expected));
    // Every span's parent is in the trace, but for the callback (its root) and what the hold's event workflow did in
    // its own run, whose span is still open: their parent is that one span.
    const ids = new Set(spans.map((s) => s.spanContext().spanId));
    const orphans = spans.filter((s) => s.name !== 'processor event' && !ids.has(s.parentSpanId ?? ''));
    expect(orphans.map((s) => s.name).sort()).toEqual([
      'StartActivity:applyProcessorEvent',
      'StartChildWorkflow:deliverHoldEvent',
    ]);
    expect(new Set(orphans.map((s) => s.parentSpanId)).size).toBe(1);
    expect(spans.find((s) => s.name === 'processor event')!.parentSpanId).toBeUndefined();
    // The receiver's line about the callback names the trace (from a log line to its trace, and back) and the request.
    expect(receiverLog.lines.find((l) => l.msg === 'processor event recorded')).toMatchObject({
      eventId: `evt_${hold.id}_1`,
      holdId: hold.id,
      traceId: callback()!.spanContext().traceId,
      spanId: callback()!.spanContext().spanId,
      requestId: expect.any(String),
    });
  } finally {
    await close();
  }
}, 120_000);
