/**
 * The SDK's OpenTelemetry workflow interceptors (src/observability/tracing.ts), for the workflows a trace reached: one
 * whose start (or a signal to it) carried a trace context: a processor callback's, through the hold's event workflow
 * it signals, to the delivery that workflow starts and each attempt; or a sampled hold's, which the sweep's listing
 * put in the hold workflow's input (`trace`), the workflow's start carrying no header of its own. A workflow started
 * without either (the sweep, from its schedule, and the holds it did not sample) runs as if the interceptors were not
 * there: a sweep's trace would be thousands of holds long, and tracing costs (the benchmark, 2,000 holds, CPU per
 * hold: 52 ms without the interceptors, 65 ms with them on every workflow; 54 ms with them loaded for nothing).
 *
 * CommonJS on purpose: `require` inside the factory makes the bundle evaluate the OpenTelemetry modules when the
 * first traced workflow needs them, not in every worker that never traces (the 2 ms those modules cost each
 * workflow). Whether a workflow is traced is read from its history (its start's and its signals' headers), so a
 * replay decides the same; the interceptors add headers, never a command.
 */

/** Where the SDK's client and workflow interceptors carry the trace context (TRACE_HEADER in their instrumentation). */
const TRACE_HEADER = '_tracer-data';

exports.interceptors = () => {
  /** The SDK's interceptors of this workflow, made by the first call that brings a trace context. */
  let traced;
  const reached = (headers) => {
    if (!traced && headers[TRACE_HEADER] !== undefined) {
      const made = require('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors').interceptors();
      traced = { inbound: made.inbound[0], outbound: made.outbound[0], internals: made.internals[0] };
    }
    return traced;
  };
  const through = (side, method) => (input, next) => (traced ? traced[side][method](input, next) : next(input));
  return {
    inbound: [
      {
        execute: (input, next) => {
          const sampled = input.headers[TRACE_HEADER] === undefined && input.args[0] && input.args[0].trace;
          if (sampled) {
            const { defaultPayloadConverter } = require('@temporalio/common');
            const headers = { ...input.headers, [TRACE_HEADER]: defaultPayloadConverter.toPayload(sampled) };
            input = { ...input, headers };
          }
          return reached(input.headers) ? traced.inbound.execute(input, next) : next(input);
        },
        handleSignal: (input, next) =>
          reached(input.headers) ? traced.inbound.handleSignal(input, next) : next(input),
        handleUpdate: through('inbound', 'handleUpdate'),
        validateUpdate: through('inbound', 'validateUpdate'),
        handleQuery: through('inbound', 'handleQuery'),
      },
    ],
    outbound: [
      {
        scheduleActivity: through('outbound', 'scheduleActivity'),
        scheduleLocalActivity: through('outbound', 'scheduleLocalActivity'),
        startChildWorkflowExecution: through('outbound', 'startChildWorkflowExecution'),
        continueAsNew: through('outbound', 'continueAsNew'),
        signalWorkflow: through('outbound', 'signalWorkflow'),
        getLogAttributes: through('outbound', 'getLogAttributes'),
      },
    ],
    internals: [{ dispose: through('internals', 'dispose') }],
  };
};
