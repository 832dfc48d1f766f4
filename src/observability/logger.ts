/**
 * One structured logger for every process (pino, which Fastify brings anyway): one JSON object per line on stdout,
 * each with `ts` (ISO 8601), `level` (a word), `service`, `msg`, and the trace it belongs to when a span is active
 * (`traceId`, `spanId`: src/observability/tracing.ts), so a line and its trace find each other. A process's last
 * words (`fatal`) go to stderr, where a supervisor and a terminal look first. Never a secret, never a full payload.
 *
 * The worker's Temporal runtime, workflows (through the replay-safe workflow logger, so a replayed history does not
 * log twice) and activities log through it too (`temporalLogger`), with the context Temporal attaches (workflowId,
 * runId, activityType, attempt...) plus ours (region, holdId, webhookId).
 */
import { trace } from '@opentelemetry/api';
import type { Logger as TemporalLogger, LogLevel, LogMetadata } from '@temporalio/common';
import { randomUUID } from 'node:crypto';
import { LogController, type FastifyBaseLogger } from 'fastify';
import { pino, type DestinationStream, type Logger } from 'pino';
import { ConfigError } from '../errors.js';

export type { Logger } from 'pino';

/** Lines at or above `info` unless LOG_LEVEL (config.ts) says otherwise. */
export function createLogger(service?: string, destination: DestinationStream = processDestination()): Logger {
  return pino(
    {
      level: 'info',
      base: service ? { service, pid: process.pid } : { pid: process.pid },
      timestamp: () => `,"ts":"${new Date().toISOString()}"`,
      formatters: { level: (label) => ({ level: label }) },
      // Errors under `error` are what went wrong, named; a stack is for what nobody expected (`err`, logFatal).
      serializers: { err: pino.stdSerializers.err, error: errorName },
      mixin: () => {
        const span = trace.getActiveSpan()?.spanContext();
        return span ? { traceId: span.traceId, spanId: span.spanId } : {};
      },
    },
    destination,
  );
}

/** stdout for every line, stderr for `fatal` alone; written as they come, so nothing is lost at process.exit. */
function processDestination(): DestinationStream {
  return pino.multistream(
    [
      { level: 'trace', stream: pino.destination({ dest: 1, sync: true }) },
      { level: 'fatal', stream: pino.destination({ dest: 2, sync: true }) },
    ],
    { dedupe: true },
  );
}

/**
 * The process's logger: each entry point names its service first thing (`nameProcess`) and sets `log.level` from
 * LOG_LEVEL once configuration is read; shared code (pools, migrations, gauges) logs here unless handed its own.
 */
export const log: Logger = createLogger();

export function nameProcess(service: string): Logger {
  log.setBindings({ service });
  return log;
}

/** A process that cannot go on says why in one line (the error's name and message, then its stack) and exits. */
export function exitOnFatal(err: unknown, code = 1): never {
  log.fatal({ err }, err instanceof Error ? `${err.name}: ${err.message}` : String(err));
  process.exit(code);
}

/** An entry point that answers its exit code; one that throws exits 2 for a configuration error, else 1. */
export function exitWith(main: Promise<number>): void {
  main.then(
    (code) => process.exit(code),
    (err: unknown) => exitOnFatal(err, err instanceof ConfigError ? 2 : 1),
  );
}

/** On SIGTERM or SIGINT: `stop`, then exit 0. */
export function stopOnSignal(stop: () => Promise<void>): void {
  const exit = async () => {
    await stop();
    process.exit(0);
  };
  process.once('SIGTERM', () => void exit());
  process.once('SIGINT', () => void exit());
}

/**
 * Runs `work` every `intervalMs` without keeping the process alive; a failure goes to `onError` unless it was stopped
 * meanwhile (what fails then is what its shutdown closed). Returns the function that stops it.
 */
export function every(intervalMs: number, work: () => Promise<unknown>, onError: (err: Error) => void): () => void {
  let stopped = false;
  const timer = setInterval(() => {
    work().catch((err: Error) => {
      if (!stopped) onError(err);
    });
  }, intervalMs);
  timer.unref();
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}

/**
 * Fastify's options for a server on `logger` (the APIs, the codec endpoint): each request's lines carry its
 * `requestId`, one of the server's own (a caller cannot choose what the audit and the logs call its request).
 */
export function fastifyLogging(logger: Logger) {
  return {
    loggerInstance: logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'requestId' }),
    genReqId: () => randomUUID(),
  } as const;
}

/** For what runs in-process beside a louder story (the demo, benchmarks, tests): lines nobody reads. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/** The Temporal SDK's logger interface over pino: the runtime's, the workflows' and the activities' lines. */
export function temporalLogger(logger: Logger): TemporalLogger {
  const write = (level: LogLevel, message: string, meta?: LogMetadata) => {
    // The task token identifies nothing an operator needs and is a kilobyte of base64 per line.
    const { taskToken: _taskToken, ...context } = meta ?? {};
    logger[level.toLowerCase() as 'info'](context, message);
  };
  return {
    log: write,
    trace: (message, meta) => write('TRACE', message, meta),
    debug: (message, meta) => write('DEBUG', message, meta),
    info: (message, meta) => write('INFO', message, meta),
    warn: (message, meta) => write('WARN', message, meta),
    error: (message, meta) => write('ERROR', message, meta),
  };
}

function errorName(value: unknown): unknown {
  return value instanceof Error ? { name: value.name, message: value.message } : value;
}
