/**
 * Operations: a real worker process's Prometheus endpoint and JSON logs, checked against the ledger. The deployment
 * files (docker-compose.yml and what it mounts) have their own checks: test/unit/compose.test.ts.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../../dev/embedded-postgres.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { pauseSends, resumeSends } from '../../src/operations/send-pauses.js';
import { recordReconciliation } from '../../src/sql/outbox.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { backdate, seedNight, type Night } from '../support/ledger.js';
import { waitUntil } from '../support/wait.js';
import { startWorkerProcesses, workerEnvironment, type WorkerProcesses } from '../../dev/worker-processes.js';
import { startReceiverProcess } from '../../dev/receiver-process.js';
import { generateSigningSecret } from '../../src/delivery/standard-webhooks.js';
import { buildMerchantServer } from '../../src/api/merchant-server.js';
import { silentLogger } from '../../src/observability/logger.js';
import { Registry, serveMetrics } from '../../src/observability/metrics-listener.js';

function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const values = text
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .filter((line) => wanted.every((w) => line.includes(w)))
    .map((line) => Number(line.slice(line.lastIndexOf(' ') + 1)));
  return values.length ? values.reduce((a, b) => a + b, 0) : undefined;
}

describe('a worker process with its metrics endpoint and JSON logs', () => {
  let harness: Harness;
  let us: TestRegion;
  let worker: WorkerProcesses;
  let metricsUrl: string;
  let night: Night;
  const scrape = async () => (await fetch(metricsUrl)).text();
  /** How old the single timestamp `at` that `sql` selects is now, by the ledger's clock, in seconds. */
  const ledgerAge = async (sql: string) =>
    (await us.pool.query<{ s: number }>(`SELECT extract(epoch FROM now() - at)::float8 AS s FROM (${sql}) t`)).rows[0]!
      .s;

  beforeAll(async () => {
    harness = await openHarness();
    us = await harness.region('us');
    const port = await freePort();
    metricsUrl = `http://127.0.0.1:${port}/metrics`;
    worker = await startWorkerProcesses(
      1,
      workerEnvironment([us.config], harness.address, inject('workflowBundlePath')),
      {
        // Per-merchant labels on: the assertions below name merchants (the default, "all", is shutdown-and-pools.test.ts's).
        extraEnv: () => ({
          METRICS_ADDRESS: `127.0.0.1:${port}`,
          METRICS_GAUGE_INTERVAL: '200ms',
          METRICS_MERCHANT_LABEL: 'per-merchant',
        }),
      },
    );
    // A small night with faults: merchant 0 rejects (400), merchant 1 answers 429 once, merchant 2 hangs.
    night = await seedNight(us.pool, 'us', `${harness.id}o`, { expired: 12, merchants: 4 }, harness.merchants);
    const [m0, m1, m2, m3] = night.merchantIds as [string, string, string, string];
    const secrets = (m: string) => [night.secrets.get(m)!];
    harness.merchants.script(m0, { secrets: secrets(m0), responses: [{ status: 400 }] });
    harness.merchants.script(m1, {
      secrets: secrets(m1),
      responses: [{ status: 429, retryAfter: '1' }, { status: 200 }],
    });
    harness.merchants.script(m2, { secrets: secrets(m2), responses: [{ hang: true }] });
    // Merchant 3 publishes one request per 2 s: its three webhooks, swept together, wait for its budget.
    await us.pool.query('UPDATE merchants SET rate_per_second = 0.5, burst = 0 WHERE id = $1', [m3]);
    // The longest attempt a policy may set (30 s): the hanging merchant's webhooks stay pending through the file.
    await us.pool.query(`UPDATE merchants SET delivery_policy = '{"attemptTimeoutMs": 30000}' WHERE id = $1`, [m2]);
    await us.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-obs`,
      args: [{ region: 'us', releaseWaitMs: 60_000 }],
    });
    // Settled except for the hanging merchant's three, which stay pending.
    await waitUntil(
      async () =>
        (await us.pool.query(`SELECT count(*)::integer AS n FROM webhook_deliveries WHERE status <> 'pending'`)).rows[0]
          .n === 9,
      "every webhook but the hanging merchant's is delivered or quarantined",
    );
  });
  afterAll(async () => {
    await worker?.stop();
    await harness?.close();
  });

  it('exports SDK and product metrics consistent with the ledger', async () => {
    const { rows } = await us.pool.query<{ reason: string; n: number }>(
      `SELECT quarantine_reason AS reason, count(*)::integer AS n FROM webhook_deliveries WHERE status = 'quarantined' GROUP BY 1`,
    );
    expect(rows).toEqual([{ reason: 'rejected', n: 3 }]);
    // Gauges are re-read every 200 ms here: wait for the reading that follows the last change.
    await expect
      .poll(async () => metricValue(await scrape(), 'hold_sweeper_undelivered_webhooks', { region: 'us' }), {
        timeout: 10_000,
      })
      .toBe(3);
    const text = await scrape();
    expect(metricValue(text, 'hold_sweeper_quarantine_depth', { region: 'us', reason: 'rejected' })).toBe(3);
    expect(metricValue(text, 'hold_sweeper_quarantine_depth', { region: 'us', reason: 'exhausted' })).toBe(0);
    const attempts = await us.pool.query<{ status_code: number; n: number }>(
      'SELECT status_code, count(*)::integer AS n FROM delivery_attempts GROUP BY 1',
    );
    const byCode = new Map(attempts.rows.map((r) => [r.status_code, r.n]));
    expect(metricValue(text, 'hold_sweeper_webhook_attempts_total', { status_class: '2xx' })).toBe(byCode.get(200));
    expect(metricValue(text, 'hold_sweeper_webhook_attempts_total', { status_class: '4xx' })).toBe(byCode.get(400));
    expect(
      metricValue(text, 'hold_sweeper_webhook_attempts_total', {
        status_class: '429',
        merchant_id: night.merchantIds[1]!,
      }),
    ).toBe(byCode.get(429));
    expect(metricValue(text, 'hold_sweeper_retry_after_honoured_total', { merchant_id: night.merchantIds[1]! })).toBe(
      byCode.get(429),
    );
    expect(metricValue(text, 'hold_sweeper_oldest_unreleased_hold_age_seconds', { region: 'us' })).toBe(0);
    // A wait names the bucket that was empty and the limit that emptied it.
    const m3 = night.merchantIds[3]!;
    expect(
      metricValue(text, 'hold_sweeper_throttle_waits_total', {
        merchant_id: m3,
        bucket: `merchant:${m3}`,
        limit: 'rate',
      }),
    ).toBeGreaterThanOrEqual(1);
    // The SDK's own metrics share the endpoint.
    expect(text).toMatch(/^temporal_\w+/m);
    // Prometheus's conventions: every counter ends in _total (the SDK's too), latencies are histograms in seconds.
    const counters = [...text.matchAll(/^# TYPE (\S+) counter$/gm)].map((m) => m[1]!);
    expect(counters.length).toBeGreaterThan(5);
    expect(counters.filter((c) => !c.endsWith('_total'))).toEqual([]);
    // (The SDK's own temporal_local_activity_total comes out as ..._total_total: its name, not ours.)
    expect(counters.filter((c) => c.startsWith('hold_sweeper_') && c.endsWith('_total_total'))).toEqual([]);
    expect(text).toMatch(/^temporal_workflow_task_schedule_to_start_latency_seconds_bucket\{/m);
    expect(metricValue(text, 'hold_sweeper_webhook_attempt_duration_seconds_count')).toBe(
      attempts.rows.reduce((n, r) => n + r.n, 0),
    );
    const released = (
      await us.pool.query<{ n: number }>(`SELECT count(*)::integer AS n FROM auth_holds WHERE state = 'released'`)
    ).rows[0]!.n;
    expect(metricValue(text, 'hold_sweeper_release_lag_seconds_count', { region: 'us' })).toBe(released);
    expect(text).toMatch(/^hold_sweeper_release_lag_seconds_bucket\{[^}]*le="2700"/m);
    // The SLO's measure: every release's webhook delivered on its first run, from its release to the 2xx.
    const delivered = (
      await us.pool.query<{ n: number }>(
        `SELECT count(*)::integer AS n FROM webhook_deliveries WHERE status = 'delivered' AND event_type = 'hold.released'`,
      )
    ).rows[0]!.n;
    expect(delivered).toBe(6);
    expect(metricValue(text, 'hold_sweeper_release_to_delivered_seconds_count')).toBe(delivered);
    expect(text).toMatch(/^hold_sweeper_release_to_delivered_seconds_bucket\{[^}]*le="3600"/m);
  });

  it('a quarantine older than QUARANTINE_PAGE_AFTER (1 h by default) is counted where its page looks, with the oldest age', async () => {
    const quarantined = (
      await us.pool.query<{ webhook_id: string }>(
        `SELECT webhook_id FROM webhook_deliveries WHERE status = 'quarantined' ORDER BY webhook_id`,
      )
    ).rows.map((r) => r.webhook_id);
    expect(quarantined).toHaveLength(3);
    // Fresh quarantines page nobody yet.
    await expect
      .poll(async () => metricValue(await scrape(), 'hold_sweeper_quarantines_past_page_age', { region: 'us' }), {
        timeout: 10_000,
      })
      .toBe(0);
    expect(metricValue(await scrape(), 'hold_sweeper_oldest_quarantine_age_seconds', { region: 'us' })).toBeLessThan(
      3600,
    );
    // Two of them quarantined two hours ago, as if nobody had looked since (the third stays fresh).
    await us.pool.query(
      `UPDATE webhook_deliveries SET quarantined_at = now() - interval '2 hours' WHERE webhook_id = ANY($1::text[])`,
      [quarantined.slice(0, 2)],
    );
    await expect
      .poll(async () => metricValue(await scrape(), 'hold_sweeper_quarantines_past_page_age', { region: 'us' }), {
        timeout: 10_000,
      })
      .toBe(2);
    const text = await scrape();
    expect(metricValue(text, 'hold_sweeper_quarantine_page_after_seconds', { region: 'us' })).toBe(3600);
    const oldest = metricValue(text, 'hold_sweeper_oldest_quarantine_age_seconds', { region: 'us' })!;
    // The two hours, as old as the ledger's clock had them when the worker read it: no older than they are now.
    expect(oldest).toBeGreaterThanOrEqual(7200);
    expect(oldest).toBeLessThanOrEqual(
      await ledgerAge(`SELECT min(quarantined_at) AS at FROM webhook_deliveries WHERE status = 'quarantined'`),
    );
    expect(metricValue(text, 'hold_sweeper_quarantine_depth', { region: 'us', reason: 'rejected' })).toBe(3);
  });

  it('processor events: the oldest unapplied event and open ledger reviews are exported where their alerts look', async () => {
    // As a receiver records them: one event 40 minutes old stuck behind a missing sequence (no workflow here), one
    // applied and flagged for review. (Refusals are the receiver's own counter: processor-events.test.ts.)
    await us.pool.query(
      `INSERT INTO processor_events (event_id, hold_id, sequence, event_type, amount_minor, currency, occurred_at, body, body_sha256, received_at)
       VALUES ('evt_obs_gap', 'h_obs', 2, 'hold.captured', 10, 'USD', now(), '{}', 'x', now() - interval '40 minutes')`,
    );
    await us.pool.query(
      `INSERT INTO processor_events (event_id, hold_id, sequence, event_type, amount_minor, currency, occurred_at, body, body_sha256, applied_at, outcome)
       VALUES ('evt_obs_late', 'h_obs', 1, 'hold.captured', 10, 'USD', now(), '{}', 'y', now(), 'ignored')`,
    );
    await us.pool.query(
      `INSERT INTO ledger_reviews (event_id, hold_id, reason) VALUES ('evt_obs_late', 'h_obs', 'hold.captured for an unknown hold')`,
    );
    // Both from one scrape: a refresh may land between the inserts above, and only a later one sees all three rows.
    await expect
      .poll(
        async () => {
          const text = await scrape();
          return {
            unappliedPastForty:
              metricValue(text, 'hold_sweeper_oldest_unapplied_processor_event_age_seconds', { region: 'us' })! >
              40 * 60 - 5,
            openReviews: metricValue(text, 'hold_sweeper_open_ledger_reviews', { region: 'us' }),
          };
        },
        { timeout: 10_000 },
      )
      .toEqual({ unappliedPastForty: true, openReviews: 1 });
  });

  it('a failing workflow task is counted where the WorkflowTaskFailures alert looks (temporal_workflow_task_execution_failed_total)', async () => {
    // A workflow type this worker does not have fails every workflow task, as a non-deterministic deploy would.
    const handle = await us.client.workflow.start('workflowFromAnotherRelease', {
      taskQueue: us.config.taskQueue,
      workflowId: `wtf-${harness.id}`,
      args: [],
    });
    try {
      await expect
        .poll(
          async () =>
            metricValue(await scrape(), 'temporal_workflow_task_execution_failed_total', {
              workflow_type: 'workflowFromAnotherRelease',
            }),
          {
            timeout: 30_000,
          },
        )
        .toBeGreaterThanOrEqual(1);
    } finally {
      await handle.terminate('test done');
    }
  });

  it('with deliveries stuck behind a hanging merchant, the oldest-undelivered age grows while depth stays flat', async () => {
    const first = await scrape();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await expect
      .poll(
        async () =>
          metricValue(await scrape(), 'hold_sweeper_oldest_undelivered_webhook_age_seconds', { region: 'us' })! -
          metricValue(first, 'hold_sweeper_oldest_undelivered_webhook_age_seconds', { region: 'us' })!,
        { timeout: 5_000 },
      )
      .toBeGreaterThan(1);
    expect(metricValue(await scrape(), 'hold_sweeper_undelivered_webhooks', { region: 'us' })).toBe(
      metricValue(first, 'hold_sweeper_undelivered_webhooks', { region: 'us' }),
    );
    // Its requests hang in flight: the oldest one's age is exported, and grows.
    await expect
      .poll(
        async () => metricValue(await scrape(), 'hold_sweeper_oldest_in_flight_attempt_age_seconds', { region: 'us' }),
        { timeout: 5_000 },
      )
      .toBeGreaterThan(1);
  });

  it('an attempt whose request left and got no answer in time is counted as outcome unknown, as the ledger has it', async () => {
    // The hanging merchant's first attempts time out after their 30 s.
    const timedOut = async () =>
      (
        await us.pool.query<{ n: number }>(
          `SELECT count(*)::integer AS n FROM delivery_attempts WHERE error_class = 'AttemptTimeout'`,
        )
      ).rows[0]!.n;
    // Counted as the attempt is noted, recorded just after: read both until they agree.
    let text = '';
    await waitUntil(
      async () => {
        text = await scrape();
        const ledger = await timedOut();
        return ledger >= 1 && metricValue(text, 'hold_sweeper_webhook_outcome_unknown_total') === ledger;
      },
      'a timed-out attempt counted as in the ledger',
      60_000,
    );
    // Every one of them is the hanging merchant's.
    expect(
      metricValue(text, 'hold_sweeper_webhook_outcome_unknown_total', { merchant_id: night.merchantIds[2]! }),
    ).toBe(metricValue(text, 'hold_sweeper_webhook_outcome_unknown_total'));
  }, 90_000);

  it('no completed sweep: the worker exports the age of the region’s last completed sweep, its batch, and the interval the alert compares it with', async () => {
    // The sweep in beforeAll completed and recorded itself in sweep_runs moments ago; the workers run with a 24 h
    // interval.
    await expect
      .poll(
        async () => metricValue(await scrape(), 'hold_sweeper_last_completed_sweep_age_seconds', { region: 'us' }),
        { timeout: 10_000 },
      )
      .toBeLessThan(600);
    expect(metricValue(await scrape(), 'hold_sweeper_sweep_interval_seconds', { region: 'us' })).toBe(86_400);
    // Its batch, by outcome, as its sweep_runs row says.
    const { rows } = await us.pool.query(
      'SELECT found, started, already_started, rejected FROM sweep_runs ORDER BY finished_at DESC LIMIT 1',
    );
    const batch = await scrape();
    expect(rows[0].found).toBeGreaterThan(0);
    const outcomes = { found: 'found', started: 'started', already_started: 'already_started', refused: 'rejected' };
    for (const [outcome, column] of Object.entries(outcomes))
      expect(metricValue(batch, 'hold_sweeper_last_sweep_holds', { region: 'us', outcome }), outcome).toBe(
        rows[0][column],
      );

    // Backdated, as if the schedule had been blocked for three days: past 2 × the interval, the alert's threshold.
    await backdate(
      us.pool,
      `UPDATE sweep_runs SET finished_at = finished_at - interval '3 days', cutoff = cutoff - interval '3 days'`,
    );
    await expect
      .poll(
        async () => metricValue(await scrape(), 'hold_sweeper_last_completed_sweep_age_seconds', { region: 'us' }),
        { timeout: 10_000 },
      )
      .toBeGreaterThan(3 * 86_400);
    const text = await scrape();
    const age = metricValue(text, 'hold_sweeper_last_completed_sweep_age_seconds', { region: 'us' })!;
    expect(age).toBeLessThanOrEqual(await ledgerAge('SELECT max(finished_at) AS at FROM sweep_runs'));
    expect(age).toBeGreaterThan(2 * metricValue(text, 'hold_sweeper_sweep_interval_seconds', { region: 'us' })!);

    // A ledger no sweep ever completed on counts from its creation (its first migration), not from zero.
    // Polled for the backdated creation's age itself: a refresh between the two statements reads the ledger's real
    // age, minutes, and one before them the three days above.
    await us.pool.query('DELETE FROM sweep_runs');
    await us.pool.query(`UPDATE schema_migrations SET applied_at = now() - interval '2 hours'`);
    await expect
      .poll(
        async () => metricValue(await scrape(), 'hold_sweeper_last_completed_sweep_age_seconds', { region: 'us' }),
        { timeout: 10_000 },
      )
      .toSatisfy((age: number | undefined) => age !== undefined && age >= 7200 && age < 86_400);
  });

  it('what the last outbox reconcile could not fix is exported, whichever worker ran it (the ledger holds it)', async () => {
    await expect
      .poll(async () => metricValue(await scrape(), 'hold_sweeper_outbox_unfixable_webhooks', { region: 'us' }), {
        timeout: 10_000,
      })
      .toBe(0);
    // As the reconciler's activity records a run (src/sql/outbox.ts): two it could not start again, then one that
    // could.
    const details = {
      restarted: [],
      unfixable: [
        { webhookId: 'wh_a', why: 'completed' },
        { webhookId: 'wh_b', why: 'completed' },
      ],
      truncated: false,
    };
    await recordReconciliation(us.pool, {
      graceMs: 600_000,
      checked: 5,
      running: 3,
      restarted: 0,
      unfixable: 2,
      details,
    });
    await expect
      .poll(async () => metricValue(await scrape(), 'hold_sweeper_outbox_unfixable_webhooks', { region: 'us' }), {
        timeout: 10_000,
      })
      .toBe(2);
    await recordReconciliation(us.pool, {
      graceMs: 600_000,
      checked: 3,
      running: 3,
      restarted: 0,
      unfixable: 0,
      details: { ...details, unfixable: [] },
    });
    await expect
      .poll(async () => metricValue(await scrape(), 'hold_sweeper_outbox_unfixable_webhooks', { region: 'us' }), {
        timeout: 10_000,
      })
      .toBe(0);
  });

  it('a pause of every send in the region (ops sends pause) is exported while it lasts', async () => {
    const ops = { region: us.config, pool: us.pool, client: us.client };
    await expect
      .poll(async () => metricValue(await scrape(), 'hold_sweeper_sends_paused', { region: 'us' }), { timeout: 10_000 })
      .toBe(0);
    await pauseSends(ops, 'Alice', 'observability test');
    await expect
      .poll(async () => metricValue(await scrape(), 'hold_sweeper_sends_paused', { region: 'us' }), { timeout: 10_000 })
      .toBe(1);
    await resumeSends(ops, 'Bob', 'observability test over');
    await expect
      .poll(async () => metricValue(await scrape(), 'hold_sweeper_sends_paused', { region: 'us' }), { timeout: 10_000 })
      .toBe(0);
  });

  it('requests per webhook over the last 15 minutes (first policy runs) are exported beside the ratio that alerts', async () => {
    const { rows } = await us.pool.query<{ requests: number; webhooks: number }>(
      `SELECT count(*)::integer AS requests, count(DISTINCT webhook_id)::integer AS webhooks
         FROM delivery_attempts WHERE started_at > now() - interval '15 minutes' AND policy_run = 1`,
    );
    const { requests, webhooks } = rows[0]!;
    // This night's faulty merchants (503s, a 429) took more than one request for some webhooks.
    expect(requests).toBeGreaterThan(webhooks);
    await expect
      .poll(async () => metricValue(await scrape(), 'hold_sweeper_webhook_requests_15m', { region: 'us' }), {
        timeout: 10_000,
      })
      .toBe(requests);
    const metrics = await scrape();
    expect(metricValue(metrics, 'hold_sweeper_webhooks_sent_15m', { region: 'us' })).toBe(webhooks);
    expect(metricValue(metrics, 'hold_sweeper_requests_per_webhook', { region: 'us' })).toBeCloseTo(
      requests / webhooks,
      6,
    );
    expect(metricValue(metrics, 'hold_sweeper_requests_per_webhook_alert_above', { region: 'us' })).toBe(1.5);
  });

  it('every process serves its own CPU, memory and event-loop lag beside what it counts, labelled with its service', async () => {
    /** `url`'s scrape once it shows the process's own metrics under `service`. */
    const processMetrics = async (url: string, service: string) => {
      // The event-loop lag is measured at a scrape and shown at the next.
      await expect
        .poll(async () => metricValue(await (await fetch(url)).text(), 'nodejs_eventloop_lag_seconds', { service }))
        .toBeGreaterThanOrEqual(0);
      const text = await (await fetch(url)).text();
      expect(metricValue(text, 'process_cpu_seconds_total', { service }), service).toBeGreaterThan(0);
      expect(metricValue(text, 'process_resident_memory_bytes', { service }), service).toBeGreaterThan(0);
      expect(metricValue(text, 'nodejs_heap_size_used_bytes', { service }), service).toBeGreaterThan(0);
      // Its series come with the first garbage collection: a young process may have had none.
      expect(text, service).toContain('# TYPE nodejs_gc_duration_seconds histogram');
      return text;
    };
    // The worker: the SDK's exporter on the same endpoint, its slots per worker type of the region's task queue.
    const fromWorker = await processMetrics(metricsUrl, 'worker');
    for (const worker_type of ['WorkflowWorker', 'ActivityWorker']) {
      const slots = { worker_type, task_queue: us.config.taskQueue };
      expect(metricValue(fromWorker, 'temporal_worker_task_slots_available', slots), worker_type).toBeGreaterThan(0);
      expect(metricValue(fromWorker, 'temporal_worker_task_slots_used', slots), worker_type).toBeGreaterThanOrEqual(0);
    }
    expect(metricValue(fromWorker, 'hold_sweeper_undelivered_webhooks', { region: 'us' })).toBe(3);

    // The receiver, its own process: one unsigned callback refused, counted where it was.
    const receiver = await startReceiverProcess({
      region: us.config,
      databaseUrl: us.databaseUrl,
      temporalAddress: harness.address,
      secret: generateSigningSecret(),
    });
    try {
      const refused = await fetch(receiver.url, { method: 'POST', body: '{}' });
      expect(refused.status).toBeGreaterThanOrEqual(400);
      const text = await processMetrics(receiver.metricsUrl, 'receiver');
      expect(metricValue(text, 'hold_sweeper_processor_requests_refused_total', { region: 'us' })).toBe(1);
      expect(text).toContain('# TYPE hold_sweeper_processor_requests_refused_total counter');
    } finally {
      await receiver.stop();
    }

    // The merchant API (the admin API serves its metrics the same way, src/api/serve.ts): a call with no key counted.
    const registry = new Registry();
    const app = await buildMerchantServer({ region: 'us', pool: us.pool, metrics: registry, logger: silentLogger() });
    const served = await serveMetrics(registry, { host: '127.0.0.1', port: 0 }, 'merchant-api');
    try {
      await app.listen({ host: '127.0.0.1', port: 0 });
      const port = (app.server.address() as { port: number }).port;
      expect((await fetch(`http://127.0.0.1:${port}/v1/webhooks`)).status).toBe(401);
      const text = await processMetrics(served.url, 'merchant-api');
      expect(metricValue(text, 'hold_sweeper_api_requests_refused_total', { api: 'merchant', status: '401' })).toBe(1);
    } finally {
      await app.close();
      await served.close();
    }
  });

  it('log lines for one hold join by hold id from the sweep to its terminal state, with no secret in them', async () => {
    const lines = worker
      .output()
      .join('')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const delivered = (
      await us.pool.query<{ hold_id: string }>(
        `SELECT hold_id FROM webhook_deliveries WHERE status = 'delivered' LIMIT 1`,
      )
    ).rows[0]!.hold_id;
    const story = lines.filter((l) => l.holdId === delivered).map((l) => l.msg);
    expect(story).toEqual(
      expect.arrayContaining(['hold workflow started', 'hold release', 'webhook attempt', 'webhook delivered']),
    );
    // Each fact once: the release is the activity's line, not the workflow's too.
    expect(story.filter((msg) => msg === 'hold release')).toHaveLength(1);
    const ofOne = lines.filter((l) => l.holdId === delivered);
    expect(ofOne.find((l) => l.msg === 'webhook attempt')).toMatchObject({
      region: 'us',
      webhookId: expect.stringMatching(/^wh_/),
      attemptNumber: 1,
      workflowId: expect.any(String),
    });
    const quarantinedHold = (
      await us.pool.query<{ hold_id: string }>(
        `SELECT hold_id FROM webhook_deliveries WHERE status = 'quarantined' LIMIT 1`,
      )
    ).rows[0]!.hold_id;
    expect(lines.filter((l) => l.holdId === quarantinedHold).map((l) => l.msg)).toContain(
      'webhook quarantined: waiting for a human',
    );
    const all = worker.output().join('');
    for (const secret of night.secrets.values()) expect(all).not.toContain(secret.replace(/^whsec_/, ''));
  });
});
