import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultPayloadConverter } from '@temporalio/common';
import type { SweepResult } from '../../src/contracts/domain.js';
import { checkLedgerInvariants } from '../../bench/invariants.js';
import type { Region } from '../../src/contracts/regions.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import type { SweepInput } from '../../src/contracts/domain.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { balances, holdStates, holdWorkflowIdOf, ledgerEntryCount, seedNight } from '../support/ledger.js';

let harness: Harness;
let sweeps = 0;

beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await harness?.close();
});

async function regionWithWorker(region: Region): Promise<TestRegion> {
  const r = await harness.region(region);
  await harness.startWorker(r);
  return r;
}

function runSweep(r: TestRegion, input: Partial<SweepInput> = {}): Promise<SweepResult> {
  return r.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: r.config.taskQueue,
    workflowId: `sweep-${r.config.region}-${harness.id}-${++sweeps}`,
    args: [{ region: r.config.region, releaseWaitMs: 60_000, ...input }],
  });
}

describe('regional sweep', () => {
  it('releases ~200 expired holds exactly once and reconciles balances to the cent', async () => {
    const us = await regionWithWorker('us');
    const night = await seedNight(us.pool, 'us', `${harness.id}a`, { expired: 200 }, harness.merchants);
    const before = await balances(us.pool);

    const result = await runSweep(us, { pageSize: 500 });

    expect(result).toMatchObject({ found: 200, started: 200, alreadyStarted: 0, rejected: 0, unreleasedAtEnd: 0 });
    expect(await ledgerEntryCount(us.pool)).toBe(200);
    const states = await holdStates(us.pool);
    for (const hold of night.expired) expect(states.get(hold.id)?.state).toBe('released');

    const releasedByAccount = new Map<string, bigint>();
    for (const hold of night.expired) {
      releasedByAccount.set(hold.accountId, (releasedByAccount.get(hold.accountId) ?? 0n) + BigInt(hold.amountMinor));
    }
    const after = await balances(us.pool);
    for (const [account, was] of before) {
      const moved = releasedByAccount.get(account) ?? 0n;
      expect(after.get(account)).toEqual({ available: was.available + moved, held: was.held - moved });
    }
    expect(await checkLedgerInvariants(us.pool)).toEqual([]);

    const { rows } = await us.pool.query('SELECT found, started, unreleased_at_end FROM sweep_runs');
    expect(rows).toEqual([{ found: 200, started: 200, unreleased_at_end: 0 }]);
  });

  it('two concurrent sweeps and a re-run after completion change nothing further', async () => {
    const us = await regionWithWorker('us');
    await seedNight(us.pool, 'us', `${harness.id}b`, { expired: 120 }, harness.merchants);

    const [first, second] = await Promise.all([runSweep(us, { pageSize: 50 }), runSweep(us, { pageSize: 50 })]);
    // Between them, each hold was started exactly once; whichever sweep lost a race counted it as already started.
    expect(first.started + second.started).toBe(120);
    expect(first.started + first.alreadyStarted).toBeLessThanOrEqual(120);
    expect(await ledgerEntryCount(us.pool)).toBe(120);
    const balancesAfterFirst = await balances(us.pool);

    const rerun = await runSweep(us, { pageSize: 50 });
    expect(rerun).toMatchObject({ found: 0, started: 0, unreleasedAtEnd: 0 });
    expect(await ledgerEntryCount(us.pool)).toBe(120);
    expect(await balances(us.pool)).toEqual(balancesAfterFirst);
    expect(await checkLedgerInvariants(us.pool)).toEqual([]);
  });

  it('pages with continue-as-new when the night is larger than a page', async () => {
    const eu = await regionWithWorker('eu');
    await seedNight(eu.pool, 'eu', `${harness.id}c`, { expired: 45 }, harness.merchants);
    const workflowId = `sweep-eu-${harness.id}-can`;

    const result = await eu.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: eu.config.taskQueue,
      workflowId,
      args: [{ region: 'eu', pageSize: 10, releaseWaitMs: 60_000 }],
    });

    expect(result).toMatchObject({ found: 45, started: 45, pages: 5, unreleasedAtEnd: 0 });
    expect(await ledgerEntryCount(eu.pool)).toBe(45);
    const runs = async () => {
      const statuses: string[] = [];
      for await (const execution of eu.client.workflow.list({ query: `WorkflowId = '${workflowId}'` }))
        statuses.push(execution.status.name);
      return statuses.sort();
    };
    // One run per page, then a run of its own that waits for the releases. Visibility is eventually consistent:
    // the last run's record may still say Running for a moment after its result is in.
    await expect.poll(runs, { timeout: 15_000 }).toEqual(['COMPLETED', ...Array<string>(5).fill('CONTINUED_AS_NEW')]);
  });

  it('with a bound on unreleased holds, a page is listed only once the earlier pages leave it room', async () => {
    const us = await regionWithWorker('us');
    const night = await seedNight(us.pool, 'us', `${harness.id}bp`, { expired: 10 }, harness.merchants);
    // The sweep's order: the first page is the first five by (expires_at, id).
    const { rows } = await us.pool.query<{ id: string }>(
      'SELECT id FROM auth_holds WHERE id = ANY($1::text[]) ORDER BY expires_at, id',
      [night.expired.map((h) => h.id)],
    );
    const [first, second] = [rows.slice(0, 5).map((r) => r.id), rows.slice(5).map((r) => r.id)];
    // One hold of the first page stays unreleased while the test holds its row: its release waits and retries.
    const blocker = await us.pool.connect();
    await blocker.query('BEGIN');
    await blocker.query('SELECT 1 FROM auth_holds WHERE id = $1 FOR UPDATE', [first[0]]);
    const workflowId = `sweep-us-${harness.id}-bound`;
    const started = await us.client.workflow.start(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId,
      args: [{ region: 'us', pageSize: 5, maxUnreleased: 5, releaseWaitMs: 60_000 }],
    });
    try {
      // The second page's listing waits for room, heartbeating the count it waits on: the one held hold.
      const waitingOn = async () => {
        const pending = (await us.client.workflow.getHandle(workflowId).describe()).raw.pendingActivities ?? [];
        const listing = pending.find((a) => a.activityType?.name === 'listExpiredHolds');
        const details = listing?.heartbeatDetails?.payloads?.[0];
        return details ? defaultPayloadConverter.fromPayload<{ unreleased: number }>(details).unreleased : undefined;
      };
      await expect.poll(waitingOn, { timeout: 30_000 }).toBe(1);
      const states = await holdStates(us.pool);
      expect(first.map((id) => states.get(id)?.state)).toEqual(['active', ...Array<string>(4).fill('released')]);
      expect(second.map((id) => states.get(id)?.state)).toEqual(Array<string>(5).fill('active'));
    } finally {
      await blocker.query('ROLLBACK');
      blocker.release();
    }
    // A full second page leaves a third to look for more: it finds none.
    expect(await started.result()).toMatchObject({ found: 10, started: 10, pages: 3, unreleasedAtEnd: 0 });
    // Every hold of the second page was released after every hold of the first.
    const released = await us.pool.query<{ first_last: Date; second_first: Date }>(
      `SELECT max(released_at) FILTER (WHERE id = ANY($1::text[])) AS first_last,
              min(released_at) FILTER (WHERE id = ANY($2::text[])) AS second_first
         FROM auth_holds`,
      [first, second],
    );
    expect(released.rows[0]!.second_first.getTime()).toBeGreaterThan(released.rows[0]!.first_last.getTime());
  });

  it('leaves holds that have not expired untouched', async () => {
    const us = await regionWithWorker('us');
    const night = await seedNight(us.pool, 'us', `${harness.id}d`, { expired: 20, future: 15 }, harness.merchants);

    const result = await runSweep(us);

    expect(result).toMatchObject({ found: 20, started: 20 });
    const states = await holdStates(us.pool);
    for (const hold of night.future) expect(states.get(hold.id)?.state).toBe('active');
    expect(await ledgerEntryCount(us.pool)).toBe(20);
  });

  it('a US sweep never touches the EU ledger, and vice versa', async () => {
    const us = await regionWithWorker('us');
    const eu = await regionWithWorker('eu');
    await seedNight(us.pool, 'us', `${harness.id}e`, { expired: 30 }, harness.merchants);
    await seedNight(eu.pool, 'eu', `${harness.id}f`, { expired: 25 }, harness.merchants);
    const euBefore = await balances(eu.pool);

    expect(await runSweep(us)).toMatchObject({ found: 30, started: 30 });
    expect(await ledgerEntryCount(eu.pool)).toBe(0);
    expect(await balances(eu.pool)).toEqual(euBefore);

    const usAfter = await balances(us.pool);
    expect(await runSweep(eu)).toMatchObject({ found: 25, started: 25 });
    expect(await ledgerEntryCount(us.pool)).toBe(30);
    expect(await balances(us.pool)).toEqual(usAfter);
  });

  it('reports and skips bad rows while the rest of the page is released', async () => {
    const eu = await regionWithWorker('eu');
    const night = await seedNight(eu.pool, 'eu', `${harness.id}g`, { expired: 16, defective: true }, harness.merchants);

    const result = await runSweep(eu, { pageSize: 100 });

    expect(result).toMatchObject({ found: 20, started: 16, rejected: 4, unreleasedAtEnd: 0 });
    const states = await holdStates(eu.pool);
    expect(night.defective.map((h) => states.get(h.id))).toEqual([
      { state: 'rejected', rejectCode: 'NonPositiveAmount' },
      { state: 'rejected', rejectCode: 'UnknownAccount' },
      { state: 'rejected', rejectCode: 'UnknownMerchant' },
      { state: 'rejected', rejectCode: 'CurrencyMismatch' },
    ]);
    for (const hold of night.expired) expect(states.get(hold.id)?.state).toBe('released');
    expect(await ledgerEntryCount(eu.pool)).toBe(16);
    expect(await checkLedgerInvariants(eu.pool)).toEqual([]);
  });

  it('a hold released twice by its own workflow id is a no-op the second time', async () => {
    const us = await regionWithWorker('us');
    const night = await seedNight(us.pool, 'us', `${harness.id}h`, { expired: 1 }, harness.merchants);
    const hold = night.expired[0]!;
    await runSweep(us);
    const workflowId = await holdWorkflowIdOf(us.pool, 'us', hold.id);
    const first = await us.client.workflow.getHandle(workflowId).result();
    expect(first.release.status).toBe('released');

    // The same business action started again by hand (after the first finished): the ledger says no.
    const again = await us.client.workflow.execute('releaseExpiredHold', {
      taskQueue: us.config.taskQueue,
      workflowId: `${workflowId}-manual`,
      args: [
        {
          region: 'us',
          holdId: hold.id,
          expiresAt: workflowId.slice(`hold-release-us-${hold.id}-`.length),
          merchantId: hold.merchantId,
        },
      ],
    });
    expect(again).toMatchObject({
      release: {
        status: 'already_released',
        ledgerEntryId: first.release.status === 'released' ? first.release.ledgerEntryId : '',
      },
    });
    expect(await ledgerEntryCount(us.pool)).toBe(1);
  });
});
