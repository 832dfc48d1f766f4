/** The night report as Markdown: what `npm run bench` prints and writes next to the JSON. */
import type { NightReport, PhaseMeasure } from './night-bench.js';

const cpu = (c: PhaseMeasure['cpu']) =>
  `Temporal ${c.temporal} s · PostgreSQL ${c.postgres} s · workers ${c.workers} s · merchants ${c.merchants} s (total ${c.total} s)`;
const events = (e: PhaseMeasure['historyEvents']) =>
  `${e.totalPerHold} (parent ${e.parentPerHold} + child ${e.childPerHold}; ${e.parentRuns} parent runs)`;
const counts = (r: Record<string, number>) =>
  Object.entries(r)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ') || 'none';

export function markdownReport(report: NightReport): string {
  const { workload: w, product: p, ceiling: c } = report;
  const minutes = (s: number) => `${s} s (${(s / 60).toFixed(1)} min)`;
  const lines = [
    `# Night benchmark: ${w.holds} holds, seed ${report.options.seed}${report.options.faults ? '' : ', fault-free'}`,
    '',
    `Reproduce: \`${report.command}\``,
    '',
    `${report.date} · ${backendName(report)} · ${report.machine.cpus} × ${report.machine.cpuModel} · ${report.machine.memoryGiB} GiB · Node ${report.machine.node} · ${report.options.workers} worker process(es) · page ${report.options.pageSize}${report.options.maxCachedWorkflows === undefined ? '' : ` · ${report.options.maxCachedWorkflows} cached workflows per worker`}`,
    '',
    `Workload: ${w.holds} holds (US ${w.byRegion.us}, EU ${w.byRegion.eu}) over ${w.merchants} merchants; faulty merchants: ${counts(w.faultyMerchants)}. ` +
      `Merchant bound: ${w.merchantBound.seconds} s (${w.merchantBound.merchantId}: ${w.merchantBound.holds} holds at ${w.merchantBound.ratePerSecond}/s).`,
    '',
    '| | value |',
    '|---|---|',
    `| **Product, end to end** (trigger → every hold released and every delivery settled) | **${minutes(p.seconds)} = ${p.holdsPerSecond} holds/s** |`,
    `| Last hold released at | ${p.releasedBySeconds} s |`,
    c
      ? `| **Bare fan-out ceiling** (no-op child per hold, same paging) | **${minutes(c.seconds)} = ${c.holdsPerSecond} holds/s** |`
      : '| Bare fan-out ceiling | not run (--no-ceiling) |',
    p.ratioToCeiling !== undefined ? `| **Ratio to the ceiling** | **${p.ratioToCeiling}×** |` : '',
    `| Makespan ÷ merchant bound | ${p.makespanVsMerchantBound}× |`,
    `| History events per hold, product | ${events(p.historyEvents)} |`,
    c ? `| History events per hold, ceiling | ${events(c.historyEvents)} |` : '',
    `| Requests per delivered webhook | ${p.requestsPerDelivered} (${p.requests} requests, ${p.deliveredWebhooks} delivered) |`,
    `| Receiver-side max per merchant in any 1 s | worst ${p.worstMerchantRate.maxPerSecond} at ${p.worstMerchantRate.merchantId} (limit ${p.worstMerchantRate.ratePerSecond}/s + burst = ${p.worstMerchantRate.limit}); over the limit: ${p.merchantsOverLimit.length === 0 ? 'none' : p.merchantsOverLimit.join(', ')} |`,
    `| 429s received | ${p.received429} |`,
    `| Deliveries | ${counts(p.deliveries)} |`,
    `| Quarantined by reason | ${counts(p.quarantinedByReason)} |`,
    `| Held behind a disabled (410) merchant | ${p.heldForDisabledMerchants} |`,
    `| Unverified requests / delivered twice | ${p.unverifiedRequests} / ${p.deliveredTwice} |`,
    `| Peak RSS per worker | ${report.workers.map((x) => `${x.peakRssMiB} MiB`).join(', ')} |`,
    `| CPU, product phase | ${cpu(p.cpu)} |`,
    c ? `| CPU, ceiling phase | ${cpu(c.cpu)} |` : '',
    `| Invariant violations | ${report.violations.length === 0 ? 'none (all seven checked)' : report.violations.map((v) => `#${v.invariant} ${v.message}`).join('; ')} |`,
  ];
  return lines.filter((l) => l !== '').join('\n') + '\n';
}

/** Which Temporal a report ran on, in words. */
export function backendName(report: NightReport): string {
  const t = report.options.temporal;
  if (t.kind === 'dev') return 'dev server (SQLite)';
  return `cluster, ${t.shards} shard${t.shards === 1 ? '' : 's'} (PostgreSQL${t.synchronousCommit === false ? ', synchronous_commit off' : ''})`;
}

/** The same night on several Temporal backends, side by side (`npm run bench -- --backends ...`). */
export function backendsReport(reports: readonly NightReport[], command: string): string {
  const [first] = reports;
  const dev = reports.find((r) => r.options.temporal.kind === 'dev');
  const perHold = (seconds: number, r: NightReport) => `${Math.round((seconds * 1000) / r.workload.holds)}`;
  const lines = [
    `# The night on each Temporal backend: ${first!.workload.holds} holds, seed ${first!.options.seed}${first!.options.faults ? '' : ', fault-free'}`,
    '',
    `Reproduce: \`${command}\``,
    '',
    `${first!.date} · ${first!.machine.cpus} × ${first!.machine.cpuModel} · ${first!.machine.memoryGiB} GiB · ${first!.options.workers} worker process(es) · page ${first!.options.pageSize}. ` +
      'Each backend ran the same seeded night, one after the other, on this one machine. On the cluster, PostgreSQL CPU includes ' +
      "Temporal's own persistence (its two databases live in the same PostgreSQL as the ledgers).",
    '',
    '| Backend | Ceiling holds/s | Product holds/s | Product vs dev server | Product ÷ ceiling | CPU ms per hold, product: Temporal / PostgreSQL / workers | Violations |',
    '|---|---|---|---|---|---|---|',
    ...reports.map((r) => {
      const p = r.product;
      return (
        `| ${backendName(r)} | ${r.ceiling?.holdsPerSecond ?? '—'} | ${p.holdsPerSecond} | ${dev ? `${(p.holdsPerSecond / dev.product.holdsPerSecond).toFixed(2)}×` : '—'} | ` +
        `${p.ratioToCeiling ?? '—'}× | ${perHold(p.cpu.temporal, r)} / ${perHold(p.cpu.postgres, r)} / ${perHold(p.cpu.workers, r)} | ${r.violations.length} |`
      );
    }),
  ];
  return lines.join('\n') + '\n';
}
