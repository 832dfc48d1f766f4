/**
 * Structured JSON logs, one object per line: the SDK's own logs, workflow logs (through the replay-safe
 * workflow logger, so a replayed history does not log twice) and activity logs all land here, each with the
 * context Temporal attaches (workflowId, runId, activityType, attempt...) plus ours (region, holdId,
 * webhookId). Never a secret, never a full payload.
 */
import { DefaultLogger, type LogLevel } from '@temporalio/worker';

export function jsonLogger(
  level: LogLevel,
  write: (line: string) => void = (line) => process.stdout.write(line),
): DefaultLogger {
  return new DefaultLogger(level, ({ level: severity, message, meta, timestampNanos }) => {
    const ts = new Date(Number(timestampNanos / 1_000_000n)).toISOString();
    // The task token identifies nothing an operator needs and is a kilobyte of base64 per line.
    const { taskToken: _taskToken, ...context } = meta ?? {};
    write(`${JSON.stringify({ ts, level: severity.toLowerCase(), msg: message, ...context }, jsonSafe)}\n`);
  });
}

/** bigint and Error values in log metadata, as JSON can carry them. */
function jsonSafe(_key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (value instanceof Error) return { name: value.name, message: value.message };
  return value;
}
