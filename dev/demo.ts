/**
 * `npm start`: a whole hold-release night on one machine, offline.
 *
 * Starts Temporal and Postgres (embedded unless configured), applies migrations, seeds a demo night in each
 * region, runs one worker and one processor-event receiver per region from this process, ensures the schedules,
 * triggers a sweep now (overlap SKIP) while the card processor calls back about some of the same holds (captures
 * racing their release, reversals, increments; duplicated and out of order), shows progress, prints a summary and
 * the Web UI address, then keeps serving until Ctrl-C.
 */
import { Client } from '@temporalio/client';
import { DefaultLogger, Runtime, type Worker } from '@temporalio/worker';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { loadConfig, type Config, type RegionConfig } from '../src/config.js';
import { buildAdminServer } from '../src/api/admin-server.js';
import { createTokenVerifier } from '../src/api/identity.js';
import { adminAudience } from '../src/contracts/identity.js';
import { buildMerchantServer } from '../src/api/merchant-server.js';
import { startDevOidcProvider } from './oidc-provider.js';
import { runOps } from '../src/operations/cli.js';
import { loadDevConfig } from './dev-config.js';
import { dataConverterFor } from '../src/codec/encryption-codec.js';
import { migrate } from '../src/db/migrate.js';
import { createPool } from '../src/db/pool.js';
import { localKeyRing } from '../src/delivery/secret-box.js';
import type pg from 'pg';
import { startLocalStack, type TemporalBackend } from './local-stack.js';
import { seedDemoNight, type DemoNight } from './seed.js';
import type { SweepResult } from '../src/contracts/domain.js';
import { generateSigningSecret } from '../src/delivery/standard-webhooks.js';
import { FakeMerchants, type MerchantScript } from './fake-merchants.js';
import { ensureOutboxSchedule, ensureSweepSchedule, outboxScheduleId, sweepNow } from '../src/schedules.js';
import { buildIdOf } from '../src/workers/deployment.js';
import {
  bundleWorkflows,
  createRegionWorker,
  ledgerPoolOptions,
  runRegionWorker,
} from '../src/workers/region-worker.js';
import { startEndpointChecks } from '../src/workers/endpoint-checks.js';
import { startSecretErasure } from '../src/workers/secret-erasure.js';
import { createLogger, silentLogger } from '../src/observability/logger.js';
import { createProcessorReceiver, REFUSAL_POOL_OPTIONS, type ProcessorReceiver } from '../src/processor/receiver.js';
import { FakeProcessor, planCallbacks, processorKeyOf, sendCallbacks, type CallbackTally } from './fake-processor.js';
import { seededRandom } from './seed.js';
import { connectClient, connectWorker, keepApiKeyFresh, PLAINTEXT } from '../src/temporal-connection.js';

/** A dozen merchants per region, as the demo promises. */
const DEMO_MERCHANTS = 12;
/** Fixed seed: the same demo night every run, so a surprise can be reproduced. */
const DEMO_SEED = 20261130;
const PROGRESS_INTERVAL_MS = 250;
/** The share of the night's holds the processor calls back about. */
const CALLBACK_SHARE = 0.08;

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
  receiver: ProcessorReceiver;
  receiverUrl: string;
  sweepId?: string;
  result?: SweepResult;
  callbacks?: Promise<CallbackTally>;
  callbacksSent?: boolean;
}

async function progressLine(
  runs: readonly RegionRun[],
): Promise<{ line: string; done: boolean; allReleased: boolean; released: number }> {
  const parts: string[] = [];
  let done = true;
  let allReleased = true;
  let releasedTotal = 0;
  for (const run of runs) {
    // Every webhook of the night's holds (releases and processor events); an expired hold is done when released, or
    // captured or reversed by the processor first.
    const { rows } = await run.pool.query<{
      released: number;
      settled: number;
      rejected: number;
      delivered: number;
      quarantined: number;
      pending: number;
      unapplied: number;
    }>(
      `SELECT (SELECT count(*) FROM auth_holds h WHERE h.id LIKE $1::text AND h.state = 'released')::integer AS released,
              (SELECT count(*) FROM auth_holds h WHERE h.id LIKE $1::text AND h.state IN ('captured', 'reversed')
                                                   AND h.expires_at <= now())::integer AS settled,
              (SELECT count(*) FROM auth_holds h WHERE h.id LIKE $1::text AND h.state = 'rejected')::integer AS rejected,
              count(*) FILTER (WHERE d.status = 'delivered')::integer AS delivered,
              count(*) FILTER (WHERE d.status = 'quarantined')::integer AS quarantined,
              count(*) FILTER (WHERE d.status = 'pending')::integer AS pending,
              (SELECT count(*) FROM processor_events e WHERE e.hold_id LIKE $1::text AND e.applied_at IS NULL)::integer AS unapplied
         FROM webhook_deliveries d WHERE d.hold_id LIKE $1::text`,
      [`h\\_${run.nightId}\\_%`],
    );
    const { released, settled, rejected, delivered, quarantined, pending, unapplied } = rows[0]!;
    releasedTotal += released;
    if (released + settled < run.night.expiredValid) allReleased = false;
    if (pending > 0 || unapplied > 0) done = false;
    const total = run.night.expiredValid;
    const width = 24;
    const filled = total === 0 ? width : Math.round((released / total) * width);
    parts.push(
      `${run.config.region.toUpperCase()} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${released}/${total} released, ` +
        `${settled} captured/reversed first, ${rejected} rejected | webhooks ${delivered} delivered, ${pending} pending, ${quarantined} quarantined`,
    );
    if (!run.result) allReleased = false;
    if (!run.callbacksSent) done = false;
  }
  return { line: parts.join('   '), done: done && allReleased, allReleased, released: releasedTotal };
}

/** `once`: exit after the summary; `temporal`: the dev server or the production server (`--temporal cluster`). */
export async function runDemo({ once, temporal }: { once: boolean; temporal: TemporalBackend }): Promise<void> {
  const config = loadConfig();
  const dev = loadDevConfig();
  const startedAt = Date.now();
  // Errors only: every retried webhook attempt is a WARN, which would drown the demo's progress bar.
  Runtime.install({ logger: new DefaultLogger('ERROR'), shutdownSignals: [] });

  log(`hold-sweeper demo night: regions ${config.regions.map((r) => r.region).join(', ')}`);
  const stack = await startLocalStack(config, dev, { log, temporal });
  const merchants = new FakeMerchants();
  log(`Fake merchants on ${await merchants.start()} (they verify every signature)`);
  const nightId = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
  const workflowBundle = await bundleWorkflows();
  const runs: RegionRun[] = [];
  // The card processor's signing secret for this run: the receivers verify with it, the fake processor signs with it.
  const processorSecret = generateSigningSecret();
  const connections: { close(): Promise<void> }[] = [];
  const stopRefreshing: (() => void)[] = [];
  const refusalPools: pg.Pool[] = [];
  const chores: { stop(): void }[] = [];
  const workerRuns: Promise<void>[] = [];
  let shuttingDown = false;
  let stopApis = async () => undefined as void;

  const shutdown = async (code: number) => {
    if (shuttingDown) return;
    shuttingDown = true;
    log('\nShutting down: workers, then Temporal and Postgres...');
    await Promise.all(runs.map((r) => r.receiver.close()));
    for (const run of runs) if (run.worker.getState() === 'RUNNING') run.worker.shutdown();
    for (const chore of chores) chore.stop();
    await Promise.allSettled(workerRuns);
    await Promise.all(runs.map((r) => r.pool.end()));
    await Promise.all(refusalPools.map((p) => p.end()));
    await stopApis();
    await merchants.stop();
    for (const stop of stopRefreshing) stop();
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
    // The dev ring unless MERCHANT_SECRET_KEYS_<R> says otherwise: a `npm run worker` joining the demo opens with it
    // too.
    const sealer = localKeyRing(region.secretKeys);
    const applied = await migrate(pool, { region: region.region, sealer });
    if (applied.length) log(`${region.region.toUpperCase()} ledger: applied ${applied.join(', ')}`);
    const night = await seedDemoNight(pool, {
      region: region.region,
      nightId,
      holds: dev.demoHolds,
      merchants: DEMO_MERCHANTS,
      seed: DEMO_SEED,
      sealer,
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
    // A configured Temporal (TEMPORAL_ADDRESS, a temporal.toml profile) is reached with its TLS and key; the embedded
    // dev server in plaintext.
    const settings = region.temporalAddress ? (region.temporal ?? PLAINTEXT) : PLAINTEXT;
    const connection = await connectClient(settings, address);
    const nativeConnection = await connectWorker(settings, address);
    connections.push(connection, nativeConnection);
    stopRefreshing.push(
      keepApiKeyFresh(settings, [connection, nativeConnection], (err) => log(`Temporal API key: ${err.message}`)),
    );
    const client = new Client({ connection, namespace: region.namespace, dataConverter: dataConverterFor(region) });
    const version = {
      deploymentName: config.deployment.deploymentName,
      buildId: buildIdOf(workflowBundle, config.deployment.buildId),
    };
    const worker = await createRegionWorker({
      connection: nativeConnection,
      region,
      pool,
      sealer,
      workflowBundle,
      version,
      webhooks: config.webhooks,
      quarantineTimeoutMs: config.decisions.quarantineTimeoutMs,
    });
    workerRuns.push((await runRegionWorker(worker, client, config.deployment.setCurrent)).run);
    chores.push(
      startSecretErasure({ region: region.region, pool }),
      startEndpointChecks({
        region: region.region,
        pool,
        rules: config.webhooks,
        secrets: { region: region.region, sealer },
        client,
      }),
    );
    const schedule = await ensureSweepSchedule(client, region, config.sweep);
    log(
      `${region.region.toUpperCase()} schedule ${region.scheduleId}: ${schedule}, every ${config.sweep.intervalMs / 60_000} min, overlap SKIP`,
    );
    const outbox = await ensureOutboxSchedule(client, region, config.outbox);
    log(
      `${region.region.toUpperCase()} schedule ${outboxScheduleId(region)}: ${outbox}, every ${config.outbox.intervalMs / 60_000} min ` +
        `(pending webhooks nothing delivers, after ${config.outbox.graceMs / 60_000} min)`,
    );
    const refusalPool = createPool(stack.databaseUrl(region.region), REFUSAL_POOL_OPTIONS);
    refusalPools.push(refusalPool);
    const receiver = createProcessorReceiver({
      region: region.region,
      pool,
      refusalPool,
      client,
      taskQueue: region.taskQueue,
      processorKey: processorKeyOf(processorSecret),
      logger: silentLogger(),
    });
    const { port } = await receiver.listen(0);
    const receiverUrl = `http://127.0.0.1:${port}/processor/events`;
    log(`${region.region.toUpperCase()} processor-event receiver on ${receiverUrl}`);
    runs.push({ config: region, pool, client, night, nightId, worker, receiver, receiverUrl });
  }
  const apis = await startDemoApis(runs, config, dev.cacheDir);
  stopApis = apis.stop;

  for (const run of runs) {
    run.sweepId = await sweepNow(run.client, run.config);
    log(`${run.config.region.toUpperCase()} sweep started: ${run.sweepId}`);
    void run.client.workflow
      .getHandle<() => Promise<SweepResult>>(run.sweepId)
      .result()
      .then((result) => void (run.result = result));
  }
  const sweepStartedAt = Date.now();
  // Meanwhile the processor calls back about some of the holds: captures race their release.
  const random = seededRandom(DEMO_SEED);
  for (const run of runs) {
    const plan = planCallbacks(run.night.holds, CALLBACK_SHARE, random);
    run.callbacks = sendCallbacks(new FakeProcessor(run.receiverUrl, processorSecret), plan, 3_000, random);
    void run.callbacks.then(() => (run.callbacksSent = true));
  }

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
    const { rows } = await run.pool.query<{
      delivered: number;
      retried: number;
      quarantined: number;
      reasons: string | null;
      attempts: number;
    }>(
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
  for (const run of runs) {
    const tally = await run.callbacks!;
    const { rows } = await run.pool.query<{ outcome: string; n: number }>(
      'SELECT outcome, count(*)::integer AS n FROM processor_events WHERE hold_id LIKE $1::text GROUP BY 1 ORDER BY 2 DESC',
      [`h\\_${run.nightId}\\_%`],
    );
    log(
      `  ${run.config.region.toUpperCase()} processor events: ${tally.events} sent as ${tally.requests} requests (${tally.duplicates} duplicates, ` +
        `${tally.reordered} out of order), applied once each: ${rows.map((r) => `${r.n} ${r.outcome}`).join(', ')}`,
    );
  }
  log(
    `  ${released} holds released (ledger count) in ${elapsedS.toFixed(1)} s: ${(released / elapsedS).toFixed(1)} holds/s; ` +
      `every webhook delivered or quarantined after ${settledS.toFixed(1)} s`,
  );
  if (stack.uiUrl) {
    log(`\nTemporal Web UI: ${stack.uiUrl}`);
    for (const run of runs)
      log(`  ${run.config.region.toUpperCase()}: ${stack.uiUrl}/namespaces/${run.config.namespace}/workflows`);
  }
  log(`Total start-up and night: ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);

  for (const line of apis.howTo) log(line);
  for (const line of await apis.check()) log(line);
  if (once) return shutdown(0);
  log('\nWorkers keep running (the schedules sweep again on their interval). Ctrl-C to stop.');
  await Promise.all(workerRuns);
}

/**
 * The admin API and the merchant API of each region, as production runs them (docs/api.md), with a real OIDC provider
 * on loopback (dev/oidc-provider.ts): nothing external. Two operators' tokens (a day each) go to the cache directory:
 * `operator` (every role; dev mode has no four eyes) and `on-call` (viewer).
 */
async function startDemoApis(runs: readonly RegionRun[], config: Config, cacheDir: string) {
  const oidc = await startDevOidcProvider(
    [
      { clientId: 'operator', roles: ['viewer', 'operator', 'approver', 'merchant-admin'] },
      { clientId: 'on-call', roles: ['viewer'] },
    ],
    { tokenTtlSeconds: 86_400 },
  );
  const servers: FastifyInstance[] = [];
  // The demo tells its own story; the APIs' access lines would drown it, their warnings and errors would not.
  const apiLog = createLogger('demo-apis');
  apiLog.level = 'warn';
  const urls: { region: string; admin: string; merchant: string }[] = [];
  for (const run of runs) {
    // Each region's API has its own audience: a token for one region's API opens no other.
    const verifier = await createTokenVerifier({
      issuer: oidc.issuer,
      audience: adminAudience(run.config.region),
      rolesClaim: 'roles',
      clockToleranceSeconds: 30,
      maxTokenAgeSeconds: 86_400,
    });
    const secrets = { region: run.config.region, sealer: localKeyRing(run.config.secretKeys) };
    const merchant = await buildMerchantServer({
      region: run.config.region,
      pool: run.pool,
      resendsStartWithinMs: config.outbox.intervalMs,
      endpointRules: config.webhooks,
      logger: apiLog,
    });
    await merchant.listen({ host: '127.0.0.1', port: 0 });
    const merchantUrl = `http://127.0.0.1:${(merchant.server.address() as { port: number }).port}`;
    const admin = await buildAdminServer({
      context: {
        // The links `merchant portal-link` mints open this region's merchant API.
        region: { ...run.config, portalUrl: `${merchantUrl}/portal` },
        pool: run.pool,
        client: run.client,
        fourEyes: config.decisions.fourEyes,
        webhooks: config.webhooks,
        secrets,
      },
      verifier,
      logger: apiLog,
    });
    await admin.listen({ host: '127.0.0.1', port: 0 });
    servers.push(admin, merchant);
    const port = (app: FastifyInstance) => (app.server.address() as { port: number }).port;
    urls.push({
      region: run.config.region,
      admin: `http://127.0.0.1:${port(admin)}`,
      merchant: merchantUrl,
    });
  }
  const tokens = path.join(cacheDir, 'dev-tokens');
  await fs.mkdir(tokens, { recursive: true, mode: 0o700 });
  const tokenFile = (clientId: string, region: string) => path.join(tokens, `${clientId}-${region}.token`);
  for (const clientId of ['operator', 'on-call']) {
    for (const { config } of runs) {
      const token = await oidc.token(clientId, adminAudience(config.region));
      await fs.writeFile(tokenFile(clientId, config.region), token, { mode: 0o600 });
    }
  }
  return {
    /**
     * One call through the first region's admin API as the operator, as the printed commands make it: what it answered.
     */
    async check(): Promise<string[]> {
      const { region, admin } = urls[0]!;
      const ops = async (...args: string[]) => {
        const lines: string[] = [];
        await runOps([...args, '--json'], (l) => lines.push(l), {
          [`HOLD_SWEEPER_API_URL_${region.toUpperCase()}`]: admin,
          [`HOLD_SWEEPER_API_TOKEN_FILE_${region.toUpperCase()}`]: tokenFile('operator', region),
        });
        return JSON.parse(lines.join('\n')) as unknown;
      };
      const quarantined = (await ops('quarantine', 'list')) as unknown[];
      const merchantId = runs[0]!.night.merchants[0]!.id;
      const { link } = (await ops('merchant', 'portal-link', merchantId)) as { link: string };
      return [
        `  checked: npm run ops -- quarantine list through the ${region.toUpperCase()} admin API as operator: ${quarantined.length} quarantined`,
        `\nMerchant portal of ${merchantId}, for an hour (npm run ops -- merchant portal-link <merchant> mints one):`,
        `  ${link}`,
      ];
    },
    howTo: [
      `\nAdmin API (docs/api.md), tokens from a local OIDC provider (${oidc.issuer}), a day each:`,
      `  export ${urls.map((u) => `HOLD_SWEEPER_API_URL_${u.region.toUpperCase()}=${u.admin}`).join(' ')}`,
      `  export ${urls.map((u) => `HOLD_SWEEPER_API_TOKEN_FILE_${u.region.toUpperCase()}=${tokenFile('operator', u.region)}`).join(' ')}`,
      `  # one token per region's API; on-call-<region>.token: read only`,
      `  npm run ops -- quarantine list --region ${urls[0]!.region}`,
      `Merchant API: ${urls.map((u) => `${u.region.toUpperCase()} ${u.merchant}`).join(', ')} (a key: npm run ops -- merchant api-key create <merchant> --region <r>)`,
    ],
    async stop() {
      for (const server of servers) await server.close();
      await oidc.stop();
    },
  };
}
