/**
 * The stack a night runs on, for the benchmark (night-bench.ts) and the chaos run (chaos-run.ts): a data directory of
 * its own, embedded PostgreSQL (durable) with both regions' ledgers, Temporal (the file-backed dev server, or the
 * production server on that same PostgreSQL: dev/temporal-cluster.ts), the fake merchants, the workflow bundle, a
 * client and a ledger pool per region, the ledgers migrated and seeded, and worker processes (the production entry
 * point). What differs between the two runs is an option; `stop()` takes down whatever started, last started first.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { freePort, startEmbeddedPostgres, type RunningPostgres } from '../dev/embedded-postgres.js';
import { localRegions, type LocalRegion, type LocalRegionNames } from '../dev/local-regions.js';
import type { TemporalBackend } from '../dev/local-stack.js';
import {
  insertAccounts,
  insertHolds,
  insertMerchants,
  type AccountSeed,
  type HoldSeed,
  type MerchantSeed,
} from '../dev/seed.js';
import { startDevServer, type DevServer } from '../dev/temporal-dev-server.js';
import { startTemporalCluster, type TemporalCluster } from '../dev/temporal-cluster.js';
import {
  startWorkerProcesses,
  workerEnvironment,
  type WorkerProcesses,
  type WorkerProcessOptions,
} from '../dev/worker-processes.js';
import { migrate } from '../src/db/migrate.js';
import { localKeyRing, type SecretSealer } from '../src/delivery/secret-box.js';
import { bundleWorkflows } from '../src/workers/region-worker.js';
import { findProcess } from './proc-stats.js';

interface BenchStackOptions {
  /** The data directory's name in the OS temp directory, before mkdtemp's suffix. */
  tmpPrefix: string;
  /** The ledgers are `<databasePrefix>_us` and `<databasePrefix>_eu`. */
  databasePrefix: string;
  temporal: TemporalBackend;
  /** Dev server only: its Prometheus endpoint on a port of its own (the cluster always serves one). */
  devServerMetrics?: boolean;
  /** Cluster only: a second history host on every start of the cluster (its shards move when it is killed). */
  historyHosts?: 1 | 2;
  /**
   * Start PostgreSQL, the dev server and the merchants at once, then the cluster (the night); otherwise one after the
   * other: PostgreSQL, Temporal, the merchants (the chaos run).
   */
  concurrentStart: boolean;
  /** In this process or one of their own: started with the services, stopped after the workers. */
  merchants: { start(): Promise<unknown>; stop(): Promise<void> };
  /** The workflows module bundled for the workers; the product's unless said. */
  workflowsPath?: string;
  /** More settings for the ledgers' PostgreSQL (`-c name=value` pairs). */
  postgresFlags?: readonly string[];
  /** Task queue and schedule prefixes, and each region's pool size. */
  regionNames: Omit<LocalRegionNames, 'databaseUrl'>;
  cacheDir: string;
  /** Where the cluster tells of its build and start; silent when undefined. */
  log?: (line: string) => void;
}

interface BenchStack {
  readonly dataDir: string;
  readonly postgres: RunningPostgres;
  /** The frontend's address: the same after a restart. */
  readonly temporalAddress: string;
  /** Temporal's Prometheus endpoint: the cluster's, or the dev server's with `devServerMetrics`. */
  readonly temporalMetricsUrl: string | undefined;
  /** The current cluster's second history host (`historyHosts: 2`). */
  readonly historyHost: { pid: number; kill(): Promise<void> } | undefined;
  readonly bundle: Awaited<ReturnType<typeof bundleWorkflows>>;
  readonly bundlePath: string;
  readonly connection: Connection;
  readonly regions: LocalRegion[];
  /** The Temporal server's process (the dev server found by its SQLite file) and PostgreSQL's postmaster. */
  pids(): Promise<{ temporal: number | undefined; postgres: number | undefined }>;
  /** Migrates each region's ledger and seeds it, one region after the other. */
  prepareLedgers(seed: (region: LocalRegion, sealer: SecretSealer) => Promise<void>): Promise<void>;
  /** `count` worker processes serving `regions`, with `env` over the stack's worker environment. */
  startWorkers(
    regions: readonly LocalRegion[],
    count: number,
    options?: WorkerProcessOptions & { env?: Record<string, string> },
  ): Promise<WorkerProcesses>;
  /** Stops Temporal and starts it again after `downMs`, on the same port with the same state. */
  restartTemporal(downMs: number): Promise<void>;
  stop(): Promise<void>;
}

const NAMESPACES = ['hold-sweeper-us', 'hold-sweeper-eu'];

export async function startBenchStack(options: BenchStackOptions): Promise<BenchStack> {
  const backend = options.temporal;
  if (options.historyHosts === 2 && backend.kind !== 'cluster')
    throw new Error('two history hosts need the cluster backend (--temporal cluster)');
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), options.tmpPrefix));
  // embedded-postgres runs as the `postgres` user when we are root: it must be able to reach its directory.
  await fs.chmod(dataDir, 0o777);
  const temporalDir = path.join(dataDir, 'temporal');
  const pgDir = path.join(dataDir, 'pg');

  let postgres: RunningPostgres | undefined;
  let server: DevServer | TemporalCluster | undefined;
  let historyHost: BenchStack['historyHost'];
  let merchantsStarted = false;
  let connection: Connection | undefined;
  let regions: LocalRegion[] = [];
  const workers: WorkerProcesses[] = [];

  // A restart comes back on the same port (workers and clients reconnect there): the dev server's is chosen here, the
  // cluster's on its first start.
  let temporalPort = backend.kind === 'dev' ? await freePort() : undefined;
  const devMetricsPort = backend.kind === 'dev' && options.devServerMetrics ? await freePort() : undefined;
  const startTemporal = async (): Promise<DevServer | TemporalCluster> => {
    if (backend.kind === 'dev') {
      return startDevServer({
        namespaces: NAMESPACES,
        dataDir: temporalDir,
        explicitCliPath: process.env.TEMPORAL_CLI_PATH,
        cacheDir: options.cacheDir,
        port: temporalPort,
        ...(devMetricsPort === undefined ? {} : { extraArgs: ['--metrics-port', String(devMetricsPort)] }),
      });
    }
    // The cluster keeps its state in the same PostgreSQL as the ledgers (its own two databases): a database restart
    // hits it too.
    const cluster = await startTemporalCluster({
      shards: backend.shards,
      postgresUrl: postgres!.urlFor('postgres'),
      namespaces: NAMESPACES,
      cacheDir: options.cacheDir,
      dataDir: temporalDir,
      port: temporalPort,
      synchronousCommit: backend.synchronousCommit,
      log: options.log,
    });
    temporalPort = Number(cluster.address.split(':').pop());
    if (options.historyHosts === 2) {
      try {
        historyHost = await cluster.addHistoryHost();
      } catch (err) {
        await cluster.stop();
        throw err;
      }
    }
    return cluster;
  };
  const startMerchants = async () => {
    await options.merchants.start();
    merchantsStarted = true;
  };
  const startPostgres = async () => {
    postgres = await startEmbeddedPostgres({
      dataDir: pgDir,
      databases: [`${options.databasePrefix}_us`, `${options.databasePrefix}_eu`],
      durable: true,
      ...(options.postgresFlags ? { flags: options.postgresFlags } : {}),
    });
  };

  const stop = async ({ keepDataDir = false } = {}) => {
    await Promise.all(workers.map((w) => w.stop()));
    if (merchantsStarted) await options.merchants.stop();
    await Promise.all(regions.map((r) => r.pool.end()));
    await connection?.close();
    await server?.stop();
    await postgres?.stop();
    if (!keepDataDir) await fs.rm(dataDir, { recursive: true, force: true });
  };

  try {
    if (options.concurrentStart) {
      // Settled, not raced: a service that did start is known to stop() when another failed.
      const [dev, ...others] = await Promise.allSettled([
        backend.kind === 'dev' ? startTemporal() : undefined,
        startPostgres(),
        startMerchants(),
      ]);
      if (dev.status === 'fulfilled') server = dev.value;
      for (const result of [dev, ...others]) if (result.status === 'rejected') throw result.reason;
      server ??= await startTemporal();
    } else {
      await startPostgres();
      server = await startTemporal();
      await startMerchants();
    }
    const bundlePath = path.join(dataDir, 'workflow-bundle.js');
    const bundle = await bundleWorkflows(options.workflowsPath);
    await fs.writeFile(bundlePath, bundle.code);
    connection = await Connection.connect({ address: server.address });
    regions = localRegions(connection, server.address, {
      databaseUrl: (region) => postgres!.urlFor(`${options.databasePrefix}_${region}`),
      ...options.regionNames,
    });
    return {
      dataDir,
      postgres: postgres!,
      connection,
      regions,
      bundle,
      bundlePath,
      get temporalAddress() {
        return server!.address;
      },
      get temporalMetricsUrl() {
        if (server && 'metricsUrl' in server) return server.metricsUrl;
        return devMetricsPort === undefined ? undefined : `http://127.0.0.1:${devMetricsPort}/metrics`;
      },
      get historyHost() {
        return historyHost;
      },
      async pids() {
        return {
          temporal:
            server && 'pid' in server ? server.pid : await findProcess(path.join(temporalDir, 'temporal.sqlite')),
          postgres: await findProcess(pgDir),
        };
      },
      async prepareLedgers(seed) {
        for (const region of regions) {
          const sealer = localKeyRing(region.secretKeys);
          await migrate(region.pool, { region: region.region, sealer });
          await seed(region, sealer);
        }
      },
      async startWorkers(group, count, { env = {}, ...processOptions } = {}) {
        const processes = await startWorkerProcesses(
          count,
          { ...workerEnvironment(group, server!.address, bundlePath), ...env },
          processOptions,
        );
        workers.push(processes);
        return processes;
      },
      async restartTemporal(downMs) {
        await server!.stop();
        await new Promise((resolve) => setTimeout(resolve, downMs));
        server = await startTemporal();
      },
      stop: () => stop(),
    };
  } catch (err) {
    // Whatever started is stopped; the data directory stays: a service's log in it may tell why the start failed.
    await stop({ keepDataDir: true }).catch(() => undefined);
    throw err;
  }
}

/** A region's ledger as a night starts: its merchants (each with the same delivery policy), accounts and holds. */
interface LedgerSeed {
  merchants: readonly MerchantSeed[];
  deliveryPolicy: Record<string, number>;
  accounts: readonly AccountSeed[];
  holds: readonly HoldSeed[];
  /** Holds per insert (a transaction each); all in one when undefined. */
  holdsPerInsert?: number;
  /** ANALYZE once seeded, so the sweep's first page query is planned on the night's row counts. */
  analyze?: boolean;
}

export async function seedLedger(region: LocalRegion, sealer: SecretSealer, seed: LedgerSeed): Promise<void> {
  await insertMerchants(region.pool, { region: region.region, sealer }, seed.merchants);
  await region.pool.query(`UPDATE merchants SET delivery_policy = $1::jsonb`, [JSON.stringify(seed.deliveryPolicy)]);
  await insertAccounts(region.pool, seed.accounts);
  const chunk = Math.max(1, seed.holdsPerInsert ?? seed.holds.length);
  for (let i = 0; i < seed.holds.length; i += chunk) await insertHolds(region.pool, seed.holds.slice(i, i + chunk));
  if (seed.analyze) await region.pool.query('ANALYZE');
}
