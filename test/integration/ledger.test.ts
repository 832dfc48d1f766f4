import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createLedgerActivities, type ListExpiredHoldsInput } from '../../src/activities/ledger.js';
import type { ExpiredHoldsPage, ReleaseOutcome } from '../../src/contracts/domain.js';
import { migrate, readMigrations } from '../../src/db/migrate.js';
import { localKeyRing } from '../../src/delivery/secret-box.js';
import { TEST_SECRET_KEYS } from '../support/secrets.js';
import { checkLedgerInvariants } from '../../bench/invariants.js';
import { openHarness, type Harness } from '../support/harness.js';
import { balances, ledgerEntryCount, seedNight } from '../support/ledger.js';

let harness: Harness;

/** The ledger activities, each call run in a real activity context (as the worker would). */
function ledgerFor(region: 'us' | 'eu', pool: import('pg').Pool) {
  const activities = createLedgerActivities({ region, pool });
  const env = () => new MockActivityEnvironment();
  return {
    releaseHold: (input: { holdId: string }): Promise<ReleaseOutcome> => env().run(activities.releaseHold, input),
    listExpiredHolds: (input: ListExpiredHoldsInput): Promise<ExpiredHoldsPage> =>
      env().run(activities.listExpiredHolds, input),
  };
}
beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await harness?.close();
});

describe('migrations', () => {
  it('apply once under concurrent start-ups and are recorded', async () => {
    const pool = await harness.emptyDatabase();
    const secrets = { region: 'us' as const, sealer: localKeyRing(TEST_SECRET_KEYS) };
    const results = await Promise.all([migrate(pool, secrets), migrate(pool, secrets), migrate(pool, secrets)]);
    const migrations = await readMigrations();
    expect(results.flat().sort()).toEqual(migrations.map((m) => m.name).sort());
    const { rows } = await pool.query('SELECT version, name FROM schema_migrations ORDER BY version');
    expect(rows).toEqual(migrations.map((m) => ({ version: m.version, name: m.name })));
    expect(await migrate(pool, secrets)).toEqual([]);
  });

  it('keep the ledger append-only', async () => {
    const us = await harness.region('us');
    const night = await seedNight(us.pool, 'us', `${harness.id}ao`, { expired: 1 }, harness.merchants);
    await ledgerFor('us', us.pool).releaseHold({ holdId: night.expired[0]!.id });
    await expect(us.pool.query('UPDATE ledger_entries SET amount_minor = 1')).rejects.toThrow(/append-only/);
    await expect(us.pool.query('DELETE FROM ledger_entries')).rejects.toThrow(/append-only/);
  });
});

describe('releaseHold', () => {
  it('releases once when called concurrently for the same hold', async () => {
    const us = await harness.region('us');
    const night = await seedNight(us.pool, 'us', `${harness.id}cc`, { expired: 1 }, harness.merchants);
    const hold = night.expired[0]!;
    const ledger = ledgerFor('us', us.pool);
    const before = (await balances(us.pool)).get(hold.accountId)!;

    const outcomes = await Promise.all(Array.from({ length: 8 }, () => ledger.releaseHold({ holdId: hold.id })));

    expect(outcomes.filter((o) => o.status === 'released')).toHaveLength(1);
    expect(outcomes.filter((o) => o.status === 'already_released')).toHaveLength(7);
    const entryIds = new Set(
      outcomes.map((o) => (o.status === 'released' || o.status === 'already_released' ? o.ledgerEntryId : '')),
    );
    expect(entryIds.size).toBe(1);
    expect(await ledgerEntryCount(us.pool)).toBe(1);
    expect((await balances(us.pool)).get(hold.accountId)).toEqual({
      available: before.available + BigInt(hold.amountMinor),
      held: before.held - BigInt(hold.amountMinor),
    });
    expect(await checkLedgerInvariants(us.pool)).toEqual([]);
  });

  it('reports unknown, not-yet-expired and defective holds without writing a ledger entry', async () => {
    const eu = await harness.region('eu');
    const night = await seedNight(
      eu.pool,
      'eu',
      `${harness.id}od`,
      { expired: 0, future: 1, defective: true },
      harness.merchants,
    );
    const ledger = ledgerFor('eu', eu.pool);

    expect(await ledger.releaseHold({ holdId: 'h_does_not_exist' })).toEqual({
      status: 'not_found',
      holdId: 'h_does_not_exist',
    });
    expect(await ledger.releaseHold({ holdId: night.future[0]!.id })).toMatchObject({ status: 'not_expired' });
    const defects = await Promise.all(night.defective.map((h) => ledger.releaseHold({ holdId: h.id })));
    expect(defects.map((d) => (d.status === 'rejected' ? d.code : d.status))).toEqual([
      'NonPositiveAmount',
      'UnknownAccount',
      'UnknownMerchant',
      'CurrencyMismatch',
    ]);
    expect(await ledgerEntryCount(eu.pool)).toBe(0);
    expect(await checkLedgerInvariants(eu.pool)).toEqual([]);
  });

  it('pages in (expires_at, id) order without skipping or repeating rows that share an expiry', async () => {
    const us = await harness.region('us');
    await seedNight(us.pool, 'us', `${harness.id}pg`, { expired: 0 }, harness.merchants);
    // 30 holds with the very same microsecond expiry: only the id breaks the tie.
    await us.pool.query(
      `INSERT INTO auth_holds (id, account_id, merchant_id, amount_minor, currency, expires_at)
       SELECT 'h_tie_' || lpad(i::text, 2, '0'), $1, $2, 100, 'USD', '2026-01-01T00:00:00.123456Z'
         FROM generate_series(1, 30) AS i`,
      [`a_${harness.id}pg_0`, `m_${harness.id}pg_0`],
    );
    await us.pool.query(`UPDATE accounts SET held_minor = 3000 WHERE id = $1`, [`a_${harness.id}pg_0`]);
    const ledger = ledgerFor('us', us.pool);
    const seen: string[] = [];
    let page = await ledger.listExpiredHolds({ cutoff: new Date().toISOString(), limit: 7 });
    for (;;) {
      seen.push(...page.holds.map((h) => h.holdId));
      if (!page.next) break;
      page = await ledger.listExpiredHolds({ cutoff: new Date().toISOString(), after: page.next, limit: 7 });
    }
    expect(seen).toEqual(Array.from({ length: 30 }, (_, i) => `h_tie_${String(i + 1).padStart(2, '0')}`));
  });
});
