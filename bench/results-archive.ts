/**
 * A night's report in two files: what it says (bench/results/<name>.json, committed) and the raw series its charts
 * are drawn from (<name>.series.json.gz beside it, ignored by git: megabytes a night). The nights reported before the
 * series moved out of the JSONs keep them in this repository's own history (the JSON as last committed with them, in
 * every clone); a later night's, once no page links its charts, go to the `bench-archive` branch under the same paths
 * relative to bench/results/. `npm run bench:report` finds a night's series in any of the three places.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { gunzipSync, gzipSync } from 'node:zlib';
import { writeCharts } from './charts.js';
import type { NightReport, NightSeries, NightSummary } from './night-report.js';
import { markdownReport } from './report.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..');
export const RESULTS_DIR = path.join(REPO_ROOT, 'bench', 'results');
const ARCHIVE_BRANCH = 'bench-archive';
/** A local branch, or origin's as `git fetch origin bench-archive` leaves it. */
const ARCHIVE_REFS = [ARCHIVE_BRANCH, `origin/${ARCHIVE_BRANCH}`];

/** The fields of a night report that are raw series: per-sample and per-second values, read only by the charts. */
const SERIES_FIELDS = ['series', 'merchantSeries', 'dashboard'] as const satisfies readonly (keyof NightSeries)[];

const exec = promisify(execFile);

/** `<name>.series.json.gz` beside `<name>.json`. */
export const seriesFile = (jsonFile: string): string => jsonFile.replace(/\.json$/, '') + '.series.json.gz';

/** A path as the reader types it from the repository root (forward slashes), or as given when outside it. */
function repoPath(file: string): string {
  const relative = path.relative(REPO_ROOT, path.resolve(file));
  return relative.startsWith('..') || path.isAbsolute(relative) ? file : relative.split(path.sep).join('/');
}

/** The series file's path on the archive branch: its path under bench/results/, or undefined outside it. */
function archivePath(jsonFile: string): string | undefined {
  const relative = path.relative(RESULTS_DIR, path.resolve(seriesFile(jsonFile)));
  return relative.startsWith('..') || path.isAbsolute(relative) ? undefined : relative.split(path.sep).join('/');
}

export const hasSeries = (report: object): boolean => SERIES_FIELDS.some((field) => field in report);

/** The report without its series, and the series (a field the night did not record stays absent). */
export function splitReport(report: NightSummary & Partial<NightSeries>): {
  summary: NightSummary;
  series: NightSeries;
} {
  const { series = [], merchantSeries = [], dashboard, ...summary } = report;
  return { summary, series: { series, merchantSeries, ...(dashboard === undefined ? {} : { dashboard }) } };
}

/** Writes `<name>.json` (the summary, indented: it is read in diffs) and `<name>.series.json.gz`. */
export async function writeNightReport(jsonFile: string, report: NightReport): Promise<void> {
  const { summary, series } = splitReport(report);
  await fs.writeFile(jsonFile, JSON.stringify(summary, null, 2) + '\n');
  await fs.writeFile(seriesFile(jsonFile), gzipSeries(series));
}

const gzipSeries = (series: NightSeries): Buffer => gzipSync(JSON.stringify(series), { level: 9 });

/**
 * The newest commit of this repository's history whose `<name>.json` still carried the night's series, or undefined
 * (a night reported after the series moved out, or a file outside the repository).
 */
export async function seriesCommit(jsonFile: string): Promise<string | undefined> {
  return (await committedWithSeries(jsonFile))?.commit;
}

/** That commit and the report as committed there, read once (megabytes of JSON). */
async function committedWithSeries(jsonFile: string): Promise<{ commit: string; report: NightReport } | undefined> {
  const file = repoPath(jsonFile);
  if (path.isAbsolute(file)) return undefined;
  let commits: string[];
  try {
    commits = (await exec('git', ['log', '--format=%h', '--', file], { cwd: REPO_ROOT })).stdout.split('\n');
  } catch {
    return undefined; // not a git checkout
  }
  for (const commit of commits.filter(Boolean)) {
    const json = await gitShow(`${commit}:${file}`);
    if (!json) continue;
    const report = JSON.parse(json.toString('utf8')) as NightReport;
    if (hasSeries(report)) return { commit, report };
  }
  return undefined;
}

/** A file as committed (`<ref>:<path>`), or undefined when the ref or the file is not there. */
async function gitShow(object: string): Promise<Buffer | undefined> {
  try {
    return (await exec('git', ['show', object], { cwd: REPO_ROOT, encoding: 'buffer', maxBuffer: 1 << 30 })).stdout;
  } catch {
    return undefined;
  }
}

/**
 * A night's series: from `<name>.series.json.gz` beside its JSON, else from the archive branch, else from the JSON as
 * last committed with them (both read with `git show`, nothing checked out); undefined when none has them.
 */
export async function readSeries(jsonFile: string): Promise<{ series: NightSeries; from: string } | undefined> {
  const local = seriesFile(jsonFile);
  try {
    return {
      series: JSON.parse(gunzipSync(await fs.readFile(local)).toString('utf8')) as NightSeries,
      from: repoPath(local),
    };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const archived = archivePath(jsonFile);
  if (archived === undefined) return undefined;
  for (const ref of ARCHIVE_REFS) {
    const gz = await gitShow(`${ref}:${archived}`); // no such branch, or no such file on it: the next place
    if (gz) return { series: JSON.parse(gunzipSync(gz).toString('utf8')) as NightSeries, from: `${ref}:${archived}` };
  }
  const found = await committedWithSeries(jsonFile);
  return found && { series: splitReport(found.report).series, from: `${found.commit}:${repoPath(jsonFile)}` };
}

/**
 * What a report says in place of charts it does not carry: where the series are and how to draw them again. `titles`:
 * the charts left out. The series are either in the JSON as committed at `commit` (in every clone), with the charts as
 * first drawn in that commit's `chartsDir` when they were committed; or on the archive branch, the charts in its
 * `tarball`.
 */
export function chartsNote(
  jsonFile: string,
  {
    titles,
    commit,
    chartsDir,
    tarball,
  }: { titles?: readonly string[]; commit?: string; chartsDir?: string; tarball?: string } = {},
): string {
  const file = repoPath(jsonFile);
  // Titles read as a list inside the sentence: "What the run waited on" lower-cased, "CPU per process" as it is.
  const listed = titles?.map((t) => (/^[A-Z][a-z]/.test(t) ? t[0]!.toLowerCase() + t.slice(1) : t));
  const where =
    commit === undefined
      ? `\`${archivePath(jsonFile) ?? path.basename(seriesFile(jsonFile))}\` on the \`${ARCHIVE_BRANCH}\` branch (\`git fetch origin ${ARCHIVE_BRANCH}\`)`
      : `in this repository's history, the JSON as committed at ${commit} (\`git show ${commit}:${file}\`)`;
  const firstDrawn =
    commit !== undefined
      ? chartsDir
        ? `; as first drawn, they are in \`${chartsDir}\` at that commit.`
        : '.'
      : tarball
        ? `; as first drawn, they are in \`${tarball}\` on that branch.`
        : '.';
  return (
    `**Charts**${listed?.length ? ` (${listed.join('; ')})` : ''}: not in this checkout. They are drawn from this night's raw series, ` +
    `${where}: \`npm run bench:report -- ${file}\` draws them again${firstDrawn}`
  );
}

/** `npm run bench:report`: each night's Markdown and charts drawn again from its JSON and its series. */
export async function redrawReports(files: readonly string[]): Promise<void> {
  for (const file of files) {
    const json = JSON.parse(await fs.readFile(file, 'utf8')) as NightSummary | NightReport;
    const name = path.basename(file, '.json');
    const markdownFile = path.join(path.dirname(file), `${name}.md`);
    // A report written before the series were kept apart still carries them.
    const found = hasSeries(json) ? { series: json as NightReport, from: repoPath(file) } : await readSeries(file);
    if (!found) {
      await fs.writeFile(markdownFile, markdownReport(json, [], chartsNote(file)));
      console.log(
        `written: ${markdownFile} without charts: no series for this night beside it, on the bench-archive branch (git fetch origin bench-archive) or in its history`,
      );
      continue;
    }
    const charts = await writeCharts({ ...json, ...found.series }, path.dirname(file), name);
    await fs.writeFile(markdownFile, markdownReport(json, charts));
    console.log(`written: ${markdownFile} and ${charts.length} charts (series from ${found.from})`);
  }
}

const rel = (file: string) => path.relative(RESULTS_DIR, file).split(path.sep).join('/');
/** Not pages of the repository: dependencies, build output, scratch space, and the results themselves. */
const NOT_PAGES = new Set(['.git', 'node_modules', 'dist', 'scratch', 'test-results', '.data']);

/**
 * `npm run bench:archive` (bench/bin/archive.ts): moves what the repository no longer shows out of bench/results/,
 * into `out` (a checkout of the `bench-archive` branch, committed there):
 *
 *   - every night report's raw series: a JSON that still carries them is rewritten without them, the series written to
 *     `<out>/<path under bench/results>.series.json.gz`; local `.series.json.gz` files (ignored by git) are copied too;
 *   - every chart no page outside bench/results/ links (README.md, docs/, bench/README.md): into
 *     `<out>/charts-<date>.tar.gz` (paths under bench/results/), then deleted; a report's Markdown says in place of
 *     each such chart where it went and how to draw it again (`npm run bench:report`), so no link is left dangling.
 *
 * Run it when the README's results move on to a newer night: the older night's charts are then unlinked.
 */
export async function archiveResults({ out, date, dryRun }: { out: string; date: string; dryRun: boolean }) {
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
    tarball = `charts-${date}.tar.gz`;
    for (let n = 2; await exists(path.join(out, tarball)); n++) tarball = `charts-${date}-${n}.tar.gz`;
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
}

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

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}
