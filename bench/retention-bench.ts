/**
 * A simulated year of one region's ledger, and the retention job on it (docs/data-retention.md): `--days` nights of
 * `--holds` holds each (a scaled design night: 50,000 holds), every one released and told, 15 % with a processor
 * event and its webhook, a tenth of the webhooks retried twice with a 2 KiB error page each, and the runs, the audit
 * and the books of every day, written into a real embedded PostgreSQL with the product's migrations. Then the job's
 * own activity runs until caught up, as its schedule would run it after a year without one. It prints the table sizes
 * before and after (and after the VACUUM autovacuum would do, and a month of nights later, which fill the space the
 * deletes left), the job's run time, and its rate.
 *
 * And what it costs a night: the ledger's side of a night (the product's own release activity and the attempt record
 * of each webhook, from `--clients` concurrent callers, as the workers make them) run alone, then again while the job
 * catches up. Temporal's side of a night never touches what the job deletes, so the ledger is where the two meet.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import pg from 'pg';
import { startEmbeddedPostgres } from '../dev/embedded-postgres.js';
import { insertAccounts, insertHolds, insertMerchants } from '../dev/seed.js';
import { createLedgerActivities } from '../src/activities/ledger.js';
import { createRetentionActivities } from '../src/activities/retention.js';
import type { ReleaseOutcome } from '../src/contracts/domain.js';
import type { RetentionReport } from '../src/contracts/retention.js';
import { migrate } from '../src/db/migrate.js';
import { DEV_SECRET_KEYS, localKeyRing } from '../src/delivery/secret-box.js';
import { recordAttempt } from '../src/sql/deliveries.js';
import { RETENTION_KINDS, retentionDays } from '../src/sql/retention.js';

const TABLES = [...RETENTION_KINDS, 'delivery_decisions', 'api_audit', 'auth_holds', 'ledger_entries'];
const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MB`;

export async function runRetentionBench(options: {
  days: number;
  holdsPerNight: number;
  nightHolds: number;
  clients: number;
}): Promise<void> {
  const { days, holdsPerNight, nightHolds, clients } = options;
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-retention-'));
  await fs.chmod(dataDir, 0o777);
  const postgres = await startEmbeddedPostgres({
    dataDir: path.join(dataDir, 'pg'),
    databases: ['year'],
    durable: true,
  });
  const pool = new pg.Pool({ connectionString: postgres.urlFor('year'), max: 4 });
  const secrets = { region: 'us' as const, sealer: localKeyRing(DEV_SECRET_KEYS) };

  async function sizes(): Promise<Map<string, { rows: number; bytes: number }>> {
    const out = new Map<string, { rows: number; bytes: number }>();
    for (const table of TABLES) {
      const { rows } = await pool.query<{ rows: string; bytes: string }>(
        `SELECT (SELECT count(*) FROM ${table}) AS rows, pg_total_relation_size('${table}') AS bytes`,
      );
      out.set(table, { rows: Number(rows[0]!.rows), bytes: Number(rows[0]!.bytes) });
    }
    return out;
  }

  /** One night `ago` days back: its holds released, its webhooks delivered, its events applied, its runs and audit. */
  async function seedNight(ago: number, prefix = 'h'): Promise<void> {
    const night = `now() - make_interval(days => ${ago})`;
    const hold = `'${prefix}_' || ${ago} || '_' || n`;
    await pool.query('BEGIN');
    await pool.query(
      `INSERT INTO auth_holds (id, account_id, merchant_id, amount_minor, currency, state, expires_at, created_at,
                               released_at, ledger_entry_id)
       SELECT ${hold}, 'a_' || n % 1000, 'm_' || n % 400, 100 + n, 'USD', 'released', ${night}, ${night} - interval '7 days',
              ${night}, n FROM generate_series(1, $1::integer) AS n`,
      [holdsPerNight],
    );
    await pool.query(
      `INSERT INTO ledger_entries (idempotency_key, kind, account_id, hold_id, amount_minor, currency, created_at)
       SELECT 'hold-release:' || ${hold}, 'hold_release', 'a_' || n % 1000, ${hold}, 100 + n, 'USD', ${night}
         FROM generate_series(1, $1::integer) AS n`,
      [holdsPerNight],
    );
    // A webhook per release, and one per event for 15 % of the holds (hold_ordinal 2).
    await pool.query(
      `INSERT INTO webhook_deliveries (webhook_id, hold_id, merchant_id, event_type, payload, status, attempt_count,
                                       last_status_code, created_at, updated_at, delivered_at, hold_ordinal)
       SELECT 'wh_' || ${hold} || '_' || o, ${hold}, 'm_' || n % 400, CASE o WHEN 1 THEN 'hold.released' ELSE 'hold.captured' END,
              json_build_object('type', 'hold.released', 'hold_id', ${hold}, 'amount_minor', 100 + n, 'currency', 'USD',
                                'merchant_id', 'm_' || n % 400, 'released_at', ${night}, 'padding', repeat('p', 200))::text,
              'delivered', CASE WHEN n % 10 = 0 THEN 3 ELSE 1 END, 200, ${night}, ${night} + interval '2 seconds',
              ${night} + interval '2 seconds', o
         FROM generate_series(1, $1::integer) AS n, generate_series(1, 2) AS o
        WHERE o = 1 OR n % 20 < 3`,
      [holdsPerNight],
    );
    await pool.query(
      `INSERT INTO delivery_attempts (webhook_id, attempt_number, policy_run, scheduled_at, started_at, duration_ms,
                                      status_code, response_excerpt, outcome, next_retry_delay_ms, retry_reason)
       SELECT w.webhook_id, a, 1, w.created_at, w.created_at + a * interval '1 second', 40,
              CASE WHEN a = w.attempt_count THEN 200 ELSE 503 END,
              CASE WHEN a = w.attempt_count THEN '{"ok":true}' ELSE '<html>' || repeat('service unavailable ', 100) || '</html>' END,
              CASE WHEN a = w.attempt_count THEN 'delivered' ELSE 'retry' END,
              CASE WHEN a = w.attempt_count THEN NULL ELSE 1000 END,
              CASE WHEN a = w.attempt_count THEN NULL ELSE 'backoff attempt ' || a END
         FROM webhook_deliveries w, generate_series(1, w.attempt_count) AS a
        WHERE w.created_at = ${night}`,
    );
    await pool.query(
      `INSERT INTO processor_events (event_id, hold_id, sequence, event_type, amount_minor, currency, occurred_at, body,
                                     body_sha256, received_at, dispatched_at, applied_at, outcome, webhook_id)
       SELECT 'ev_' || ${hold}, ${hold}, 1, 'hold.captured', 50 + n, 'USD', ${night} + interval '1 hour',
              json_build_object('type', 'hold.captured', 'data', json_build_object('hold_id', ${hold}, 'sequence', 1))::text,
              md5(${hold}), ${night} + interval '1 hour', ${night} + interval '1 hour', ${night} + interval '1 hour',
              'late_captured', 'wh_' || ${hold} || '_2'
         FROM generate_series(1, $1::integer) AS n WHERE n % 20 < 3`,
      [holdsPerNight],
    );
    // A sweep every 15 minutes, a reconcile every 5, a hundred audited operator calls a day.
    await pool.query(
      `INSERT INTO sweep_runs (sweep_id, cutoff, pages, found, started, already_started, rejected, unreleased_at_end,
                               finished_at)
       SELECT 'sweep-us-${prefix}-' || ${ago} || '-' || q, ${night} + q * interval '15 minutes', 1, 0, 0, 0, 0, 0,
              ${night} + q * interval '15 minutes' FROM generate_series(0, 95) AS q`,
    );
    await pool.query(
      `INSERT INTO outbox_reconciliations (finished_at, grace_ms, checked, running, restarted, unfixable, details)
       SELECT ${night} + q * interval '5 minutes', 600000, 0, 0, 0, 0, '{"restarted":[],"unfixable":[]}'
         FROM generate_series(0, 287) AS q`,
    );
    await pool.query(
      `INSERT INTO api_audit (at, request_id, subject, roles, verb, method, path, target, outcome, status)
       SELECT ${night} + q * interval '10 minutes', gen_random_uuid()::text, 'alice@example.com', '{us:operator}',
              'quarantine.list', 'GET', '/v1/quarantine?merchant=m_' || q, NULL, 'ok', 200 FROM generate_series(1, 100) AS q`,
    );
    await pool.query('COMMIT');
  }

  function table(
    before: Map<string, { rows: number; bytes: number }>,
    ...after: Map<string, { rows: number; bytes: number }>[]
  ) {
    const lines = [
      '| table | rows before | size before | rows after | size after the job | after VACUUM | rows, a month later | size, a month later |',
      '|---|---:|---:|---:|---:|---:|---:|---:|',
    ];
    for (const t of TABLES) {
      const b = before.get(t)!;
      const [a, v, m] = after.map((x) => x.get(t)!);
      lines.push(
        `| ${t} | ${b.rows} | ${mb(b.bytes)} | ${a!.rows} | ${mb(a!.bytes)} | ${mb(v!.bytes)} | ${m!.rows} | ${mb(m!.bytes)} |`,
      );
    }
    const total = (m: Map<string, { bytes: number }>) => mb([...m.values()].reduce((s, x) => s + x.bytes, 0));
    lines.push(
      `| **all** | | ${total(before)} | | ${total(after[0]!)} | ${total(after[1]!)} | | ${total(after[2]!)} |`,
    );
    return lines.join('\n');
  }

  /**
   * The ledger's side of a night of `holds` expired holds: each released by the product's own activity and its
   * webhook's delivered attempt recorded, from `clients` callers at once. Returns the releases per second.
   */
  async function night(label: string, holds: number): Promise<{ seconds: number; perSecond: number }> {
    await insertHolds(
      pool,
      Array.from({ length: holds }, (_, i) => ({
        id: `h_${label}_${i}`,
        accountId: `a_${i % 1000}`,
        merchantId: `m_${i % 400}`,
        amountMinor: 100 + (i % 5000),
        currency: 'USD',
        expiresInSeconds: -60,
      })),
    );
    const ledger = createLedgerActivities({ region: 'us', pool });
    const env = new MockActivityEnvironment();
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: clients }, async () => {
        for (let i = next++; i < holds; i = next++) {
          const released: ReleaseOutcome = await env.run(ledger.releaseHold, { holdId: `h_${label}_${i}` });
          if (released.status !== 'released') throw new Error(`h_${label}_${i}: ${released.status}`);
          const at = Date.now();
          await recordAttempt(pool, {
            webhookId: released.webhookId,
            attemptNumber: 1,
            policyRun: 1,
            scheduledAtMs: at,
            startedAtMs: at,
            durationMs: 40,
            statusCode: 200,
            errorClass: null,
            responseExcerpt: '{"ok":true}',
            outcome: 'delivered',
          });
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    return { seconds, perSecond: holds / seconds };
  }

  try {
    await migrate(pool, secrets);
    const keeps = await retentionDays(pool);
    await insertMerchants(
      pool,
      secrets,
      Array.from({ length: 400 }, (_, i) => ({ id: `m_${i}`, endpointUrl: `https://m${i}.example/h` })),
    );
    await insertAccounts(
      pool,
      Array.from({ length: 1000 }, (_, i) => ({ id: `a_${i}`, currency: 'USD', availableMinor: 1_000_000_000 })),
    );
    const seeding = performance.now();
    for (let ago = days; ago >= 1; ago--) {
      await seedNight(ago);
      if (ago % 50 === 0) console.log(`[retention] seeded down to ${ago} days ago`);
    }
    await pool.query('VACUUM ANALYZE');
    console.log(
      `[retention] seeded ${days} nights of ${holdsPerNight} holds in ${((performance.now() - seeding) / 1000).toFixed(0)} s`,
    );
    const before = await sizes();

    const alone = await night('alone', nightHolds);
    console.log(`[retention] a night alone: ${nightHolds} holds in ${alone.seconds.toFixed(1)} s`);

    // The job's own activity, run by its schedule's workflow once a run, until a run reports it caught up; beside it, a
    // night of the same size.
    const activities = createRetentionActivities({ region: 'us', pool });
    const env = new MockActivityEnvironment({
      workflowExecution: { workflowId: 'retention-us-bench', runId: 'bench' },
    });
    const runs: RetentionReport[] = [];
    const started = performance.now();
    const job = (async () => {
      do runs.push(await env.run(activities.pruneLedger, { budgetMs: 5 * 60_000 }));
      while (!runs.at(-1)!.caughtUp);
      return performance.now() - started;
    })();
    const beside = await night('beside', nightHolds);
    const jobMs = await job;
    console.log(`[retention] a night beside the job: ${nightHolds} holds in ${beside.seconds.toFixed(1)} s`);
    const after = await sizes();
    await pool.query('VACUUM');
    const vacuumed = await sizes();
    // A month of nights more, as they come after the job: they go into the space the job's deletes left.
    for (let ago = 30; ago >= 1; ago--) await seedNight(ago, 'next');
    const month = await sizes();

    const deleted = runs.reduce((s, r) => s + Object.values(r.pruned).reduce((a, b) => a + b, 0), 0);
    const report = [
      `# Retention: a simulated year`,
      '',
      `${days} nights of ${holdsPerNight} holds (the design night is 50,000: ${(holdsPerNight / 50_000).toFixed(2)} of it), ` +
        `retentions ${RETENTION_KINDS.map((k) => `${k} ${keeps[k]} d`).join(', ')}, api_audit 400 d.`,
      '',
      table(before, after, vacuumed, month),
      '',
      `The job: ${runs.length} run(s) of at most 5 min, ${(jobMs / 1000).toFixed(1)} s in all, ${deleted} rows deleted ` +
        `(${Math.round(deleted / (jobMs / 1000))} rows/s); per run: ${runs.map((r) => `${(r.ms / 1000).toFixed(1)} s`).join(', ')}.`,
      '',
      `The ledger's side of a night (${nightHolds} holds released by the product's release activity, each webhook's ` +
        `delivered attempt recorded, ${clients} callers): alone ${alone.perSecond.toFixed(0)} holds/s ` +
        `(${alone.seconds.toFixed(1)} s); beside the job's catch-up ${beside.perSecond.toFixed(0)} holds/s ` +
        `(${beside.seconds.toFixed(1)} s, the job running for ${Math.min(100, (100 * jobMs) / 1000 / beside.seconds).toFixed(0)} % of it): ` +
        `${((beside.perSecond / alone.perSecond) * 100).toFixed(0)} % of the rate alone.`,
      '',
      `Reproduce: npm run bench:retention -- --days ${days} --holds ${holdsPerNight} --night ${nightHolds} --clients ${clients}`,
    ].join('\n');
    console.log(report);
    await fs.writeFile(
      path.resolve(import.meta.dirname, `results/retention-${days}d-${holdsPerNight}.md`),
      `${report}\n`,
    );
  } finally {
    await pool.end();
    await postgres.stop();
    await fs.rm(dataDir, { recursive: true, force: true });
  }
}
