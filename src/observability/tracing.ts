/**
 * One trace per hold's story: OpenTelemetry through the Temporal SDK's own interceptors
 * (@temporalio/interceptors-opentelemetry). A processor callback's span in the receiver is the parent of the
 * signal-with-start it sends; the client interceptor carries the context in the workflow's headers; the workflow
 * interceptors (in the workflow bundle) and the activity interceptors continue it through the release, each child
 * delivery and every webhook attempt. Workflow spans leave the sandbox through the `exporter` sink.
 *
 * Exported over OTLP when the standard variables say where (OTEL_EXPORTER_OTLP_ENDPOINT or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, with OTEL_EXPORTER_OTLP_HEADERS and the rest read by the exporter itself);
 * otherwise spans are made and dropped, and the interceptors cost a header per call.
 */
import { trace, type Tracer } from '@opentelemetry/api';
import { makeWorkflowExporter } from '@temporalio/interceptors-opentelemetry';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor, NoopSpanProcessor, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

export interface Tracing {
  resource: Resource;
  processor: SpanProcessor;
  tracer: Tracer;
  shutdown(): Promise<void>;
}

type Env = Readonly<Record<string, string | undefined>>;

/** The process's tracer provider, registered globally; `processor` is given by tests (an in-memory exporter). */
export function startTracing(service: string, options: { env?: Env; processor?: SpanProcessor } = {}): Tracing {
  const env = options.env ?? process.env;
  const resource = new Resource({ 'service.name': env.OTEL_SERVICE_NAME || service });
  const exporting = Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  const processor =
    options.processor ?? (exporting ? new BatchSpanProcessor(new OTLPTraceExporter()) : new NoopSpanProcessor());
  const provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
  provider.register();
  return { resource, processor, tracer: trace.getTracer('hold-sweeper'), shutdown: () => provider.shutdown() };
}

/**
 * The sinks workflows trace through (`exporter`): a worker's, with its processor, or (none given) a replayer's, which
 * must know the sink's name although it calls none while replaying.
 */
export function workflowSinks(tracing: Pick<Tracing, 'resource' | 'processor'> = untraced()) {
  return { exporter: makeWorkflowExporter(tracing.processor, tracing.resource) };
}

/** Spans made and dropped. */
export function untraced(): Pick<Tracing, 'resource' | 'processor'> {
  return { resource: Resource.empty(), processor: new NoopSpanProcessor() };
}
