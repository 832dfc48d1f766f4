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
import { context, createContextKey, trace, type Tracer } from '@opentelemetry/api';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  OpenTelemetryWorkflowClientInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
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

/** Where the SDK's interceptors carry the trace context (TRACE_HEADER in their instrumentation; tracing.cjs too). */
const TRACE_HEADER = '_tracer-data';
/** Set in the context of an activity no trace reached: its span is its own, and what it starts is not traced. */
const UNREACHED = createContextKey('hold-sweeper.unreached-by-a-trace');

/**
 * The SDK's activity interceptors: every activity has its span (an attempt's says its status and size), continuing its
 * workflow's trace where one reached it. One no trace reached (the sweep's, the outbox reconciler's) is marked, so the
 * workflows it starts are untraced, as src/workflows/tracing.cjs leaves the workflows no trace reached.
 */
export const tracedActivities: ActivityInterceptorsFactory = (ctx) => {
  const traced = new OpenTelemetryActivityInboundInterceptor(ctx);
  return {
    inbound: {
      execute: (input, next) =>
        input.headers[TRACE_HEADER] === undefined
          ? context.with(context.active().setValue(UNREACHED, true), () => traced.execute(input, next))
          : traced.execute(input, next),
    },
    outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
  };
};

/**
 * The SDK's client interceptor for the workers' own client (the workflows activities start), applied only to a call
 * made within a trace that reached its activity: a workflow the outbox reconciler starts again is not traced.
 */
export function clientTracedWithin(): WorkflowClientInterceptor {
  const traced = new OpenTelemetryWorkflowClientInterceptor();
  const within = () =>
    context.active().getValue(UNREACHED) !== true && trace.getSpanContext(context.active()) !== undefined;
  const methods = Object.getOwnPropertyNames(OpenTelemetryWorkflowClientInterceptor.prototype).filter(
    (name) => name !== 'constructor',
  ) as (keyof WorkflowClientInterceptor)[];
  type Call = (input: unknown, next: (input: unknown) => unknown) => unknown;
  return Object.fromEntries(
    methods.map((name) => {
      const call = (traced[name] as Call).bind(traced);
      return [name, ((input, next) => (within() ? call(input, next) : next(input))) satisfies Call];
    }),
  ) as WorkflowClientInterceptor;
}
