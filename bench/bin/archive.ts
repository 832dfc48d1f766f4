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
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import type { NightReport } from '../night-bench.js';
import {
  archivePath,
  chartsNote,
  gzipSeries,
  hasSeries,
  REPO_ROOT,
  RESULTS_DIR,
  splitReport,
} from '../results-archive.js';

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
const out = path.resolve(values.out);
const dryRun = values['dry-run'];
const exec = promisify(execFile);
const rel = (file: string) => path.relative(RESULTS_DIR, file).split(path.sep).join('/');
/** Not pages of the repository: dependencies, build output, scratch space, and the results themselves. */
const NOT_PAGES = new Set(['.git', 'node_modules', 'dist', 'scratch', 'test-results', '.data']);

async function walk(dir: string, skip: (dir: string) => boolean = () => false): Promise<string[]> {
  const files: string[] = [];
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!skip(file)) files.push(...(await walk(file, skip)));
    } else files.push(file);
  }
  return files;
}

const write = async (file: string, data: string | Buffer) => {
  if (dryRun) return;
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, data);
};

const results = await walk(RESULTS_DIR);

// 1. Raw series out of the committed JSONs (a backends comparison holds several nights: their series are each night's
//    own).
for (const file of results.filter((f) => f.endsWith('.json'))) {
  const json = JSON.parse(await fs.readFile(file, 'utf8')) as NightReport | NightReport[] | Record<string, unknown>;
  if (Array.isArray(json)) {
    if (!json.some(hasSeries)) continue;
    await write(
      file,
      JSON.stringify(
        json.map((r) => splitReport(r).summary),
        null,
        2,
      ) + '\n',
    );
    console.log(`${rel(file)}: series left out`);
  } else if (hasSeries(json)) {
    const { summary, series } = splitReport(json as NightReport);
    await write(path.join(out, archivePath(file)!), gzipSeries(series));
    await write(file, JSON.stringify(summary, null, 2) + '\n');
    console.log(`${rel(file)}: series to ${archivePath(file)}`);
  }
}
for (const file of results.filter((f) => f.endsWith('.series.json.gz'))) {
  await write(path.join(out, rel(file)), await fs.readFile(file));
  console.log(`${rel(file)}: copied`);
}

// 2. Charts no page links.
const pages = (await walk(REPO_ROOT, (dir) => NOT_PAGES.has(path.basename(dir)) || dir === RESULTS_DIR)).filter((f) =>
  /\.(md|ts)$/.test(f),
);
const linked = new Set<string>();
for (const page of pages) {
  for (const [, target] of (await fs.readFile(page, 'utf8')).matchAll(/\]\(([^)\s]+\.svg)\)|src="([^"]+\.svg)"/g))
    if (target && !/^[a-z]+:/.test(target)) linked.add(path.resolve(path.dirname(page), target));
}
const archived = results.filter(
  (f) => f.endsWith('.svg') && path.basename(path.dirname(f)) === 'charts' && !linked.has(f),
);
let tarball: string | undefined;
if (archived.length > 0) {
  tarball = `charts-${values.date}.tar.gz`;
  for (let n = 2; await exists(path.join(out, tarball)); n++) tarball = `charts-${values.date}-${n}.tar.gz`;
  if (!dryRun) {
    await fs.mkdir(out, { recursive: true });
    await exec('tar', ['-czf', path.join(out, tarball), '-C', RESULTS_DIR, ...archived.map(rel)]);
    await Promise.all(archived.map((f) => fs.rm(f)));
  }
  console.log(
    `${archived.length} charts to ${tarball}; kept (linked): ${[...linked]
      .filter((f) => f.startsWith(RESULTS_DIR))
      .map(rel)
      .join(', ')}`,
  );
}

// 3. The reports' Markdown: each chart that is not here any more (archived now, or never committed) gives way to a
//    note.
const gone = new Set(archived);
const CHART = /\*\*([^*\n]+)\*\*\n\n!\[[^\]\n]*\]\(([^)\s]+\.svg)\)(\n\n)?/g;
for (const file of results.filter((f) => f.endsWith('.md'))) {
  const text = await fs.readFile(file, 'utf8');
  const removed = new Map<string, { title: string; wasHere: boolean }>();
  for (const [, title, target] of text.matchAll(CHART)) {
    const svg = path.resolve(path.dirname(file), target!);
    if (gone.has(svg) || !(await exists(svg))) removed.set(svg, { title: title!, wasHere: gone.has(svg) });
  }
  if (removed.size === 0) continue;
  const note = chartsNote(file.replace(/\.md$/, '.json'), {
    titles: [...removed.values()].map((r) => r.title),
    tarball: [...removed.values()].some((r) => r.wasHere) ? tarball : undefined,
  });
  // The note stands where the first of them stood; the charts still here stay as they were.
  let first = true;
  const rewritten = text.replace(CHART, (block: string, _title: string, target: string, end: string | undefined) => {
    if (!removed.has(path.resolve(path.dirname(file), target))) return block;
    if (!first) return '';
    first = false;
    return note + (end ?? '');
  });
  await write(file, rewritten);
  console.log(`${rel(file)}: ${removed.size} charts replaced by a note`);
}

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}
