/**
 * Hardening, cases 5 and 6, on the real stack (dev server, embedded PostgreSQL, real workers):
 * - "expired" is decided by one clock, the ledger's: a sweep's cutoff may be earlier than it, never later, so
 *   listing and release agree; a hold workflow that ended without releasing its hold never keeps a later sweep from
 *   starting it again;
 * - the release retries locally for a few seconds only, then on durable timers; a release that can never
 *   succeed ends the hold `rejected` with its reason, in bounded time, instead of retrying forever.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MockActivityEnvironment } from '@temporalio/testing';
import type pg from 'pg';
import { checkLedgerInvariants } from '../../bench/invariants.js';
import { createLedgerActivities, type ReleaseHoldInput } from '../../src/activities/ledger.js';
import type {
  ReleaseExpiredHoldResult,
  ReleaseOutcome,
  SweepInput,
  SweepResult,
  SweepTotals,
} from '../../src/contracts/domain.js';
import type { Region } from '../../src/contracts/regions.js';
import { DeliveryStatusKey } from '../../src/contracts/search-attributes.js';
import { isoUtc } from '../../src/db/sql.js';
import { releaseExpiredHold } from '../../src/workflows/release-expired-hold.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { balances, holdStates, holdWorkflowIdOf, ledgerEntryCount, seedNight } from '../support/ledger.js';
import { waitUntil } from '../support/wait.js';

let harness: Harness;
let sweeps = 0;

beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await harness?.close();
});

const NO_TOTALS: SweepTotals = { found: 0, started: 0, alreadyStarted: 0, rejected: 0, pages: 0 };

/** The release activity, run in a real activity context (as the worker would). */
function releaseHoldIn(region: Region, pool: pg.Pool) {
  const { releaseHold } = createLedgerActivities({ region, pool });
  return (input: ReleaseHoldInput): Promise<ReleaseOutcome> => new MockActivityEnvironment().run(releaseHold, input);
}

async function regionWithWorker(region: Region): Promise<TestRegion> {
  const r = await harness.region(region);
  await harness.startWorker(r);
  return r;
}

/** A sweep; `cutoff` stands for the sweep's clock (a first run that fixed its cutoff then). */
function runSweep(r: TestRegion, input: Partial<SweepInput> & { cutoff?: string } = {}): Promise<SweepResult> {
  const { cutoff, ...rest } = input;
  return r.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: r.config.taskQueue,
    workflowId: `sweep-${r.config.region}-${harness.id}-${++sweeps}`,
    args: [
      {
        region: r.config.region,
        releaseWaitMs: 60_000,
        ...(cutoff ? { progress: { cutoff, totals: NO_TOTALS } } : {}),
        ...rest,
      },
    ],
  });
}

/** The database clock, plus `offsetMs`, as an ISO string. */
async function dbClock(pool: pg.Pool, offsetMs = 0): Promise<string> {
  const { rows } = await pool.query<{ now: Date }>('SELECT now() AS now');
  return new Date(rows[0]!.now.getTime() + offsetMs).toISOString();
}

/** A hold's exact (microsecond) expiry, as the sweep's page reads it. */
async function expiryOf(pool: pg.Pool, holdId: string): Promise<string> {
  const { rows } = await pool.query<{ e: string }>(
    `SELECT ${isoUtc('expires_at')} AS e FROM auth_holds WHERE id = $1`,
    [holdId],
  );
  return rows[0]!.e;
}

/** `promise`, or a failure naming `what` after `ms`: the test proves the wait is bounded. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not end within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

const MINUTE = 60_000;

/** The status of every run under `workflowId`. */
async function runsOf(r: TestRegion, workflowId: string): Promise<string[]> {
  const runs: string[] = [];
  for await (const execution of r.client.workflow.list({ query: `WorkflowId = '${workflowId}'` }))
    runs.push(execution.status.name);
  return runs;
}

describe('one clock decides "expired", the ledger\'s', () => {
  it('the release decides "expired" by the ledger\'s clock: a sweep\'s cutoff may be earlier, never later', async () => {
    const us = await harness.region('us');
    const night = await seedNight(us.pool, 'us', `${harness.id}c5a`, { expired: 0, future: 4 }, harness.merchants);
    const [ahead, reauthorised, early, byHand] = night.future.map((h) => h.id) as [string, string, string, string];
    const releaseHold = releaseHoldIn('us', us.pool);
    // A sweep whose clock runs 15 minutes ahead of the ledger's (or a caller who says so): these holds expire 10
    // minutes from the database's now(), so by that cutoff they expired 5 minutes ago. The ledger's clock decides.
    await us.pool.query(`UPDATE auth_holds SET expires_at = now() + interval '10 minutes'`);
    const cutoff = await dbClock(us.pool, 15 * MINUTE);
    expect(await releaseHold({ holdId: ahead, expiresAt: await expiryOf(us.pool, ahead), cutoff })).toMatchObject({
      status: 'not_expired',
    });

    // Re-authorised after the sweep saw it (a new expiry is a new business action, for a later sweep): not released.
    await us.pool.query(`UPDATE auth_holds SET expires_at = now() - interval '5 minutes' WHERE id = $1`, [
      reauthorised,
    ]);
    const seen = await expiryOf(us.pool, reauthorised);
    await us.pool.query(`UPDATE auth_holds SET expires_at = expires_at - interval '1 minute' WHERE id = $1`, [
      reauthorised,
    ]);
    expect(await releaseHold({ holdId: reauthorised, expiresAt: seen, cutoff })).toMatchObject({
      status: 'not_expired',
    });

    // A cutoff earlier than the ledger's now (a sweep that started a while ago) is honoured: expired by the database
    // clock but not by the cutoff it is given, not released.
    await us.pool.query(`UPDATE auth_holds SET expires_at = now() - interval '1 minute' WHERE id = $1`, [early]);
    const earlyCutoff = await dbClock(us.pool, -2 * MINUTE);
    expect(
      await releaseHold({ holdId: early, expiresAt: await expiryOf(us.pool, early), cutoff: earlyCutoff }),
    ).toMatchObject({
      status: 'not_expired',
    });
    // And with the future cutoff, by the ledger's clock: released.
    expect(await releaseHold({ holdId: early, expiresAt: await expiryOf(us.pool, early), cutoff })).toMatchObject({
      status: 'released',
    });

    // Started by hand (no sweep, so no cutoff): the database clock decides, as before.
    expect(await releaseHold({ holdId: byHand })).toMatchObject({ status: 'not_expired' });

    expect(await ledgerEntryCount(us.pool)).toBe(1);
    expect(await checkLedgerInvariants(us.pool)).toEqual([]);
  });

  it("a sweep whose clock runs ahead of the ledger's lists only what the ledger says expired, strands nothing, and a later sweep releases the rest", async () => {
    const us = await regionWithWorker('us');
    const night = await seedNight(us.pool, 'us', `${harness.id}c5b`, { expired: 2, future: 1 }, harness.merchants);
    const lagging = night.future[0]!;
    // Expires a minute from the ledger's now: inside the sweep's cutoff, and never reached while the sweep runs, however
    // slow a shared machine makes it (2 s once was: its finish then counted the hold unreleased).
    await us.pool.query(`UPDATE auth_holds SET expires_at = now() + interval '1 minute' WHERE id = $1`, [lagging.id]);

    // The sweep's clock is 15 minutes ahead of the database's (the cutoff its first run fixed).
    const result = await runSweep(us, { cutoff: await dbClock(us.pool, 15 * MINUTE), releaseWaitMs: 5_000 });

    expect(result).toMatchObject({ found: 2, started: 2, alreadyStarted: 0, unreleasedAtEnd: 0 });
    expect((await holdStates(us.pool)).get(lagging.id)?.state).toBe('active');
    // What it recorded is not in the future: a later sweep's `left_active` reads it.
    const { rows } = await us.pool.query<{ ahead: boolean }>('SELECT bool_or(cutoff > now()) AS ahead FROM sweep_runs');
    expect(rows[0]!.ahead).toBe(false);

    // Once the ledger's clock has passed the hold's expiry, the next sweep releases it (one start, no duplicate). The
    // minute is not waited out: the hold's expiry is brought to the ledger's now (what a minute later would be).
    await us.pool.query(`UPDATE auth_holds SET expires_at = now() WHERE id = $1`, [lagging.id]);
    await waitUntil(
      async () =>
        (await us.pool.query('SELECT 1 FROM auth_holds WHERE id = $1 AND expires_at < now()', [lagging.id]))
          .rowCount === 1,
      "the ledger's clock passes the hold's expiry",
    );
    expect(await runSweep(us, { releaseWaitMs: 5_000 })).toMatchObject({
      found: 1,
      started: 1,
      alreadyStarted: 0,
      unreleasedAtEnd: 0,
    });
    const states = await holdStates(us.pool);
    for (const hold of [...night.expired, lagging]) expect(states.get(hold.id)?.state).toBe('released');
    expect(await checkLedgerInvariants(us.pool)).toEqual([]);
  });

  it('a child that returned not_expired (started before its hold expired) does not block the next sweep', async () => {
    const us = await regionWithWorker('us');
    const night = await seedNight(us.pool, 'us', `${harness.id}c5c`, { expired: 0, future: 1 }, harness.merchants);
    const hold = night.future[0]!;
    // Long enough for the child started by hand to run before it on a busy shared machine (its workflow id carries the
    // expiry, so the clock is waited out, not moved).
    await us.pool.query(`UPDATE auth_holds SET expires_at = now() + interval '8 seconds' WHERE id = $1`, [hold.id]);
    const workflowId = await holdWorkflowIdOf(us.pool, 'us', hold.id);
    const expiresAt = await expiryOf(us.pool, hold.id);

    // The hold's child, under the id a sweep gives it, ran before the hold expired (started by hand, or a sweep that
    // saw it a moment early) and completed `not_expired`; a sweep that finished after the expiry left it active.
    const first = await us.client.workflow.execute(releaseExpiredHold, {
      taskQueue: us.config.taskQueue,
      workflowId,
      args: [{ region: 'us', holdId: hold.id, expiresAt, merchantId: hold.merchantId }],
    });
    expect(first.release.status).toBe('not_expired');
    await waitUntil(
      async () =>
        (await us.pool.query('SELECT 1 FROM auth_holds WHERE id = $1 AND expires_at < now()', [hold.id])).rowCount ===
        1,
      "the ledger's clock passes the hold's expiry",
    );
    await us.pool.query(
      `INSERT INTO sweep_runs (sweep_id, cutoff, pages, found, started, already_started, rejected, unreleased_at_end)
       VALUES ($1, now(), 1, 1, 1, 0, 0, 1)`,
      [`sweep-us-${harness.id}-left-it-active`],
    );

    // The next sweep starts a new run under the same id, and this time the hold is released.
    const result = await runSweep(us, { releaseWaitMs: 5_000 });

    expect(result).toMatchObject({ found: 1, started: 1, alreadyStarted: 0, unreleasedAtEnd: 0 });
    expect((await holdStates(us.pool)).get(hold.id)?.state).toBe('released');
    const second: ReleaseExpiredHoldResult = await us.client.workflow.getHandle(workflowId).result();
    expect(second).toMatchObject({ release: { status: 'released' }, delivery: { status: 'delivered' } });
    // Visibility is eventually consistent: poll.
    await expect.poll(() => runsOf(us, workflowId), { timeout: 10_000 }).toEqual(['COMPLETED', 'COMPLETED']);
    expect(await ledgerEntryCount(us.pool)).toBe(1);
  });

  it('a child that completed without releasing (rejected, then fixed upstream) does not block the next sweep', async () => {
    const us = await regionWithWorker('us');
    const night = await seedNight(us.pool, 'us', `${harness.id}c5d`, { expired: 1 }, harness.merchants);
    const hold = night.expired[0]!;
    const workflowId = await holdWorkflowIdOf(us.pool, 'us', hold.id);
    await us.pool.query(`UPDATE accounts SET held_minor = 0 WHERE id = $1`, [hold.accountId]);
    expect(await runSweep(us, { releaseWaitMs: 5_000 })).toMatchObject({ found: 1, started: 1, unreleasedAtEnd: 0 });
    expect(await us.client.workflow.getHandle(workflowId).result()).toMatchObject({ release: { status: 'rejected' } });

    // Fixed upstream as the reject code's doc says: the account corrected, the hold set back to 'active'.
    await us.pool.query(`UPDATE accounts SET held_minor = $2 WHERE id = $1`, [hold.accountId, hold.amountMinor]);
    await us.pool.query(
      `UPDATE auth_holds SET state = 'active', reject_code = NULL, rejected_at = NULL WHERE id = $1`,
      [hold.id],
    );

    expect(await runSweep(us, { releaseWaitMs: 5_000 })).toMatchObject({
      found: 1,
      started: 1,
      alreadyStarted: 0,
      unreleasedAtEnd: 0,
    });
    expect((await holdStates(us.pool)).get(hold.id)?.state).toBe('released');
    // Visibility is eventually consistent: poll.
    await expect.poll(() => runsOf(us, workflowId), { timeout: 10_000 }).toEqual(['COMPLETED', 'COMPLETED']);
    expect(await checkLedgerInvariants(us.pool)).toEqual([]);
  });
});

describe('a release that cannot succeed ends, one that may succeed waits durably', () => {
  it('the release classifies what can never succeed: a held balance it would take below zero, a released hold without its webhook', async () => {
    const eu = await harness.region('eu');
    const night = await seedNight(eu.pool, 'eu', `${harness.id}c6a`, { expired: 2 }, harness.merchants);
    const [short, orphan] = night.expired as [(typeof night.expired)[0], (typeof night.expired)[0]];
    const releaseHold = releaseHoldIn('eu', eu.pool);

    // The account's held balance no longer covers the hold (an upstream bug): releasing it would break held_minor >= 0.
    await eu.pool.query(`UPDATE accounts SET held_minor = $2 WHERE id = $1`, [short.accountId, short.amountMinor - 1]);
    const before = (await balances(eu.pool)).get(short.accountId);
    expect(await releaseHold({ holdId: short.id })).toEqual({
      status: 'rejected',
      holdId: short.id,
      code: 'InsufficientHeldBalance',
    });
    expect((await holdStates(eu.pool)).get(short.id)).toEqual({
      state: 'rejected',
      rejectCode: 'InsufficientHeldBalance',
    });
    expect((await balances(eu.pool)).get(short.accountId)).toEqual(before);
    expect(await ledgerEntryCount(eu.pool)).toBe(0);
    // Rejected is final for the release: asked again, it says so without trying.
    expect(await releaseHold({ holdId: short.id })).toEqual({
      status: 'rejected',
      holdId: short.id,
      code: 'InsufficientHeldBalance',
    });

    // A released hold whose webhook row is missing: the release stands (its ledger entry is real), reported as such.
    expect(await releaseHold({ holdId: orphan.id })).toMatchObject({ status: 'released' });
    await eu.pool.query('DELETE FROM webhook_deliveries WHERE hold_id = $1', [orphan.id]);
    expect(await releaseHold({ holdId: orphan.id })).toEqual({
      status: 'rejected',
      holdId: orphan.id,
      code: 'ReleasedWithoutWebhook',
    });
    expect((await holdStates(eu.pool)).get(orphan.id)).toEqual({ state: 'released', rejectCode: null });
    expect(await ledgerEntryCount(eu.pool)).toBe(1);
  });

  it("a hold whose release would take the account's held balance below zero ends rejected with its reason, in bounded time", async () => {
    const us = await regionWithWorker('us');
    const night = await seedNight(us.pool, 'us', `${harness.id}c6b`, { expired: 3 }, harness.merchants);
    const [short, ...healthy] = night.expired as [(typeof night.expired)[0], ...typeof night.expired];
    await us.pool.query(`UPDATE accounts SET held_minor = 0 WHERE id = $1`, [short.accountId]);
    const before = (await balances(us.pool)).get(short.accountId);

    // Before: the release retried forever inside the worker and the sweep waited its whole releaseWaitMs for it.
    const result = await within(runSweep(us, { releaseWaitMs: 30_000 }), 25_000, 'the sweep');

    expect(result).toMatchObject({ found: 3, started: 3, unreleasedAtEnd: 0 });
    const handle = us.client.workflow.getHandle(await holdWorkflowIdOf(us.pool, 'us', short.id));
    expect(await within(handle.result(), 10_000, "the hold's workflow")).toEqual({
      release: { status: 'rejected', holdId: short.id, code: 'InsufficientHeldBalance' },
    });
    const description = await handle.describe();
    expect(description.status.name).toBe('COMPLETED');
    expect(description.typedSearchAttributes.get(DeliveryStatusKey)).toBe('none');
    const states = await holdStates(us.pool);
    expect(states.get(short.id)).toEqual({ state: 'rejected', rejectCode: 'InsufficientHeldBalance' });
    for (const hold of healthy) expect(states.get(hold.id)?.state).toBe('released');
    expect((await balances(us.pool)).get(short.accountId)).toEqual(before);
    expect(await ledgerEntryCount(us.pool)).toBe(2);
    const { rows } = await us.pool.query('SELECT 1 FROM webhook_deliveries WHERE hold_id = $1', [short.id]);
    expect(rows).toEqual([]);
  });

  it('a database outage during the release leaves the worker after a few seconds: durable timers until it heals, then released', async () => {
    const us = await regionWithWorker('us');
    const night = await seedNight(us.pool, 'us', `${harness.id}c6c`, { expired: 1 }, harness.merchants);
    const hold = night.expired[0]!;
    // The outage, as the release sees it: every attempt fails (retryably) at its first write.
    await us.pool.query(`
      CREATE FUNCTION simulated_outage() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'simulated outage'; END; $$;
      CREATE TRIGGER simulated_outage BEFORE INSERT ON ledger_entries FOR EACH ROW EXECUTE FUNCTION simulated_outage();`);

    // The sweep waits for the release only briefly: it finishes (and records itself) with the hold still active.
    expect(await runSweep(us, { releaseWaitMs: 1 })).toMatchObject({ found: 1, started: 1, unreleasedAtEnd: 1 });
    const workflowId = await holdWorkflowIdOf(us.pool, 'us', hold.id);
    const handle = us.client.workflow.getHandle(workflowId);
    const events = async () => (await handle.fetchHistory()).events ?? [];
    // Local retries 1 s and 2 s apart; the next backoff (4 s) is past the threshold and becomes a timer.
    await waitUntil(
      async () => (await events()).some((e) => e.timerStartedEventAttributes),
      'the release backs off on a durable timer',
      30_000,
    );
    expect((await holdStates(us.pool)).get(hold.id)?.state).toBe('active');
    const runningId = (await handle.describe()).runId;

    // The hold was left active by a finished sweep, so the next one may start its id again, but its workflow is
    // still running: the start fails, and the hold counts as already handled.
    expect(await runSweep(us, { releaseWaitMs: 1 })).toMatchObject({ found: 1, started: 0, alreadyStarted: 1 });

    await us.pool.query('DROP TRIGGER simulated_outage ON ledger_entries');
    expect(await within(handle.result(), 60_000, "the hold's workflow")).toMatchObject({
      release: { status: 'released' },
      delivery: { status: 'delivered' },
    });
    // Still the one run the first sweep started.
    const description = await handle.describe();
    expect({ status: description.status.name, runId: description.runId }).toEqual({
      status: 'COMPLETED',
      runId: runningId,
    });
    expect(await ledgerEntryCount(us.pool)).toBe(1);
    // A timer for each backoff past the threshold; a marker for each attempt before one, and one for the release.
    const history = await events();
    const timers = history.filter((e) => e.timerStartedEventAttributes).length;
    expect(timers).toBeGreaterThanOrEqual(1);
    expect(history.filter((e) => e.markerRecordedEventAttributes).length).toBeGreaterThanOrEqual(timers + 1);
    expect(await checkLedgerInvariants(us.pool)).toEqual([]);
  });
});
