/**
 * The production entry point: a worker for the regions in HOLD_SWEEPER_REGIONS against an external Temporal
 * cluster and external ledger databases (in dev mode, unset addresses are a running `npm start`'s, so a second
 * worker can join the demo). Nothing is started or seeded here; migrations are applied (under an
 * advisory lock, so replicas starting together are safe). In dev mode it also applies the region's schedules and makes
 * its build current; in production both are the deploy step's (`npm run promote`).
 *
 *   HOLD_SWEEPER_MODE=production HOLD_SWEEPER_REGIONS=eu TEMPORAL_ADDRESS=temporal:7233 \
 *   DATABASE_URL_EU=postgres://... PAYLOAD_KEYS_EU=k1:<base64 of 32 bytes> MERCHANT_SECRET_KEYS_EU=k1:<base64> npm run
 *   worker
 *
 * Each region's worker also erases rotated-out merchant secrets past their overlap, on an interval beside its gauges.
 */
import '../node-version.js';
import fs from 'node:fs/promises';
import v8 from 'node:v8';
import { Client } from '@temporalio/client';
import { Runtime } from '@temporalio/worker';
import { loadConfig, requireExplicitMode } from '../config.js';
import { connectClient, connectWorker, keepApiKeyFresh, PLAINTEXT } from '../temporal-connection.js';
import { dataConverterFor } from '../codec/encryption-codec.js';
import { sealingKeysInUse } from '../db/secrets-at-rest.js';
import { createPool } from '../db/pool.js';
import { localKeyRing } from '../delivery/secret-box.js';
import { ConfigError } from '../errors.js';
import { exitOnFatal, nameProcess, temporalLogger } from '../observability/logger.js';
import { serveHealth, type ReadinessCheck } from '../observability/health.js';
import { listenAddressOf, loopbackPort, Registry, serveMetrics } from '../observability/metrics-listener.js';
import { startTracing } from '../observability/tracing.js';
import { LATENCY_BUCKETS, PROMETHEUS_EXPORT, startLedgerGauges } from '../observability/metrics.js';
import { addressesIn } from '../dev-stack.js';
import { applySchedules } from '../schedules.js';
import { ledgerGaugeSource } from '../sql/gauges.js';
import { buildIdOf } from '../workers/deployment.js';
import {
  bundleWorkflows,
  createRegionWorker,
  ledgerPoolOptions,
  runRegionWorker,
  SHUTDOWN_GRACE_MS,
} from '../workers/region-worker.js';
import { startEndpointChecks } from '../workers/endpoint-checks.js';
import { startSecretErasure } from '../workers/secret-erasure.js';
import { ledgerReady, waitingOn } from '../workers/startup.js';

const log = nameProcess('worker');

/** Waits for what restarts (src/workers/startup.ts), saying so; stops at once at what no wait fixes. */
const whenReachable = waitingOn(log);

async function main() {
  // Fail closed: dev mode drops the SSRF guard, allows plain http and runs unencrypted, so the production entry
  // point never falls into it by default.
  requireExplicitMode();
  const config = loadConfig();
  log.level = config.observability.logLevel.toLowerCase();
  // The SDK's exporter listens on loopback only: METRICS_ADDRESS serves its text after the process's own metrics.
  const sdkExporter = config.observability.metricsAddress ? `127.0.0.1:${await loopbackPort()}` : undefined;
  // SIGINT/SIGTERM make the runtime drain the workers; run() then resolves and the process exits.
  Runtime.install({
    logger: temporalLogger(log),
    telemetryOptions: sdkExporter
      ? {
          metrics: {
            // Prometheus's conventions: counters end in _total, durations are seconds (PROMETHEUS_EXPORT).
            prometheus: { bindAddress: sdkExporter, ...PROMETHEUS_EXPORT, histogramBucketOverrides: LATENCY_BUCKETS },
          },
        }
      : undefined,
  });
  const metrics = config.observability.metricsAddress
    ? await serveMetrics(
        new Registry(),
        listenAddressOf(config.observability.metricsAddress),
        'worker',
        `http://${sdkExporter}/metrics`,
      )
    : undefined;
  const meter = Runtime.instance().metricMeter;
  // A prebuilt bundle (e.g. baked into the image) saves each replica the webpack build at start-up.
  const workflowBundle = process.env.WORKFLOW_BUNDLE_PATH
    ? {
        code: await fs.readFile(process.env.WORKFLOW_BUNDLE_PATH, 'utf8').catch(() => {
          throw new ConfigError(
            'WORKFLOW_BUNDLE_PATH',
            process.env.WORKFLOW_BUNDLE_PATH,
            'a readable workflow bundle file (see npm run build:bundle)',
          );
        }),
      }
    : await bundleWorkflows();
  const version = {
    deploymentName: config.deployment.deploymentName,
    buildId: buildIdOf(workflowBundle, config.deployment.buildId),
  };
  // OTLP export when OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) says where (src/observability/tracing.ts).
  const tracing = startTracing('hold-sweeper-worker', { sampleRatio: config.observability.traceSampleRatio });
  const runs: Promise<void>[] = [];
  const cleanup: (() => Promise<void>)[] = [];
  const checks: Record<string, ReadinessCheck> = {};
  // This entry point never starts services. In dev mode an unset address means the running `npm start`'s.
  const addresses = await addressesIn(config.mode);
  const tuning =
    config.worker.maxCachedWorkflows === undefined
      ? undefined
      : { maxCachedWorkflows: config.worker.maxCachedWorkflows };
  // A connection for each of the worker's activity and local-activity slots (see ledgerPoolOptions).
  const poolOptions = ledgerPoolOptions(tuning);
  for (const configured of config.regions) {
    const up = configured.region.toUpperCase();
    const region = { ...configured, ...addresses(configured) };
    const orRunningStack = config.mode === 'dev' ? ', or a running `npm start` to join' : '';
    if (!region.temporalAddress)
      throw new ConfigError(`TEMPORAL_ADDRESS_${up}`, undefined, `host:port (or TEMPORAL_ADDRESS)${orRunningStack}`);
    if (!region.databaseUrl)
      throw new ConfigError(`DATABASE_URL_${up}`, undefined, `a postgres:// URL${orRunningStack}`);
    const pool = createPool(region.databaseUrl, poolOptions);
    // MERCHANT_SECRET_KEYS_<R>: migrate seals and re-seals with it, the delivery activities open with it.
    const sealer = localKeyRing(region.secretKeys);
    await ledgerReady(log, pool, config.mode, 'worker', region);
    const address = region.temporalAddress;
    const settings = region.temporal ?? PLAINTEXT;
    const connection = await whenReachable('Temporal', () => connectClient(settings, address));
    const client = new Client({ connection, namespace: region.namespace, dataConverter: dataConverterFor(region) });
    // The schedules are deployment state: in production `npm run promote` applies them with the namespace's admin
    // credential, and the worker's own may not change them (deploy/temporal/server/cluster-rights.json).
    if (config.mode === 'dev') await whenReachable('Temporal', () => applySchedules(client, region, config));
    const nativeConnection = await whenReachable('Temporal', () => connectWorker(settings, address));
    // A key from TEMPORAL_API_KEY_FILE is re-read and handed to both connections: rotated without a restart.
    const stopRefreshing = keepApiKeyFresh(settings, [connection, nativeConnection], (err) =>
      log.warn({ region: region.region, error: err }, 'Temporal API key not refreshed'),
    );
    const worker = await createRegionWorker({
      tracing,
      connection: nativeConnection,
      region,
      pool,
      sealer,
      workflowBundle,
      version,
      webhooks: config.webhooks,
      fourEyes: config.decisions.fourEyes,
      quarantineTimeoutMs: config.decisions.quarantineTimeoutMs,
      maxWorkflowIdLength: config.temporalLimits.maxWorkflowIdLength,
      meter,
      merchantLabel: config.observability.merchantLabel,
      tuning,
    });
    const gauges = startLedgerGauges({
      region: region.region,
      source: ledgerGaugeSource(pool),
      meter,
      intervalMs: config.observability.gaugeIntervalMs,
      quarantinePageAfterMs: config.observability.quarantinePageAfterMs,
      duplicateSendsAlertRatio: config.observability.duplicateSendsAlertRatio,
      worstMerchants: config.observability.worstMerchants,
      sweepIntervalMs: config.sweep.intervalMs,
    });
    await gauges.refresh();
    const erasure = startSecretErasure({ region: region.region, pool });
    const endpointChecks = startEndpointChecks({
      region: region.region,
      pool,
      rules: config.webhooks,
      secrets: { region: region.region, sealer },
      client,
    });
    // What this region's worker needs to do its work, asked at every readiness request (src/observability/health.ts).
    const ring = new Set(region.secretKeys.map((k) => k.id));
    Object.assign(checks, {
      [`ledger-${region.region}`]: async () => void (await pool.query('SELECT 1')),
      [`temporal-${region.region}`]: async () => void (await connection.healthService.check({})),
      [`keys-${region.region}`]: async () => {
        const missing = (await sealingKeysInUse(pool)).filter((id) => !ring.has(id));
        if (missing.length > 0)
          throw new Error(`merchant secrets sealed under ${missing.join(', ')}, not in MERCHANT_SECRET_KEYS_${up}`);
      },
    } satisfies Record<string, ReadinessCheck>);
    const running = await runRegionWorker(worker, client, config.deployment.setCurrent);
    runs.push(running.run);
    Runtime.instance().logger.info('worker running', {
      region: region.region,
      namespace: region.namespace,
      taskQueue: region.taskQueue,
      deployment: version.deploymentName,
      buildId: version.buildId,
      setCurrent: config.deployment.setCurrent,
      currentVersion:
        running.setCurrent.status === 'left' ? (running.setCurrent.current ?? 'none') : running.setCurrent.status,
      metrics: config.observability.metricsAddress,
      merchantLabel: config.observability.merchantLabel,
      ledgerPoolMax: poolOptions.max,
      ledgerConnectionTimeoutMs: poolOptions.connectionTimeoutMillis,
      shutdownGraceMs: SHUTDOWN_GRACE_MS,
      // What bounds its memory: the sticky cache (the SDK sizes it from the V8 heap limit unless told) and that limit.
      maxCachedWorkflows: worker.options.maxCachedWorkflows,
      heapLimitMiB: Math.round(v8.getHeapStatistics().heap_size_limit / 2 ** 20),
      // The runtime under it: the image's Node (Dockerfile) or whichever runs `npm run worker`.
      node: process.version,
      pid: process.pid,
    });
    cleanup.push(
      async () => stopRefreshing(),
      async () => gauges.stop(),
      async () => erasure.stop(),
      async () => endpointChecks.stop(),
      () => pool.end(),
      () => connection.close(),
      () => nativeConnection.close(),
    );
  }
  const health = config.observability.healthAddress
    ? await serveHealth(checks, config.observability.healthAddress)
    : undefined;
  if (health)
    Runtime.instance().logger.info('worker health', { livez: `${health.url}/livez`, readyz: `${health.url}/readyz` });
  await Promise.all(runs);
  await health?.close();
  await metrics?.close();
  for (const close of cleanup) await close();
  await tracing.shutdown();
}

main().catch((err) => exitOnFatal(err));
