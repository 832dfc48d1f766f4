/**
 * The production entry point: a worker for the regions in HOLD_SWEEPER_REGIONS against an external Temporal
 * cluster and external ledger databases. Nothing is started or seeded here; migrations are applied (under an
 * advisory lock, so replicas starting together are safe) and the region's schedule is ensured.
 *
 *   HOLD_SWEEPER_MODE=production HOLD_SWEEPER_REGIONS=eu TEMPORAL_ADDRESS=temporal:7233 \
 *   DATABASE_URL_EU=postgres://... npm run worker
 */
import fs from 'node:fs/promises';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Runtime } from '@temporalio/worker';
import { loadConfig } from '../config.js';
import { dataConverterFor } from '../codec/encryption-codec.js';
import { migrate } from '../db/migrate.js';
import { createPool } from '../db/pool.js';
import { ConfigError } from '../errors.js';
import { jsonLogger } from '../observability/logging.js';
import { startLedgerGauges } from '../observability/metrics.js';
import { ensureSweepSchedule } from '../schedules.js';
import { bundleWorkflows, createRegionWorker } from './region-worker-factory.js';

/** A worker that starts while its database or Temporal restarts waits for them (up to 2 min) instead of dying. */
const STARTUP_RETRY_MS = 120_000;

async function whenReachable<T>(what: string, attempt: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + STARTUP_RETRY_MS;
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      Runtime.instance().logger.warn(`${what} not reachable yet; retrying`, { error: (err as Error).message });
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

async function main() {
  const config = loadConfig();
  // SIGINT/SIGTERM make the runtime drain the workers; run() then resolves and the process exits.
  Runtime.install({
    logger: jsonLogger(config.observability.logLevel),
    telemetryOptions: config.observability.metricsAddress
      ? { metrics: { prometheus: { bindAddress: config.observability.metricsAddress } } }
      : undefined,
  });
  const meter = Runtime.instance().metricMeter;
  // A prebuilt bundle (e.g. baked into the image) saves each replica the webpack build at start-up.
  const workflowBundle = process.env.WORKFLOW_BUNDLE_PATH
    ? { code: await fs.readFile(process.env.WORKFLOW_BUNDLE_PATH, 'utf8').catch(() => {
        throw new ConfigError('WORKFLOW_BUNDLE_PATH', process.env.WORKFLOW_BUNDLE_PATH, 'a readable workflow bundle file (see npm run build:bundle)');
      }) }
    : await bundleWorkflows();
  const runs: Promise<void>[] = [];
  const cleanup: (() => Promise<void>)[] = [];
  for (const region of config.regions) {
    const up = region.region.toUpperCase();
    // This entry point never falls back to embedded services, whatever the mode.
    if (!region.temporalAddress) throw new ConfigError(`TEMPORAL_ADDRESS_${up}`, undefined, 'host:port (or TEMPORAL_ADDRESS)');
    if (!region.databaseUrl) throw new ConfigError(`DATABASE_URL_${up}`, undefined, 'a postgres:// URL');
    const pool = createPool(region.databaseUrl);
    await whenReachable('ledger database', () => migrate(pool));
    const address = region.temporalAddress;
    const connection = await whenReachable('Temporal', () => Connection.connect({ address }));
    const client = new Client({ connection, namespace: region.namespace, dataConverter: dataConverterFor(region.payloadKeys) });
    await whenReachable('Temporal', () => ensureSweepSchedule(client, region, config.sweep));
    const nativeConnection = await whenReachable('Temporal', () => NativeConnection.connect({ address }));
    const worker = await createRegionWorker({
      connection: nativeConnection,
      region,
      pool,
      workflowBundle,
      webhooks: config.webhooks,
      meter,
      tuning: config.worker.maxCachedWorkflows === undefined ? undefined : { maxCachedWorkflows: config.worker.maxCachedWorkflows },
    });
    const gauges = startLedgerGauges({ region: region.region, pool, meter, intervalMs: config.observability.gaugeIntervalMs });
    await gauges.refresh();
    runs.push(worker.run());
    Runtime.instance().logger.info('worker running', {
      region: region.region,
      namespace: region.namespace,
      taskQueue: region.taskQueue,
      metrics: config.observability.metricsAddress,
      pid: process.pid,
    });
    cleanup.push(async () => gauges.stop(), () => pool.end(), () => connection.close(), () => nativeConnection.close());
  }
  await Promise.all(runs);
  for (const close of cleanup) await close();
}

main().catch((err) => {
  console.error(err instanceof Error ? `${err.name}: ${err.message}` : err);
  process.exit(1);
});
