/**
 * The on-call dashboard (deploy/perses/provisioning), checked without Perses: it is a Perses dashboard of the project
 * and datasource provisioned beside it, every panel is placed once and nothing overlaps, every query names only
 * metrics the product exports (or Prometheus's `up`, or the SDK metrics the alert rules name), every series name is
 * made of labels its query keeps, and every alert's signal is on a panel. Its PromQL is parsed by promtool in
 * test/integration/alert-rules.test.ts, its gauges read from a real worker in alerts-live.test.ts, and the whole
 * dashboard is drawn from a real night by the benchmark (bench/dashboard.ts).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { parse } from 'yaml';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { renderSvg } from '../../bench/charts.js';
import {
  dashboardSpec,
  interpolate,
  layoutRows,
  panelId,
  readDashboard,
  seriesName,
  type DashboardNight,
} from '../../bench/dashboard.js';

const REPO = path.resolve(import.meta.dirname, '../..');
const PROVISIONING = path.join(REPO, 'deploy/perses/provisioning');
const readJson = async <T>(file: string) => JSON.parse(await fs.readFile(path.join(PROVISIONING, file), 'utf8')) as T;

/** Every .ts file under src/. */
async function sources(): Promise<string> {
  const files = (await fs.readdir(path.join(REPO, 'src'), { recursive: true })).filter((f) => f.endsWith('.ts'));
  return (await Promise.all(files.map((f) => fs.readFile(path.join(REPO, 'src', f), 'utf8')))).join('\n');
}

/**
 * The series names the product exports, from where it declares them: an SDK meter's counter gets `_total` from the
 * exporter and a histogram its `_bucket`, `_sum` and `_count` (src/observability/metrics.ts, PROMETHEUS_EXPORT); a
 * gauge, and a prom-client counter of the receivers', the APIs' and the codec endpoint's registry (named with
 * `_total`), are as named. Every process's default metrics (CPU, memory, event loop) are what prom-client registers.
 */
async function exportedNames(): Promise<Set<string>> {
  const names = new Set<string>();
  for (const [, kind, name] of (await sources()).matchAll(
    /\b(createCounter|createHistogram|createGauge|gauge|name:)\(?\s*'(hold_sweeper_[a-z0-9_]+)'/g,
  )) {
    if (kind === 'createCounter') names.add(`${name}_total`);
    else if (kind === 'createHistogram')
      for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${name}${suffix}`);
    else names.add(name!);
  }
  const defaults = new Registry();
  collectDefaultMetrics({ register: defaults });
  for (const metric of await defaults.getMetricsAsJSON())
    for (const value of metric.values) names.add((value as { metricName?: string }).metricName ?? metric.name);
  return names;
}

const METRIC =
  /\b(hold_sweeper_[a-z0-9_]+|temporal_[a-z0-9_]+|process_[a-z0-9_]+|nodejs_[a-z0-9_]+|up)\b(?=\s*[{[)]|\s*$)/g;
const metricsOf = (query: string) => new Set([...query.matchAll(METRIC)].map((m) => m[1]!));

interface Alert {
  alert: string;
  expr: string;
}

describe('the on-call dashboard', async () => {
  const dashboard = await readDashboard();
  const panels = Object.entries(dashboard.spec.panels);
  const queries = panels.flatMap(([id, p]) => p.spec.queries.map((q) => ({ id, ...q.spec.plugin.spec })));

  it('is a Perses dashboard of the provisioned project, on the provisioned Prometheus datasource', async () => {
    const project = await readJson<{ kind: string; metadata: { name: string } }>('project.json');
    const datasource = await readJson<{
      kind: string;
      spec: { default: boolean; plugin: { kind: string; spec: { proxy: { kind: string; spec: { url: string } } } } };
    }>('datasource-prometheus.json');
    expect(project.kind).toBe('Project');
    expect(dashboard.kind).toBe('Dashboard');
    expect(dashboard.metadata.project).toBe(project.metadata.name);
    expect(dashboard.metadata.name).toMatch(/^[a-z0-9-]+$/);
    // The panels name no datasource: they use the default one, which is this.
    expect(datasource.kind).toBe('GlobalDatasource');
    expect(datasource.spec.default).toBe(true);
    expect(datasource.spec.plugin.kind).toBe('PrometheusDatasource');
    expect(datasource.spec.plugin.spec.proxy).toEqual({ kind: 'HTTPProxy', spec: { url: 'http://prometheus:9090' } });
    for (const q of queries) expect(q, `${q.id}: no datasource of its own`).not.toHaveProperty('datasource');
  });

  it('places every panel exactly once, on a 24-column grid, none overlapping another', () => {
    const refs = dashboard.spec.layouts.flatMap((g) => g.spec.items.map(panelId));
    expect(refs.filter((r) => r === undefined)).toEqual([]);
    expect([...refs].sort()).toEqual(panels.map(([id]) => id).sort());
    for (const grid of dashboard.spec.layouts) {
      const items = grid.spec.items;
      for (const item of items) {
        expect(item.x >= 0 && item.width > 0 && item.x + item.width <= 24, `${item.content.$ref} fits the grid`).toBe(
          true,
        );
        expect(item.height).toBeGreaterThan(0);
      }
      for (const [i, a] of items.entries())
        for (const b of items.slice(i + 1)) {
          const overlap = a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
          expect(overlap, `${a.content.$ref} and ${b.content.$ref} overlap`).toBe(false);
        }
    }
    expect(layoutRows(dashboard).flatMap((g) => g.rows.flat().map((p) => p.id))).toEqual(refs);
  });

  it('has time-series panels of Prometheus queries, each with a name, a description, a unit and a series name', () => {
    for (const [id, panel] of panels) {
      expect(panel.kind).toBe('Panel');
      expect(panel.spec.plugin.kind, id).toBe('TimeSeriesChart');
      expect(panel.spec.display.name, id).toBeTruthy();
      expect(panel.spec.display.description?.length, `${id} says what it shows`).toBeGreaterThan(40);
      expect(['seconds', 'decimal', 'percent-decimal', 'bytes'], `${id}'s unit`).toContain(
        panel.spec.plugin.spec.yAxis?.format?.unit,
      );
      expect(panel.spec.queries.length, id).toBeGreaterThan(0);
      for (const q of panel.spec.queries) {
        expect(q.kind).toBe('TimeSeriesQuery');
        expect(q.spec.plugin.kind).toBe('PrometheusTimeSeriesQuery');
        expect(q.spec.plugin.spec.seriesNameFormat, `${id}: ${q.spec.plugin.spec.query}`).toBeTruthy();
      }
    }
  });

  it('names series only by labels its query keeps (a `by` clause of the outermost aggregation)', () => {
    for (const q of queries) {
      const kept = new Set(
        (
          /^\s*(?:\d+\s*\*\s*)?(?:[a-z_]+\s+by|histogram_quantile\([0-9.]+,\s*sum by)\s*\(([^)]*)\)/.exec(
            q.query,
          )?.[1] ?? ''
        ).split(/\s*,\s*/),
      );
      for (const [, label] of q.seriesNameFormat!.matchAll(/\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}/g))
        expect(kept.has(label!), `${q.id}: {{${label}}} is kept by ${q.query}`).toBe(true);
    }
  });

  it('uses only the variables it defines ($region) and Perses’s own ($__rate_interval)', () => {
    expect(dashboard.spec.variables?.map((v) => v.spec.name)).toEqual(['region']);
    for (const q of queries) {
      for (const [variable] of q.query.matchAll(/\$[a-zA-Z_]+/g))
        expect(['$region', '$__rate_interval'], q.query).toContain(variable);
      expect(interpolate(q.query, '20s'), q.query).not.toContain('$');
    }
  });

  it('queries only metrics the product exports, Prometheus’s `up`, or SDK metrics the alert rules name', async () => {
    const exported = await exportedNames();
    // The extraction finds what it should: a counter, a histogram and a gauge the dashboard reads.
    expect(exported).toContain('hold_sweeper_webhook_attempts_total');
    expect(exported).toContain('hold_sweeper_limiter_wait_seconds_bucket');
    expect(exported).toContain('hold_sweeper_oldest_unreleased_hold_age_seconds');
    expect(exported).toContain('hold_sweeper_processor_requests_refused_total');
    expect(exported).toContain('process_cpu_seconds_total');
    expect(exported).toContain('nodejs_eventloop_lag_p99_seconds');
    const alerts = await fs.readFile(path.join(REPO, 'deploy/prometheus/alerts.yml'), 'utf8');
    for (const q of queries)
      for (const metric of metricsOf(q.query)) {
        const known =
          exported.has(metric) || metric === 'up' || (metric.startsWith('temporal_') && alerts.includes(metric));
        expect(known, `${q.id}: ${metric} is exported`).toBe(true);
      }
  });

  it('shows every alert’s signal: each rule of alerts.yml reads a metric some panel reads', async () => {
    const rules = (
      parse(await fs.readFile(path.join(REPO, 'deploy/prometheus/alerts.yml'), 'utf8')) as {
        groups: { rules: Alert[] }[];
      }
    ).groups.flatMap((g) => g.rules);
    const shown = new Set(queries.flatMap((q) => [...metricsOf(q.query)]));
    expect(rules.length).toBeGreaterThan(15);
    for (const rule of rules)
      expect(
        [...metricsOf(rule.expr)].some((m) => shown.has(m)),
        `${rule.alert} (${rule.expr})`,
      ).toBe(true);
  });

  it('draws as SVG from a night’s answers: every panel titled, a quiet one saying so', async () => {
    const [first, ...rest] = panels.map(([id]) => id);
    const night: DashboardNight = {
      dashboard,
      origin: '2026-12-02T00:00:00.000Z',
      stepSeconds: 5,
      rateInterval: '20s',
      panels: {
        [first!]: [
          {
            query: 'q',
            series: [
              {
                name: seriesName('{{region}} x', { region: 'us' }),
                points: [
                  [0, 1],
                  [5, 2],
                  [10, 4],
                ],
              },
            ],
          },
        ],
        ...Object.fromEntries(rest.map((id) => [id, [{ query: 'q', series: [] }]])),
      },
    };
    const svg = await renderSvg(dashboardSpec(night, 'a night'));
    expect(svg).toMatch(/^<svg/);
    for (const [, panel] of panels) expect(svg).toContain(escapeXml(panel.spec.display.name));
    expect(svg).toContain('us x');
    expect(svg.split('no series this night').length - 1).toBe(rest.length);
  });
});

const escapeXml = (text: string) => text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
