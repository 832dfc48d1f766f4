/**
 * Shutdown and pools: a deploy drains (the worker's shutdown grace, and a container stop period longer than it), each
 * region's ledger pool has a connection for every activity slot and a bounded wait for one, and the merchant_id label
 * cannot multiply series by the number of merchants.
 */
import fs from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parse } from 'yaml';
import { freePort } from '../../dev/embedded-postgres.js';
import { startWorkerProcesses, workerEnvironment, type WorkerProcesses } from '../../dev/worker-processes.js';
import { parseDuration } from '../../src/config.js';
import { createPool, inTransaction } from '../../src/db/pool.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { ledgerPoolOptions, SHUTDOWN_GRACE_MS, TASK_SLOTS } from '../../src/workers/region-worker.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { seedNight } from '../support/ledger.js';
import { capturedLogger } from '../support/logs.js';
import { waitUntil } from '../support/wait.js';

/** The fixed slot counts a real worker compiled its options to (the SDK turns maxConcurrent* into a tuner). */
function slotsOf(options: unknown): { activities: number; localActivities: number } {
  const { tuner } = options as { tuner: Record<string, { type: string; numSlots: number }> };
  expect(tuner.activityTaskSlotSupplier!.type).toBe('fixed-size');
  return {
    activities: tuner.activityTaskSlotSupplier!.numSlots,
    localActivities: tuner.localActivityTaskSlotSupplier!.numSlots,
  };
}

/** Compose durations: `45s`, `1m30s`, `2m`. */
function composeDurationMs(raw: string): number {
  const parts = [...raw.matchAll(/(\d+)(ms|s|m|h)/g)];
  expect(parts.map((p) => p[0]).join(''), `a compose duration: ${raw}`).toBe(raw);
  return parts.reduce((sum, [, n, unit]) => sum + parseDuration('stop_grace_period', `${n}${unit}`), 0);
}

describe('a regional worker and its ledger pool', () => {
  let harness: Harness;
  let us: TestRegion;
  beforeAll(async () => {
    harness = await openHarness();
    us = await harness.region('us');
  });
  afterAll(async () => harness?.close());

  it('a connection lost while a transaction holds it between two statements fails that transaction, not the process', async () => {
    const { logger, lines } = capturedLogger();
    const pool = createPool(us.databaseUrl, { max: 2, logger });
    try {
      const outcome = inTransaction(pool, async (client) => {
        const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        // The server ends this backend (a restart, an admin) while no statement of ours runs on it: node-postgres
        // emits 'error' on the checked-out client, which with no listener would take the process down.
        const ended = new Promise((resolve) => client.once('end', resolve));
        await us.pool.query('SELECT pg_terminate_backend($1::integer)', [rows[0]!.pid]);
        await ended;
      });
      await expect(outcome).rejects.toThrow(/connection|terminat|not queryable/i);
      expect(lines).toContainEqual(
        expect.objectContaining({ level: 'warn', msg: 'checked-out database connection lost' }),
      );
      // The broken connection was discarded: the pool serves the next statement on a new one.
      expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await pool.end();
    }
  }, 20_000);

  it('the worker drains for the shutdown grace and its ledger pool has a connection for each activity and local-activity slot', async () => {
    const { worker } = await harness.startWorker(us);
    expect(worker.options.shutdownGraceTimeMs).toBe(SHUTDOWN_GRACE_MS);
    // Longer than one webhook attempt (15 s) and the 2 s in-activity wait for the merchant's budget.
    expect(SHUTDOWN_GRACE_MS).toBeGreaterThan(17_000);
    const slots = slotsOf(worker.options);
    expect(slots).toEqual({
      activities: TASK_SLOTS.maxConcurrentActivityTaskExecutions,
      localActivities: TASK_SLOTS.maxConcurrentLocalActivityExecutions,
    });
    // Every statement bounded, every lock wait too: below the ledger activities' 30 s start-to-close.
    expect(ledgerPoolOptions()).toEqual({
      max: slots.activities + slots.localActivities,
      connectionTimeoutMillis: 5_000,
      statement_timeout: 10_000,
      lock_timeout: 5_000,
    });

    // Tuned slots, tuned pool: the same numbers reach Worker.create and the pool.
    const tuning = { maxConcurrentActivityTaskExecutions: 7, maxConcurrentLocalActivityExecutions: 3 };
    const tuned = await harness.startWorker(await harness.region('us'), tuning);
    expect(slotsOf(tuned.worker.options)).toEqual({ activities: 7, localActivities: 3 });
    expect(ledgerPoolOptions(tuning).max).toBe(10);
  });
});

it('docker-compose.yml: each worker container gets longer to stop than the worker takes to drain', async () => {
  const compose = parse(await fs.readFile(new URL('../../docker-compose.yml', import.meta.url), 'utf8')) as {
    services: Record<string, { stop_grace_period?: string; command?: string[] }>;
  };
  for (const region of ['us', 'eu']) {
    const period = compose.services[`worker-${region}`]!.stop_grace_period;
    expect(
      period,
      `worker-${region} has a stop_grace_period (compose's default, 10 s, would kill sends mid-flight)`,
    ).toBeDefined();
    // The grace, then closing the pools and connections.
    expect(composeDurationMs(period!)).toBeGreaterThanOrEqual(SHUTDOWN_GRACE_MS + 10_000);
  }
  // The ledger server admits both regional workers' pools at their largest, twice over (a rolling deploy).
  const maxConnections = Number(/max_connections=(\d+)/.exec(compose.services['ledger-db']!.command!.join(' '))![1]);
  expect(maxConnections).toBeGreaterThanOrEqual(2 * 2 * ledgerPoolOptions().max);
});

describe('the production entry point with its defaults', () => {
  let harness: Harness;
  let us: TestRegion;
  let worker: WorkerProcesses;
  let metricsUrl: string;
  let merchantIds: string[];

  beforeAll(async () => {
    harness = await openHarness();
    us = await harness.region('us');
    const port = await freePort();
    metricsUrl = `http://127.0.0.1:${port}/metrics`;
    // Nothing about labels in the environment: the default is what production gets.
    worker = await startWorkerProcesses(
      1,
      workerEnvironment([us.config], harness.address, inject('workflowBundlePath')),
      {
        extraEnv: () => ({ METRICS_ADDRESS: `127.0.0.1:${port}` }),
      },
    );
    const night = await seedNight(us.pool, 'us', `${harness.id}c10`, { expired: 12, merchants: 6 }, harness.merchants);
    merchantIds = night.merchantIds;
    const m1 = merchantIds[1]!;
    harness.merchants.script(m1, {
      secrets: [night.secrets.get(m1)!],
      responses: [{ status: 429, retryAfter: '1' }, { status: 200 }],
    });
    await us.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-c10`,
      args: [{ region: 'us', releaseWaitMs: 60_000 }],
    });
    await waitUntil(
      async () =>
        (await us.pool.query(`SELECT count(*)::integer AS n FROM webhook_deliveries WHERE status = 'delivered'`))
          .rows[0].n === 12,
      'every webhook is delivered',
    );
  });
  afterAll(async () => {
    await worker?.stop();
    await harness?.close();
  });

  it('merchant_id is "all" on every delivery metric: six merchants, one series per status class', async () => {
    const { rows } = await us.pool.query<{ n: number }>('SELECT count(*)::integer AS n FROM delivery_attempts');
    const attemptLines = async () =>
      (await (await fetch(metricsUrl)).text())
        .split('\n')
        .filter((l) => l.startsWith('hold_sweeper_webhook_attempts_total{'));
    // Counters are exported as they are recorded; the last attempt may be a moment behind the ledger.
    await expect
      .poll(
        async () =>
          (await attemptLines()).reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0),
        { timeout: 10_000 },
      )
      .toBe(rows[0]!.n);
    expect((await attemptLines()).map((l) => /merchant_id="([^"]*)"/.exec(l)?.[1])).toEqual(['all', 'all']);
    const text = await (await fetch(metricsUrl)).text();
    const merchantLines = text.split('\n').filter((l) => l.startsWith('hold_sweeper_') && l.includes('merchant_id='));
    expect(merchantLines.length).toBeGreaterThanOrEqual(3);
    for (const line of merchantLines) expect(line).toContain('merchant_id="all"');
    for (const id of merchantIds) expect(text).not.toContain(id);
  });

  it('the worker says at start-up how many ledger connections it may open, how long it waits for one, and how long it drains', () => {
    const running = worker
      .output()
      .join('')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.msg === 'worker running');
    expect(running).toMatchObject({
      region: 'us',
      merchantLabel: 'all',
      ledgerPoolMax: ledgerPoolOptions().max,
      ledgerConnectionTimeoutMs: 5_000,
      shutdownGraceMs: SHUTDOWN_GRACE_MS,
    });
  });
});
