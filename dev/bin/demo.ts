/**
 * `npm start`: a whole hold-release night on one machine, offline.
 *
 * Starts Temporal and Postgres (embedded unless configured), applies migrations, seeds a demo night in each
 * region, runs one worker per region from this process, ensures the schedules, triggers a sweep now (overlap
 * SKIP), shows progress, prints a summary and the Web UI address, then keeps serving until Ctrl-C.
 *
 *   npm start               run the demo and keep the workers up (the schedules keep sweeping)
 *   npm start -- --once     exit after the summary (scripts, CI smoke runs)
 */
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, type Worker } from '@temporalio/worker';
import { loadConfig, type RegionConfig } from '../../src/config.js';
import { loadDevConfig } from '../dev-config.js';
import { dataConverterFor } from '../../src/codec/encryption-codec.js';
import { migrate } from '../../src/db/migrate.js';
import { createPool } from '../../src/db/pool.js';
import type pg from 'pg';
import { parseTemporalBackend, startLocalStack } from '../local-stack.js';
import { seedDemoNight, type DemoNight } from '../seed.js';
import type { SweepResult } from '../../src/contracts/domain.js';
import { generateSigningSecret } from '../../src/delivery/signing.js';
import { FakeMerchants, type MerchantScript } from '../fake-merchants.js';
import { ensureSweepSchedule, sweepNow } from '../../src/schedules.js';
import { buildIdOf } from '../../src/workers/deployment.js';
import { bundleWorkflows, createRegionWorker, ledgerPoolOptions, runRegionWorker } from '../../src/workers/region-worker.js';

/** A dozen merchants per region, as the demo promises. */
const DEMO_MERCHANTS = 12;
/** Fixed seed: the same demo night every run, so a surprise can be reproduced. */
const DEMO_SEED = 20261130;
const PROGRESS_INTERVAL_MS = 250;

/**
 * How the demo's merchants answer: most accept at once (a little latency), one rate-limits with 429 and
 * Retry-After, one has a short 503 outage, one rejects with 400 (quarantined for a human).
 */
function demoScript(merchantNumber: number, secret: string): MerchantScript {
  const secrets = [secret];
  switch (merchantNumber) {
    case 2:
      return {
        secrets,
        responses: [
          { status: 429, retryAfter: '2' },
          { status: 429, retryAfter: '2' },
          { status: 200, delayMs: 5 },
        ],
      };
    case 3:
      return { secrets, responses: [{ status: 503 }, { status: 503 }, { status: 200, delayMs: 5 }] };
    case 4:
      return { secrets, responses: [{ status: 400, body: '{"error":"unknown hold reference format"}' }] };
    default:
      return { secrets, responses: [{ status: 200, delayMs: 5 }] };
  }
}

const log = (line: string) => console.log(line);

interface RegionRun {
  config: RegionConfig;
  pool: pg.Pool;
  client: Client;
  night: DemoNight;
  nightId: string;
  worker: Worker;
  sweepId?: string;
  result?: SweepResult;
}

async function progressLine(runs: readonly RegionRun[]): Promise<{ line: string; done: boolean; allReleased: boolean; released: number }> {
  const parts: string[] = [];
  let done = true;
  let allReleased = true;
  let releasedTotal = 0;
  for (const run of runs) {
    const { rows } = await run.pool.query<{ released: number; rejected: number; delivered: number; quarantined: number; pending: number }>(
      `SELECT count(*) FILTER (WHERE h.state = 'released')::integer AS released,
              count(*) FILTER (WHERE h.state = 'rejected')::integer AS rejected,
              count(*) FILTER (WHERE d.status = 'delivered')::integer AS delivered,
              count(*) FILTER (WHERE d.status = 'quarantined')::integer AS quarantined,
              count(*) FILTER (WHERE d.status = 'pending')::integer AS pending
         FROM auth_holds h LEFT JOIN webhook_deliveries d ON d.hold_id = h.id
        WHERE h.id LIKE $1::text`,
      [`h\\_${run.nightId}\\_%`],
    );
    const { released, rejected, delivered, quarantined, pending } = rows[0]!;
    releasedTotal += released;
    if (released < run.night.expiredValid) allReleased = false;
    if (pending > 0) done = false;
    const total = run.night.expiredValid;
    const width = 24;
    const filled = total === 0 ? width : Math.round((released / total) * width);
    parts.push(
      `${run.config.region.toUpperCase()} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${released}/${total} released, ` +
        `${rejected} rejected | webhooks ${delivered} delivered, ${pending} pending, ${quarantined} quarantined`,
    );
    if (!run.result) allReleased = false;
  }
  return { line: parts.join('   '), done: done && allReleased, allReleased, released: releasedTotal };
}

async function main() {
  const once = process.argv.includes('--once');
  const config = loadConfig();
  const dev = loadDevConfig();
  const startedAt = Date.now();
  // Errors only: every retried webhook attempt is a WARN, which would drown the demo's progress bar.
  Runtime.install({ logger: new DefaultLogger('ERROR'), shutdownSignals: [] });

  log(`hold-sweeper demo night: regions ${config.regions.map((r) => r.region).join(', ')}`);
  // `npm start -- --temporal cluster [--shards 4]`: the production server on PostgreSQL instead of the dev server.
  const stack = await startLocalStack(config, dev, { log, temporal: parseTemporalBackend(process.argv) });
  const merchants = new FakeMerchants();
  log(`Fake merchants on ${await merchants.start()} (they verify every signature)`);
  const nightId = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
  const workflowBundle = await bundleWorkflows();
  const runs: RegionRun[] = [];
  const connections: { close(): Promise<void> }[] = [];
  const workerRuns: Promise<void>[] = [];
  let shuttingDown = false;

  const shutdown = async (code: number) => {
    if (shuttingDown) return;
    shuttingDown = true;
    log('\nShutting down: workers, then Temporal and Postgres...');
    for (const run of runs) if (run.worker.getState() === 'RUNNING') run.worker.shutdown();
    await Promise.allSettled(workerRuns);
    await Promise.all(runs.map((r) => r.pool.end()));
    await merchants.stop();
    for (const c of connections) await c.close();
    await stack.stop();
    process.exit(code);
  };
  process.once('SIGINT', () => void shutdown(0));
  process.once('SIGTERM', () => void shutdown(0));

  for (const region of config.regions) {
    const address = stack.temporalAddress(region.region);
    // Sized like the production worker's: a connection per activity and local-activity slot.
    const pool = createPool(stack.databaseUrl(region.region), ledgerPoolOptions());
    const applied = await migrate(pool);
    if (applied.length) log(`${region.region.toUpperCase()} ledger: applied ${applied.join(', ')}`);
    const night = await seedDemoNight(pool, {
      region: region.region,
      nightId,
      holds: dev.demoHolds,
      merchants: DEMO_MERCHANTS,
      seed: DEMO_SEED,
      endpointFor: (id) => merchants.endpointFor(id),
      secretFor: (id) => {
        const secret = generateSigningSecret();
        merchants.script(id, demoScript(Number(id.split('_').pop()), secret));
        return secret;
      },
    });
    log(
      `${region.region.toUpperCase()} ledger: seeded ${night.holds.length + night.defective} holds ` +
        `(${night.expiredValid} expired, ${night.future} expiring tomorrow, ${night.defective} defective rows)`,
    );
    const connection = await Connection.connect({ address });
    const nativeConnection = await NativeConnection.connect({ address });
    connections.push(connection, nativeConnection);
    const client = new Client({ connection, namespace: region.namespace, dataConverter: dataConverterFor(region.payloadKeys) });
    const version = { deploymentName: config.deployment.deploymentName, buildId: buildIdOf(workflowBundle, config.deployment.buildId) };
    const worker = await createRegionWorker({ connection: nativeConnection, region, pool, workflowBundle, version, webhooks: config.webhooks });
    workerRuns.push((await runRegionWorker(worker, client, config.deployment.setCurrent)).run);
    const schedule = await ensureSweepSchedule(client, region, config.sweep);
    log(`${region.region.toUpperCase()} schedule ${region.scheduleId}: ${schedule}, every ${config.sweep.intervalMs / 60_000} min, overlap SKIP`);
    runs.push({ config: region, pool, client, night, nightId, worker });
  }

  for (const run of runs) {
    run.sweepId = await sweepNow(run.client, run.config);
    log(`${run.config.region.toUpperCase()} sweep started: ${run.sweepId}`);
    void run.client.workflow
      .getHandle<() => Promise<SweepResult>>(run.sweepId)
      .result()
      .then((result) => void (run.result = result));
  }
  const sweepStartedAt = Date.now();

  const tty = process.stdout.isTTY;
  let lastPrinted = 0;
  let released = 0;
  let allReleasedAt: number | undefined;
  for (;;) {
    const progress = await progressLine(runs);
    const { line, done } = progress;
    released = progress.released;
    if (progress.allReleased) allReleasedAt ??= Date.now();
    if (tty) process.stdout.write(`\r${line}`);
    else if (done || Date.now() - lastPrinted > 2000) {
      log(line);
      lastPrinted = Date.now();
    }
    if (done) break;
    await new Promise((resolve) => setTimeout(resolve, PROGRESS_INTERVAL_MS));
  }
  if (tty) process.stdout.write('\n');

  const elapsedS = ((allReleasedAt ?? Date.now()) - sweepStartedAt) / 1000;
  const settledS = (Date.now() - sweepStartedAt) / 1000;
  log('\nSummary');
  for (const run of runs) {
    const r = run.result!;
    log(
      `  ${run.config.region.toUpperCase()} ${run.sweepId}: found ${r.found}, child workflows started ${r.started}, ` +
        `already handled ${r.alreadyStarted}, rejected rows ${r.rejected}, unreleased at end ${r.unreleasedAtEnd}, ${r.pages} page(s)`,
    );
  }
  for (const run of runs) {
    const { rows } = await run.pool.query<{ delivered: number; retried: number; quarantined: number; reasons: string | null; attempts: number }>(
      `SELECT count(*) FILTER (WHERE status = 'delivered')::integer AS delivered,
              count(*) FILTER (WHERE attempt_count > 1)::integer AS retried,
              count(*) FILTER (WHERE status = 'quarantined')::integer AS quarantined,
              string_agg(DISTINCT quarantine_reason, ', ') AS reasons,
              coalesce(sum(attempt_count), 0)::integer AS attempts
         FROM webhook_deliveries WHERE hold_id LIKE $1::text`,
      [`h\\_${run.nightId}\\_%`],
    );
    const d = rows[0]!;
    log(
      `  ${run.config.region.toUpperCase()} webhooks: ${d.delivered} delivered, ${d.retried} needed retries, ` +
        `${d.quarantined} quarantined${d.reasons ? ` (${d.reasons})` : ''}; ` +
        `${d.attempts} requests = ${(d.attempts / Math.max(1, d.delivered)).toFixed(2)} per delivered webhook`,
    );
  }
  log(
    `  ${released} holds released (ledger count) in ${elapsedS.toFixed(1)} s: ${(released / elapsedS).toFixed(1)} holds/s; ` +
      `every webhook delivered or quarantined after ${settledS.toFixed(1)} s`,
  );
  if (stack.uiUrl) {
    log(`\nTemporal Web UI: ${stack.uiUrl}`);
    for (const run of runs) log(`  ${run.config.region.toUpperCase()}: ${stack.uiUrl}/namespaces/${run.config.namespace}/workflows`);
  }
  log(`Total start-up and night: ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);

  if (once) return shutdown(0);
  log('\nWorkers keep running (the schedules sweep again on their interval). Ctrl-C to stop.');
  await Promise.all(workerRuns);
}

main().catch((err) => {
  console.error(err instanceof Error ? `${err.name}: ${err.message}` : err);
  process.exit(1);
});
