/**
 * The ledger's rights (src/db/rights.ts) as code alone: docs/security.md's table is the code's, no role may write a
 * timestamp retention reads, and the grants take everything before they give. What PostgreSQL makes of them is
 * test/integration/ledger-roles.test.ts's.
 */
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SECURITY_DOC, withRightsTable } from '../../dev/rights-docs.js';
import { grantStatements, LEDGER_RIGHTS, RETENTION_CLOCK } from '../../src/db/rights.js';

describe('the ledger’s rights', () => {
  it('docs/security.md shows them as the code has them (npm run docs:rights writes the table)', () => {
    const doc = fs.readFileSync(SECURITY_DOC, 'utf8');
    expect(withRightsTable(doc)).toBe(doc);
    const stale = doc.replace(
      '| `ledger_reviews` | SELECT; INSERT (event_id, hold_id, reason) |',
      '| `ledger_reviews` | SELECT |',
    );
    expect(stale).not.toBe(doc);
    expect(withRightsTable(stale)).toBe(doc);
  });

  it('no role may insert or update a timestamp retention reads', () => {
    const writers = Object.entries(LEDGER_RIGHTS).flatMap(([service, { tables }]) =>
      Object.entries(RETENTION_CLOCK).flatMap(([table, clock]) =>
        (['INSERT', 'UPDATE'] as const).flatMap((verb) => {
          const columns = tables[table]?.[verb];
          const writes = columns === 'all' ? clock : clock.filter((c) => columns?.includes(c));
          return writes.map((column) => `${service} ${verb} ${table}.${column}`);
        }),
      ),
    );
    expect(writers).toEqual([]);
  });

  it('takes everything from each role that exists before it grants, and skips the roles that do not', () => {
    const statements = grantStatements({ worker: 'w' });
    const firstGrant = statements.findIndex((s) => s.startsWith('GRANT'));
    expect(statements.slice(0, firstGrant).filter((s) => s.startsWith('REVOKE ALL ON ALL'))).toEqual([
      'REVOKE ALL ON ALL TABLES IN SCHEMA public FROM w',
      'REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM w',
      'REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM w',
    ]);
    expect(statements.slice(firstGrant).every((s) => s.startsWith('GRANT') && s.endsWith(' TO w'))).toBe(true);
    expect(statements).toContain('GRANT UPDATE (unreleased_at_end) ON sweep_runs TO w');
    expect(statements.join('\n')).toContain('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC, w');
    expect(statements.join('\n')).toContain('REVOKE CREATE ON SCHEMA public FROM PUBLIC, w');
  });
});
