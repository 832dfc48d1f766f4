/**
 * `npm run bench:archive -- --out <dir> [--date 2026-12-02] [--dry-run]`: bench/results-archive.ts `archiveResults`,
 * into `<dir>`, a checkout of the `bench-archive` branch (committed there).
 */
import '../../src/node-version.js';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { archiveResults } from '../results-archive.js';

const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    date: { type: 'string', default: new Date().toISOString().slice(0, 10) },
    'dry-run': { type: 'boolean', default: false },
  },
});
if (!values.out)
  throw new Error(
    'usage: npm run bench:archive -- --out <a checkout of the bench-archive branch> [--date YYYY-MM-DD] [--dry-run]',
  );
await archiveResults({ out: path.resolve(values.out), date: values.date, dryRun: values['dry-run'] });
