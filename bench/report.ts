/** The night report as Markdown: what `npm run bench` prints and writes next to the JSON. */
import type { NightSummary, PhaseMeasure, SlowMerchantReport } from './night-report.js';
import type { PageRuns, PhaseSignals } from './analysis.js';
import type { ActionCount } from './actions.js';
import type { Chart } from './charts.js';
import { profileSection } from './profile.js';

const cpu = (c: PhaseMeasure['cpu']) =>
  `Temporal ${c.temporal} s · PostgreSQL ${c.postgres} s · workers ${c.workers} s · merchants ${c.merchants} s (total ${c.total} s)`;
const events = (e: PhaseMeasure['historyEvents']) =>
  `${e.totalPerHold} (parent ${e.parentPerHold} + child ${e.childPerHold}; ${e.parentRuns} parent runs)`;
const census = (c: NonNullable<NightSummary['product']['eventCensus']>) =>
  Object.entries(c)
    .map(([type, byEvent]) => `${type}: ${counts(byEvent)}`)
    .join('<br>');
const counts = (r: Record<string, number>) =>
  Object.entries(r)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ') || 'none';

/** A slow merchant's night in a line, after its id: the console's and the report's. */
export function slowMerchantLine(s: SlowMerchantReport): string {
  const p = (n: number | undefined) => (n === undefined ? '—' : `${n} s`);
  return (
    `answers in ${s.latencyMs} ms (${s.holds} holds, ${s.ratePerSecond}/s): ${s.webhooks} webhooks, ` +
    `${s.requests} requests = ${s.requestsPerWebhook.toFixed(2)} per webhook, ${s.delivered} delivered; ` +
    `release → delivery p50 ${p(s.releaseToDeliveryP50Seconds)}, p95 ${p(s.releaseToDeliveryP95Seconds)}`
  );
}

const sharedOrigin = (o: NonNullable<NightSummary['workload']['sharedOrigin']>) =>
  `${o.merchants.length} merchants (${o.holds} holds) on one origin; ` +
  (o.destination
    ? `declared as destination '${o.destination.id}' at ${o.destination.ratePerSecond}/s for all of them`
    : 'no destination declared: each paced at its own rate');

/**
 * `chartsNote`: what stands where the charts would (bench/results-archive.ts) when the night's series are not at hand.
 */
export function markdownReport(report: NightSummary, charts: readonly Chart[] = [], chartsNote?: string): string {
  const { workload: w, product: p, ceiling: c } = report;
  const minutes = (s: number) => `${s} s (${(s / 60).toFixed(1)} min)`;
  const lines = [
    `# Night benchmark: ${w.holds} holds, seed ${report.options.seed}${report.options.faults ? '' : ', fault-free'}`,
    '',
    `Reproduce: \`${report.command}\``,
    '',
    `${report.date} · ${backendName(report)} · ${report.machine.cpus} × ${report.machine.cpuModel} · ${report.machine.memoryGiB} GiB · Node ${report.machine.node} · ${report.options.workers} worker process(es) · page ${report.options.pageSize} in batches of ${report.options.batchSize} · ${report.options.maxUnreleased === undefined ? 'no bound on unreleased holds' : `at most ${report.options.maxUnreleased} unreleased before a page`}${report.options.regionPerProcess ? ' · one region per worker process' : ''}${report.options.maxCachedWorkflows === undefined ? '' : ` · ${report.options.maxCachedWorkflows} cached workflows per worker`}`,
    '',
    `Workload: ${w.holds} holds (US ${w.byRegion.us}, EU ${w.byRegion.eu}) over ${w.merchants} merchants; faulty merchants: ${counts(w.faultyMerchants)}. ` +
      `Merchant bound: ${w.merchantBound.seconds} s (${w.merchantBound.merchantId}: ${w.merchantBound.holds} holds at ${w.merchantBound.ratePerSecond}/s).`,
    '',
    '| | value |',
    '|---|---|',
    `| **Product, end to end** (trigger → every hold released and every delivery settled) | **${minutes(p.seconds)} = ${p.holdsPerSecond} holds/s** |`,
    p.releaseRatePerSecond === undefined
      ? `| Last hold released at | ${p.releasedBySeconds} s |`
      : `| Released (first release → last) / last release / every delivery settled, from the trigger | ${p.releaseRatePerSecond} holds/s / ${p.lastReleaseSeconds} s / ${p.settleSeconds} s |`,
    w.sharedOrigin ? `| Shared origin | ${sharedOrigin(w.sharedOrigin)} |` : '',
    ...(p.slowMerchants ?? []).map((s) => `| Slow merchant ${s.merchantId} | ${slowMerchantLine(s)} |`),
    c
      ? `| **Bare fan-out ceiling** (no-op child per hold, same paging) | **${minutes(c.seconds)} = ${c.holdsPerSecond} holds/s** |`
      : '| Bare fan-out ceiling | not run (--no-ceiling) |',
    p.ratioToCeiling !== undefined ? `| **Ratio to the ceiling** | **${p.ratioToCeiling}×** |` : '',
    `| Makespan ÷ merchant bound | ${p.makespanVsMerchantBound}× |`,
    `| History events per hold, product | ${events(p.historyEvents)} |`,
    report.holdLatency
      ? `| A hold's wait for its first workflow task (sampled histories) / its release → delivery (ledger), p50 · p95 | ${report.holdLatency.firstTaskWait.p50} · ${report.holdLatency.firstTaskWait.p95} s / ${report.holdLatency.releaseToDelivered.p50} · ${report.holdLatency.releaseToDelivered.p95} s |`
      : '',
    report.traces
      ? `| Traces exported (TRACE_SAMPLE_RATIO ${report.options.traceSampleRatio}) | ${report.traces.requests} OTLP requests, ${Math.round(report.traces.bytes / 1024)} KiB |`
      : '',
    p.eventCensus ? `| Event census, product (workflow type: event type × count) | ${census(p.eventCensus)} |` : '',
    c ? `| History events per hold, ceiling | ${events(c.historyEvents)} |` : '',
    `| Requests per delivered webhook | ${p.requestsPerDelivered} (${p.requests} requests, ${p.deliveredWebhooks} delivered) |`,
    `| Receiver-side max per merchant in any 1 s | worst ${p.worstMerchantRate.maxPerSecond} at ${p.worstMerchantRate.merchantId} (limit ${p.worstMerchantRate.ratePerSecond}/s + burst = ${p.worstMerchantRate.limit}); over the limit: ${p.merchantsOverLimit.length === 0 ? 'none' : p.merchantsOverLimit.join(', ')} |`,
    `| 429s received | ${p.received429} |`,
    `| Deliveries | ${counts(p.deliveries)} |`,
    `| Quarantined by reason | ${counts(p.quarantinedByReason)} |`,
    `| Held behind a disabled (410) merchant | ${p.heldForDisabledMerchants} |`,
    `| Unverified requests / delivered twice | ${p.unverifiedRequests} / ${p.deliveredTwice} |`,
    `| Peak RSS per worker | ${report.workers.map((x) => `${x.peakRssMiB} MiB (${x.regions})`).join(', ')}; sticky cache ${report.workers[0]?.maxCachedWorkflows ?? '?'} workflows, V8 heap limit ${report.workers[0]?.heapLimitMiB ?? '?'} MiB per process |`,
    `| **Temporal Cloud Actions** | **${report.actions.perHold} per hold**: the night of ${w.holds} holds costs **${report.actions.nightTotal.toLocaleString('en')} Actions** (below) |`,
    `| CPU, product phase | ${cpu(p.cpu)} |`,
    c ? `| CPU, ceiling phase | ${cpu(c.cpu)} |` : '',
    c
      ? `| **CPU per hold**, product ÷ ceiling | **${(p.cpu.total / c.cpu.total).toFixed(2)}×** (${Math.round((p.cpu.total * 1000) / w.holds)} ms against ${Math.round((c.cpu.total * 1000) / w.holds)} ms) |`
      : '',
    c ? ratioRow(ratioDecomposition(report)!, report.machine.cpus) : '',
    `| Invariant violations | ${report.violations.length === 0 ? 'none (all seven checked)' : report.violations.map((v) => `#${v.invariant} ${v.message}`).join('; ')} |`,
  ];
  return (
    [
      lines.filter((l) => l !== '').join('\n'),
      ...chartSection(charts, chartsNote),
      whatBinds(report),
      actionsSection(report),
      ...(report.profile ? [profileSection(report.profile)] : []),
    ].join('\n\n') + '\n'
  );
}

/**
 * The ratio to the ceiling split into its two factors, from the same CPU seconds: holds/s = cores kept busy ÷ CPU
 * seconds per hold, in each phase, so ratio = (product's cores ÷ ceiling's) × (ceiling's CPU per hold ÷ product's).
 * The first factor is what waiting costs (a serial step leaves cores idle), the second what the product's own work
 * costs; on a machine the whole stack shares, the second also bounds what removing every wait could reach:
 * `bestRatio` (every core busy at this CPU per hold), and the cores the target ratio would need.
 */
export function ratioDecomposition(report: NightSummary, target = 0.8) {
  const { product: p, ceiling: c } = report;
  if (!c) return undefined;
  const productCores = p.cpu.total / p.seconds;
  const ceilingCores = c.cpu.total / c.seconds;
  const utilisation = productCores / ceilingCores;
  const efficiency = c.cpu.total / p.cpu.total;
  return {
    productCores,
    ceilingCores,
    utilisation,
    efficiency,
    ratio: utilisation * efficiency,
    bestRatio: (report.machine.cpus / ceilingCores) * efficiency,
    coresForTarget: (target * ceilingCores) / efficiency,
    target,
  };
}

function ratioRow(d: NonNullable<ReturnType<typeof ratioDecomposition>>, cpus: number): string {
  const f = (x: number) => x.toFixed(2);
  return (
    `| **The ratio, decomposed** | cores kept busy ${f(d.productCores)} ÷ ${f(d.ceilingCores)} = ${f(d.utilisation)} × CPU per hold ` +
    `${f(d.efficiency)} (ceiling's ÷ product's) = ${d.ratio.toFixed(3)}; with all ${cpus} cores busy at this CPU per hold the ratio could reach ` +
    `${f(d.bestRatio)}; ${d.target}× would need ${f(d.coresForTarget)} cores |`
  );
}

function chartSection(charts: readonly Chart[], note: string | undefined): string[] {
  return charts.length === 0 && note ? [note] : charts.map((c) => `**${c.title}**\n\n![${c.title}](${c.file})`);
}

const ms = (n: number | undefined) => (n === undefined ? '—' : `${n} ms`);
const record = (r: Record<string, number>) =>
  Object.entries(r)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ') || '—';

/** The sampled signals, ceiling beside product, and the page runs: the evidence for what binds. */
function whatBinds(report: NightSummary): string {
  const { ceiling: c, product: p } = report.analysis;
  const row = (label: string, f: (s: PhaseSignals) => string) => `| ${label} | ${c ? f(c) : '—'} | ${p ? f(p) : '—'} |`;
  const pages = (label: string, f: (r: PageRuns) => string) =>
    `| ${label} | ${report.analysis.ceilingPages ? f(report.analysis.ceilingPages) : '—'} | ${f(report.analysis.productPages)} |`;
  return [
    '## What binds: the server and the SDK, sampled through both phases',
    '',
    '| | ceiling | product |',
    '|---|---|---|',
    row('Cores used, by process', (s) => record(s.coresByProcess)),
    row(
      'Persistence calls/s, mean latency',
      (s) => `${s.server.persistenceRequestsPerSecond}/s, ${s.server.persistenceMeanMs} ms`,
    ),
    row('Busiest persistence operations (calls/s, mean)', (s) =>
      s.server.persistenceByOperation.map((o) => `${o.operation} ${o.perSecond}/s ${o.meanMs} ms`).join('; '),
    ),
    row('History tasks: time in queue, retries included (tasks/s, mean)', (s) =>
      s.server.queueByTask
        .map((q) => `${q.task.replace(/^(Transfer|Timer)ActiveTask/, '')} ${q.perSecond}/s ${q.meanMs} ms`)
        .join('; '),
    ),
    row(
      'Workflow execution lock: wait / hold / gave up per second',
      (s) =>
        `${ms(s.server.executionLockWaitMs)} / ${ms(s.server.executionLockHoldMs)} / ${s.server.executionLockFailuresPerSecond}/s`,
    ),
    row('Shard lock wait', (s) => ms(s.server.shardLockMs)),
    row('Matching schedule-to-start', (s) => record(s.server.scheduleToStartMs) + ' ms'),
    row(
      'SDK: workflow task schedule-to-start / execution',
      (s) =>
        `${ms(s.sdk.workflowTaskScheduleToStartMs)} / ${ms(s.sdk.workflowTaskExecutionMs)} (${s.sdk.workflowTasksPerSecond} tasks/s)`,
    ),
    row('SDK: local activity execution', (s) => ms(s.sdk.localActivityExecutionMs)),
    row('SDK: slots in use (mean, all workers)', (s) => record(s.sdk.slotsUsed)),
    row(
      'SDK: sticky cache hit ratio / size',
      (s) => `${s.sdk.stickyCacheHitRatio ?? '—'} / ${s.sdk.stickyCacheSize ?? '—'}`,
    ),
    pages('Runs that started hold children (page runs, or their batches)', (r) => String(r.pages)),
    pages(
      "Such a run's children all started within (mean / p50 / max)",
      (r) => `${r.startChildrenSeconds.mean} / ${r.startChildrenSeconds.p50} / ${r.startChildrenSeconds.max} s`,
    ),
    pages('Child starts per second within such a run', (r) => String(r.childStartsPerSecond)),
    pages(
      'Per such run: child completions landed in it, its workflow tasks',
      (r) => `${r.completionsPerPage}, ${r.workflowTasksPerPage}`,
    ),
    pages('Failed workflow tasks in such runs (server-side causes)', (r) => record(r.failedWorkflowTasks)),
  ].join('\n');
}

const kinds = (a: ActionCount) =>
  Object.entries(a.byKind)
    .filter(([, v]) => v > 0)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');

/** Temporal Cloud Actions per hold by outcome, the sweep's share, and the night's total. */
function actionsSection(report: NightSummary): string {
  const a = report.actions;
  const sweep = a.sweepPerHold;
  return [
    '## What a hold costs in Temporal Cloud Actions',
    '',
    'Counted from the histories by the rules of docs.temporal.io/cloud/actions (bench/actions.ts): a child workflow 2, ' +
      'a continue-as-new 1, each activity attempt 1, all local activities of one workflow task 1, each timer, signal and ' +
      "search-attribute upsert 1; a schedule execution 3 (2 + the workflow it starts). Per hold below is the hold's own " +
      "workflow; its start (2) is in the sweep's share.",
    '',
    '| hold | holds tonight | histories read | Actions per hold (its workflow) | by kind |',
    '|---|---|---|---|---|',
    ...a.byOutcome.map(
      (o) => `| ${o.outcome} | ${o.holds} | ${o.sampled} | ${o.perHold.total} | ${kinds(o.perHold)} |`,
    ),
    `| quarantined, then replayed by a human (${a.quarantinedThenReplayed.source}) | — | 1 | ${a.quarantinedThenReplayed.perHold.total} | ${kinds(a.quarantinedThenReplayed.perHold)} |`,
    `| **the sweep's share per hold** (its runs, batches, child starts) | | | ${sweep.total} | ${kinds(sweep)}; plus ${sweep.scheduleActions} for the schedule and ~${sweep.finishHeartbeats} finish heartbeats in all |`,
    '',
    `**A night of ${report.workload.holds.toLocaleString('en')} holds like this one costs ${a.nightTotal.toLocaleString('en')} Actions (${a.perHold} per hold).** ` +
      "Operator queries (the `status` query, the Web UI's stack trace) are 1 each on top.",
  ].join('\n');
}

/** Which Temporal a report ran on, in words. */
function backendName(report: NightSummary): string {
  const t = report.options.temporal;
  if (t.kind === 'dev') return 'dev server (SQLite)';
  return `cluster, ${t.shards} shard${t.shards === 1 ? '' : 's'} (PostgreSQL${t.synchronousCommit === false ? ', synchronous_commit off' : ''})`;
}

/** The same night on several Temporal backends, side by side (`npm run bench -- --backends ...`). */
export function backendsReport(reports: readonly NightSummary[], command: string): string {
  const [first] = reports;
  const dev = reports.find((r) => r.options.temporal.kind === 'dev');
  const perHold = (seconds: number, r: NightSummary) => `${Math.round((seconds * 1000) / r.workload.holds)}`;
  const lines = [
    `# The night on each Temporal backend: ${first!.workload.holds} holds, seed ${first!.options.seed}${first!.options.faults ? '' : ', fault-free'}`,
    '',
    `Reproduce: \`${command}\``,
    '',
    `${first!.date} · ${first!.machine.cpus} × ${first!.machine.cpuModel} · ${first!.machine.memoryGiB} GiB · ${first!.options.workers} worker process(es) · page ${first!.options.pageSize}. ` +
      'Each backend ran the same seeded night, one after the other, on this one machine. On the cluster, PostgreSQL CPU includes ' +
      "Temporal's own persistence (its two databases live in the same PostgreSQL as the ledgers).",
    '',
    "| Backend | Ceiling holds/s | Product holds/s | Product vs dev server | Product ÷ ceiling | CPU ms per hold, product: Temporal / PostgreSQL / workers | CPU per hold ÷ ceiling's | Actions per hold | Violations |",
    '|---|---|---|---|---|---|---|---|---|',
    ...reports.map((r) => {
      const p = r.product;
      return (
        `| ${backendName(r)} | ${r.ceiling?.holdsPerSecond ?? '—'} | ${p.holdsPerSecond} | ${dev ? `${(p.holdsPerSecond / dev.product.holdsPerSecond).toFixed(2)}×` : '—'} | ` +
        `${p.ratioToCeiling ?? '—'}× | ${perHold(p.cpu.temporal, r)} / ${perHold(p.cpu.postgres, r)} / ${perHold(p.cpu.workers, r)} | ` +
        `${r.ceiling ? `${(p.cpu.total / r.ceiling.cpu.total).toFixed(2)}×` : '—'} | ${r.actions?.perHold ?? '—'} | ${r.violations.length} |`
      );
    }),
  ];
  return lines.join('\n') + '\n';
}
