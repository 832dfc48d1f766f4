/**
 * Alerts seen firing for real: a real Prometheus (compose's version, built once: dev/prometheus-tools.ts) scrapes a
 * real worker process's metrics endpoint every second and evaluates the production WorkersDown and LedgerGaugesStale
 * rules, their `for:` shortened to 5 s (the one change from deploy/prometheus/alerts.yml; the worker reads its gauges
 * every second). Killing the worker fires WorkersDown within a minute; starting it again resolves it. Closing the
 * worker's ledger database to connections mid-run fires LedgerGaugesStale and turns the worker's readiness to 503
 * naming the ledger, while the age alerts' expressions count the outage as age; opening it resolves both. The same
 * Prometheus answers the on-call dashboard's queries of the worker's gauges, slots and process
 * (deploy/perses/provisioning/dashboard-on-call.json) with the worker's series.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { parse } from 'yaml';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { interpolate, readDashboard, seriesName } from '../../bench/dashboard.js';
import { loadDevConfig } from '../../dev/dev-config.js';
import { freePort } from '../../dev/embedded-postgres.js';
import { startPrometheus, type PrometheusServer } from '../../dev/prometheus-server.js';
import { obtainPrometheus } from '../../dev/prometheus-tools.js';
import { startWorkerProcesses, workerEnvironment, type WorkerProcesses } from '../../dev/worker-processes.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { seedNight } from '../support/ledger.js';
import { waitUntil } from '../support/wait.js';

const ALERTS = path.resolve(import.meta.dirname, '../../deploy/prometheus/alerts.yml');

let harness: Harness;
let workers: WorkerProcesses | undefined;
let prometheus: PrometheusServer | undefined;
let api: string;
let health: string;
let us: TestRegion;

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
  us = await harness.region('us');
  const [metricsPort, healthPort] = [await freePort(), await freePort()];
  health = `http://127.0.0.1:${healthPort}`;
  workers = await startWorkerProcesses(1, {
    ...workerEnvironment([us.config], harness.address, inject('workflowBundlePath')),
    METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
    HEALTH_ADDRESS: `127.0.0.1:${healthPort}`,
    METRICS_GAUGE_INTERVAL: '1s',
  });

  // The production rules, waiting 5 s instead of minutes.
  const production = (parse(await fs.readFile(ALERTS, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap(
    (g) => g.rules,
  );
  const live = ['WorkersDown', 'LedgerGaugesStale'].map((name) => ({
    ...production.find((r) => r.alert === name)!,
    for: '5s',
  }));
  prometheus = await startPrometheus({
    binary,
    rules: { groups: [{ name: 'live', rules: live }] },
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

/** The state of an alert for region us, as Prometheus has it now: none, pending or firing. */
async function usAlert(alertname: string): Promise<string> {
  const data = await get<{ alerts: { labels: Record<string, string>; state: string }[] }>('/alerts');
  return data?.alerts.find((a) => a.labels.alertname === alertname && a.labels.region === 'us')?.state ?? 'none';
}
const usWorkersDown = () => usAlert('WorkersDown');

/** One instant query's single value and the time (s) Prometheus evaluated it at: `at`, or now. */
async function sample(query: string, at?: number): Promise<{ t: number; v: number } | undefined> {
  const time = at === undefined ? '' : `&time=${at}`;
  const result = (
    await get<{ result: { value: [number, string] }[] }>(`/query?query=${encodeURIComponent(query)}${time}`)
  )?.result;
  return result?.[0] ? { t: result[0].value[0], v: Number(result[0].value[1]) } : undefined;
}

/** One instant query's single value, or undefined while it has none. */
async function value(query: string, at?: number): Promise<number | undefined> {
  return (await sample(query, at))?.v;
}

it('the on-call dashboard’s panels of gauges read the worker, each series named for its region', async () => {
  const dashboard = await readDashboard();
  // The panels a worker fills before it has done anything (the others need releases, attempts or a merchant in
  // trouble).
  // The worker's slots and the process row read its one endpoint: the process's metrics and the SDK's exporter's.
  const idle = [
    'oldestAges',
    'sweepCompletion',
    'duplicates',
    'backlog',
    'targetsUp',
    'workerSlots',
    'processCpu',
    'processMemory',
    'processEventLoopLag',
  ];
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
      [...new Set(result.map((r) => seriesName(q.seriesNameFormat, r.metric).split(' ')[0]))],
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

it('the ledger closed mid-run: readiness says so, LedgerGaugesStale fires, the ages count the outage; all clear once it is back', async () => {
  const ready = async () => {
    const response = await fetch(`${health}/readyz`);
    return {
      status: response.status,
      body: (await response.json()) as { ready: boolean; checks: Record<string, string> },
    };
  };
  await waitUntil(async () => (await ready().catch(() => undefined))?.status === 200, 'the worker ready', 60_000);
  expect((await ready()).body).toEqual({
    ready: true,
    checks: { 'ledger-us': 'ok', 'temporal-us': 'ok', 'keys-us': 'ok' },
  });
  expect((await fetch(`${health}/livez`)).status).toBe(200);
  await waitUntil(
    async () => (await usAlert('LedgerGaugesStale')) === 'none',
    'no LedgerGaugesStale while it reads',
    30_000,
  );
  // HoldReleaseBehind's left side, as the rule reads it: the oldest hold's age plus how stale that value is.
  const ageAsRead = `max by (region) (hold_sweeper_oldest_unreleased_hold_age_seconds{region="us"})
    + on (region) (time() - max by (region) (hold_sweeper_ledger_gauges_refreshed_timestamp_seconds{region="us"}))`;
  const lastRead = 'max by (region) (hold_sweeper_ledger_gauges_refreshed_timestamp_seconds{region="us"})';
  /**
   * No hold late, and a read of the ledger since `since` (s) scraped: the age as the rule reads it is then no older
   * than the time since, by Prometheus's own clock.
   */
  const readSince = async (since: number) => {
    await waitUntil(async () => ((await value(lastRead)) ?? 0) > since, 'a read of the ledger scraped', 30_000);
    expect(await value('hold_sweeper_oldest_unreleased_hold_age_seconds{region="us"}')).toBe(0);
    const age = (await sample(ageAsRead))!;
    expect(age.v).toBeLessThanOrEqual(age.t - since);
  };
  await readSince(Date.now() / 1000);

  // The ledger stops taking connections, and the ones open are cut: what a worker sees of a database that went down.
  const database = new URL(us.databaseUrl).pathname.slice(1);
  const admin = new pg.Client({
    connectionString: Object.assign(new URL(us.databaseUrl), { pathname: '/postgres' }).href,
  });
  await admin.connect();
  try {
    await admin.query(`ALTER DATABASE "${database}" WITH ALLOW_CONNECTIONS false`);
    await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [database]);

    await waitUntil(async () => (await ready()).status === 503, 'readiness 503', 30_000);
    const down = (await ready()).body;
    expect(down.ready).toBe(false);
    expect(down.checks['temporal-us']).toBe('ok');
    expect(down.checks['ledger-us']).not.toBe('ok');
    expect((await fetch(`${health}/livez`)).status).toBe(200);
    await waitUntil(async () => (await usAlert('LedgerGaugesStale')) === 'firing', 'LedgerGaugesStale firing', 60_000);
    // The worker still exports the last age it read (0: no hold late), and the rule does not read that as healthy:
    // its age is the time since the last read, past the stale rule's four refresh intervals, and it grows second for
    // second (Prometheus's clock) while no read comes.
    const firing = (await sample(ageAsRead))!;
    const readThen = (await value(lastRead, firing.t))!;
    expect(await value('hold_sweeper_oldest_unreleased_hold_age_seconds{region="us"}', firing.t)).toBe(0);
    expect(firing.v).toBeCloseTo(firing.t - readThen, 3);
    expect(firing.v).toBeGreaterThan(4 * (await value('hold_sweeper_ledger_gauges_interval_seconds{region="us"}'))!);
    expect((await ready()).status).toBe(503);
    const later = (await sample(ageAsRead))!;
    expect(await value(lastRead, later.t)).toBe(readThen);
    expect(later.v - firing.v).toBeCloseTo(later.t - firing.t, 3);
  } finally {
    await admin.query(`ALTER DATABASE "${database}" WITH ALLOW_CONNECTIONS true`);
    await admin.end();
  }
  const reopenedAt = Date.now() / 1000;

  await waitUntil(async () => (await ready()).status === 200, 'ready again', 60_000);
  await waitUntil(async () => (await usAlert('LedgerGaugesStale')) === 'none', 'LedgerGaugesStale resolved', 60_000);
  await readSince(reopenedAt);
}, 240_000);

it('the dashboard’s dedup panel reads two sweeps run beside each other: each hold started once, the other start counted', async () => {
  const night = await seedNight(us.pool, 'us', `${harness.id}dd`, { expired: 5, merchants: 1 }, harness.merchants);
  const holds = night.expired.map((h) => h.id);
  // The holds' rows locked: no release can finish, so both sweeps find all five active and race to start each one.
  const blocker = await us.pool.connect();
  await blocker.query('BEGIN');
  await blocker.query('SELECT 1 FROM auth_holds WHERE id = ANY($1::text[]) FOR UPDATE', [holds]);
  const sweeps = await Promise.all(
    ['a', 'b'].map((s) =>
      us.client.workflow.start(sweepExpiredHolds, {
        taskQueue: us.config.taskQueue,
        workflowId: `sweep-us-${harness.id}-dedup-${s}`,
        args: [{ region: 'us', releaseWaitMs: 60_000 }],
      }),
    ),
  );
  const suppressed = 'sum(hold_sweeper_duplicate_suppressions_total{region="us", kind="child_already_started"})';
  try {
    await waitUntil(async () => (await value(suppressed)) === holds.length, 'five starts suppressed', 60_000);
  } finally {
    await blocker.query('ROLLBACK');
    blocker.release();
  }
  const results = await Promise.all(sweeps.map((h) => h.result()));
  expect(results.reduce((n, r) => n + r.started, 0)).toBe(holds.length);
  expect(results.reduce((n, r) => n + r.alreadyStarted, 0)).toBe(holds.length);
  // The panel's own query, as the dashboard asks it, reads the counter by region and kind (a rate: 0 once the two
  // sweeps are done, the counter having appeared at 5).
  const dashboard = await readDashboard();
  const [dedup] = dashboard.spec.panels.dedup!.spec.queries.map((q) => q.spec.plugin.spec);
  let series: { metric: Record<string, string> }[] = [];
  await waitUntil(
    async () => {
      series =
        (
          await get<{ result: { metric: Record<string, string>; value: [number, string] }[] }>(
            `/query?query=${encodeURIComponent(interpolate(dedup!.query, '1m'))}`,
          )
        )?.result ?? [];
      return series.length > 0;
    },
    'the dedup panel answers',
    30_000,
  );
  // Other kinds may show beside it: what this file's earlier tests suppressed inside the panel's window.
  const names = series.map((r) => seriesName(dedup!.seriesNameFormat, r.metric));
  expect(names).toContain('us child_already_started');
  for (const name of names) expect(name).toMatch(/^us [a-z_]+$/);
}, 180_000);
