/**
 * An alert seen firing for real: a real Prometheus (compose's version, built once: dev/prometheus-tools.ts) scrapes a
 * real worker process's metrics endpoint every second and evaluates the production WorkersDown rule, its `for:`
 * shortened to 5 s (the one change from deploy/prometheus/alerts.yml). Killing the worker fires it within a minute;
 * starting the worker again resolves it. The same Prometheus answers the on-call dashboard's queries of the worker's
 * gauges (deploy/perses/provisioning/dashboard-on-call.json) with the worker's series.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { interpolate, readDashboard, seriesName } from '../../bench/dashboard.js';
import { loadDevConfig } from '../../dev/dev-config.js';
import { freePort } from '../../dev/embedded-postgres.js';
import { startPrometheus, type PrometheusServer } from '../../dev/prometheus-server.js';
import { obtainPrometheus } from '../../dev/prometheus-tools.js';
import { startWorkerProcesses, workerEnvironment, type WorkerProcesses } from '../../dev/worker-processes.js';
import { openHarness, type Harness } from '../support/harness.js';
import { waitUntil } from '../support/wait.js';

const ALERTS = path.resolve(import.meta.dirname, '../../deploy/prometheus/alerts.yml');

let harness: Harness;
let workers: WorkerProcesses | undefined;
let prometheus: PrometheusServer | undefined;
let api: string;

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

beforeAll(async () => {
  const binary = await obtainPrometheus(loadDevConfig().cacheDir, (line) => console.log(line));
  harness = await openHarness();
  const us = await harness.region('us');
  const metricsPort = await freePort();
  workers = await startWorkerProcesses(1, {
    ...workerEnvironment([us.config], harness.address, inject('workflowBundlePath')),
    METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
  });

  // The production rule, waiting 5 s instead of 2 min.
  const production = (parse(await fs.readFile(ALERTS, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap(
    (g) => g.rules,
  );
  const workersDown = production.find((r) => r.alert === 'WorkersDown')!;
  prometheus = await startPrometheus({
    binary,
    rules: { groups: [{ name: 'live', rules: [{ ...workersDown, for: '5s' }] }] },
    config: {
      global: { scrape_interval: '1s', evaluation_interval: '1s', scrape_timeout: '900ms' },
      scrape_configs: [
        {
          job_name: 'hold-sweeper-workers',
          static_configs: [{ targets: [`127.0.0.1:${metricsPort}`], labels: { region: 'us' } }],
        },
      ],
    },
  });
  api = prometheus.api;
}, 900_000);

afterAll(async () => {
  await prometheus?.stop();
  await workers?.stop();
  await harness?.close();
});

async function get<T>(route: string): Promise<T | undefined> {
  const response = await fetch(`${api}${route}`).catch(() => undefined);
  if (!response?.ok) return undefined;
  return ((await response.json()) as { data: T }).data;
}

/** The state of the WorkersDown alert for region us, as Prometheus has it now: none, pending or firing. */
async function usWorkersDown(): Promise<string> {
  const data = await get<{ alerts: { labels: Record<string, string>; state: string }[] }>('/alerts');
  return data?.alerts.find((a) => a.labels.alertname === 'WorkersDown' && a.labels.region === 'us')?.state ?? 'none';
}

it('the on-call dashboard’s panels of gauges read the worker, each series named for its region', async () => {
  const dashboard = await readDashboard();
  // The panels a worker fills before it has done anything (the others need releases, attempts or a merchant in
  // trouble).
  const idle = ['oldestAges', 'sweepCompletion', 'duplicates', 'backlog', 'targetsUp'];
  const queries = idle.flatMap((id) =>
    dashboard.spec.panels[id]!.spec.queries.map((q) => ({ id, ...q.spec.plugin.spec })),
  );
  // One not about the workers: Temporal and the codec endpoint are not scraped here.
  const read = queries.filter((q) => !q.query.includes('temporal|hold-sweeper-codec'));
  expect(read.length).toBe(queries.length - 1);
  for (const q of read) {
    const query = interpolate(q.query, '1m');
    let result: { metric: Record<string, string> }[] = [];
    await waitUntil(
      async () => {
        result =
          (await get<{ result: { metric: Record<string, string> }[] }>(`/query?query=${encodeURIComponent(query)}`))
            ?.result ?? [];
        return result.length > 0;
      },
      `${q.id}: ${query} answers`,
      60_000,
    );
    expect(
      result.map((r) => seriesName(q.seriesNameFormat, r.metric).split(' ')[0]),
      `${q.id}: ${query}`,
    ).toEqual(['us']);
  }
}, 120_000);

it('WorkersDown fires within a minute of the workers dying, and resolves once they are back', async () => {
  const up = async () =>
    (
      await get<{ result: { value: [number, string] }[] }>(
        `/query?query=${encodeURIComponent('up{job="hold-sweeper-workers",region="us"}')}`,
      )
    )?.result[0]?.value[1];
  await waitUntil(async () => (await up()) === '1', 'Prometheus scraping the worker', 60_000);
  // Before the first scrape the region's series was absent, which is pending WorkersDown too: it clears once scraped.
  await waitUntil(async () => (await usWorkersDown()) === 'none', 'no WorkersDown while the worker answers', 30_000);

  workers!.kill(0);
  await waitUntil(async () => (await up()) === '0', 'the scrape failing', 30_000);
  await waitUntil(
    async () => (await usWorkersDown()) === 'firing',
    'WorkersDown firing for us within a minute',
    60_000,
  );

  await workers!.restart(0);
  await waitUntil(
    async () => (await usWorkersDown()) === 'none',
    'WorkersDown resolved once the worker is back',
    60_000,
  );
  expect(await up()).toBe('1');
}, 240_000);
