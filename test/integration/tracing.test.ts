/**
 * One trace per hold's story, on the real stack: a processor callback's span in the receiver, the signal-with-start
 * it sends, the hold's event workflow, the event's application, the child workflow that delivers its webhook and the
 * webhook attempt share one trace id (OpenTelemetry through the SDK's interceptors, src/observability/tracing.ts), as
 * an in-memory exporter receives them; the receiver's log line about the callback names that trace. What a merchant
 * answers stays in the ledger, inert: never in a span, a worker's log line, or raw on an operator's terminal.
 */
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { LogEntry } from '@temporalio/worker';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { eventDeliveryWorkflowId, holdEventsWorkflowId } from '../../src/contracts/ids.js';
import { startTracing, type Tracing } from '../../src/observability/tracing.js';
import { pauseMerchant, resumeMerchant } from '../../src/sql/merchants.js';
import { reconcileOutbox } from '../../src/workflows/reconcile-outbox.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { holdWorkflowIdOf, seedNight } from '../support/ledger.js';
import { capturedLogger } from '../support/logs.js';
import { withOps } from '../support/ops.js';
import { startTestReceiver, tracedClient } from '../support/processor.js';
import { onceRunning, terminateOnceRunning, waitUntil } from '../support/wait.js';

let harness: Harness;
let us: TestRegion;
let tracing: Tracing;
const exporter = new InMemorySpanExporter();
/** Every entry the workers log from WARN up (a failed activity's among them), the SDK core's included. */
const workerLog: LogEntry[] = [];

beforeAll(async () => {
  tracing = startTracing('hold-sweeper-test', { processor: new SimpleSpanProcessor(exporter), sampleRatio: 1 });
  harness = await openHarness({ logSink: (entry) => workerLog.push(entry) });
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

it("a swept hold, sampled, is one trace: the sweep's listing, its workflow, the release's ledger statements, the budget's wait and the HTTP request", async () => {
  const night = await seedNight(us.pool, 'us', `${harness.id}sw`, { expired: 1, merchants: 1 }, harness.merchants);
  const hold = night.expired[0]!;
  await us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: us.config.taskQueue,
    workflowId: `sweep-us-${harness.id}-traced`,
    args: [{ region: 'us', releaseWaitMs: 60_000 }],
  });
  // The hold's run span leaves the sandbox with the workflow's last task, after every span of what it did.
  let spans: ReadableSpan[] = [];
  await waitUntil(async () => {
    const root = exporter
      .getFinishedSpans()
      .find((s) => s.name === 'hold swept' && s.attributes['hold_sweeper.hold_id'] === hold.id);
    spans = root
      ? exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === root.spanContext().traceId)
      : [];
    return spans.some((s) => s.name === 'RunWorkflow:releaseExpiredHold');
  }, "the hold's trace, its workflow's run span in it");
  const names = spans.map((s) => s.name);
  console.log(`[tracing] a swept hold's trace, ${spans.length} spans: ${[...new Set(names)].join(', ')}`);
  expect(names).toEqual(
    expect.arrayContaining([
      'hold swept',
      'RunWorkflow:releaseExpiredHold',
      'RunActivity:releaseAndDeliver',
      'hold release',
      'webhook attempt',
      'merchant budget wait',
      'POST',
    ]),
  );
  // One root, and every other span's parent in the trace.
  const ids = new Set(spans.map((s) => s.spanContext().spanId));
  expect(spans.filter((s) => !ids.has(s.parentSpanId ?? '')).map((s) => s.name)).toEqual(['hold swept']);
  const parentOf = (name: string) =>
    spans.find((s) => s.spanContext().spanId === spans.find((t) => t.name === name)?.parentSpanId)?.name;
  expect(parentOf('hold release')).toBe('RunActivity:releaseAndDeliver');
  expect(parentOf('webhook attempt')).toBe('RunActivity:releaseAndDeliver');
  expect(parentOf('merchant budget wait')).toBe('webhook attempt');
  expect(parentOf('POST')).toBe('webhook attempt');
  expect(spans.find((s) => s.name === 'POST')?.attributes['http.response.status_code']).toBe(200);
  // The release's statements under its activity, as the ledger ran them: placeholders, never values.
  const release = spans.find((s) => s.name === 'hold release')!.spanContext().spanId;
  const statements = spans.filter((s) => s.name.startsWith('ledger ') && s.parentSpanId === release);
  expect(statements.map((s) => s.name)).toEqual(expect.arrayContaining(['ledger BEGIN', 'ledger COMMIT']));
  expect(statements.map((s) => String(s.attributes['db.query.text'])).join('\n')).not.toContain(hold.id);
}, 120_000);

/** A merchant's answer that commands a terminal: a window title, a colour, a clipboard write, a C1 CSI, a new line. */
const HOSTILE_BODY = '\x1b]0;pwned\x07\x1b[31mRED\x1b]52;c;ZXZpbA==\x07 secret-excerpt-words\u009b2J\nsecond line';
/** The same, inert: what the ledger keeps and an operator reads. */
const HOSTILE_INERT =
  '\\u001b]0;pwned\\u0007\\u001b[31mRED\\u001b]52;c;ZXZpbA==\\u0007 secret-excerpt-words\\u009b2J\\nsecond line';
/** Any of the merchant's words. */
const MERCHANT_WORDS = /pwned|ZXZpbA|secret-excerpt-words|second line/;
/** A control character other than a line break. */
const CONTROL_BUT_LINE_BREAK = /(?!\n)\p{Cc}/u;

it("a merchant's answer stays in the ledger, inert: no span, no worker log line quotes it, the ops CLI prints it escaped", async () => {
  const night = await seedNight(us.pool, 'us', `${harness.id}mx`, { expired: 1, merchants: 1 }, harness.merchants);
  const merchantId = night.merchantIds[0]!;
  harness.merchants.script(merchantId, {
    secrets: [night.secrets.get(merchantId)!],
    responses: [{ status: 400, body: HOSTILE_BODY }],
  });
  await us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: us.config.taskQueue,
    workflowId: `sweep-us-${harness.id}-mx`,
    args: [{ region: 'us', releaseWaitMs: 60_000 }],
  });
  const quarantined = async () =>
    (
      await us.pool.query<{ webhook_id: string; last_error: string; response_excerpt: string }>(
        `SELECT d.webhook_id, d.last_error, a.response_excerpt
           FROM webhook_deliveries d JOIN delivery_attempts a USING (webhook_id)
          WHERE d.hold_id = $1 AND d.status = 'quarantined'`,
        [night.expired[0]!.id],
      )
    ).rows[0];
  await waitUntil(async () => (await quarantined()) !== undefined, 'the webhook quarantined as rejected');
  const row = (await quarantined())!;
  // The ledger keeps the merchant's words, inert: the attempt's excerpt, and its start on the quarantined delivery.
  expect(row.response_excerpt).toBe(HOSTILE_INERT);
  expect(row.last_error).toBe(`HTTP 400 from merchant ${merchantId} (not retryable): ${HOSTILE_INERT}`);

  // The attempt's span says its status and size; no span says a word of the answer.
  const workflowId = await holdWorkflowIdOf(us.pool, 'us', night.expired[0]!.id);
  // The first attempt, in its release's local activity.
  const attemptSpan = () => {
    const spans = exporter.getFinishedSpans();
    const activity = spans.find(
      (s) => s.name === 'RunActivity:releaseAndDeliver' && s.attributes.temporalWorkflowId === workflowId,
    );
    return spans.find((s) => s.name === 'webhook attempt' && s.parentSpanId === activity?.spanContext().spanId);
  };
  await waitUntil(async () => attemptSpan() !== undefined, "the rejected attempt's span exported");
  expect(attemptSpan()!.attributes).toMatchObject({
    'webhook.status_class': '4xx',
    'http.response.status_code': 400,
    'webhook.response_bytes': Buffer.byteLength(HOSTILE_BODY),
  });
  expect(attemptSpan()!.status.message).toBe('WebhookRejected');
  const spans = JSON.stringify(
    exporter
      .getFinishedSpans()
      .map((s) => ({ name: s.name, attributes: s.attributes, status: s.status, events: s.events })),
  );
  expect(spans).not.toMatch(MERCHANT_WORDS);
  // Nor its ESC or BEL, as JSON.stringify escapes them or as the ledger keeps them.
  expect(spans).not.toMatch(/\\u001b|\\u0007/);

  // The worker logged the failed attempt (its failure and stack), without the answer.
  const logged = workerLog.map(
    (e) =>
      `${e.message} ${JSON.stringify(e.meta, (_, v: unknown) => (v instanceof Error ? { message: v.message, stack: v.stack } : v))}`,
  );
  expect(logged.filter((l) => l.includes(`HTTP 400 from merchant ${merchantId}`))).not.toEqual([]);
  expect(logged.join('\n')).not.toMatch(MERCHANT_WORDS);
  expect(logged.join('\n')).not.toMatch(CONTROL_BUT_LINE_BREAK);

  // The operator's terminal: what the ledger holds prints escaped, a row written raw (before its text was made inert)
  // included.
  await withOps(us, 'dev', async (ops, lines) => {
    expect(await ops('quarantine', 'list', '--merchant', merchantId, '--json')).toBe(0);
    expect(JSON.parse(lines.at(-1)!)).toMatchObject([{ lastError: row.last_error }]);
    await us.pool.query('UPDATE webhook_deliveries SET last_error = $2 WHERE webhook_id = $1', [
      row.webhook_id,
      HOSTILE_BODY,
    ]);
    expect(await ops('quarantine', 'list', '--merchant', merchantId)).toBe(0);
    expect(lines.at(-1)).toContain('\\u001b]0;pwned\\u0007\\u001b[31mRED');
    expect(await ops('quarantine', 'list', '--merchant', merchantId, '--json')).toBe(0);
    expect(JSON.parse(lines.at(-1)!)).toMatchObject([{ lastError: HOSTILE_BODY }]);
    expect(lines.join('\n')).not.toMatch(CONTROL_BUT_LINE_BREAK);
  });
}, 120_000);

it('the outbox reconciler, which no trace reaches, starts stranded deliveries again untraced: no trace header, no start span', async () => {
  const night = await seedNight(
    us.pool,
    'us',
    `${harness.id}ob`,
    { expired: 1, future: 1, merchants: 1 },
    harness.merchants,
  );
  const [merchantId] = night.merchantIds as [string];
  await pauseMerchant(us.pool, merchantId, 'test: hold every delivery');
  // A hold's release from the sweep (untraced) and a processor event's delivery from a traced callback, both held.
  await us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: us.config.taskQueue,
    workflowId: `sweep-us-${harness.id}-traced-outbox`,
    args: [{ region: 'us', releaseWaitMs: 60_000 }],
  });
  const { processor, close } = await startTestReceiver(us, { client: tracedClient(us) });
  let closing: Promise<void> | undefined;
  const closeReceiver = () => (closing ??= close());
  const futureHold = night.future[0]!.id;
  try {
    const event = {
      eventId: `evt_${futureHold}_1`,
      holdId: futureHold,
      sequence: 1,
      type: 'hold.incremented' as const,
    };
    expect((await processor.send({ ...event, amountMinor: 100, currency: 'USD' })).status).toBe(202);
    const webhookOf = async (holdId: string) =>
      (
        await us.pool.query<{ webhook_id: string }>('SELECT webhook_id FROM webhook_deliveries WHERE hold_id = $1', [
          holdId,
        ])
      ).rows[0]?.webhook_id;
    await waitUntil(async () => (await webhookOf(futureHold)) !== undefined, "the event's webhook");
    const workflowIds = [
      await holdWorkflowIdOf(us.pool, 'us', night.expired[0]!.id),
      eventDeliveryWorkflowId('us', (await webhookOf(futureHold))!),
    ];
    const traceHeaderOf = async (workflowId: string) => {
      const events = (await us.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
      return events[0]?.workflowExecutionStartedEventAttributes?.header?.fields?.['_tracer-data'] !== undefined;
    };
    // Their workflows ended without finishing them: nothing drives the webhooks now. The hold's event workflow ends
    // first, or it would start its event's delivery again itself, in its own (traced) trace; and only once that
    // delivery runs, or it would never have started it.
    await onceRunning(us.client, workflowIds);
    // The receiver goes first: its relay hands an event over again while it is not marked dispatched (a busy machine
    // can take longer than the relay's 5 s to mark it), and that would start the terminated event workflow anew.
    await closeReceiver();
    await us.client.workflow
      .getHandle(holdEventsWorkflowId('us', futureHold))
      .terminate('test: strand its event')
      .catch(() => undefined);
    const firstRuns = await terminateOnceRunning(us.client, workflowIds, 'test: strand its webhook');
    await resumeMerchant(us.pool, merchantId);
    await us.pool.query(`UPDATE webhook_deliveries SET awaited_until = now() - interval '1 hour'`);
    // Stranded: nothing drives either webhook when the reconciler looks.
    const statuses = await Promise.all(
      workflowIds.map(async (id) => `${id} ${(await us.client.workflow.getHandle(id).describe()).status.name}`),
    );
    expect(statuses).toEqual(workflowIds.map((id) => `${id} TERMINATED`));
    const spansBefore = exporter.getFinishedSpans().length;

    const report = await us.client.workflow.execute(reconcileOutbox, {
      taskQueue: us.config.taskQueue,
      workflowId: `outbox-traced-${harness.id}`,
      args: [{ region: 'us', graceMs: 0 }],
    });
    expect(report.restartedWebhooks.sort(), JSON.stringify(report)).toEqual(
      [(await webhookOf(night.expired[0]!.id))!, (await webhookOf(futureHold))!].sort(),
    );
    const restarted = await Promise.all(
      workflowIds.map(async (workflowId) => {
        const { runId } = await us.client.workflow.getHandle(workflowId).describe();
        expect(runId).not.toBe(firstRuns.get(workflowId));
        return traceHeaderOf(workflowId);
      }),
    );
    console.log(
      `[tracing] restarted by the outbox reconciler, a trace header: release ${restarted[0]}, event ${restarted[1]}`,
    );
    expect(restarted).toEqual([false, false]);
    const reconcilerSpans = exporter
      .getFinishedSpans()
      .slice(spansBefore)
      .filter((s) => s.name.startsWith('StartWorkflow:'));
    expect(reconcilerSpans.map((s) => s.name)).toEqual([]);
  } finally {
    await closeReceiver();
  }
}, 120_000);
