/**
 * The retention job on the real stack (docs/data-retention.md): a night's rows, aged, leave by their retention and not
 * a day before, through the region's schedule; a webhook leaves with every row that names it; what still matters
 * stays (an open webhook, an event a review names, the newest run); money never leaves; a backlog larger than a run's
 * budget is worked through run by run; the migrator builds the job's indexes concurrently and rebuilds one a failed
 * run left invalid.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RetentionReport } from '../../src/contracts/retention.js';
import { migrate } from '../../src/db/migrate.js';
import { localKeyRing } from '../../src/delivery/secret-box.js';
import { ensureRetentionSchedule, retentionScheduleId } from '../../src/schedules.js';
import { pruneLedger } from '../../src/workflows/prune-ledger.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { backdate, ledgerEntryCount, seedNight } from '../support/ledger.js';
import { waitUntil } from '../support/wait.js';

let harness: Harness;
let us: TestRegion;

beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
  await harness.startWorker(us);
});
afterAll(async () => {
  await us?.client.schedule
    .getHandle(retentionScheduleId(us.config))
    .delete()
    .catch(() => undefined);
  await harness?.close();
});

const count = async (sql: string, params: unknown[] = []) =>
  Number((await us.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${sql}`, params)).rows[0]!.n);
const ago = (days: number) => `now() - interval '${days} days'`;

/** A run of the region's retention schedule, triggered now: its report. */
async function runSchedule(): Promise<RetentionReport> {
  const schedule = us.client.schedule.getHandle(retentionScheduleId(us.config));
  const before = (await schedule.describe()).info.recentActions.length;
  await schedule.trigger();
  let workflowId = '';
  await waitUntil(async () => {
    const { info } = await schedule.describe();
    const action =
      info.runningActions[0] ?? (info.recentActions.length > before ? info.recentActions.at(-1) : undefined);
    workflowId = action ? ('action' in action ? action.action.workflow.workflowId : action.workflow.workflowId) : '';
    return workflowId !== '';
  }, 'the schedule started a run');
  return us.client.workflow.getHandle<typeof pruneLedger>(workflowId).result();
}

describe('the retention job', () => {
  it("deletes each kind of row past its retention, through the region's schedule, and nothing that still matters", async () => {
    const night = await seedNight(us.pool, 'us', `${harness.id}r`, { expired: 4, merchants: 1 }, harness.merchants);
    await us.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-retention`,
      args: [{ region: 'us', releaseWaitMs: 60_000 }],
    });
    await waitUntil(
      async () => (await count(`webhook_deliveries WHERE status = 'delivered'`)) === 4,
      'the night delivered',
    );
    const webhooks = (
      await us.pool.query<{ webhook_id: string; hold_id: string }>(
        'SELECT webhook_id, hold_id FROM webhook_deliveries ORDER BY webhook_id',
      )
    ).rows;
    const [gone1, gone2, kept, open] = webhooks.map((w) => w.webhook_id) as [string, string, string, string];
    const age = (table: string, column: string, days: number, where: string, ids: string[]) =>
      backdate(us.pool, `UPDATE ${table} SET ${column} = ${ago(days)} WHERE ${where} = ANY($1::text[])`, [ids]);
    // Two webhooks ended 401 days ago, one 399 days ago (its attempts 91 days ago), one quarantined 500 days ago.
    await age('webhook_deliveries', 'updated_at', 401, 'webhook_id', [gone1, gone2]);
    await age('webhook_deliveries', 'updated_at', 399, 'webhook_id', [kept]);
    await age('delivery_attempts', 'started_at', 401, 'webhook_id', [gone1, gone2]);
    await age('delivery_attempts', 'started_at', 91, 'webhook_id', [kept]);
    await backdate(
      us.pool,
      `UPDATE webhook_deliveries SET status = 'quarantined', quarantine_reason = 'exhausted', delivered_at = NULL,
              quarantined_at = ${ago(500)}, updated_at = ${ago(500)} WHERE webhook_id = $1`,
      [open],
    );
    await age('delivery_attempts', 'started_at', 89, 'webhook_id', [open]);
    // One of the two gone was never sent, its merchant not subscribed to it: it leaves like any other at an end.
    await backdate(
      us.pool,
      `UPDATE webhook_deliveries SET status = 'not_subscribed', delivered_at = NULL, updated_at = ${ago(401)}
        WHERE webhook_id = $1`,
      [gone2],
    );
    await us.pool.query(
      `INSERT INTO delivery_decisions (webhook_id, policy_run, decision, decided_by, reason, decided_at)
       VALUES ($1, 1, 'discard', 'alice', 'test', ${ago(401)})`,
      [gone1],
    );
    // Processor events: applied 36 days ago (goes), 34 days ago (stays), 36 days ago but named by an open review
    // (stays), and 500 days ago with its review resolved 401 days ago (both go).
    const holdId = webhooks[0]!.hold_id;
    const event = (id: string, sequence: number, appliedDaysAgo: number) =>
      us.pool.query(
        `INSERT INTO processor_events (event_id, hold_id, sequence, event_type, occurred_at, body, body_sha256,
                                       received_at, dispatched_at, applied_at, outcome)
         VALUES ($1, $2, $3, 'hold.reversed', ${ago(appliedDaysAgo)}, '{}', 'x', ${ago(appliedDaysAgo)},
                 ${ago(appliedDaysAgo)}, ${ago(appliedDaysAgo)}, 'ignored')`,
        [id, holdId, sequence],
      );
    await event('ev_old', 1, 36);
    await event('ev_recent', 2, 34);
    await event('ev_reviewed', 3, 36);
    await event('ev_resolved', 4, 500);
    await us.pool.query(
      `INSERT INTO ledger_reviews (event_id, hold_id, reason, opened_at, resolved_by, resolved_at)
       VALUES ('ev_reviewed', $1, 'late capture', ${ago(36)}, NULL, NULL),
              ('ev_resolved', $1, 'late capture', ${ago(500)}, 'bob', ${ago(401)})`,
      [holdId],
    );
    // Runs: the night's sweep and two 91 days old; every reconcile 91 days old (the newest of them stays).
    await backdate(us.pool, `UPDATE sweep_runs SET cutoff = ${ago(92)}, finished_at = ${ago(91)}`);
    await us.pool.query(
      `INSERT INTO sweep_runs (sweep_id, cutoff, pages, found, started, already_started, rejected, unreleased_at_end,
                               finished_at)
       VALUES ('s_old1', ${ago(200)}, 1, 0, 0, 0, 0, 0, ${ago(199)}), ('s_recent', ${ago(2)}, 1, 0, 0, 0, 0, 0, ${ago(1)})`,
    );
    await us.pool.query(
      `INSERT INTO api_audit (at, request_id, subject, verb, method, path, outcome, status)
       VALUES (${ago(401)}, 'r_old', 'alice', 'sends.pause', 'POST', '/v1/sends/pause', 'ok', 200),
              (${ago(399)}, 'r_kept', 'alice', 'sends.pause', 'POST', '/v1/sends/pause', 'ok', 200)`,
    );
    const entries = await ledgerEntryCount(us.pool);
    const holds = await count('auth_holds');

    await ensureRetentionSchedule(us.client, us.config, { intervalMs: 24 * 3_600_000, budgetMs: 60_000 });
    const report = await runSchedule();

    expect(report).toMatchObject({
      caughtUp: true,
      pruned: {
        // Past their own 90 days: the two 401-day webhooks' attempts and the kept webhook's (91 days); not the open one's.
        delivery_attempts: 3,
        webhook_deliveries: 2,
        ledger_reviews: 1,
        processor_events: 2,
        sweep_runs: 2,
        outbox_reconciliations: 0,
        api_audit: 1,
      },
    });
    const left = async (table: string, column: string) =>
      (await us.pool.query<{ id: string }>(`SELECT ${column} AS id FROM ${table} ORDER BY 1`)).rows.map((r) => r.id);
    expect(await left('webhook_deliveries', 'webhook_id')).toEqual([kept, open].sort());
    expect(await left('delivery_attempts', 'webhook_id')).toEqual([open]);
    expect(await count('delivery_decisions')).toBe(0);
    expect(await left('processor_events', 'event_id')).toEqual(['ev_recent', 'ev_reviewed']);
    expect(await left('ledger_reviews', 'event_id')).toEqual(['ev_reviewed']);
    expect(await left('sweep_runs', 'sweep_id')).toEqual(['s_recent']);
    // The audit keeps its year, and the prune is itself a row of it, naming the run.
    expect(await left(`api_audit WHERE verb <> 'audit.prune'`, 'request_id')).toEqual(['r_kept']);
    expect(
      (await us.pool.query<{ subject: string }>(`SELECT subject FROM api_audit WHERE verb = 'audit.prune'`)).rows,
    ).toEqual([{ subject: expect.stringMatching(/^retention job \(retention-us-/) }]);
    // The books never leave.
    expect(await ledgerEntryCount(us.pool)).toBe(entries);
    expect(await count('auth_holds')).toBe(holds);
    expect(night.expired).toHaveLength(4);

    // Run again: nothing more is past its retention.
    expect((await runSchedule()).pruned).toMatchObject({ delivery_attempts: 0, webhook_deliveries: 0, api_audit: 0 });
  }, 120_000);

  it('works through a backlog larger than a run can take, run by run, each deleting at least a batch', async () => {
    const [webhookId] = (await us.pool.query<{ webhook_id: string }>('SELECT webhook_id FROM webhook_deliveries'))
      .rows as [{ webhook_id: string }];
    await us.pool.query(
      `INSERT INTO delivery_attempts (webhook_id, attempt_number, policy_run, scheduled_at, started_at, duration_ms,
                                      status_code, outcome)
       SELECT $1, 1000 + n, 1, ${ago(100)}, ${ago(100)} + n * interval '1 second', 12, 503, 'retry'
         FROM generate_series(1, 2500) AS n`,
      [webhookId.webhook_id],
    );
    const reports: RetentionReport[] = [];
    // A budget of 1 ms: every run stops after its first batch of 1,000.
    for (let run = 0; run < 10 && !reports.at(-1)?.caughtUp; run++) {
      reports.push(
        await us.client.workflow.execute(pruneLedger, {
          taskQueue: us.config.taskQueue,
          workflowId: `retention-us-${harness.id}-backlog-${run}`,
          args: [{ region: 'us', budgetMs: 1 }],
        }),
      );
    }
    expect(reports.map((r) => [r.pruned.delivery_attempts, r.caughtUp])).toEqual([
      [1000, false],
      [1000, false],
      [500, false],
      [0, true],
    ]);
    expect(await count(`delivery_attempts WHERE started_at < ${ago(90)}`)).toBe(0);
  }, 120_000);

  it('prune_expired refuses a kind it has no rule for and a batch out of bounds', async () => {
    await expect(us.pool.query(`SELECT prune_expired('auth_holds', 10)`)).rejects.toThrow(
      'no retention rule for auth_holds',
    );
    await expect(us.pool.query(`SELECT prune_expired('delivery_attempts', 0)`)).rejects.toThrow(
      'a batch is 1 to 10000 rows, not 0',
    );
  });

  it('the migrator builds an index a failed concurrent build left invalid again', async () => {
    const valid = async () =>
      (
        await us.pool.query<{ valid: boolean }>(
          `SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = 'webhook_deliveries_settled_by_age'::regclass`,
        )
      ).rows[0]?.valid;
    expect(await valid()).toBe(true);
    // What a build stopped by lock_timeout leaves: the index, invalid, and its migration not recorded.
    await us.pool.query(
      `UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'webhook_deliveries_settled_by_age'::regclass`,
    );
    await us.pool.query(`DELETE FROM schema_migrations WHERE version = 7`);
    const applied = await migrate(us.pool, { region: 'us', sealer: localKeyRing(us.config.secretKeys) });
    expect(applied).toEqual(['007_settled_index']);
    expect(await valid()).toBe(true);
  });
});
