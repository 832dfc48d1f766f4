/**
 * Checks the ledger invariants of shared/DESIGN.md against a region's database and reports every violation
 * with the offending ids. Used by the tests (and, as it grows, by the chaos run and the benchmark).
 */
import type pg from 'pg';

export interface Violation {
  invariant: number;
  message: string;
  ids: string[];
}

async function ids(pool: pg.Pool, sql: string): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>(sql);
  return rows.map((r) => r.id);
}

/** Invariant 1: released at most once, one ledger entry per release, held balances match active holds. */
export async function checkLedgerInvariants(pool: pg.Pool): Promise<Violation[]> {
  const checks: { message: string; sql: string }[] = [
    {
      message: 'released hold without exactly one matching ledger entry',
      sql: `SELECT h.id FROM auth_holds h
              LEFT JOIN ledger_entries e ON e.hold_id = h.id
             WHERE h.state = 'released'
             GROUP BY h.id, h.amount_minor, h.ledger_entry_id
            HAVING count(e.id) <> 1 OR bool_or(e.amount_minor <> h.amount_minor) OR bool_or(e.id <> h.ledger_entry_id)`,
    },
    {
      message: 'ledger entry for a hold that is not released',
      sql: `SELECT e.hold_id AS id FROM ledger_entries e JOIN auth_holds h ON h.id = e.hold_id WHERE h.state <> 'released'`,
    },
    {
      // Defective rows (non-positive amount, foreign currency) never held money, so they are not summed.
      message: "account's held balance differs from the sum of its unreleased holds",
      sql: `SELECT a.id FROM accounts a
              LEFT JOIN auth_holds h ON h.account_id = a.id AND h.state <> 'released'
                                    AND h.amount_minor > 0 AND h.currency = a.currency
             GROUP BY a.id, a.held_minor
            HAVING a.held_minor <> coalesce(sum(h.amount_minor), 0)`,
    },
  ];
  const violations: Violation[] = [];
  for (const check of checks) {
    const found = await ids(pool, check.sql);
    if (found.length > 0) violations.push({ invariant: 1, message: check.message, ids: found });
  }
  return violations;
}
