/**
 * Operations: a real worker process's Prometheus endpoint and JSON logs, checked against the ledger; and the
 * deployment files (docker-compose, Prometheus, alert rules, .env.example), which cannot run here, checked for
 * structure against the code they configure.
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parse } from 'yaml';
import {
  CONFIG_VARIABLES,
  ENTRY_POINTS,
  loadApiConfig,
  loadConfig,
  loadMerchantApiConfig,
  loadProcessorConfig,
} from '../../src/config.js';
import { SERVICE_ROLES } from '../../src/db/roles.js';
import { DEV_CONFIG_VARIABLES } from '../../dev/dev-config.js';
import { writeComposeCredentials } from '../../dev/credentials.js';
import { freePort } from '../../dev/embedded-postgres.js';
import { TEMPORAL_DEPLOY_DIR, temporalServerVersion, temporalUiVersion } from '../../dev/temporal-cluster.js';
import { startCodecServer } from '../../src/codec/codec-server.js';
import { SEARCH_ATTRIBUTES } from '../../src/contracts/search-attributes.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { pauseSends, resumeSends } from '../../src/operations/send-pauses.js';
import { recordReconciliation } from '../../src/sql/outbox.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { seedNight, type Night } from '../support/ledger.js';
import { waitUntil } from '../support/wait.js';
import { startWorkerProcesses, workerEnvironment, type WorkerProcesses } from '../../dev/worker-processes.js';

const REPO = path.resolve(import.meta.dirname, '../..');
/** The role a postgres:// URL connects as (compose's ${PASSWORD} left as it is). */
const roleIn = (url: string) => decodeURIComponent(/^postgres(?:ql)?:\/\/([^:@/]+)/.exec(url)![1]!);
/** The `permissions` claim of a JWT (its payload, not checked: the cluster checks it). */
const permissionsIn = (token: string) =>
  (JSON.parse(Buffer.from(token.trim().split('.')[1]!, 'base64url').toString()) as { permissions: string[] })
    .permissions;
const read = (file: string) => fs.readFile(new URL(`../../${file}`, import.meta.url), 'utf8');
/**
 * The source `npm run build` compiles `dist/<X>.js` from (tsconfig.build.json: rootDir src, outDir dist); undefined for
 * any other path.
 */
function sourceOf(compiled: string): string | undefined {
  const module = /^dist\/(.+)\.js$/.exec(compiled)?.[1];
  return module === undefined ? undefined : `src/${module}.ts`;
}

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
    const [m0, m1, m2] = night.merchantIds as [string, string, string];
    const secrets = (m: string) => [night.secrets.get(m)!];
    harness.merchants.script(m0, { secrets: secrets(m0), responses: [{ status: 400 }] });
    harness.merchants.script(m1, {
      secrets: secrets(m1),
      responses: [{ status: 429, retryAfter: '1' }, { status: 200 }],
    });
    harness.merchants.script(m2, { secrets: secrets(m2), responses: [{ hang: true }] });
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
    await expect
      .poll(
        async () =>
          metricValue(await scrape(), 'hold_sweeper_oldest_unapplied_processor_event_age_seconds', { region: 'us' }),
        {
          timeout: 10_000,
        },
      )
      .toBeGreaterThan(40 * 60 - 5);
    const text = await scrape();
    expect(metricValue(text, 'hold_sweeper_open_ledger_reviews', { region: 'us' })).toBe(1);
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

  it('no completed sweep: the worker exports the age of the region’s last completed sweep and the interval the alert compares it with', async () => {
    // The sweep in beforeAll completed and recorded itself in sweep_runs moments ago; the workers run with a 24 h
    // interval.
    await expect
      .poll(
        async () => metricValue(await scrape(), 'hold_sweeper_last_completed_sweep_age_seconds', { region: 'us' }),
        { timeout: 10_000 },
      )
      .toBeLessThan(600);
    expect(metricValue(await scrape(), 'hold_sweeper_sweep_interval_seconds', { region: 'us' })).toBe(86_400);

    // Backdated, as if the schedule had been blocked for three days: past 2 × the interval, the alert's threshold.
    await us.pool.query(
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
    await us.pool.query('DELETE FROM sweep_runs');
    await us.pool.query(`UPDATE schema_migrations SET applied_at = now() - interval '2 hours'`);
    await expect
      .poll(
        async () => metricValue(await scrape(), 'hold_sweeper_last_completed_sweep_age_seconds', { region: 'us' }),
        { timeout: 10_000 },
      )
      .toBeLessThan(86_400);
    expect(
      metricValue(await scrape(), 'hold_sweeper_last_completed_sweep_age_seconds', { region: 'us' }),
    ).toBeGreaterThanOrEqual(7200);
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
      expect.arrayContaining([
        'hold workflow started',
        'hold released',
        'hold release',
        'webhook attempt',
        'webhook delivered',
      ]),
    );
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

describe('deployment files', () => {
  it('docker-compose.yml: every dependency exists, the worker image runs a real entry point with variables the config loader reads', async () => {
    const compose = parse(await read('docker-compose.yml'), { merge: true }) as {
      services: Record<string, Record<string, unknown>>;
    };
    const services = compose.services;
    // The files `npm run credentials` writes, where compose mounts them: each service's /run/secrets/temporal/* is
    // read from here, so its configuration loads as it would in its container (certificates and all).
    const secrets = await fs.mkdtemp(path.join(os.tmpdir(), 'hs-compose-secrets-'));
    await writeComposeCredentials(secrets, 1);
    const inContainer = (service: Record<string, unknown>, env: Record<string, string>) => {
      const mounts = new Map(
        ((service.volumes as string[] | undefined) ?? [])
          .map((v) => v.split(':'))
          .map(([host, container]) => [container!, host!] as const),
      );
      return Object.fromEntries(
        Object.entries(env).map(([k, v]) => {
          if (!v.startsWith('/run/secrets/')) return [k, v];
          const host = mounts.get(v);
          expect(host, `${k}=${v} is mounted`).toBeDefined();
          return [k, path.join(secrets, path.relative('./deploy/secrets', host!))];
        }),
      );
    };
    for (const [name, service] of Object.entries(services)) {
      expect(service.image ?? service.build, `${name} has an image or a build`).toBeTruthy();
      if (service.build && (service.command as string[] | undefined)?.[0] === 'node') {
        // Compiled JavaScript the build makes from a source that exists.
        const command = (service.command as string[]).at(-1)!;
        expect(sourceOf(command), `${name} runs ${command}`).toBeDefined();
        await expect(
          fs.access(path.join(REPO, sourceOf(command)!)),
          `${name} runs ${command}`,
        ).resolves.toBeUndefined();
      }
      for (const dependency of Object.keys((service.depends_on as Record<string, unknown>) ?? {})) {
        expect(Object.keys(services), `${name} depends on ${dependency}`).toContain(dependency);
      }
    }
    // The image itself (its stages, its CMD) has a test of its own below.
    const dockerfile = await read('Dockerfile');
    for (const region of ['us', 'eu'] as const) {
      const worker = services[`worker-${region}`]!;
      // The image's build id comes from the operator's BUILD_ID (the git revision), baked in as WORKER_BUILD_ID.
      expect(worker.build).toEqual({ context: '.', args: { BUILD_ID: '${BUILD_ID:-}' } });
      expect(dockerfile).toMatch(/^ARG BUILD_ID=$/m);
      expect(dockerfile).toMatch(/^ENV WORKER_BUILD_ID=\$\{BUILD_ID\}$/m);
      // Compose substitutes ${VAR:?message} from the operator's environment (stand in a real key) and ${VAR:-default}.
      const key = `k1:${Buffer.alloc(32, 7).toString('base64')}`;
      const env = inContainer(
        worker,
        Object.fromEntries(
          Object.entries(worker.environment as Record<string, string>).map(([k, v]) => [
            k,
            v.replace(/^\$\{[A-Z_]+:\?[^}]*\}$/, key).replace(/^\$\{[A-Z_]+:-([^}]*)\}$/, '$1'),
          ]),
        ),
      );
      for (const variable of Object.keys(env)) expect(CONFIG_VARIABLES as readonly string[]).toContain(variable);
      const config = loadConfig(env, ENTRY_POINTS.worker);
      expect(config).toMatchObject({ mode: 'production', regions: [{ region, namespace: `hold-sweeper-${region}` }] });
      expect(roleIn(config.regions[0]!.databaseUrl!)).toBe(SERVICE_ROLES.worker);
      // Locked: the cluster's CA and name, the worker's own certificate, and a token file granting its region's write.
      expect(config.regions[0]!.temporal).toMatchObject({
        address: 'temporal:7233',
        tls: { serverNameOverride: 'temporal.hold.internal' },
      });
      const tls = config.regions[0]!.temporal!.tls as { clientCertPair?: { crt: Buffer } };
      expect(new X509Certificate(tls.clientCertPair!.crt).subject).toContain(`worker-${region}.clients.hold.internal`);
      expect(permissionsIn(await fs.readFile(config.regions[0]!.temporal!.apiKeyFile!, 'utf8'))).toEqual([
        `hold-sweeper-${region}:write`,
      ]);
      expect(config.observability.metricsAddress).toBe('0.0.0.0:9464');
      expect(config.deployment).toEqual({ deploymentName: 'hold-sweeper', buildId: undefined, setCurrent: 'always' });

      // The region's processor-event receiver: the same image, its own entry point, a configuration both loaders
      // accept.
      const receiver = services[`receiver-${region}`]!;
      expect(receiver.command).toEqual(['node', 'dist/bin/receiver.js']);
      const secret = `whsec_${Buffer.alloc(24, 9).toString('base64')}`;
      const receiverEnv = inContainer(
        receiver,
        Object.fromEntries(
          Object.entries(receiver.environment as Record<string, string>).map(([k, v]) => [
            k,
            v.replace(/^\$\{PROCESSOR_[A-Z_]+:\?[^}]*\}$/, secret).replace(/^\$\{[A-Z_]+:\?[^}]*\}$/, key),
          ]),
        ),
      );
      for (const variable of Object.keys(receiverEnv))
        expect(CONFIG_VARIABLES as readonly string[]).toContain(variable);
      const receiverConfig = loadConfig(receiverEnv, ENTRY_POINTS.receiver);
      expect(receiverConfig.regions.map((r) => r.region)).toEqual([region]);
      // Its own role, and no key to the merchants' secrets (it may not read them).
      expect(roleIn(receiverConfig.regions[0]!.databaseUrl!)).toBe(SERVICE_ROLES.receiver);
      expect(Object.keys(receiverEnv).filter((k) => k.startsWith('MERCHANT_SECRET_KEYS'))).toEqual([]);
      expect(loadProcessorConfig(receiverEnv, region, receiverConfig.mode)).toMatchObject({
        host: '0.0.0.0',
        port: 8090,
        behindTlsProxy: true,
        metrics: { host: '0.0.0.0', port: 9465 },
        gapWaitMs: 15 * 60_000,
      });
      expect(permissionsIn(await fs.readFile(receiverConfig.regions[0]!.temporal!.apiKeyFile!, 'utf8'))).toEqual([
        `hold-sweeper-${region}:write`,
      ]);

      // The region's admin API: the operators' role and the region's keys, its own Temporal identity, an https issuer.
      const substituted = (service: Record<string, unknown>) =>
        inContainer(
          service,
          Object.fromEntries(
            Object.entries(service.environment as Record<string, string>).map(([k, v]) => [
              k,
              v
                .replace(/^\$\{API_OIDC_ISSUER:\?[^}]*\}$/, 'https://login.example.com')
                .replace(/^\$\{[A-Z_]+:\?[^}]*\}$/, key),
            ]),
          ),
        );
      const apiService = services[`api-${region}`]!;
      expect(apiService.command).toEqual(['node', 'dist/bin/api.js']);
      const apiEnv = substituted(apiService);
      for (const variable of Object.keys(apiEnv)) expect(CONFIG_VARIABLES as readonly string[]).toContain(variable);
      const apiConfig = loadConfig(apiEnv, ENTRY_POINTS.api);
      expect(roleIn(apiConfig.regions[0]!.databaseUrl!)).toBe(SERVICE_ROLES.ops);
      expect(loadApiConfig(apiEnv, apiConfig)).toMatchObject({
        region,
        port: 8443,
        issuer: 'https://login.example.com',
        audience: `hold-sweeper-admin-${region}`,
        behindTlsProxy: true,
        metrics: { host: '0.0.0.0', port: 9466 },
      });
      expect(permissionsIn(await fs.readFile(apiConfig.regions[0]!.temporal!.apiKeyFile!, 'utf8'))).toEqual([
        `hold-sweeper-${region}:write`,
      ]);
      // The region's merchant API: its own role, and nothing else: no Temporal, no payload or merchant-secret key.
      const merchantApi = services[`merchant-api-${region}`]!;
      expect(merchantApi.command).toEqual(['node', 'dist/bin/merchant-api.js']);
      const merchantEnv = substituted(merchantApi);
      for (const variable of Object.keys(merchantEnv))
        expect(CONFIG_VARIABLES as readonly string[]).toContain(variable);
      const merchantConfig = loadConfig(merchantEnv, ENTRY_POINTS['merchant-api']);
      expect(roleIn(merchantConfig.regions[0]!.databaseUrl!)).toBe(SERVICE_ROLES.merchantApi);
      expect(Object.keys(merchantEnv).filter((k) => /^(TEMPORAL_|PAYLOAD_KEYS|MERCHANT_SECRET_KEYS)/.test(k))).toEqual(
        [],
      );
      expect(loadMerchantApiConfig(merchantEnv, merchantConfig)).toMatchObject({
        region,
        port: 8444,
        behindTlsProxy: true,
        metrics: { host: '0.0.0.0', port: 9467 },
      });
    }
    // The codec endpoint calls neither the ledger nor Temporal: it holds none of their credentials, nor the
    // merchant-secret key ring (src/bin/codec-server.ts).
    const codec = services.codec!;
    const codecEnv = inContainer(
      codec,
      Object.fromEntries(
        Object.entries(codec.environment as Record<string, string>).map(([k, v]) => [
          k,
          v
            .replace(/^\$\{API_OIDC_ISSUER:\?[^}]*\}$/, 'https://login.example.com')
            .replace(/^\$\{[A-Z_]+:\?[^}]*\}$/, 'x'),
        ]),
      ),
    );
    expect(() =>
      loadConfig(
        {
          ...codecEnv,
          PAYLOAD_KEYS_US: `k1:${Buffer.alloc(32, 1).toString('base64')}`,
          PAYLOAD_KEYS_EU: `k1:${Buffer.alloc(32, 2).toString('base64')}`,
        },
        ENTRY_POINTS.codec,
      ),
    ).not.toThrow();
    expect(
      Object.keys(codec.environment as Record<string, string>).filter((k) =>
        /^(MERCHANT_SECRET_KEYS|DATABASE_URL|TEMPORAL_)/.test(k),
      ),
    ).toEqual([]);
    // The migrator owns the schema (ledger-init.sh makes it the databases' owner) and the operators' CLI has its own
    // role; nothing of the product connects as the database's superuser.
    for (const [name, role] of [
      ['ledger-migrate', SERVICE_ROLES.migrator],
      ['ops', SERVICE_ROLES.ops],
    ] as const) {
      const urls = Object.entries(services[name]!.environment as Record<string, string>).filter(([k]) =>
        k.startsWith('DATABASE_URL_'),
      );
      expect(
        urls.map(([, url]) => roleIn(url)),
        name,
      ).toEqual([role, role]);
    }
    expect(services['ledger-migrate']!.command).toEqual(['node', 'dist/bin/migrate.js']);
    for (const [name, service] of Object.entries(services)) {
      for (const [variable, value] of Object.entries(
        (service.environment as Record<string, string> | undefined) ?? {},
      )) {
        if (variable.startsWith('DATABASE_URL_'))
          expect(Object.values(SERVICE_ROLES), `${name} ${variable}`).toContain(roleIn(value));
      }
    }
    const init = await read('deploy/ledger-init.sh');
    for (const role of Object.values(SERVICE_ROLES)) expect(init).toContain(`CREATE ROLE ${role} LOGIN`);
    expect(init).toContain('OWNER hold_sweeper_migrator');
    expect(services['ledger-db']!.volumes).toContain(
      './deploy/ledger-init.sh:/docker-entrypoint-initdb.d/ledger-init.sh:ro',
    );
    // Nothing is published beyond this machine: whatever reaches a port from outside is decided in front of it.
    for (const [name, service] of Object.entries(services)) {
      for (const port of (service.ports as string[] | undefined) ?? [])
        expect(port, name).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
    }
    await fs.rm(secrets, { recursive: true, force: true });
  });

  it('docker-compose.yml runs the Temporal that dev/temporal-cluster.ts runs: same version, server build, config files and setup scripts, locked', async () => {
    const compose = parse(await read('docker-compose.yml'), { merge: true }) as {
      services: Record<string, Record<string, unknown>>;
    };
    const services = compose.services;
    const version = await temporalServerVersion();
    // The server is deploy/temporal/server built against that version, on the official image of that version.
    expect(services.temporal!.build).toBe('./deploy/temporal/server');
    expect(services.temporal!.image).toBe(`hold-sweeper-temporal:${version}`);
    expect(await read('deploy/temporal/server/Dockerfile')).toMatch(
      new RegExp(`^FROM temporalio/server:${version.replace(/\./g, '\\.')}$`, 'm'),
    );
    expect(await read('deploy/temporal/server/go.mod')).toContain(`go.temporal.io/server v${version}\n`);
    // Locked as the cluster test's cluster is: its TLS files, the JWKS and audience, the internal-frontend, no
    // --allow-no-auth.
    const command = JSON.stringify(services.temporal!.command);
    expect(command).toContain('hold-sweeper-temporal');
    for (const service of ['frontend', 'internal-frontend', 'history', 'matching', 'worker'])
      expect(command).toContain(`--service ${service} `.trimEnd());
    expect(command).not.toContain('allow-no-auth');
    expect(Object.keys(services.temporal!.environment as object)).toEqual(
      expect.arrayContaining([
        'TEMPORAL_TLS_CA_FILE',
        'TEMPORAL_TLS_FRONTEND_CERT_FILE',
        'TEMPORAL_TLS_INTERNODE_CERT_FILE',
        'TEMPORAL_TLS_SERVER_NAME',
        'TEMPORAL_AUTH_JWKS_URL',
        'TEMPORAL_AUTH_AUDIENCE',
      ]),
    );
    expect(services['temporal-schema']!.image).toBe(`temporalio/admin-tools:${version}`);
    expect(services['temporal-setup']!.image).toBe(`temporalio/admin-tools:${version}`);
    expect(services['temporal-ui']!.image).toBe(`temporalio/ui:${await temporalUiVersion()}`);
    // The files the cluster backend starts the server with are the files compose mounts.
    expect(path.resolve(REPO, 'deploy/temporal')).toBe(TEMPORAL_DEPLOY_DIR);
    expect(services.temporal!.volumes).toEqual(
      expect.arrayContaining([
        './deploy/temporal/config.yaml:/etc/temporal/config/docker.yaml:ro',
        './deploy/temporal/dynamicconfig.yaml:/etc/temporal/config/dynamicconfig/docker.yaml:ro',
      ]),
    );
    expect(JSON.stringify(services.temporal!.command)).toContain('--env docker');
    for (const [service, script] of [
      ['temporal-schema', 'setup-schema.sh'],
      ['temporal-setup', 'setup-namespaces.sh'],
    ] as const) {
      expect((services[service]!.volumes as string[])[0]).toBe('./deploy/temporal:/etc/hold-sweeper/temporal:ro');
      expect(services[service]!.entrypoint).toEqual(['sh', `/etc/hold-sweeper/temporal/${script}`]);
    }
    // The setup script registers exactly the product's namespaces and search attributes.
    const setup = await read('deploy/temporal/setup-namespaces.sh');
    expect(/SEARCH_ATTRIBUTES="\$\{SEARCH_ATTRIBUTES:-([^}]*)\}"/.exec(setup)![1]!.split(' ')).toEqual(
      SEARCH_ATTRIBUTES.map((a) => a.name),
    );
    const namespaces = loadConfig({}).regions.map((r) => r.namespace);
    expect(/NAMESPACES="\$\{NAMESPACES:-([^}]*)\}"/.exec(setup)![1]!.split(' ')).toEqual(namespaces);
  });

  it('docker-compose.yml and the Dockerfile: the image is built in a stage of its own and runs compiled JavaScript on Node 24', async () => {
    // The build compiles src/ alone into dist/ (what sourceOf maps back), with tsx; the image runs without it.
    expect(JSON.parse(await read('tsconfig.build.json'))).toEqual({
      extends: './tsconfig.json',
      compilerOptions: { rootDir: 'src', outDir: 'dist' },
      include: ['src/**/*.ts'],
    });
    const pkg = JSON.parse(await read('package.json')) as {
      scripts: Record<string, string>;
      dependencies: Record<string, string>;
    };
    expect(pkg.scripts.build).toBe('tsx dev/bin/build.ts');
    expect(Object.keys(pkg.dependencies)).not.toContain('tsx');

    const dockerfile = await read('Dockerfile');
    const stages: string[][] = [];
    for (const line of dockerfile.split('\n').filter((l) => l.trim() && !l.startsWith('#'))) {
      if (line.startsWith('FROM ')) stages.push([]);
      stages.at(-1)!.push(line);
    }
    expect(stages.map((stage) => stage[0])).toEqual([
      'FROM node:24-bookworm-slim AS build',
      'FROM node:24-bookworm-slim',
    ]);
    const [build, runtime] = stages as [string[], string[]];
    expect(build).toEqual(
      expect.arrayContaining(['WORKDIR /app', 'RUN npm ci --no-audit --no-fund', 'RUN npm run build']),
    );
    expect(runtime).toEqual(
      expect.arrayContaining([
        'WORKDIR /app',
        'ENV NODE_ENV=production HOLD_SWEEPER_MODE=production',
        'COPY --from=build /app/dist ./dist',
        // Where dev/bin/build.ts writes the bundle.
        'ENV WORKFLOW_BUNDLE_PATH=/app/dist/workflow-bundle.js',
        'USER node',
      ]),
    );
    expect(runtime.some((line) => /^RUN npm ci --omit=dev /.test(line))).toBe(true);
    expect(runtime.join('\n')).not.toContain('tsx');
    const cmd = JSON.parse(/^CMD (\[.*\])$/.exec(runtime.at(-1)!)![1]!) as string[];
    expect(cmd).toEqual(['node', 'dist/bin/worker.js']);
    await expect(fs.access(path.join(REPO, sourceOf(cmd[1]!)!))).resolves.toBeUndefined();
    // The build context is what the build stage copies and nothing else (no deploy/secrets/, no .env).
    const admitted = (await read('.dockerignore'))
      .split('\n')
      .filter((line) => line.startsWith('!'))
      .map((line) => line.slice(1).replace(/\/$/, ''));
    const copied = build.filter((line) => line.startsWith('COPY ')).flatMap((line) => line.split(' ').slice(1, -1));
    expect(copied.sort()).toEqual(admitted.sort());
  });

  it('docker-compose.yml hardens every service: read-only, no capabilities but the named ones, no new privileges, memory and process limits, health checks', async () => {
    const compose = parse(await read('docker-compose.yml'), { merge: true }) as {
      services: Record<string, Record<string, unknown>>;
      volumes: Record<string, unknown>;
    };
    const services = compose.services;
    // PostgreSQL's entrypoint gives its directories to postgres as root, then becomes postgres (said in the file).
    const postgresCaps = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'SETGID', 'SETUID'];
    const capsAdded: Record<string, string[]> = { 'temporal-db': postgresCaps, 'ledger-db': postgresCaps };
    // They exit when done, and what depends on them waits for that: no health check.
    const oneShots = ['temporal-schema', 'temporal-setup', 'ledger-migrate'];
    // Run by a person when needed (`docker compose run --rm ops ...`), never by `up`.
    const tools = ['ops'];
    // Its image has nothing to run a check with (Perses's binary alone: no shell, no HTTP client), and nothing waits on
    // it.
    const unchecked = ['perses'];
    for (const [name, service] of Object.entries(services)) {
      expect(service.read_only, `${name} is read-only`).toBe(true);
      expect(service.tmpfs, `${name} writes temporary files to a tmpfs`).toContain('/tmp');
      expect(service.cap_drop, name).toEqual(['ALL']);
      expect(service.cap_add, name).toEqual(capsAdded[name]);
      expect(service.security_opt, name).toEqual(['no-new-privileges:true']);
      expect(service.mem_limit, name).toMatch(/^\d+[mg]$/);
      expect(service.pids_limit, name).toBeGreaterThan(0);
      for (const volume of (service.volumes as string[] | undefined) ?? []) {
        const source = volume.split(':')[0]!;
        if (!source.startsWith('.') && !source.startsWith('/'))
          expect(Object.keys(compose.volumes), `${name} mounts volume ${source}`).toContain(source);
      }
      const check = (service.healthcheck as { test?: string[] } | undefined)?.test;
      if (oneShots.includes(name) || tools.includes(name)) {
        expect(service.restart, name).toBe('no');
        expect(check, name).toBeUndefined();
        if (tools.includes(name)) expect(service.profiles, name).toEqual(['ops']);
      } else if (unchecked.includes(name)) {
        expect(check, name).toBeUndefined();
        expect(
          Object.values(services).filter((s) => Object.keys((s.depends_on as object | undefined) ?? {}).includes(name)),
          `nothing waits on ${name}`,
        ).toEqual([]);
      } else {
        expect(check?.[0], `${name} has a health check`).toMatch(/^CMD(-SHELL)?$/);
      }
      // This repository's image (the Dockerfile): compiled JavaScript (its CMD, or another entry point of dist/), never
      // tsx.
      if (service.build === '.' || (service.build as { context?: string } | undefined)?.context === '.') {
        expect(JSON.stringify(service), name).not.toContain('tsx');
        // That its source exists: the first docker-compose test.
        if (service.command)
          expect(service.command, name).toEqual(['node', expect.stringMatching(/^dist\/bin\/.+\.js$/)]);
      }
    }
    for (const oneShot of oneShots) {
      const dependents = Object.values(services).filter(
        (s) =>
          (s.depends_on as Record<string, { condition: string }> | undefined)?.[oneShot]?.condition ===
          'service_completed_successfully',
      );
      expect(dependents.length, `something waits for ${oneShot} to complete`).toBeGreaterThan(0);
    }
    // The databases keep their data on their volume; the socket directory is a tmpfs.
    for (const db of ['temporal-db', 'ledger-db']) {
      expect(services[db]!.volumes).toContain(`${db}:/var/lib/postgresql/data`);
      expect(services[db]!.tmpfs).toContain('/var/run/postgresql');
    }
    // Each Node service's health check asks its own port, from inside the container (the image has no curl).
    const nodeCheckUrl = (name: string) =>
      /fetch\('([^']+)'/.exec((services[name]!.healthcheck as { test: string[] }).test.at(-1)!)![1]!;
    const portIn = (name: string, variable: string) =>
      (services[name]!.environment as Record<string, string>)[variable]!.split(':').at(-1);
    for (const region of ['us', 'eu']) {
      // A worker is healthy while it is ready: its ledger, Temporal and key ring (src/observability/health.ts).
      const workerCheck = new URL(nodeCheckUrl(`worker-${region}`));
      expect([workerCheck.port, workerCheck.pathname]).toEqual([
        portIn(`worker-${region}`, 'HEALTH_ADDRESS'),
        '/readyz',
      ]);
      const receiverCheck = new URL(nodeCheckUrl(`receiver-${region}`));
      expect([receiverCheck.port, receiverCheck.pathname]).toEqual([
        portIn(`receiver-${region}`, 'PROCESSOR_RECEIVER_ADDRESS'),
        '/healthz',
      ]);
    }
    expect(new URL(nodeCheckUrl('codec')).port).toBe(portIn('codec', 'CODEC_SERVER_ADDRESS'));
    // The codec endpoint passes its check without the token it requires of everything else: run the check against one.
    const codec = await startCodecServer({
      codecs: new Map(),
      corsOrigins: ['http://localhost:8080'],
      authToken: 'not-sent-by-the-check',
    });
    try {
      const script = (services.codec!.healthcheck as { test: string[] }).test
        .at(-1)!
        .replace(new URL(nodeCheckUrl('codec')).host, new URL(codec.url).host);
      await expect(promisify(execFile)(process.execPath, ['-e', script], { timeout: 10_000 })).resolves.toBeDefined();
    } finally {
      await codec.stop();
    }
  });

  it('Prometheus scrapes each worker, receiver and API (with its region) where each serves its metrics, the codec endpoint and Temporal, with the alert rules and Alertmanager', async () => {
    const prometheus = parse(await read('deploy/prometheus/prometheus.yml')) as {
      scrape_configs: { job_name: string; static_configs: { targets: string[]; labels?: { region?: string } }[] }[];
      rule_files: string[];
      alerting: { alertmanagers: { static_configs: { targets: string[] }[] }[] };
    };
    const targets = Object.fromEntries(
      prometheus.scrape_configs.map((c) => [
        c.job_name,
        c.static_configs.flatMap((s) => s.targets.map((t) => `${t}${s.labels?.region ? ` ${s.labels.region}` : ''}`)),
      ]),
    );
    expect(targets).toEqual({
      'hold-sweeper-workers': ['worker-us:9464 us', 'worker-eu:9464 eu'],
      'hold-sweeper-receivers': ['receiver-us:9465 us', 'receiver-eu:9465 eu'],
      'hold-sweeper-apis': ['api-us:9466 us', 'merchant-api-us:9467 us', 'api-eu:9466 eu', 'merchant-api-eu:9467 eu'],
      'hold-sweeper-codec': ['codec:8888'],
      temporal: ['temporal:8000'],
    });
    const compose = parse(await read('docker-compose.yml')) as {
      services: Record<string, { image?: string; volumes?: string[]; environment?: Record<string, string> }>;
    };
    // Each one's metrics address as its configuration reads it (production's default for the APIs), never the port its
    // callers reach.
    for (const region of ['us', 'eu'] as const) {
      const env = (name: string) => compose.services[name]!.environment ?? {};
      expect(env(`receiver-${region}`).PROCESSOR_RECEIVER_METRICS_ADDRESS).toBe('0.0.0.0:9465');
      expect(env(`receiver-${region}`).PROCESSOR_RECEIVER_ADDRESS).toBe('0.0.0.0:8090');
    }
    expect(compose.services.prometheus!.volumes).toEqual(
      expect.arrayContaining(['./deploy/prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro']),
    );
    expect(prometheus.rule_files).toEqual(['/etc/prometheus/alerts.yml']);
    // The versions compose runs are the ones the tests build and run (dev/prometheus-tools.ts).
    expect(compose.services.prometheus!.image).toBe(
      `prom/prometheus:v${(await read('deploy/prometheus/prometheus-version')).trim()}`,
    );
    expect(compose.services.alertmanager!.image).toBe(
      `prom/alertmanager:v${(await read('deploy/alertmanager/alertmanager-version')).trim()}`,
    );
    expect(prometheus.alerting.alertmanagers[0]!.static_configs[0]!.targets).toEqual(['alertmanager:9093']);
    expect(compose.services.temporal!.environment!.TEMPORAL_METRICS_ADDRESS).toBe('0.0.0.0:8000');
  });

  it('Perses serves the on-call dashboard: provisioned from deploy/perses, read-only, on compose’s Prometheus, at the tested version', async () => {
    const compose = parse(await read('docker-compose.yml'), { merge: true }) as {
      services: Record<
        string,
        {
          image?: string;
          volumes?: string[];
          environment?: Record<string, string>;
          depends_on?: object;
          ports?: string[];
          tmpfs?: string[];
        }
      >;
    };
    const perses = compose.services.perses!;
    expect(perses.image).toBe(`persesdev/perses:v${(await read('deploy/perses/perses-version')).trim()}`);
    // The provisioning folder Perses reads is the one mounted from the repository, and it holds the dashboard.
    const folder = perses.environment!.PERSES_PROVISIONING_FOLDERS_0!;
    expect(perses.volumes).toContain(`./deploy/perses/provisioning:${folder}:ro`);
    expect((await fs.readdir(path.join(REPO, 'deploy/perses/provisioning'))).sort()).toEqual([
      'dashboard-on-call.json',
      'datasource-prometheus.json',
      'project.json',
    ]);
    // The files are the dashboard's source: the UI cannot edit what the next provisioning pass would overwrite.
    expect(perses.environment!.PERSES_SECURITY_READONLY).toBe('true');
    // Its database is a volume, and the plugins it unpacks at start land on a tmpfs (the root filesystem is read-only).
    expect(perses.volumes).toContain('perses:/perses');
    expect(perses.tmpfs).toEqual(expect.arrayContaining(['/tmp', '/etc/perses/plugins']));
    // The datasource's URL is compose's Prometheus, on the port it listens on.
    const datasource = JSON.parse(await read('deploy/perses/provisioning/datasource-prometheus.json')) as {
      spec: { plugin: { spec: { proxy: { spec: { url: string } } } } };
    };
    const url = new URL(datasource.spec.plugin.spec.proxy.spec.url);
    expect(Object.keys(compose.services)).toContain(url.hostname);
    expect(compose.services[url.hostname]!.ports).toContain(`127.0.0.1:${url.port}:${url.port}`);
    expect(Object.keys(perses.depends_on!)).toEqual([url.hostname]);
    // Published on loopback only, like every port, on one no other service takes.
    const published = Object.values(compose.services).flatMap((s) => s.ports ?? []);
    expect(perses.ports).toEqual(['127.0.0.1:8081:8080']);
    expect(published.filter((p) => p.startsWith('127.0.0.1:8081:'))).toHaveLength(1);
  });

  it('alert rules parse, page on exported metrics, and each links its runbook section by an absolute URL', async () => {
    const rules = (
      parse(await read('deploy/prometheus/alerts.yml')) as {
        groups: {
          rules: { alert: string; expr: string; labels: { severity: string }; annotations: { runbook_url: string } }[];
        }[];
      }
    ).groups.flatMap((g) => g.rules);
    const runbook = await read('docs/runbook.md');
    const { repository } = JSON.parse(await read('package.json')) as { repository: { url: string } };
    // The workers' metrics, the receivers' and the codec endpoint's counters.
    const exported = (
      await Promise.all(
        ['src/observability/metrics.ts', 'src/processor/receiver.ts', 'src/codec/codec-server.ts'].map(read),
      )
    )
      .join('\n')
      .match(/'hold_sweeper_\w+'/g)!
      .map((m) => m.slice(1, -1));
    expect(rules.map((r) => r.alert)).toEqual([
      'WorkersDown',
      'LedgerGaugesStale',
      'ReceiversDown',
      'TemporalDown',
      'CodecServerDown',
      'HoldReleaseBehind',
      'WebhookDeliveryBehind',
      'WebhooksQuarantined',
      'QuarantinePastPageAge',
      'QuarantineAbandoned',
      'MerchantEndpointDisabled',
      'MerchantRateLimited',
      'MerchantFailing',
      'DuplicateSends',
      'SweepNotCompleting',
      'WorkflowTaskFailures',
      'ProcessorEventGap',
      'LedgerReviewsOpen',
      'ProcessorCallbacksRefused',
    ]);
    for (const rule of rules) {
      expect(['page', 'ticket']).toContain(rule.labels.severity);
      expect(runbook).toContain(`## ${rule.alert}`);
      expect(rule.annotations.runbook_url).toBe(
        `${repository.url}/blob/main/docs/runbook.md#${rule.alert.toLowerCase()}`,
      );
      for (const metric of rule.expr.match(/hold_sweeper_\w+/g) ?? []) expect(exported).toContain(metric);
    }
  });

  it('.env.example lists exactly the variables the config loader reads', async () => {
    const listed = [...(await read('.env.example')).matchAll(/^#?\s?([A-Z][A-Z0-9_]+)=/gm)].map((m) => m[1]);
    expect([...new Set(listed)].sort()).toEqual([...new Set([...CONFIG_VARIABLES, ...DEV_CONFIG_VARIABLES])].sort());
  });
});
