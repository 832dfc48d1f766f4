/**
 * The night benchmark (`npm run bench`): everything on real services, set up here, measured side by side.
 *
 *   1. Temporal (the file-backed dev server, or with `temporal: cluster` the production server with N history
 *      shards on the same embedded PostgreSQL: dev/temporal-cluster.ts), embedded PostgreSQL (durable) with one
 *      ledger per region, the fake merchants in their own process, N worker processes (the production entry point).
 *   2. The night workload (night-workload.ts) seeded from a fixed seed.
 *   3. The ceiling: `bareFanOut` in both regions at once, timed from its start until every no-op child closed.
 *   4. The product: each region's schedule triggered (the production path), timed until every hold is released
 *      and every delivery is settled (delivered, quarantined, or held behind a merchant whose endpoint is gone).
 *   5. The report: throughput, ratio, history events per hold, makespan vs the merchant bound, requests per
 *      delivered webhook, the receiver-side rate per merchant, 429s, quarantines, RSS and CPU per process; and
 *      every invariant checked.
 */
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import { freePort } from '../dev/embedded-postgres.js';
import { generateSigningSecret } from '../src/delivery/standard-webhooks.js';
import { FakeMerchantsProcess, type TrafficSummary } from './fake-merchants-process.js';
import type { MerchantScript, ReceivedWebhook } from '../dev/fake-merchants.js';
import type pg from 'pg';
import { seededRandom } from '../dev/seed.js';
import { startPrometheus, type PrometheusServer } from '../dev/prometheus-server.js';
import { obtainPrometheus } from '../dev/prometheus-tools.js';
import type { WorkerProcesses } from '../dev/worker-processes.js';
import { checkInvariants } from './invariants.js';
import type { Region } from '../src/contracts/regions.js';
import { DEFAULT_SWEEP_TIMEOUT_MS } from '../src/config.js';
import { ensureSweepSchedule, sweepNow } from '../src/schedules.js';
import { bareFanOut } from './bare-fan-out.js';
import { byVolume, merchantScript, nightWorkload, type NightWorkload } from './night-workload.js';
import { cpuSeconds, peakRssBytes } from './proc-stats.js';
import { pageRuns, phaseSignals, type PageRuns } from './analysis.js';
import { addActions, billableActions, NO_ACTIONS, perUnit, type ActionCount } from './actions.js';
import { round, Sampler } from './sampler.js';
import { emptyPanels, queryDashboard, readDashboard, type DashboardNight } from './dashboard.js';
import { HoldIdKey } from '../src/contracts/search-attributes.js';
import { seedLedger, startBenchStack } from './stack.js';
import {
  BENCH_QUERY,
  cpuBreakdown,
  profilingNodeArgs,
  readStatements,
  resetStatements,
  STATEMENT_STATS_FLAGS,
} from './profile.js';
import { backendsReport, markdownReport, slowMerchantLine } from './report.js';
import { writeCharts } from './charts.js';
import { splitReport, writeNightReport } from './results-archive.js';
import type { TemporalBackend } from '../dev/local-stack.js';
import type {
  ActionsReport,
  EventCensus,
  MerchantSeries,
  NightBenchOptions,
  NightReport,
  Percentiles,
  PhaseMeasure,
  SlowMerchantReport,
} from './night-report.js';
import proto, { type temporal } from '@temporalio/proto';
const EventType = proto.temporal.api.enums.v1.EventType;
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';

/** The design's rate-limit target is stated for three worker processes. */
export const DEFAULT_WORKERS = 3;
/** The destination `declareDestinationRate` declares in each region's ledger. */
const SHARED_DESTINATION = 'shared-origin';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const BENCH_WORKFLOWS = fileURLToPath(
  new URL(`./workflows${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url),
);
/**
 * How often completion is polled, in both phases; the measured end is the poll that saw it (so at most this
 * late). The ceiling's poll is a visibility count on the server under test: once a second keeps it negligible.
 */
const POLL_MS = 1000;

interface Processes {
  temporal: number | undefined;
  postgres: number | undefined;
  workers: number[];
  merchants: number | undefined;
}

async function cpuNow(p: Processes) {
  const of = async (pid: number | undefined, tree = false) => (pid === undefined ? 0 : cpuSeconds(pid, tree));
  const workers = (await Promise.all(p.workers.map((pid) => cpuSeconds(pid)))).reduce((a, b) => a + b, 0);
  return {
    temporal: await of(p.temporal),
    postgres: await of(p.postgres, true),
    workers,
    merchants: await of(p.merchants),
  };
}

function cpuDelta(
  before: Awaited<ReturnType<typeof cpuNow>>,
  after: Awaited<ReturnType<typeof cpuNow>>,
): PhaseMeasure['cpu'] {
  const d = {
    temporal: round(after.temporal - before.temporal, 1),
    postgres: round(after.postgres - before.postgres, 1),
    workers: round(after.workers - before.workers, 1),
    merchants: round(after.merchants - before.merchants, 1),
  };
  return { ...d, total: round(d.temporal + d.postgres + d.workers + d.merchants, 1) };
}

/** History events of every execution of the parent and child workflow types, per hold (from visibility). */
/**
 * The workflow types that start the holds' children: the page runs and their batches (the ceiling's, or the sweep's).
 */
const typesQuery = (types: readonly string[]) => types.map((t) => `WorkflowType = '${t}'`).join(' OR ');

async function eventCensus(clients: Client[], types: readonly string[]): Promise<EventCensus> {
  const census: EventCensus = {};
  for (const client of clients) {
    const ids: { workflowId: string; runId: string; type: string }[] = [];
    for await (const wf of client.workflow.list({ query: typesQuery(types) }))
      ids.push({ workflowId: wf.workflowId, runId: wf.runId, type: wf.type });
    for (let i = 0; i < ids.length; i += 32) {
      await Promise.all(
        ids.slice(i, i + 32).map(async ({ workflowId, runId, type }) => {
          const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
          const byType = (census[type] ??= {});
          for (const e of history.events ?? []) {
            const name = String(EventType[e.eventType ?? 0] ?? e.eventType).replace(/^EVENT_TYPE_/, '');
            byType[name] = (byType[name] ?? 0) + 1;
          }
        }),
      );
    }
  }
  for (const [type, counts] of Object.entries(census))
    census[type] = Object.fromEntries(Object.entries(counts).sort(([a], [b]) => a.localeCompare(b)));
  return census;
}

async function historyEvents(
  clients: Client[],
  parentTypes: readonly string[],
  childType: string,
  holds: number,
): Promise<PhaseMeasure['historyEvents']> {
  let parent = 0;
  let child = 0;
  let parentRuns = 0;
  for (const client of clients) {
    for await (const wf of client.workflow.list({ query: typesQuery(parentTypes) })) {
      parent += wf.historyLength;
      parentRuns++;
    }
    for await (const wf of client.workflow.list({ query: `WorkflowType = '${childType}'` })) child += wf.historyLength;
  }
  return {
    parentPerHold: round(parent / holds),
    childPerHold: round(child / holds),
    totalPerHold: round((parent + child) / holds),
    parentRuns,
  };
}

async function runNightBench(options: NightBenchOptions, command: string): Promise<NightReport> {
  const { log } = options;
  const workload = nightWorkload(options);
  const merchants = new FakeMerchantsProcess();
  // The product's own task queue and schedule names: the benchmark runs on a stack of its own.
  const stack = await startBenchStack({
    tmpPrefix: 'hold-sweeper-bench-',
    databasePrefix: 'bench',
    temporal: options.temporal,
    devServerMetrics: true,
    concurrentStart: true,
    merchants,
    workflowsPath: BENCH_WORKFLOWS,
    regionNames: { taskQueuePrefix: 'hold-sweeper', schedulePrefix: 'hold-sweep', poolMax: 4 },
    cacheDir: options.cacheDir,
    log,
    ...(options.profile ? { postgresFlags: STATEMENT_STATS_FLAGS } : {}),
  });
  const { dataDir, regions } = stack;
  // Outside the stack's directory, which its stop removes: the profiles are written as the workers exit.
  const profileDir = options.profile ? await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-profile-')) : undefined;
  log(
    `[bench] ${workload.holds.length} holds over ${workload.merchants.length} merchants (seed ${options.seed}, faults ${options.faults ? 'on' : 'off'}); data in ${dataDir}`,
  );
  const workerGroups: { regions: string; processes: WorkerProcesses }[] = [];
  let prometheus: PrometheusServer | undefined;
  const traceSink = options.traceSampleRatio === undefined ? undefined : await startTraceSink();
  try {
    // Seed: merchants (scripted in the merchants' process with the secret each one verifies), accounts, holds.
    const random = seededRandom(options.seed ^ 0x5eed);
    const scripts = new Map<string, MerchantScript>();
    await stack.prepareLedgers(async (region, sealer) => {
      const regionMerchants = workload.merchants.filter((m) => m.region === region.region);
      const secrets = regionMerchants.map(() => generateSigningSecret());
      regionMerchants.forEach((m, i) => scripts.set(m.id, merchantScript(m.fault, secrets[i]!, random, m.latencyMs)));
      const shared = regionMerchants.filter((m) => m.sharedOrigin).map((m) => m.id);
      const endpoints = await merchants.endpointsFor(
        regionMerchants.map((m) => m.id),
        shared,
      );
      const holds = workload.holds.filter((h) => h.region === region.region);
      const currency = region.region === 'us' ? 'USD' : 'EUR';
      await seedLedger(region, sealer, {
        merchants: regionMerchants.map((m, i) => ({
          id: m.id,
          endpointUrl: endpoints.get(m.id)!,
          signingSecret: secrets[i]!,
          ratePerSecond: m.ratePerSecond,
          burst: m.burst,
        })),
        deliveryPolicy: { retryHorizonMs: options.retryHorizonMs },
        accounts: [...new Set(holds.map((h) => h.accountId))].map((id) => ({
          id,
          currency,
          availableMinor: 1_000_000,
        })),
        holds: holds.map((h) => ({ ...h, currency })),
        holdsPerInsert: 5000,
        analyze: true,
      });
      // The merchants sharing the origin declared as one destination: one budget at its rate, not one each.
      if (options.declareDestinationRate !== undefined) {
        await region.pool.query(`INSERT INTO destinations (id, rate_per_second) VALUES ($1, $2)`, [
          SHARED_DESTINATION,
          options.declareDestinationRate,
        ]);
        await region.pool.query(`UPDATE merchants SET destination_id = $1 WHERE id = ANY($2)`, [
          SHARED_DESTINATION,
          shared,
        ]);
      }
    });
    await merchants.script(scripts);

    // Each worker process exports its metrics (METRICS_ADDRESS) for the sampler and the night's Prometheus, its
    // ledger gauges refreshed every scrape interval of that Prometheus.
    const workerMetricsUrls: string[] = [];
    const workerTargets: { targets: string[]; labels?: { region: string } }[] = [];
    for (const group of options.regionPerProcess ? regions.map((r) => [r]) : [regions]) {
      const env: Record<string, string> = {};
      if (options.maxCachedWorkflows !== undefined)
        env.WORKER_MAX_CACHED_WORKFLOWS = String(options.maxCachedWorkflows);
      env.METRICS_GAUGE_INTERVAL = `${DASHBOARD_SCRAPE_SECONDS}s`;
      if (traceSink) {
        env.TRACE_SAMPLE_RATIO = String(options.traceSampleRatio);
        env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = traceSink.url;
      }
      const ports = await Promise.all(Array.from({ length: options.workers }, () => freePort()));
      workerMetricsUrls.push(...ports.map((port) => `http://127.0.0.1:${port}/metrics`));
      // As compose's prometheus.yml labels them: by region where a process serves one.
      workerTargets.push({
        targets: ports.map((port) => `127.0.0.1:${port}`),
        ...(group.length === 1 ? { labels: { region: group[0]!.region } } : {}),
      });
      const names = group.map((r) => r.region).join('+');
      workerGroups.push({
        regions: names,
        processes: await stack.startWorkers(group, options.workers, {
          env,
          logDir: dataDir,
          logName: `worker-${names}`,
          extraEnv: (index) => ({ METRICS_ADDRESS: `127.0.0.1:${ports[index]}` }),
          ...(profileDir ? { nodeArgs: profilingNodeArgs(profileDir) } : {}),
        }),
      });
    }
    const workerPids = () => workerGroups.flatMap((g) => g.processes.pids);
    const processes: Processes = { ...(await stack.pids()), workers: workerPids(), merchants: merchants.pid };
    log(
      `[bench] ${workerPids().length} worker process(es) running (${workerGroups.map((g) => `${g.processes.pids.length} for ${g.regions}`).join(', ')}); Temporal pid ${processes.temporal}, PostgreSQL pid ${processes.postgres}`,
    );
    const holdsTotal = workload.holds.length;
    const temporalMetrics = new URL(stack.temporalMetricsUrl!);
    prometheus = options.dashboard
      ? await startPrometheus({
          binary: await obtainPrometheus(options.cacheDir, log),
          config: {
            global: {
              scrape_interval: `${DASHBOARD_SCRAPE_SECONDS}s`,
              scrape_timeout: `${DASHBOARD_SCRAPE_SECONDS - 1}s`,
            },
            scrape_configs: [
              { job_name: 'hold-sweeper-workers', static_configs: workerTargets },
              {
                job_name: 'temporal',
                metrics_path: temporalMetrics.pathname,
                static_configs: [{ targets: [temporalMetrics.host] }],
              },
            ],
          },
        })
      : undefined;
    const sampler = new Sampler({
      processes: () => [
        { name: 'temporal', pid: processes.temporal },
        { name: 'postgres', pid: processes.postgres, tree: true },
        ...workerGroups.flatMap((g) =>
          g.processes.pids.map((pid, i) => ({ name: `worker ${g.regions} ${i}`, pid, rss: true })),
        ),
        { name: 'merchants', pid: processes.merchants },
      ],
      serverMetricsUrl: stack.temporalMetricsUrl,
      workerMetricsUrls,
      // About 600 samples a phase at most: enough to see a page's rhythm, small enough to keep in the report.
      intervalMs: holdsTotal > 10_000 ? 5_000 : 2_000,
    });

    // Phase 1: the ceiling.
    let ceiling: PhaseMeasure | undefined;
    let ceilingPages: PageRuns | undefined;
    if (options.ceiling) {
      const cutoff = new Date().toISOString();
      const cpuBefore = await cpuNow(processes);
      const startedAt = Date.now();
      sampler.begin('ceiling');
      await Promise.all(
        regions.map((r) =>
          r.client.workflow.start(bareFanOut, {
            taskQueue: r.taskQueue,
            workflowId: `bare-fan-out-${r.region}`,
            args: [{ region: r.region, pageSize: options.pageSize, batchSize: options.batchSize, cutoff }],
          }),
        ),
      );
      let lastLog = startedAt;
      for (;;) {
        let done = 0;
        for (const r of regions)
          done += (await r.client.workflow.count(`WorkflowType = 'noopHold' AND ExecutionStatus = 'Completed'`)).count;
        sampler.report({ completed: done });
        if (done >= holdsTotal) break;
        if (Date.now() - lastLog >= 10_000) {
          lastLog = Date.now();
          log(
            `[bench] ceiling: ${done}/${holdsTotal} no-op children completed after ${round((Date.now() - startedAt) / 1000, 0)} s`,
          );
        }
        await sleep(POLL_MS);
      }
      const seconds = (Date.now() - startedAt) / 1000;
      await sampler.end({ completed: holdsTotal });
      const cpu = cpuDelta(cpuBefore, await cpuNow(processes));
      for (const r of regions) await r.client.workflow.getHandle(`bare-fan-out-${r.region}`).result();
      ceilingPages = pageRuns(await parentHistories(regions, ['bareFanOut', 'bareBatch']), 'noopHold');
      ceiling = {
        seconds: round(seconds, 1),
        holdsPerSecond: round(holdsTotal / seconds, 1),
        cpu,
        historyEvents: await historyEvents(
          regions.map((r) => r.client),
          ['bareFanOut', 'bareBatch'],
          'noopHold',
          holdsTotal,
        ),
      };
      log(`[bench] ceiling: ${holdsTotal} no-op children in ${ceiling.seconds} s = ${ceiling.holdsPerSecond}/s`);
    }

    // Phase 2: the product, started the production way (each region's schedule, triggered).
    for (const r of regions) {
      await ensureSweepSchedule(r.client, r, {
        intervalMs: 86_400_000,
        catchupWindowMs: 600_000,
        pageSize: options.pageSize,
        batchSize: options.batchSize,
        maxUnreleased: options.maxUnreleased,
        timeoutMs: DEFAULT_SWEEP_TIMEOUT_MS,
      });
    }
    if (profileDir) for (const r of regions) await resetStatements(r.pool);
    const cpuBefore = await cpuNow(processes);
    const startedAt = Date.now();
    sampler.begin('product');
    await Promise.all(regions.map((r) => sweepNow(r.client, r)));
    const progress = async () => {
      const totals = { active: 0, released: 0, settled: 0, delivered: 0 };
      for (const r of regions) {
        const { rows } = await r.pool.query<{ active: number; released: number; settled: number; delivered: number }>(
          `SELECT ${BENCH_QUERY} (SELECT count(*) FROM auth_holds WHERE state = 'active' AND expires_at <= now())::integer AS active,
                  (SELECT count(*) FROM auth_holds WHERE state = 'released')::integer AS released,
                  (SELECT count(*) FROM webhook_deliveries d JOIN merchants m ON m.id = d.merchant_id
                    WHERE d.status <> 'pending' OR m.status = 'disabled')::integer AS settled,
                  (SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered')::integer AS delivered`,
        );
        for (const key of Object.keys(totals) as (keyof typeof totals)[]) totals[key] += rows[0]![key];
      }
      return totals;
    };
    let lastLog = startedAt;
    for (;;) {
      const p = await progress();
      sampler.report({ released: p.released, delivered: p.delivered });
      if (p.active === 0 && p.settled === p.released) break;
      if (Date.now() - lastLog >= 10_000) {
        lastLog = Date.now();
        const s = (Date.now() - startedAt) / 1000;
        log(
          `[bench] product: +${round(s, 0)} s released ${p.released}/${holdsTotal} (${round(p.released / s, 1)}/s), delivered ${p.delivered}, settled ${p.settled}`,
        );
      }
      await sleep(POLL_MS);
    }
    const seconds = (Date.now() - startedAt) / 1000;
    // Before the measuring below adds statements of its own.
    const statements = profileDir
      ? await readStatements(
          regions.map((r) => r.pool),
          holdsTotal,
        )
      : undefined;
    const final = await progress();
    await sampler.end({ released: final.released, delivered: final.delivered });
    const cpu = cpuDelta(cpuBefore, await cpuNow(processes));
    let firstReleaseAt = Infinity;
    let lastReleaseAt = startedAt;
    for (const r of regions) {
      const { rows } = await r.pool.query<{ first: string | null; last: string | null }>(
        `SELECT extract(epoch FROM min(released_at)) * 1000 AS first, extract(epoch FROM max(released_at)) * 1000 AS last
           FROM auth_holds`,
      );
      if (rows[0]!.first !== null) firstReleaseAt = Math.min(firstReleaseAt, Number(rows[0]!.first));
      if (rows[0]!.last !== null) lastReleaseAt = Math.max(lastReleaseAt, Number(rows[0]!.last));
    }
    const releasedBySeconds = (lastReleaseAt - startedAt) / 1000;
    const releaseSpanSeconds = (lastReleaseAt - firstReleaseAt) / 1000;
    log(`[bench] product: ${holdsTotal} holds released and settled in ${round(seconds, 1)} s; measuring`);

    const deliveries: Record<string, number> = {};
    const quarantinedByReason: Record<string, number> = {};
    let heldForDisabledMerchants = 0;
    for (const r of regions) {
      const { rows } = await r.pool.query<{ status: string; reason: string | null; disabled: boolean; n: number }>(
        `SELECT d.status, d.quarantine_reason AS reason, m.status = 'disabled' AS disabled, count(*)::integer AS n
           FROM webhook_deliveries d JOIN merchants m ON m.id = d.merchant_id GROUP BY 1, 2, 3`,
      );
      for (const row of rows) {
        deliveries[row.status] = (deliveries[row.status] ?? 0) + row.n;
        if (row.status === 'quarantined')
          quarantinedByReason[row.reason ?? '?'] = (quarantinedByReason[row.reason ?? '?'] ?? 0) + row.n;
        if (row.status === 'pending' && row.disabled) heldForDisabledMerchants += row.n;
      }
    }
    const traffic: TrafficSummary = await merchants.summary();
    const limits = new Map(workload.merchants.map((m) => [m.id, m]));
    const rates = Object.entries(traffic.byMerchant).map(([merchantId, t]) => {
      const m = limits.get(merchantId)!;
      return {
        merchantId,
        maxPerSecond: t.maxPerSecond,
        limit: m.ratePerSecond + m.burst,
        ratePerSecond: m.ratePerSecond,
      };
    });
    const worst = rates.reduce((a, b) => (b.maxPerSecond / b.limit > a.maxPerSecond / a.limit ? b : a), rates[0]!);
    const delivered = deliveries.delivered ?? 0;
    const slow = await slowMerchantReports(regions, workload, traffic);
    const product: NightReport['product'] = {
      seconds: round(seconds, 1),
      holdsPerSecond: round(holdsTotal / seconds, 1),
      releasedBySeconds: round(releasedBySeconds, 1),
      releaseRatePerSecond: round(final.released / (releaseSpanSeconds > 0 ? releaseSpanSeconds : 1), 1),
      lastReleaseSeconds: round(releasedBySeconds, 1),
      settleSeconds: round(seconds, 1),
      ...(slow.length === 0 ? {} : { slowMerchants: slow }),
      ratioToCeiling: ceiling ? round(holdsTotal / seconds / ceiling.holdsPerSecond) : undefined,
      makespanVsMerchantBound: round(seconds / workload.merchantBound.seconds),
      cpu,
      historyEvents: await historyEvents(
        regions.map((r) => r.client),
        ['sweepExpiredHolds', 'startHoldBatch'],
        'releaseExpiredHold',
        holdsTotal,
      ),
      eventCensus: await eventCensus(
        regions.map((r) => r.client),
        ['sweepExpiredHolds', 'startHoldBatch', 'releaseExpiredHold'],
      ),
      deliveries,
      quarantinedByReason,
      heldForDisabledMerchants,
      requests: traffic.requests,
      deliveredWebhooks: delivered,
      requestsPerDelivered: round(traffic.requests / Math.max(1, delivered), 3),
      received429: traffic.answers['429'] ?? 0,
      unverifiedRequests: traffic.unverified,
      deliveredTwice: traffic.deliveredTwice,
      worstMerchantRate: worst,
      merchantsOverLimit: rates
        .filter((r) => r.maxPerSecond > r.limit)
        .map((r) => `${r.merchantId} (${r.maxPerSecond} > ${r.limit})`),
    };
    log(
      `[bench] product: released at ${product.releaseRatePerSecond}/s from the first release to the last (at ${product.lastReleaseSeconds} s); every delivery settled at ${product.settleSeconds} s`,
    );
    for (const s of slow) log(`[bench] slow merchant ${s.merchantId}: ${slowMerchantLine(s)}`);
    const workerRss = await Promise.all(
      workerGroups.flatMap((g) =>
        g.processes.pids.map(async (pid, index) => ({
          index,
          regions: g.regions,
          peakRssMiB: round(((await peakRssBytes(pid)) ?? 0) / 2 ** 20, 0),
        })),
      ),
    );

    // Every invariant, on the whole night: ledgers, every request received, parents' and sampled children's
    // histories, and the workers' logs. The same histories give the page runs and the Actions per hold.
    const texts = workerGroups.flatMap((g) =>
      g.processes.output().map((text, i) => ({ source: `worker ${g.regions} ${i} logs`, text })),
    );
    for (const w of workerRss) {
      const text = texts.find((t) => t.source === `worker ${w.regions} ${w.index} logs`)?.text ?? '';
      const running = text
        .split('\n')
        .filter((line) => line.includes('"msg":"worker running"'))
        .map((line) => JSON.parse(line) as { maxCachedWorkflows?: number; heapLimitMiB?: number })[0];
      Object.assign(w, { maxCachedWorkflows: running?.maxCachedWorkflows, heapLimitMiB: running?.heapLimitMiB });
    }
    const sweepHistories = await parentHistories(regions, ['sweepExpiredHolds', 'startHoldBatch']);
    for (const history of sweepHistories)
      texts.push({ source: `history of a sweep run`, text: JSON.stringify(history) });
    const sampledChildren: { region: Region; holdId: string; history: temporal.api.history.v1.IHistory }[] = [];
    for (const r of regions) {
      // A sample of the children (every n-th), fetched one by one: leaving intoHistories() early would leave
      // its fetches running.
      const ids: { workflowId: string; holdId: string }[] = [];
      for await (const wf of r.client.workflow.list({ query: `WorkflowType = 'releaseExpiredHold'` }))
        ids.push({ workflowId: wf.workflowId, holdId: wf.typedSearchAttributes.get(HoldIdKey) ?? '' });
      const every = Math.max(1, Math.ceil(ids.length / options.historiesToScan));
      for (const { workflowId, holdId } of ids.filter((_, i) => i % every === 0)) {
        const history = await r.client.workflow.getHandle(workflowId).fetchHistory();
        texts.push({ source: `history ${workflowId}`, text: JSON.stringify(history) });
        sampledChildren.push({ region: r.region, holdId, history });
      }
    }
    const requests = await merchants.requests(path.join(dataDir, 'requests.json'));
    const violations = await checkInvariants({ regions, requests, texts });
    const actions = await actionsReport(regions, sampledChildren, sweepHistories, holdsTotal);
    const holdLatency = {
      firstTaskWait: percentiles(sampledChildren.map((c) => firstTaskWaitSeconds(c.history))),
      releaseToDelivered: percentiles(await releaseToDeliveredSeconds(regions)),
    };
    const merchantSeries = busiestMerchants(requests, workload, startedAt, 4);
    const dashboard = prometheus && (await nightDashboard(prometheus.api, startedAt, log));
    const { log: _log, cacheDir: _cacheDir, ...reportedOptions } = options;
    const faultyMerchants: Record<string, number> = {};
    for (const m of workload.merchants)
      if (m.fault !== 'none') faultyMerchants[m.fault] = (faultyMerchants[m.fault] ?? 0) + 1;
    const sharedOrigin = workload.merchants.filter((m) => m.sharedOrigin);
    // The profiles cover each worker's whole life: so does the CPU they are set against.
    const workersLifeCpu = profileDir ? (await cpuNow(processes)).workers : 0;
    if (profileDir) await Promise.all(workerGroups.map((g) => g.processes.stop()));
    return {
      command,
      date: new Date().toISOString(),
      machine: {
        cpus: os.cpus().length,
        cpuModel: os.cpus()[0]?.model ?? '?',
        memoryGiB: round(os.totalmem() / 2 ** 30, 0),
        node: process.version,
      },
      options: reportedOptions,
      workload: {
        holds: holdsTotal,
        merchants: workload.merchants.length,
        byRegion: {
          us: workload.holds.filter((h) => h.region === 'us').length,
          eu: workload.holds.filter((h) => h.region === 'eu').length,
        },
        faultyMerchants,
        merchantBound: { ...workload.merchantBound, seconds: round(workload.merchantBound.seconds, 1) },
        ...(sharedOrigin.length === 0
          ? {}
          : {
              sharedOrigin: {
                merchants: sharedOrigin.map((m) => m.id),
                holds: sharedOrigin.reduce((a, m) => a + m.holds, 0),
                ...(options.declareDestinationRate === undefined
                  ? {}
                  : { destination: { id: SHARED_DESTINATION, ratePerSecond: options.declareDestinationRate } }),
              },
            }),
      },
      ceiling,
      product,
      workers: workerRss,
      analysis: {
        ceiling: phaseSignals(sampler.samples, 'ceiling'),
        product: phaseSignals(sampler.samples, 'product'),
        ceilingPages,
        productPages: pageRuns(sweepHistories, 'releaseExpiredHold'),
      },
      actions,
      holdLatency,
      ...(traceSink ? { traces: { requests: traceSink.requests, bytes: traceSink.bytes } } : {}),
      series: sampler.samples,
      merchantSeries,
      dashboard,
      violations,
      ...(profileDir && statements
        ? {
            profile: {
              cpu: await cpuBreakdown(profileDir, holdsTotal),
              workerCpuMsPerHold: round((workersLifeCpu * 1000) / holdsTotal, 1),
              statements,
            },
          }
        : {}),
    };
  } finally {
    await prometheus?.stop();
    await stack.stop();
    await traceSink?.close();
  }
}

/** Where the workers export their traces (OTLP/HTTP): a collector that counts what it gets and keeps nothing. */
async function startTraceSink() {
  const server = http.createServer((request, response) => {
    request.on('data', (chunk: Buffer) => (sink.bytes += chunk.length));
    request.on('end', () => {
      sink.requests++;
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const sink = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`,
    requests: 0,
    bytes: 0,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  return sink;
}

/**
 * `npm run bench`: the night on each backend in turn, each report printed and written to bench/results/ (the names:
 * bench/bin/night.ts); with more than one backend, their comparison too. True when every night kept every invariant.
 */
export async function runNights(
  options: Omit<NightBenchOptions, 'temporal'>,
  backends: readonly TemporalBackend[],
  command: string,
): Promise<boolean> {
  const log = options.log;
  await fs.mkdir('bench/results', { recursive: true });
  const reports: NightReport[] = [];
  for (const temporal of backends) {
    const report = await runNightBench({ ...options, temporal }, command);
    reports.push(report);
    const o = report.options;
    const variations = `${o.traceSampleRatio === undefined ? '' : `-traced-${o.traceSampleRatio}`}${o.merchantLatencyMs?.length ? `-latency-${o.merchantLatencyMs.join('-')}` : ''}${o.sharedOrigin === undefined ? '' : `-shared-origin-${o.sharedOrigin}`}${o.declareDestinationRate === undefined ? '' : `-destination-${o.declareDestinationRate}`}`;
    const name = `bench/results/night-${report.workload.holds}${report.options.faults ? '' : '-fault-free'}${report.options.workers === DEFAULT_WORKERS ? '' : `-${report.options.workers}-workers`}${report.options.maxCachedWorkflows === undefined ? '' : `-cache-${report.options.maxCachedWorkflows}`}${report.options.batchSize === 50 ? '' : `-batch-${report.options.batchSize}`}${report.options.maxUnreleased === undefined ? '-unbounded' : report.options.maxUnreleased === 2 * report.options.pageSize ? '' : `-unreleased-${report.options.maxUnreleased}`}${report.options.regionPerProcess ? '-region-per-process' : ''}${variations}${report.options.profile ? '-profile' : report.options.ceiling ? '' : '-no-ceiling'}${temporal.kind === 'cluster' ? `-cluster-${temporal.shards}${temporal.synchronousCommit === false ? '-async' : ''}` : ''}`;
    const charts = await writeCharts(report, 'bench/results', path.basename(name));
    const markdown = markdownReport(report, charts);
    log(`\n${markdown}`);
    await writeNightReport(`${name}.json`, report);
    await fs.writeFile(`${name}.md`, markdown);
    log(`written: ${name}.json, ${name}.series.json.gz, ${name}.md\nreproduce: ${command}`);
  }
  if (reports.length > 1) {
    const markdown = backendsReport(reports, command);
    log(`\n${markdown}`);
    const specs = backends.map((b) =>
      b.kind === 'dev' ? 'dev' : `cluster${b.shards}${b.synchronousCommit === false ? 'async' : ''}`,
    );
    const name = `bench/results/backends-${reports[0]!.workload.holds}${reports[0]!.options.faults ? '' : '-fault-free'}-${specs.join('_')}`;
    // Summaries only: each night's series are in its own report's series file.
    const summaries = reports.map((r) => splitReport(r).summary);
    await fs.writeFile(`${name}.json`, JSON.stringify(summaries, null, 2) + '\n');
    await fs.writeFile(`${name}.md`, markdown);
    log(`written: ${name}.json, ${name}.md\nreproduce: ${command}`);
  }
  return reports.every((r) => r.violations.length === 0);
}

/** The night's Prometheus scrapes every 5 s (the workers refresh their ledger gauges as often): a panel's step. */
const DASHBOARD_SCRAPE_SECONDS = 5;

/**
 * The on-call dashboard over the product phase (from 10 s before the trigger until now), each panel's PromQL as
 * committed. `$__rate_interval` is what Perses gives it at this scrape interval and step: four scrape intervals.
 */
async function nightDashboard(api: string, startedAt: number, log: (line: string) => void): Promise<DashboardNight> {
  const night = await queryDashboard(api, await readDashboard(), {
    origin: startedAt,
    start: startedAt - 10_000,
    end: Date.now(),
    stepSeconds: DASHBOARD_SCRAPE_SECONDS,
    rateInterval: `${4 * DASHBOARD_SCRAPE_SECONDS}s`,
  });
  const empty = emptyPanels(night);
  log(
    `[bench] on-call dashboard: ${Object.keys(night.panels).length} panels queried${empty.length ? `; no series this night: ${empty.join(', ')}` : ''}`,
  );
  return night;
}

/** Every run's history of a parent workflow type (the sweep's or the ceiling's), in both regions. */
async function parentHistories(
  regions: readonly { client: Client }[],
  types: readonly string[],
): Promise<temporal.api.history.v1.IHistory[]> {
  const out: temporal.api.history.v1.IHistory[] = [];
  for (const r of regions)
    for await (const { history } of r.client.workflow.list({ query: typesQuery(types) }).intoHistories())
      out.push(history as temporal.api.history.v1.IHistory);
  return out;
}

/** finishSweep's heartbeat timeout (src/workflows/activity-profiles.ts): the SDK sends one every 80 % of it at most. */
const FINISH_HEARTBEAT_THROTTLE_S = 0.8 * 30;
const GOLDEN_REPLAYED = 'test/golden/histories/1.0.0/releaseExpiredHold-completed-delivered-replayed-99.json.gz';

/**
 * Temporal Cloud Actions for the night: each sampled hold's child classified by the ledger's word on its webhook,
 * averaged per outcome and weighted by every hold of that outcome; the sweeps' runs in full (2 per child start
 * included); 2 more per schedule execution; finishSweep's heartbeats estimated from its duration.
 */
async function actionsReport(
  regions: readonly { region: Region; pool: pg.Pool }[],
  sampled: readonly { region: Region; holdId: string; history: temporal.api.history.v1.IHistory }[],
  sweepHistories: readonly temporal.api.history.v1.IHistory[],
  holds: number,
): Promise<ActionsReport> {
  const outcomeSql = `CASE WHEN d.status = 'delivered' AND d.attempt_count <= 1 THEN 'delivered at the first attempt'
                           WHEN d.status = 'delivered' THEN 'delivered after retries'
                           WHEN d.status = 'quarantined' THEN 'quarantined (waiting for a human)'
                           WHEN d.status = 'pending' THEN 'held (merchant endpoint disabled)'
                           ELSE d.status END`;
  const outcomeOf = new Map<string, string>();
  const holdsByOutcome = new Map<string, number>();
  for (const r of regions) {
    const ids = sampled.filter((c) => c.region === r.region).map((c) => c.holdId);
    const { rows } = await r.pool.query(
      `SELECT d.hold_id, ${outcomeSql} AS outcome FROM webhook_deliveries d WHERE d.hold_id = ANY($1)`,
      [ids],
    );
    for (const row of rows as { hold_id: string; outcome: string }[])
      outcomeOf.set(`${r.region}/${row.hold_id}`, row.outcome);
    const counts = await r.pool.query(
      `SELECT ${outcomeSql} AS outcome, count(*)::integer AS n FROM webhook_deliveries d GROUP BY 1`,
    );
    for (const row of counts.rows as { outcome: string; n: number }[])
      holdsByOutcome.set(row.outcome, (holdsByOutcome.get(row.outcome) ?? 0) + row.n);
  }
  const sums = new Map<string, { n: number; actions: ActionCount }>();
  for (const child of sampled) {
    const outcome = outcomeOf.get(`${child.region}/${child.holdId}`) ?? 'no webhook';
    const entry = sums.get(outcome) ?? { n: 0, actions: NO_ACTIONS };
    sums.set(outcome, { n: entry.n + 1, actions: addActions(entry.actions, billableActions(child.history)) });
  }
  const byOutcome = [...holdsByOutcome.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([outcome, n]) => {
      const sum = sums.get(outcome);
      return { outcome, holds: n, sampled: sum?.n ?? 0, perHold: perUnit(sum?.actions ?? NO_ACTIONS, sum?.n ?? 1) };
    });
  let sweep = NO_ACTIONS;
  let heartbeats = 0;
  let firstRuns = 0;
  for (const history of sweepHistories) {
    sweep = addActions(sweep, billableActions(history));
    const events = history.events ?? [];
    const start = events[0]?.workflowExecutionStartedEventAttributes;
    // A sweep's first run is the schedule's action (its batches and continue-as-new runs are not).
    if (start?.workflowType?.name === 'sweepExpiredHolds' && !start.continuedExecutionRunId) firstRuns++;
    const started = events.find((e) => e.activityTaskStartedEventAttributes);
    const closed = events.find((e) => e.activityTaskCompletedEventAttributes || e.activityTaskFailedEventAttributes);
    const at = (e: typeof started) => Number(e?.eventTime?.seconds ?? 0);
    if (started && closed && events.some((e) => e.workflowExecutionCompletedEventAttributes))
      heartbeats += Math.floor((at(closed) - at(started)) / FINISH_HEARTBEAT_THROTTLE_S);
  }
  const scheduleActions = 2 * firstRuns;
  const sweepTotal = sweep.total + scheduleActions + heartbeats;
  const childTotal = byOutcome.reduce((a, o) => a + o.perHold.total * o.holds, 0);
  const replayed = billableActions(
    historyFromJSON(JSON.parse(gunzipSync(await fs.readFile(GOLDEN_REPLAYED)).toString('utf8'))),
  );
  return {
    byOutcome,
    quarantinedThenReplayed: { source: GOLDEN_REPLAYED, perHold: replayed },
    sweepPerHold: { ...perUnit(sweep, holds), scheduleActions, finishHeartbeats: heartbeats },
    nightTotal: Math.round(childTotal + sweepTotal),
    perHold: round((childTotal + sweepTotal) / holds),
  };
}

/** The p50 and p95 of `values` (nearest rank), rounded to 0.1; 0 for none. */
function percentiles(values: number[]): Percentiles {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => round(sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] ?? 0, 1);
  return { p50: at(0.5), p95: at(0.95) };
}

/** From a workflow's start to its first workflow task's start: how long it waited in the task queue. */
function firstTaskWaitSeconds(history: temporal.api.history.v1.IHistory): number {
  const seconds = (e: temporal.api.history.v1.IHistoryEvent | undefined) =>
    Number(e?.eventTime?.seconds ?? 0) + (e?.eventTime?.nanos ?? 0) / 1e9;
  const events = history.events ?? [];
  const EventType = proto.temporal.api.enums.v1.EventType;
  const taskStarted = events.find((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED);
  return seconds(taskStarted) - seconds(events[0]);
}

/** Every delivered hold webhook's release → delivery, seconds, by the ledger's clock. */
async function releaseToDeliveredSeconds(regions: readonly { pool: pg.Pool }[]): Promise<number[]> {
  const all: number[] = [];
  for (const r of regions) {
    const { rows } = await r.pool.query<{ s: number }>(
      `SELECT extract(epoch FROM d.delivered_at - h.released_at)::float8 AS s
         FROM webhook_deliveries d JOIN auth_holds h ON h.id = d.hold_id
        WHERE d.status = 'delivered' AND d.event_type = 'hold.released'`,
    );
    all.push(...rows.map((row) => row.s));
  }
  return all;
}

/** Each slow merchant's webhooks and deliveries from its region's ledger, its requests from the receiver's count. */
async function slowMerchantReports(
  regions: readonly { region: Region; pool: pg.Pool }[],
  workload: NightWorkload,
  traffic: TrafficSummary,
): Promise<SlowMerchantReport[]> {
  // By volume: the order the latencies were given in (night-workload.ts `slowMerchants`).
  const slow = byVolume(workload.merchants).filter((m) => m.latencyMs !== undefined);
  const out: SlowMerchantReport[] = [];
  for (const m of slow) {
    const pool = regions.find((r) => r.region === m.region)!.pool;
    const { rows } = await pool.query<{ webhooks: number; delivered: number; p50: number | null; p95: number | null }>(
      `SELECT count(*)::integer AS webhooks, count(*) FILTER (WHERE d.status = 'delivered')::integer AS delivered,
              percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM d.delivered_at - h.released_at)::float8) AS p50,
              percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM d.delivered_at - h.released_at)::float8) AS p95
         FROM webhook_deliveries d JOIN auth_holds h ON h.id = d.hold_id
        WHERE d.merchant_id = $1`,
      [m.id],
    );
    const { webhooks, delivered, p50, p95 } = rows[0]!;
    const requests = traffic.byMerchant[m.id]?.requests ?? 0;
    out.push({
      merchantId: m.id,
      latencyMs: m.latencyMs!,
      ratePerSecond: m.ratePerSecond,
      holds: m.holds,
      webhooks,
      delivered,
      requests,
      requestsPerWebhook: round(requests / Math.max(1, webhooks)),
      ...(p50 === null ? {} : { releaseToDeliveryP50Seconds: round(p50, 1) }),
      ...(p95 === null ? {} : { releaseToDeliveryP95Seconds: round(p95, 1) }),
    });
  }
  return out;
}

/**
 * Requests each second since the trigger at the `n` merchants that came closest to their limit (their busiest
 * second against rate + burst; the busier one first on a tie), receiver side, with their limits.
 */
function busiestMerchants(
  requests: readonly ReceivedWebhook[],
  workload: NightWorkload,
  startedAt: number,
  n: number,
): MerchantSeries[] {
  const bins = new Map<string, Map<number, number>>();
  for (const r of requests) {
    const second = Math.floor((r.receivedAt - startedAt) / 1000);
    const m = bins.get(r.merchantId) ?? new Map<number, number>();
    m.set(second, (m.get(second) ?? 0) + 1);
    bins.set(r.merchantId, m);
  }
  const limits = new Map(workload.merchants.map((m) => [m.id, m]));
  const ranked = [...bins.entries()].map(([merchantId, seconds]) => {
    const m = limits.get(merchantId)!;
    const total = [...seconds.values()].reduce((a, b) => a + b, 0);
    return { merchantId, m, seconds, closeness: Math.max(...seconds.values()) / (m.ratePerSecond + m.burst), total };
  });
  ranked.sort((a, b) => b.closeness - a.closeness || b.total - a.total);
  return ranked.slice(0, n).map(({ merchantId, m, seconds }) => {
    const perSecond: [number, number][] = [];
    for (let t = Math.min(...seconds.keys()); t <= Math.max(...seconds.keys()); t++)
      perSecond.push([t, seconds.get(t) ?? 0]);
    return { merchantId, ratePerSecond: m.ratePerSecond, limit: m.ratePerSecond + m.burst, perSecond };
  });
}
