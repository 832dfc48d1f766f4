/**
 * One trace per sampled hold's story: OpenTelemetry through the Temporal SDK's own interceptors
 * (@temporalio/interceptors-opentelemetry). A trace starts where the hold's story does: the sweep's listing of it
 * (`sweptHoldTrace`, carried in the hold workflow's input, src/workflows/tracing.cjs), or a processor callback's span
 * in the receiver, the parent of the signal-with-start it sends. The client interceptor carries the context in the
 * workflow's headers; the workflow interceptors (in the workflow bundle) and the activity interceptors continue it
 * through the release, each child delivery and every webhook attempt, where the merchant budget's wait, each ledger
 * statement (src/db/pool.ts) and the HTTP request are spans of their own (`inSpan`, ./spans.ts). Workflow spans leave the sandbox
 * through the `exporter` sink.
 *
 * Exported over OTLP when the standard variables say where (OTEL_EXPORTER_OTLP_ENDPOINT or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, with OTEL_EXPORTER_OTLP_HEADERS and the rest read by the exporter itself), a
 * share of the holds (TRACE_SAMPLE_RATIO); otherwise no trace is sampled, and what a callback starts costs a header.
 */
import {
  context,
  createContextKey,
  propagation,
  ROOT_CONTEXT,
  trace,
  TraceFlags,
  type Tracer,
} from '@opentelemetry/api';
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
import {
  AlwaysOffSampler,
  BatchSpanProcessor,
  NoopSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { tracer } from './spans.js';

export interface Tracing {
  resource: Resource;
  processor: SpanProcessor;
  tracer: Tracer;
  shutdown(): Promise<void>;
}

type Env = Readonly<Record<string, string | undefined>>;

/**
 * The process's tracer provider, registered globally; `processor` is given by tests (an in-memory exporter). A trace's
 * root (a swept hold, a processor callback) is sampled at `sampleRatio` (TRACE_SAMPLE_RATIO), and what it starts
 * follows its decision; with nowhere to send spans, no root is sampled.
 */
export function startTracing(
  service: string,
  options: { env?: Env; processor?: SpanProcessor; sampleRatio: number },
): Tracing {
  const env = options.env ?? process.env;
  const resource = new Resource({ 'service.name': env.OTEL_SERVICE_NAME || service });
  const exporting = Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  const processor =
    options.processor ?? (exporting ? new BatchSpanProcessor(new OTLPTraceExporter()) : new NoopSpanProcessor());
  const root =
    options.processor || exporting ? new TraceIdRatioBasedSampler(options.sampleRatio) : new AlwaysOffSampler();
  const provider = new NodeTracerProvider({
    resource,
    sampler: new ParentBasedSampler({ root }),
    spanProcessors: [processor],
  });
  provider.register();
  return { resource, processor, tracer: tracer(), shutdown: () => provider.shutdown() };
}

/**
 * A swept hold's trace, when the sampler takes it: its root span, which marks when the sweep listed the hold (ended at
 * once), as the carrier the hold workflow's input holds (`trace`). Undefined for a hold not sampled.
 */
export function sweptHoldTrace(holdId: string, merchantId: string): Record<string, string> | undefined {
  const span = tracer().startSpan('hold swept', {
    root: true,
    attributes: { 'hold_sweeper.hold_id': holdId, 'hold_sweeper.merchant_id': merchantId },
  });
  span.end();
  if (!(span.spanContext().traceFlags & TraceFlags.SAMPLED)) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(trace.setSpan(ROOT_CONTEXT, span), carrier);
  return carrier;
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
