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
    `${report.date} · ${report.machine.cpus} × ${report.machine.cpuModel} · ${report.machine.memoryGiB} GiB · Node ${report.machine.node} · ${report.options.workers} worker process(es) · page ${report.options.pageSize}${report.options.maxCachedWorkflows === undefined ? '' : ` · ${report.options.maxCachedWorkflows} cached workflows per worker`}`,
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
