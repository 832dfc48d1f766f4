/**
 * The processor-event receiver under load: how fast it acknowledges callbacks (the processor's timeout is what
 * matters, typically 10-30 s) with a healthy ledger and with a slow one, and how fast the events then apply.
 *
 * Real services: an embedded PostgreSQL, a Temporal dev server, one regional worker and the receiver in this
 * process, the fake merchants (the events' webhooks are delivered too). Two phases of `--holds` active holds, two
 * events each (an increment, then a capture), shuffled, a fifth of them duplicated, sent by `--senders` concurrent
 * processor connections:
 *   healthy: nothing else on the ledger;
 *   slow:    every one of the phase's hold rows is locked FOR UPDATE by another transaction for `--lock-seconds`
 *            (a long ledger transaction: no event of them can apply until it ends), and a CPU-heavy query runs beside.
 * Then a flood: `--flood` unsigned requests (an attacker without the secret, its own process at the lowest CPU
 * priority: bench/flood.ts) in 20 bursts at 1,000 a second over 16 connections, and one signed event at a time timed
 * from request to acknowledgement, interleaved: a round without the flood, then one during a burst of it, so that
 * whatever else the machine does falls on both alike. Its figure is the two latencies side by side (the receiver's
 * test holds only what the flood must never do: add a row, or keep a signed event from being recorded).
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import type pg from 'pg';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { loadDevConfig } from '../dev/dev-config.js';
import { freePort, startEmbeddedPostgres } from '../dev/embedded-postgres.js';
import { FakeMerchants } from '../dev/fake-merchants.js';
import { FakeProcessor, processorKeyOf, type ProcessorEvent } from '../dev/fake-processor.js';
import { localRegions } from '../dev/local-regions.js';
import { insertAccounts, insertHolds, insertMerchants, seededRandom, type HoldSeed } from '../dev/seed.js';
import { startDevServer } from '../dev/temporal-dev-server.js';
import { DEFAULT_DEPLOYMENT_NAME } from '../src/config.js';
import { migrate } from '../src/db/migrate.js';
import { generateSigningSecret } from '../src/delivery/standard-webhooks.js';
import { createPool } from '../src/db/pool.js';
import { localKeyRing } from '../src/delivery/secret-box.js';
import { silentLogger } from '../src/observability/logger.js';
import { createProcessorReceiver, REFUSAL_POOL_OPTIONS } from '../src/processor/receiver.js';
import { startFlood } from './flood.js';
import { buildIdOf } from '../src/workers/deployment.js';
import { bundleWorkflows, createRegionWorker, runRegionWorker } from '../src/workers/region-worker.js';

const FLOOD_ROUNDS = 20;
const FLOOD_SIGNED_PER_ROUND = 30;
const log = (line: string) => console.log(line);

export async function runReceiverBench(options: {
  holdsPerPhase: number;
  senders: number;
  lockSeconds: number;
  floodRequests: number;
}): Promise<void> {
  const { holdsPerPhase, senders, lockSeconds, floodRequests } = options;
  Runtime.install({ logger: new DefaultLogger('ERROR'), shutdownSignals: [] });
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-receiver-'));
  await fs.chmod(dataDir, 0o777);
  const postgres = await startEmbeddedPostgres({
    dataDir: path.join(dataDir, 'pg'),
    databases: ['receiver_us', 'receiver_eu'],
    durable: true,
  });
  const server = await startDevServer({
    namespaces: ['hold-sweeper-us', 'hold-sweeper-eu'],
    dataDir: path.join(dataDir, 'temporal'),
    cacheDir: loadDevConfig().cacheDir,
    explicitCliPath: process.env.TEMPORAL_CLI_PATH,
    port: await freePort(),
  });
  const connection = await Connection.connect({ address: server.address });
  const nativeConnection = await NativeConnection.connect({ address: server.address });
  const [us] = localRegions(connection, server.address, {
    databaseUrl: (region) => postgres.urlFor(`receiver_${region}`),
    taskQueuePrefix: 'receiver-bench',
    schedulePrefix: 'receiver-bench',
    poolMax: 40,
  });
  const region = us!;
  const merchants = new FakeMerchants();
  await merchants.start();
  const secret = generateSigningSecret();
  const random = seededRandom(20261201);

  const sealer = localKeyRing(region.secretKeys);
  try {
    await migrate(region.pool, { region: 'us', sealer });
    const merchantIds = Array.from({ length: 20 }, (_, i) => `m_${i}`);
    await insertMerchants(
      region.pool,
      { region: 'us', sealer },
      merchantIds.map((id) => {
        const merchantSecret = generateSigningSecret();
        merchants.script(id, { secrets: [merchantSecret], responses: [{ status: 200 }] });
        return {
          id,
          endpointUrl: merchants.endpointFor(id),
          signingSecret: merchantSecret,
          ratePerSecond: 200,
          burst: 20,
        };
      }),
    );
    await insertAccounts(
      region.pool,
      Array.from({ length: 200 }, (_, i) => ({ id: `a_${i}`, currency: 'USD', availableMinor: 10_000_000 })),
    );
    const holdsOf = (phase: string, count = holdsPerPhase): HoldSeed[] =>
      Array.from({ length: count }, (_, i) => ({
        id: `h_${phase}_${i}`,
        accountId: `a_${i % 200}`,
        merchantId: merchantIds[i % merchantIds.length]!,
        amountMinor: 1_000 + (i % 5_000),
        currency: 'USD',
        expiresInSeconds: 86_400,
      }));
    const phases = { healthy: holdsOf('healthy'), slow: holdsOf('slow') };
    const floodHolds = holdsOf('flood', 2 * FLOOD_ROUNDS * FLOOD_SIGNED_PER_ROUND);
    await insertHolds(region.pool, [...phases.healthy, ...phases.slow, ...floodHolds]);

    const workflowBundle = await bundleWorkflows();
    const worker = await createRegionWorker({
      connection: nativeConnection,
      region,
      pool: region.pool,
      sealer,
      workflowBundle,
      version: { deploymentName: DEFAULT_DEPLOYMENT_NAME, buildId: buildIdOf(workflowBundle) },
      webhooks: { allowInsecureHttp: true, allowPrivateAddresses: true, trustedNetworks: [] },
    });
    const running = await runRegionWorker(worker, region.client, 'always');
    const refusalPool = createPool(postgres.urlFor('receiver_us'), REFUSAL_POOL_OPTIONS);
    const receiver = createProcessorReceiver({
      region: 'us',
      pool: region.pool,
      refusalPool,
      client: region.client,
      taskQueue: region.taskQueue,
      processorKey: processorKeyOf(secret),
      logger: silentLogger(),
    });
    const { port } = await receiver.listen(0);
    const processor = new FakeProcessor(`http://127.0.0.1:${port}/processor/events`, secret);

    const results: Record<string, unknown> = {};
    for (const [phase, holds] of Object.entries(phases)) {
      const events: ProcessorEvent[] = holds.flatMap((h) => [
        {
          eventId: `evt_${h.id}_1`,
          holdId: h.id,
          sequence: 1,
          type: 'hold.incremented',
          amountMinor: 100,
          currency: 'USD',
        },
        {
          eventId: `evt_${h.id}_2`,
          holdId: h.id,
          sequence: 2,
          type: 'hold.captured',
          amountMinor: 500,
          currency: 'USD',
        },
      ]);
      const requests = [...events, ...events.filter(() => random() < 0.2)]
        .map((e) => ({ e, key: random() }))
        .sort((a, b) => a.key - b.key);
      let blocker: pg.PoolClient | undefined;
      let burner: Promise<unknown> | undefined;
      if (phase === 'slow') {
        blocker = await region.pool.connect();
        await blocker.query('BEGIN');
        await blocker.query(`SELECT 1 FROM auth_holds WHERE id LIKE 'h\\_slow\\_%' FOR UPDATE`);
        burner = region.pool
          .query(`SELECT count(*) FROM generate_series(1, 1e9::bigint) g WHERE g % 7 = 3`)
          .catch(() => undefined);
      }
      const latencies: number[] = [];
      const statuses = new Map<number, number>();
      const started = performance.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: senders }, async () => {
          while (next < requests.length) {
            const { e } = requests[next++]!;
            const t0 = performance.now();
            const answer = await processor.send(e, { maxAttempts: 1 });
            latencies.push(performance.now() - t0);
            statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
          }
        }),
      );
      const sentMs = performance.now() - started;
      const appliedDuringLock = (
        await region.pool.query<{ n: number }>(
          `SELECT count(*)::integer AS n FROM processor_events WHERE hold_id LIKE $1 AND applied_at IS NOT NULL`,
          [`h\\_${phase}\\_%`],
        )
      ).rows[0]!.n;
      if (blocker) {
        const held = lockSeconds * 1000 - sentMs;
        if (held > 0) await new Promise((resolve) => setTimeout(resolve, held));
        await region.pool.query(
          `SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%generate_series(1, 1e9%' AND pid <> pg_backend_pid()`,
        );
        await burner;
        await blocker.query('ROLLBACK');
        blocker.release();
      }
      const released = performance.now();
      for (;;) {
        const { rows } = await region.pool.query<{ n: number }>(
          `SELECT count(*)::integer AS n FROM processor_events WHERE hold_id LIKE $1 AND applied_at IS NULL`,
          [`h\\_${phase}\\_%`],
        );
        if (rows[0]!.n === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      const appliedMs = performance.now() - (blocker ? released : started);
      latencies.sort((a, b) => a - b);
      const q = (p: number) =>
        Math.round(latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]! * 10) / 10;
      const summary = {
        events: events.length,
        requests: requests.length,
        statuses: Object.fromEntries(statuses),
        ackMs: { p50: q(0.5), p95: q(0.95), p99: q(0.99), max: q(1) },
        acknowledgedPerSecond: Math.round(requests.length / (sentMs / 1000)),
        appliedWhileLedgerBusy: phase === 'slow' ? appliedDuringLock : undefined,
        applySeconds: Math.round(appliedMs / 100) / 10,
        appliedPerSecond: Math.round(events.length / (appliedMs / 1000)),
      };
      results[phase] = summary;
      log(
        `${phase}: ${summary.requests} requests (${summary.events} events + duplicates) by ${senders} senders, answered ${JSON.stringify(summary.statuses)}; ` +
          `ack latency p50 ${summary.ackMs.p50} ms, p95 ${summary.ackMs.p95} ms, p99 ${summary.ackMs.p99} ms, max ${summary.ackMs.max} ms; ` +
          `${summary.acknowledgedPerSecond} acknowledged/s; ` +
          (phase === 'slow'
            ? `applied while the ledger held the rows: ${appliedDuringLock}; all applied ${summary.applySeconds} s after it let go`
            : `all applied in ${summary.applySeconds} s`) +
          ` (${summary.appliedPerSecond} events/s)`,
      );
    }
    results.flood = await floodPhase(processor, `http://127.0.0.1:${port}/processor/events`, floodHolds, floodRequests);
    const reproduce = `npm run bench:receiver -- --holds ${holdsPerPhase} --senders ${senders} --lock-seconds ${lockSeconds} --flood ${floodRequests}`;
    log(`reproduce: ${reproduce}`);
    await fs.mkdir('bench/results', { recursive: true });
    const file = `bench/results/receiver-${new Date().toISOString().slice(0, 10)}.json`;
    await fs.writeFile(
      file,
      `${JSON.stringify({ command: reproduce, cpus: os.cpus().length, cpu: os.cpus()[0]?.model, ...results }, null, 2)}\n`,
    );
    log(`written: ${file}`);
    await receiver.close();
    await refusalPool.end();
    worker.shutdown();
    await running.run;
  } finally {
    await merchants.stop();
    await region.pool.end();
    await connection.close();
    await nativeConnection.close();
    await server.stop();
    await postgres.stop();
    await fs.rm(dataDir, { recursive: true, force: true });
  }
}

/**
 * Signed events acknowledged without the flood and during it, interleaved round by round; each timed from request to
 * acknowledgement. A flood that held signed events back (a connection, the event loop, the ledger pool) would put
 * its requests in front of them.
 */
async function floodPhase(processor: FakeProcessor, url: string, holds: readonly HoldSeed[], floodRequests: number) {
  const next = holds.values();
  const acknowledge = async (count: number, until?: () => boolean) => {
    const ms: number[] = [];
    for (let i = 0; i < count && !until?.(); i++) {
      const hold = next.next().value!;
      const event = {
        eventId: `evt_${hold.id}_1`,
        holdId: hold.id,
        sequence: 1,
        type: 'hold.incremented' as const,
        amountMinor: 1,
        currency: 'USD',
      };
      const started = performance.now();
      const { status } = await processor.post(event.eventId, FakeProcessor.body(event));
      ms.push(performance.now() - started);
      if (status !== 202) throw new Error(`a signed event was answered ${status} during the flood phase`);
    }
    return ms;
  };
  const attacker = startFlood(url, 16, 1_000);
  const quiet: number[] = [];
  const loud: number[] = [];
  const statuses: Record<string, number> = {};
  let floodMs = 0;
  try {
    for (let round = 0; round < FLOOD_ROUNDS; round++) {
      quiet.push(...(await acknowledge(FLOOD_SIGNED_PER_ROUND)));
      let flooding = true;
      const burst = attacker.burst(Math.round(floodRequests / FLOOD_ROUNDS)).finally(() => (flooding = false));
      loud.push(...(await acknowledge(FLOOD_SIGNED_PER_ROUND, () => !flooding)));
      const result = await burst;
      floodMs += result.ms;
      for (const [status, n] of Object.entries(result.statuses)) statuses[status] = (statuses[status] ?? 0) + n;
    }
  } finally {
    await attacker.stop();
  }
  const at = (values: number[], p: number) => {
    const sorted = [...values].sort((a, b) => a - b);
    return Math.round(sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! * 10) / 10;
  };
  const summary = {
    unsigned: statuses,
    floodMs,
    withoutFloodAckMs: { samples: quiet.length, p50: at(quiet, 50), p99: at(quiet, 99) },
    duringFloodAckMs: { samples: loud.length, p50: at(loud, 50), p99: at(loud, 99) },
  };
  log(
    `flood: ${floodRequests} unsigned requests in ${FLOOD_ROUNDS} bursts (${floodMs} ms flooding, 16 connections, ` +
      `1,000/s), answered ${JSON.stringify(statuses)}; signed acks without: p50 ${summary.withoutFloodAckMs.p50} ms, ` +
      `p99 ${summary.withoutFloodAckMs.p99} ms (${quiet.length}); during: p50 ${summary.duringFloodAckMs.p50} ms, ` +
      `p99 ${summary.duringFloodAckMs.p99} ms (${loud.length})`,
  );
  return summary;
}
