/**
 * Spans within a traced hold's work (src/observability/tracing.ts sets up the provider and the sampling): only
 * `@opentelemetry/api`, so the ledger's pool and the activities use them without loading the SDK's interceptors.
 */
import { SpanKind, SpanStatusCode, trace, type Attributes, type Span } from '@opentelemetry/api';

export const tracer = () => trace.getTracer('hold-sweeper');

/**
 * `work` in a span of its own under the active span, when that one is recorded (a sampled hold's); otherwise `work`'s
 * own promise, at the cost of one look. A failure's status names its code, its type (an ApplicationFailure's) or its
 * error, never its message (a merchant's words may be in it).
 */
export function inSpan<T>(
  name: string,
  attributes: Attributes,
  work: (span?: Span) => Promise<T>,
  kind = SpanKind.INTERNAL,
): Promise<T> {
  if (!trace.getActiveSpan()?.isRecording()) return work();
  return tracer().startActiveSpan(name, { kind, attributes }, async (span) => {
    try {
      return await work(span);
    } catch (err) {
      const { code, type, name: error } = err as Error & { code?: unknown; type?: unknown };
      const named = [code, type].find((n): n is string => typeof n === 'string') ?? error;
      span.setStatus({ code: SpanStatusCode.ERROR, message: named });
      throw err;
    } finally {
      span.end();
    }
  });
}
