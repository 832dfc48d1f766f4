/**
 * `npm run bench:archive -- --out <dir> [--date 2026-12-02] [--dry-run]`: moves what the repository no longer shows out
 * of bench/results/, into `<dir>` (a checkout of the `bench-archive` branch, committed there):
 *
 *   - every night report's raw series: a JSON that still carries them is rewritten without them, the series written to
 *     `<dir>/<path under bench/results>.series.json.gz`; local `.series.json.gz` files (ignored by git) are copied too;
 *   - every chart no page outside bench/results/ links (README.md, docs/, bench/README.md): into
 *     `<dir>/charts-<date>.tar.gz` (paths under bench/results/), then deleted; a report's Markdown says in place of
 *     each such chart where it went and how to draw it again (`npm run bench:report`), so no link is left dangling.
 *
 * Run it when the README's results move on to a newer night: the older night's charts are then unlinked.
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
