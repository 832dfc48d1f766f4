/**
 * One writer per table: every statement that inserts, updates or deletes a table's rows lives in one module (its
 * src/sql module, next to its reads), so a table's life reads in one file. The committed schema names the tables.
 * A statement composed into another module's statement (a CTE fragment exported by the owner) counts as the owner's.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** Where a second module writes a table, and why it must: keep this short. */
const SECOND_WRITERS: ReadonlyMap<string, { file: string; why: string }> = new Map([
  [
    'merchants',
    {
      file: 'src/db/secrets-at-rest.ts',
      why: 'sealing secrets at rest is the code step of a migration: it runs at start-up, below the SQL layer',
    },
  ],
  [
    'merchant_requests_in_flight',
    {
      file: 'src/sql/deliveries.ts',
      why: "an attempt's lease on a request in flight is given back in the statement that records the attempt",
    },
  ],
]);

const tables = [
  ...fs.readFileSync(path.join(ROOT, 'src/db/schema.sql'), 'utf8').matchAll(/^CREATE TABLE (\w+) \(/gm),
].map((m) => m[1]!);
const WRITE = /\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)\b/g;

function writers(): Map<string, Set<string>> {
  const byTable = new Map<string, Set<string>>();
  const files = fs
    .readdirSync(path.join(ROOT, 'src'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join('src', f));
  for (const file of files) {
    for (const m of fs.readFileSync(path.join(ROOT, file), 'utf8').matchAll(WRITE)) {
      if (!tables.includes(m[1]!)) continue;
      if (!byTable.has(m[1]!)) byTable.set(m[1]!, new Set());
      byTable.get(m[1]!)!.add(file);
    }
  }
  return byTable;
}

describe('one writer per table', () => {
  const found = writers();

  it('reads the tables and finds their writers (the scan is not blind)', () => {
    expect(tables).toEqual(expect.arrayContaining(['auth_holds', 'ledger_entries', 'webhook_deliveries']));
    expect([...found.get('webhook_deliveries')!]).toEqual(['src/sql/deliveries.ts']);
  });

  it("every table is written by one module (and the ledger's by src/sql/holds.ts alone)", () => {
    const many = [...found]
      .map(([table, files]) => [table, [...files].filter((f) => SECOND_WRITERS.get(table)?.file !== f)] as const)
      .filter(([, files]) => files.length > 1)
      .map(([table, files]) => `${table}: ${files.join(', ')}`);
    expect(many).toEqual([]);
    for (const table of ['auth_holds', 'accounts', 'ledger_entries', 'sweep_runs'])
      expect([...found.get(table)!]).toEqual(['src/sql/holds.ts']);
  });

  it('each second writer is still one (a stale entry here would hide nothing, and is removed)', () => {
    for (const [table, { file }] of SECOND_WRITERS) expect(found.get(table)?.has(file)).toBe(true);
  });
});
