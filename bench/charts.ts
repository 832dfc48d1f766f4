/**
 * The night report's pictures: Vega-Lite specifications compiled and rendered to SVG by Vega itself (headless, no
 * browser, no canvas), from the series the benchmark sampled. Each chart is a file next to the report, which embeds it.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import { dashboardSpec } from './dashboard.js';
import type { NightReport } from './night-report.js';
import { round, type Phase, type Sample } from './sampler.js';

export interface Chart {
  title: string;
  /** Path relative to the report's directory. */
  file: string;
}

const WIDTH = 640;

/** Per-second rates of cumulative values between consecutive samples of a phase (the value at the interval's end). */
function rates(
  samples: readonly Sample[],
  phase: Phase,
  read: (s: Sample) => number | undefined,
): { t: number; rate: number }[] {
  const ofPhase = samples.filter((s) => s.phase === phase);
  const out: { t: number; rate: number }[] = [];
  for (let i = 1; i < ofPhase.length; i++) {
    const [a, b] = [ofPhase[i - 1]!, ofPhase[i]!];
    const [va, vb] = [read(a), read(b)];
    if (va === undefined || vb === undefined || b.t <= a.t) continue;
    out.push({ t: b.t, rate: round(Math.max(0, vb - va) / (b.t - a.t)) });
  }
  return out;
}

/** Mean of a histogram over each interval (its sum and count differences), in ms. */
function intervalMeans(
  samples: readonly Sample[],
  phase: Phase,
  sum: (s: Sample) => number | undefined,
  count: (s: Sample) => number | undefined,
  scale: number,
) {
  const ofPhase = samples.filter((s) => s.phase === phase);
  const out: { t: number; ms: number }[] = [];
  for (let i = 1; i < ofPhase.length; i++) {
    const [a, b] = [ofPhase[i - 1]!, ofPhase[i]!];
    const n = (count(b) ?? 0) - (count(a) ?? 0);
    if (n <= 0) continue;
    // At least 0.1 ms: the chart's scale is logarithmic.
    out.push({ t: b.t, ms: Math.max(0.1, round((((sum(b) ?? 0) - (sum(a) ?? 0)) / n) * scale, 1)) });
  }
  return out;
}

const seriesKey = (record: Record<string, number>, prefix: string) =>
  Object.entries(record)
    .filter(([k]) => k.startsWith(prefix))
    .reduce((a, [, v]) => a + v, 0);

export function throughputSpec(report: NightReport): TopLevelSpec {
  const values = [
    ...rates(report.series, 'ceiling', (s) => s.progress.completed).map((r) => ({
      ...r,
      series: 'ceiling: no-op children completed',
    })),
    ...rates(report.series, 'product', (s) => s.progress.released).map((r) => ({
      ...r,
      series: 'product: holds released',
    })),
    ...rates(report.series, 'product', (s) => s.progress.delivered).map((r) => ({
      ...r,
      series: 'product: webhooks delivered',
    })),
  ];
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: `Holds per second over the run, product and ceiling (${report.workload.holds} holds)`,
    width: WIDTH,
    height: 260,
    data: { values },
    // A rolling mean over five sampling intervals: a page's rhythm stays visible, a single interval's noise does not.
    transform: [
      {
        window: [{ op: 'mean', field: 'rate', as: 'smoothed' }],
        frame: [-2, 2],
        groupby: ['series'],
        sort: [{ field: 't' }],
      },
    ],
    mark: { type: 'line', interpolate: 'monotone' },
    encoding: {
      x: { field: 't', type: 'quantitative', title: 'seconds since the phase started' },
      y: { field: 'smoothed', type: 'quantitative', title: 'per second (rolling mean of 5 samples)' },
      color: {
        field: 'series',
        type: 'nominal',
        title: null,
        legend: { orient: 'bottom', columns: 3, labelLimit: 400 },
      },
    },
  };
}

function cpuSpec(report: NightReport): TopLevelSpec {
  const names = Object.keys(report.series[0]?.cpu ?? {});
  const values = (['ceiling', 'product'] as const).flatMap((phase) =>
    names.flatMap((name) =>
      rates(report.series, phase, (s) => s.cpu[name]).map((r) => ({ t: r.t, cores: r.rate, process: name, phase })),
    ),
  );
  return phaseLines('CPU per process over the run (cores; the machine has ' + report.machine.cpus + ')', values, {
    y: { field: 'cores', type: 'quantitative', title: 'cores' },
    color: 'process',
    columns: 4,
  });
}

function merchantsSpec(report: NightReport): TopLevelSpec {
  const values = report.merchantSeries.flatMap((m) =>
    m.perSecond.map(([t, n]) => ({ merchant: `${m.merchantId} (${m.ratePerSecond}/s + burst)`, t, n, limit: m.limit })),
  );
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: 'Requests each second at the merchants closest to their limit (receiver side), against rate + burst (red)',
    data: { values },
    facet: {
      row: {
        field: 'merchant',
        type: 'nominal',
        title: null,
        header: { labelAngle: 0, labelOrient: 'top', labelAlign: 'left' },
      },
    },
    spec: {
      width: WIDTH,
      height: 90,
      layer: [
        {
          mark: { type: 'bar', width: 1 },
          encoding: {
            x: { field: 't', type: 'quantitative', title: 'seconds since the trigger' },
            y: { field: 'n', type: 'quantitative', title: 'requests' },
          },
        },
        {
          mark: { type: 'rule', color: 'red' },
          encoding: { y: { field: 'limit', aggregate: 'max', type: 'quantitative' } },
        },
      ],
    },
    resolve: { scale: { y: 'independent' } },
  };
}

/** What binds, over time: the wait for a workflow execution's lock and the child-start tasks' time in their queue. */
function serverSpec(report: NightReport): TopLevelSpec {
  const lockSum = (s: Sample) =>
    s.server['cache_latency_sum{cache_type=mutablestate,operation=HistoryCacheGetOrCreate}'];
  const lockCount = (s: Sample) =>
    s.server['cache_latency_count{cache_type=mutablestate,operation=HistoryCacheGetOrCreate}'];
  const startSum = (s: Sample) => s.server['task_latency_queue_sum{operation=TransferActiveTaskStartChildExecution}'];
  const startCount = (s: Sample) =>
    s.server['task_latency_queue_count{operation=TransferActiveTaskStartChildExecution}'];
  const wftSum = (s: Sample) => seriesKey(s.sdk, 'temporal_workflow_task_schedule_to_start_latency_sum');
  const wftCount = (s: Sample) => seriesKey(s.sdk, 'temporal_workflow_task_schedule_to_start_latency_count');
  const values = (['ceiling', 'product'] as const).flatMap((phase) => [
    ...intervalMeans(report.series, phase, lockSum, lockCount, 1000).map((r) => ({
      ...r,
      phase,
      signal: 'server: wait for a workflow execution lock',
    })),
    ...intervalMeans(report.series, phase, startSum, startCount, 1000).map((r) => ({
      ...r,
      phase,
      signal: 'server: child-start task in its queue',
    })),
    ...intervalMeans(report.series, phase, wftSum, wftCount, 1).map((r) => ({
      ...r,
      phase,
      signal: 'SDK: workflow task schedule-to-start',
    })),
  ]);
  return phaseLines('What the run waited on (mean per sampling interval, ms, log scale)', values, {
    y: { field: 'ms', type: 'quantitative', title: 'ms', scale: { type: 'log' } },
    color: 'signal',
    columns: 2,
  });
}

/** Lines over time, one row per phase (ceiling above product), one colour per `color` field value. */
function phaseLines(
  title: string,
  values: readonly Record<string, unknown>[],
  {
    y,
    color,
    columns,
  }: {
    y: { field: string; type: 'quantitative'; title: string; scale?: { type: 'log' } };
    color: string;
    columns: number;
  },
): TopLevelSpec {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    data: { values: [...values] },
    facet: { row: { field: 'phase', type: 'nominal', title: null, sort: ['ceiling', 'product'] } },
    spec: {
      width: WIDTH,
      height: 160,
      mark: { type: 'line', interpolate: 'monotone' },
      encoding: {
        x: { field: 't', type: 'quantitative', title: 'seconds since the phase started' },
        y,
        color: { field: color, type: 'nominal', title: null, legend: { orient: 'bottom', columns, labelLimit: 400 } },
      },
    },
  };
}

export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Renders every chart of `report` as `<dir>/charts/<name>-<chart>.svg`; returns them for the Markdown. */
export async function writeCharts(report: NightReport, dir: string, name: string): Promise<Chart[]> {
  const specs: [string, string, TopLevelSpec | undefined][] = [
    ['throughput', 'Holds released and webhooks delivered per second, product and ceiling', throughputSpec(report)],
    ['cpu', 'CPU per process over time', cpuSpec(report)],
    ['waits', 'What the run waited on', serverSpec(report)],
    [
      'merchants',
      'The busiest merchants, receiver side, against their limit',
      report.merchantSeries.length > 0 ? merchantsSpec(report) : undefined,
    ],
    [
      'on-call',
      'The on-call dashboard (deploy/perses), drawn from this night by its own queries',
      report.dashboard
        ? dashboardSpec(report.dashboard, `The on-call dashboard over this night (${report.workload.holds} holds)`)
        : undefined,
    ],
  ];
  await fs.mkdir(path.join(dir, 'charts'), { recursive: true });
  const charts: Chart[] = [];
  for (const [key, title, spec] of specs) {
    if (!spec) continue;
    const file = path.join('charts', `${name}-${key}.svg`);
    await fs.writeFile(path.join(dir, file), await renderSvg(spec));
    charts.push({ title, file });
  }
  return charts;
}
