/**
 * An alert seen firing for real: a real Prometheus (compose's version, built once: dev/prometheus-tools.ts) scrapes a
 * real worker process's metrics endpoint every second and evaluates the production WorkersDown rule, its `for:`
 * shortened to 5 s (the one change from deploy/prometheus/alerts.yml). Killing the worker fires it within a minute;
 * starting the worker again resolves it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { loadDevConfig } from '../../dev/dev-config.js';
import { freePort } from '../../dev/embedded-postgres.js';
import { obtainPrometheus } from '../../dev/prometheus-tools.js';
import { startWorkerProcesses, workerEnvironment, type WorkerProcesses } from '../../dev/worker-processes.js';
import { openHarness, type Harness } from '../support/harness.js';
import { waitUntil } from '../support/wait.js';

const ALERTS = path.resolve(import.meta.dirname, '../../deploy/prometheus/alerts.yml');

let harness: Harness;
let workers: WorkerProcesses | undefined;
let prometheus: ChildProcess | undefined;
let dir: string;
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
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-prometheus-'));
  const metricsPort = await freePort();
  workers = await startWorkerProcesses(1, {
    ...workerEnvironment([us.config], harness.address, inject('workflowBundlePath')),
    METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
  });

  // The production rule, waiting 5 s instead of 2 min.
  const production = (parse(await fs.readFile(ALERTS, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);
  const workersDown = production.find((r) => r.alert === 'WorkersDown')!;
  await fs.writeFile(path.join(dir, 'rules.yml'), stringify({ groups: [{ name: 'live', rules: [{ ...workersDown, for: '5s' }] }] }));
  await fs.writeFile(
    path.join(dir, 'prometheus.yml'),
    stringify({
      global: { scrape_interval: '1s', evaluation_interval: '1s', scrape_timeout: '900ms' },
      rule_files: ['rules.yml'],
      scrape_configs: [{ job_name: 'hold-sweeper-workers', static_configs: [{ targets: [`127.0.0.1:${metricsPort}`], labels: { region: 'us' } }] }],
    }),
  );
  const port = await freePort();
  api = `http://127.0.0.1:${port}/api/v1`;
  prometheus = spawn(
    binary,
    [
      `--config.file=${path.join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
}, 900_000);

afterAll(async () => {
  prometheus?.kill('SIGTERM');
  await workers?.stop();
  await harness?.close();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
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

it('WorkersDown fires within a minute of the workers dying, and resolves once they are back', async () => {
  const up = async () =>
    (await get<{ result: { value: [number, string] }[] }>(`/query?query=${encodeURIComponent('up{job="hold-sweeper-workers",region="us"}')}`))
      ?.result[0]?.value[1];
  await waitUntil(async () => (await up()) === '1', 'Prometheus scraping the worker', 60_000);
  // Before the first scrape the region's series was absent, which is pending WorkersDown too: it clears once scraped.
  await waitUntil(async () => (await usWorkersDown()) === 'none', 'no WorkersDown while the worker answers', 30_000);

  workers!.kill(0);
  await waitUntil(async () => (await up()) === '0', 'the scrape failing', 30_000);
  await waitUntil(async () => (await usWorkersDown()) === 'firing', 'WorkersDown firing for us within a minute', 60_000);

  await workers!.restart(0);
  await waitUntil(async () => (await usWorkersDown()) === 'none', 'WorkersDown resolved once the worker is back', 60_000);
  expect(await up()).toBe('1');
}, 240_000);
