/**
 * docs/security.md's table of the ledger's rights, written from src/db/rights.ts: `npm run docs:rights` rewrites it,
 * and a unit test fails while the file and the code disagree.
 */
import fs from 'node:fs';
import path from 'node:path';
import { LEDGER_RIGHTS, TABLE_VERBS } from '../src/db/rights.js';
import { SERVICE_ROLES, type Service } from '../src/db/roles.js';

export const SECURITY_DOC = path.resolve(import.meta.dirname, '../docs/security.md');

const MARKERS = [
  "<!-- the ledger's rights: written by npm run docs:rights from src/db/rights.ts -->",
  "<!-- end of the ledger's rights -->",
] as const;

const SERVICES = Object.keys(LEDGER_RIGHTS) as Service[];

/** One role's rights on one table: `SELECT`, `INSERT (a, b)`, … (a verb alone: every column). */
function cell(service: Service, table: string): string {
  const rights = LEDGER_RIGHTS[service].tables[table] ?? {};
  const verbs = TABLE_VERBS.flatMap((verb) => {
    const columns = rights[verb];
    if (columns === undefined) return [];
    return [columns === 'all' ? verb : `${verb} (${columns.join(', ')})`];
  });
  return verbs.join('; ') || '—';
}

/** The table: a row per table any role may touch, then a row per SECURITY DEFINER function any role may call. */
function rightsTable(): string {
  const tables = [...new Set(SERVICES.flatMap((s) => Object.keys(LEDGER_RIGHTS[s].tables)))].sort();
  const functions = [...new Set(SERVICES.flatMap((s) => LEDGER_RIGHTS[s].execute))].sort();
  return [
    `| table | ${SERVICES.map((s) => `\`${SERVICE_ROLES[s]}\``).join(' | ')} |`,
    `|---|${SERVICES.map(() => '---|').join('')}`,
    ...tables.map((t) => `| \`${t}\` | ${SERVICES.map((s) => cell(s, t)).join(' | ')} |`),
    ...functions.map(
      (f) =>
        `| \`${f}\` | ${SERVICES.map((s) => (LEDGER_RIGHTS[s].execute.includes(f) ? 'EXECUTE' : '—')).join(' | ')} |`,
    ),
  ].join('\n');
}

/** `doc` with its marked table written from the code. */
export function withRightsTable(doc: string): string {
  const [start, end] = MARKERS;
  const from = doc.indexOf(start);
  const to = doc.indexOf(end);
  if (from < 0 || to < from) throw new Error(`docs/security.md lacks the markers ${start} … ${end}`);
  return `${doc.slice(0, from + start.length)}\n\n${rightsTable()}\n\n${doc.slice(to)}`;
}

/** Rewrites docs/security.md's table; true when the file changed. */
export function writeRightsDoc(): boolean {
  const before = fs.readFileSync(SECURITY_DOC, 'utf8');
  const after = withRightsTable(before);
  if (after !== before) fs.writeFileSync(SECURITY_DOC, after);
  return after !== before;
}
