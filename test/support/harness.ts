/**
 * Per-test-file access to the shared services: isolated ledgers (cloned from the migrated template), unique
 * task queues and schedule ids, real workers on the shared dev server. Nothing here is a mock.
 */
import { randomUUID } from 'node:crypto';
import { Client, Connection, type TLSConfig } from '@temporalio/client';
import {
  NativeConnection,
  Runtime,
  DefaultLogger,
  makeTelemetryFilterString,
  type LogEntry,
  type Worker,
} from '@temporalio/worker';
import pg from 'pg';
import { inject } from 'vitest';
import type { RegionConfig } from '../../src/config.js';
import { dataConverterFor } from '../../src/codec/encryption-codec.js';
import { FakeMerchants } from '../../dev/fake-merchants.js';
import type { Region } from '../../src/contracts/regions.js';
import type { WorkerDeploymentVersion } from '@temporalio/common';
import { DEFAULT_DEPLOYMENT_NAME, type SetCurrentMode } from '../../src/config.js';
import { buildIdOf } from '../../src/workers/deployment.js';
import { createRegionWorker, runRegionWorker, type RegionWorkerOptions } from '../../src/workers/region-worker.js';
import { createPool } from '../../src/db/pool.js';
import { localKeyRing } from '../../src/delivery/secret-box.js';
import { TEST_SECRET_KEYS } from './secrets.js';

let runtimeInstalled = false;
function installQuietRuntime(logSink?: (entry: LogEntry) => void) {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  // ERROR: retried webhook attempts log a WARN each, by design; they would bury a real failure's output. A test that
  // reads the workers' log (the SDK core's warnings included, forwarded at WARN) gets every entry from WARN up instead.
  const logger = logSink
    ? new DefaultLogger('WARN', logSink)
    : new DefaultLogger((process.env.TEST_LOG_LEVEL as 'ERROR') ?? 'ERROR');
  Runtime.install({
    logger,
    shutdownSignals: [],
    // The core's own warnings (e.g. TMPRL1104, a slow workflow task) reach the sink too, instead of going to stderr.
    ...(logSink
      ? {
          telemetryOptions: {
            logging: { forward: {}, filter: makeTelemetryFilterString({ core: 'WARN', other: 'WARN' }) },
          },
        }
      : {}),
  });
}

export interface TestRegion {
  config: RegionConfig;
  pool: pg.Pool;
  client: Client;
  databaseUrl: string;
}

export interface RunningWorker {
  worker: Worker;
  stop(): Promise<void>;
}

export interface Harness {
  /** Unique per test file: prefix ids with it so files sharing the server never collide. */
  id: string;
  address: string;
  /** This file's fake merchants (a real HTTP server on loopback). */
  merchants: FakeMerchants;
  /**
   * A fresh ledger and task queue for the region; `payloadKeys` turns on payload encryption for its clients and
   * workers;
   * `secretKeys`: its merchant-secret key ring (TEST_SECRET_KEYS unless said).
   */
  region(
    region: Region,
    options?: { payloadKeys?: RegionConfig['payloadKeys']; secretKeys?: RegionConfig['secretKeys'] },
  ): Promise<TestRegion>;
  /** A pool on a brand-new database with no schema at all (for migration tests). */
  emptyDatabase(): Promise<pg.Pool>;
  /**
   * A real worker for the region; dev endpoint rules (loopback http) unless `webhooks` says otherwise. Versioned like
   * every worker: by default the product's deployment and the bundle's build, made current (`always`, as in dev).
   * `options.fourEyes` makes it a production worker for operator decisions (DecisionsConfig).
   */
  startWorker(
    region: TestRegion,
    tuning?: RegionWorkerOptions['tuning'],
    webhooks?: RegionWorkerOptions['webhooks'],
    options?: {
      workflowBundle?: { code: string };
      version?: WorkerDeploymentVersion;
      setCurrent?: SetCurrentMode;
      fourEyes?: boolean;
      quarantineTimeoutMs?: number;
      outboxBudget?: RegionWorkerOptions['outboxBudget'];
      fastPathSlots?: number;
      tracing?: RegionWorkerOptions['tracing'];
    },
  ): Promise<RunningWorker>;
  /**
   * The region's ledger on a task queue of its own, served by a worker whose quarantines are abandoned after
   * `quarantineTimeoutMs` (QUARANTINE_DECISION_TIMEOUT is at least a minute in a real config): a sweep started there
   * runs its holds there.
   */
  abandoningAfter(region: TestRegion, quarantineTimeoutMs: number): Promise<TestRegion>;
  close(): Promise<void>;
}

/**
 * `address`: another Temporal server than the shared one (a test that needs its own server settings); `tls` and
 * `apiKey`: how to reach it when it is locked (the workers' and the clients' identity).
 */
export async function openHarness(
  options: { address?: string; tls?: TLSConfig; apiKey?: string; logSink?: (entry: LogEntry) => void } = {},
): Promise<Harness> {
  installQuietRuntime(options.logSink);
  const id = randomUUID().slice(0, 8);
  const address = options.address ?? inject('temporalAddress');
  const secured = {
    ...(options.tls ? { tls: options.tls } : {}),
    ...(options.apiKey ? { apiKey: options.apiKey } : {}),
  };
  const connection = await Connection.connect({ address, ...secured });
  const nativeConnection = await NativeConnection.connect({ address, ...secured });
  const workflowBundle = { code: inject('workflowBundleCode') };
  const pools: pg.Pool[] = [];
  const workers: RunningWorker[] = [];
  const admin = new pg.Client({ connectionString: `${inject('postgresUrlBase')}postgres` });
  await admin.connect();
  const merchants = new FakeMerchants();
  await merchants.start();

  const harness: Harness = {
    id,
    address,
    merchants,
    async region(region, options = {}) {
      const database = `t_${id}_${region}_${pools.length}`;
      await admin.query(
        `CREATE DATABASE ${pg.escapeIdentifier(database)} TEMPLATE ${pg.escapeIdentifier(inject('templateDatabase'))}`,
      );
      const databaseUrl = `${inject('postgresUrlBase')}${database}`;
      // The workers' own kind of pool (src/db/pool.ts): its lost-connection handling and its statements' spans.
      const pool = createPool(databaseUrl, { max: 20 });
      pools.push(pool);
      const config: RegionConfig = {
        region,
        databaseUrl,
        temporalAddress: address,
        namespace: `hold-sweeper-${region}`,
        taskQueue: `t-${id}-${region}-${pools.length}`,
        scheduleId: `t-${id}-sweep-${region}-${pools.length}`,
        payloadKeys: options.payloadKeys,
        secretKeys: options.secretKeys ?? TEST_SECRET_KEYS,
      };
      const client = new Client({ connection, namespace: config.namespace, dataConverter: dataConverterFor(config) });
      return { config, pool, databaseUrl, client };
    },
    async emptyDatabase() {
      const database = `t_${id}_empty_${pools.length}`;
      await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}`);
      const pool = new pg.Pool({ connectionString: `${inject('postgresUrlBase')}${database}` });
      pools.push(pool);
      return pool;
    },
    async startWorker(
      region,
      tuning,
      webhooks = { allowInsecureHttp: true, allowPrivateAddresses: true, trustedNetworks: [] },
      options = {},
    ) {
      const bundle = options.workflowBundle ?? workflowBundle;
      const worker = await createRegionWorker({
        connection: nativeConnection,
        region: region.config,
        pool: region.pool,
        sealer: localKeyRing(region.config.secretKeys),
        workflowBundle: bundle,
        version: options.version ?? { deploymentName: DEFAULT_DEPLOYMENT_NAME, buildId: buildIdOf(bundle) },
        webhooks,
        fourEyes: options.fourEyes,
        quarantineTimeoutMs: options.quarantineTimeoutMs,
        outboxBudget: options.outboxBudget,
        fastPathSlots: options.fastPathSlots,
        tracing: options.tracing,
        tuning,
      });
      const { run: running } = await runRegionWorker(worker, region.client, options.setCurrent ?? 'always');
      const handle: RunningWorker = {
        worker,
        async stop() {
          if (worker.getState() === 'RUNNING') worker.shutdown();
          await running;
        },
      };
      workers.push(handle);
      return handle;
    },
    async abandoningAfter(region, quarantineTimeoutMs) {
      const own = {
        ...region,
        config: { ...region.config, taskQueue: `${region.config.taskQueue}-q${quarantineTimeoutMs}` },
      };
      await harness.startWorker(own, undefined, undefined, { quarantineTimeoutMs });
      return own;
    },
    async close() {
      await merchants.stop();
      await Promise.all(workers.map((w) => w.stop()));
      await Promise.all(pools.map((p) => p.end()));
      await admin.end();
      await nativeConnection.close();
      await connection.close();
    },
  };
  return harness;
}
