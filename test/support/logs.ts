/** Loggers for tests, made as the product makes its own (src/observability/logger.ts): kept in memory or dropped. */
import { createLogger, type Logger } from '../../src/observability/logger.js';

/** Every line the logger writes, parsed, in order. */
export function capturedLogger(service = 'test'): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger(service, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { logger, lines };
}
