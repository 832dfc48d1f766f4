/**
 * The on-call dashboard (deploy/perses/provisioning/dashboard-on-call.json, what compose's Perses serves) drawn from a
 * real night: the benchmark runs a real Prometheus scraping its workers and Temporal, asks it each panel's own PromQL
 * over the product phase, keeps the answers in the report, and renders the panels, laid out as the dashboard lays them
 * out, with Vega-Lite like the report's other charts. Same queries, same series names, same units as on call.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { TopLevelSpec } from 'vega-lite';
import type { Resolve } from 'vega-lite/types_unstable/resolve.js';
import type { NonNormalizedSpec } from 'vega-lite/types_unstable/spec/index.js';

const DASHBOARD_FILE = path.resolve(import.meta.dirname, '../deploy/perses/provisioning/dashboard-on-call.json');

interface PersesQuery {
  kind: 'TimeSeriesQuery';
  spec: { plugin: { kind: 'PrometheusTimeSeriesQuery'; spec: { query: string; seriesNameFormat?: string } } };
}

interface PersesPanel {
  kind: 'Panel';
  spec: {
    display: { name: string; description?: string };
    plugin: { kind: string; spec: { yAxis?: { format?: { unit?: string }; min?: number } } };
    queries: PersesQuery[];
  };
}

interface GridItem {
  x: number;
  y: number;
  width: number;
  height: number;
  content: { $ref: string };
}

interface PersesDashboard {
  kind: 'Dashboard';
  metadata: { name: string; project: string };
  spec: {
    display?: { name?: string; description?: string };
    variables?: { kind: string; spec: { name: string; plugin?: { kind: string; spec: Record<string, unknown> } } }[];
    panels: Record<string, PersesPanel>;
    layouts: { kind: 'Grid'; spec: { display?: { title?: string }; items: GridItem[] } }[];
  };
}

export async function readDashboard(file = DASHBOARD_FILE): Promise<PersesDashboard> {
  return JSON.parse(await fs.readFile(file, 'utf8')) as PersesDashboard;
}

/** A grid item's panel id (`#/spec/panels/<id>`), or undefined for a reference to anything else. */
export const panelId = (item: GridItem): string | undefined =>
  /^#\/spec\/panels\/([^/]+)$/.exec(item.content.$ref)?.[1];

/** The dashboard's grids, each as rows of panel ids, top to bottom and left to right, as Perses places them. */
export function layoutRows(dashboard: PersesDashboard): { title: string; rows: { id: string; width: number }[][] }[] {
  return dashboard.spec.layouts.map((grid) => {
    const byRow = new Map<number, GridItem[]>();
    for (const item of grid.spec.items) byRow.set(item.y, [...(byRow.get(item.y) ?? []), item]);
    const rows = [...byRow.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, items]) => items.sort((a, b) => a.x - b.x).map((item) => ({ id: panelId(item)!, width: item.width })));
    return { title: grid.spec.display?.title ?? '', rows };
  });
}

/**
 * A panel query as a Prometheus of its own runs it: the dashboard's variables filled in the way Perses fills them with
 * every value selected (`$region` in a regex matcher matches every region) and `$__rate_interval` given.
 */
export function interpolate(query: string, rateInterval: string): string {
  return query.replaceAll('$__rate_interval', rateInterval).replaceAll('=~"$region"', '=~".*"');
}

/** Perses's series name: `{{label}}` replaced by the series' label value. */
export function seriesName(format: string | undefined, labels: Record<string, string>): string {
  if (format === undefined) return JSON.stringify(labels);
  return format.replace(/\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}/g, (_, label: string) => labels[label] ?? '').trim();
}

/** Each panel's query answers over a time range: points are [seconds since `origin` (negative before it), value]. */
export interface DashboardNight {
  /** The dashboard as it was queried (so a report renders the same panels after the file changes). */
  dashboard: PersesDashboard;
  /** The time the points count from: the night's trigger. */
  origin: string;
  stepSeconds: number;
  rateInterval: string;
  /** Panel id → one entry per query, in the panel's order. */
  panels: Record<string, { query: string; series: { name: string; points: [number, number][] }[] }[]>;
}

/** Runs every panel query over [start, end] (ms) against a Prometheus API (e.g. http://127.0.0.1:9090/api/v1). */
export async function queryDashboard(
  api: string,
  dashboard: PersesDashboard,
  {
    origin,
    start,
    end,
    stepSeconds,
    rateInterval,
  }: { origin: number; start: number; end: number; stepSeconds: number; rateInterval: string },
): Promise<DashboardNight> {
  const panels: DashboardNight['panels'] = {};
  for (const [id, panel] of Object.entries(dashboard.spec.panels)) {
    panels[id] = [];
    for (const q of panel.spec.queries) {
      const { query: raw, seriesNameFormat } = q.spec.plugin.spec;
      const query = interpolate(raw, rateInterval);
      const params = new URLSearchParams({
        query,
        start: String(start / 1000),
        end: String(end / 1000),
        step: String(stepSeconds),
      });
      const response = await fetch(`${api}/query_range?${params}`);
      const body = (await response.json()) as {
        status: string;
        error?: string;
        data?: { result: { metric: Record<string, string>; values: [number, string][] }[] };
      };
      if (body.status !== 'success') throw new Error(`panel ${id}: Prometheus refused ${query}: ${body.error}`);
      panels[id].push({
        query,
        series: body.data!.result.map((r) => ({
          name: seriesName(seriesNameFormat, r.metric),
          points: r.values
            .map(([t, v]): [number, number] => [Math.round((t - origin / 1000) * 10) / 10, Number(v)])
            .filter(([, v]) => Number.isFinite(v)),
        })),
      });
    }
  }
  return { dashboard, origin: new Date(origin).toISOString(), stepSeconds, rateInterval, panels };
}

/** The panels that answered nothing over the night (a metric renamed, a label that is not there, or a quiet signal). */
export function emptyPanels(night: DashboardNight): string[] {
  return Object.entries(night.panels)
    .filter(([, queries]) => queries.every((q) => q.series.every((s) => s.points.length === 0)))
    .map(([id]) => id);
}

const DASHBOARD_WIDTH = 1200;
const PANEL_HEIGHT = 150;

/** How a Perses unit reads on a Vega-Lite axis (d3 formats). */
function axisFor(unit: string | undefined): { title: string; format: string } {
  switch (unit) {
    case 'seconds':
      return { title: 'seconds', format: ',.3~f' };
    case 'percent-decimal':
      return { title: 'share', format: '.0%' };
    default:
      return { title: '', format: ',.3~f' };
  }
}

/** One time axis for every panel, as on the dashboard: the night's first and last point. */
function timeDomain(night: DashboardNight): [number, number] {
  const ts = Object.values(night.panels).flatMap((qs) =>
    qs.flatMap((q) => q.series.flatMap((s) => s.points.map(([t]) => t))),
  );
  return ts.length === 0 ? [0, 1] : [Math.min(...ts), Math.max(...ts)];
}

function panelSpec(night: DashboardNight, id: string, width: number, domain: [number, number]): NonNormalizedSpec {
  const panel = night.dashboard.spec.panels[id]!;
  const values = (night.panels[id] ?? []).flatMap((q) =>
    q.series.flatMap((s) => s.points.map(([t, v]) => ({ t, v, series: s.name }))),
  );
  const title = { text: panel.spec.display.name, anchor: 'start' as const, fontSize: 12 };
  const chartWidth = Math.round((DASHBOARD_WIDTH * width) / 24) - 40;
  if (values.length === 0) {
    return {
      title,
      width: chartWidth,
      height: PANEL_HEIGHT,
      data: { values: [{}] },
      mark: { type: 'text', text: 'no series this night', color: 'gray' },
    };
  }
  const yAxis = panel.spec.plugin.spec.yAxis;
  const axis = axisFor(yAxis?.format?.unit);
  // A long list of series (merchants that passed through the worst) in columns, so the legend stays short.
  const columns = Math.min(
    Math.max(1, Math.floor(chartWidth / 150)),
    Math.ceil(new Set(values.map((v) => v.series)).size / 6),
  );
  return {
    title,
    width: chartWidth,
    height: PANEL_HEIGHT,
    data: { values },
    mark: { type: 'line', interpolate: 'step-after', strokeWidth: 1.5 },
    encoding: {
      x: { field: 't', type: 'quantitative', title: 'seconds since the trigger', scale: { domain, nice: false } },
      y: {
        field: 'v',
        type: 'quantitative',
        title: axis.title,
        axis: { format: axis.format },
        scale: yAxis?.min !== undefined ? { domainMin: yAxis.min } : { zero: false },
      },
      color: {
        field: 'series',
        type: 'nominal',
        title: null,
        legend: { orient: 'bottom', columns, labelLimit: Math.floor(chartWidth / columns) - 20 },
      },
    },
  };
}

const independent: Resolve = {
  scale: { color: 'independent', x: 'independent', y: 'independent' },
  legend: { color: 'independent' },
};

/** The dashboard's grids as titled blocks of rows, each panel as wide as its grid item. */
export function dashboardSpec(night: DashboardNight, title: string): TopLevelSpec {
  const domain = timeDomain(night);
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: title, anchor: 'start', fontSize: 15 },
    vconcat: layoutRows(night.dashboard).map((grid) => ({
      title: { text: grid.title, anchor: 'start', fontSize: 13 },
      vconcat: grid.rows.map((row) => ({
        hconcat: row.map((p) => panelSpec(night, p.id, p.width, domain)),
        resolve: independent,
      })),
      resolve: independent,
    })),
    resolve: independent,
    config: { concat: { spacing: 24 } },
  };
}
