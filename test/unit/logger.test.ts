/**
 * One logger for every process (src/observability/logger.ts): the shape each line has, the trace it names when a span
 * is active, errors by name, and the Temporal SDK's lines through it.
 */
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { temporalLogger } from '../../src/observability/logger.js';
import { startTracing } from '../../src/observability/tracing.js';
import { capturedLogger } from '../support/logs.js';

it('writes one JSON object a line: ISO time, a level word, the service, the message and its fields', () => {
  const { logger, lines } = capturedLogger('receiver');
  logger.info({ region: 'us', eventId: 'evt_1' }, 'processor event recorded');
  logger.debug('not at the default level');
  expect(lines).toEqual([
    {
      ts: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      level: 'info',
      service: 'receiver',
      pid: process.pid,
      region: 'us',
      eventId: 'evt_1',
      msg: 'processor event recorded',
    },
  ]);
});

it('names the active span’s trace on a line written inside it, and none outside', async () => {
  const exporter = new InMemorySpanExporter();
  const tracing = startTracing('test', { processor: new SimpleSpanProcessor(exporter), sampleRatio: 1 });
  try {
    const { logger, lines } = capturedLogger();
    await tracing.tracer.startActiveSpan('processor event', async (span) => {
      logger.info('inside');
      span.end();
    });
    logger.info('outside');
    const [span] = exporter.getFinishedSpans();
    expect(lines[0]).toMatchObject({
      msg: 'inside',
      traceId: span!.spanContext().traceId,
      spanId: span!.spanContext().spanId,
    });
    expect(lines[1]).not.toHaveProperty('traceId');
  } finally {
    await tracing.shutdown();
  }
});

it('writes an error under `error` by its name and message (no stack), under `err` with its stack', () => {
  const { logger, lines } = capturedLogger();
  const err = new ConfigError('LOG_LEVEL', 'chatty', 'one of TRACE, DEBUG, INFO, WARN, ERROR');
  logger.warn({ error: err }, 'expected');
  logger.error({ err }, 'unexpected');
  expect(lines[0]!.error).toEqual({ name: 'ConfigError', message: err.message });
  expect(lines[1]!.err).toMatchObject({ type: 'ConfigError', message: err.message, stack: expect.any(String) });
});

it('carries the Temporal SDK’s lines at their level with their context, without the task token', () => {
  const { logger, lines } = capturedLogger('worker');
  const sdk = temporalLogger(logger);
  sdk.warn('Activity failed', { workflowId: 'hold-release-us-h_1', attempt: 2, taskToken: 'AAAA' });
  sdk.log('ERROR', 'Workflow task failed', { runId: 'r1' });
  sdk.trace('below the level');
  expect(lines).toEqual([
    expect.objectContaining({ level: 'warn', msg: 'Activity failed', workflowId: 'hold-release-us-h_1', attempt: 2 }),
    expect.objectContaining({ level: 'error', msg: 'Workflow task failed', runId: 'r1' }),
  ]);
  expect(lines[0]).not.toHaveProperty('taskToken');
});
