/**
 * A night's report in two files: what it says (bench/results/<name>.json, committed) and the raw series its charts
 * are drawn from (<name>.series.json.gz beside it, ignored by git: megabytes a night). Older nights' series, and the
 * charts no page links any more, live on the `bench-archive` branch under the same paths relative to bench/results/,
 * outside the default checkout; `npm run bench:report` finds a night's series in either place.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { gunzipSync, gzipSync } from 'node:zlib';
import type { NightReport, NightSeries, NightSummary } from './night-bench.js';

export const REPO_ROOT = path.resolve(import.meta.dirname, '..');
export const RESULTS_DIR = path.join(REPO_ROOT, 'bench', 'results');
export const ARCHIVE_BRANCH = 'bench-archive';
/** A local branch, or origin's as `git fetch origin bench-archive` leaves it. */
const ARCHIVE_REFS = [ARCHIVE_BRANCH, `origin/${ARCHIVE_BRANCH}`];

/** The fields of a night report that are raw series: per-sample and per-second values, read only by the charts. */
export const SERIES_FIELDS = [
  'series',
  'merchantSeries',
  'dashboard',
] as const satisfies readonly (keyof NightSeries)[];

const exec = promisify(execFile);

/** `<name>.series.json.gz` beside `<name>.json`. */
export const seriesFile = (jsonFile: string): string => jsonFile.replace(/\.json$/, '') + '.series.json.gz';

/** A path as the reader types it from the repository root (forward slashes), or as given when outside it. */
export function repoPath(file: string): string {
  const relative = path.relative(REPO_ROOT, path.resolve(file));
  return relative.startsWith('..') || path.isAbsolute(relative) ? file : relative.split(path.sep).join('/');
}

/** The series file's path on the archive branch: its path under bench/results/, or undefined outside it. */
export function archivePath(jsonFile: string): string | undefined {
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

export const gzipSeries = (series: NightSeries): Buffer => gzipSync(JSON.stringify(series), { level: 9 });

/**
 * A night's series: from `<name>.series.json.gz` beside its JSON, else from the archive branch (read with `git show`,
 * nothing checked out); undefined when neither has them.
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
    let gz: Buffer;
    try {
      ({ stdout: gz } = await exec('git', ['show', `${ref}:${archived}`], {
        cwd: REPO_ROOT,
        encoding: 'buffer',
        maxBuffer: 1 << 30,
      }));
    } catch {
      continue; // no such branch, or no such file on it
    }
    return { series: JSON.parse(gunzipSync(gz).toString('utf8')) as NightSeries, from: `${ref}:${archived}` };
  }
  return undefined;
}

/**
 * What a report says in place of charts it does not carry: where the series are and how to draw them again. `titles`:
 * the charts left out; `tarball`: the archive file holding them as first drawn.
 */
export function chartsNote(
  jsonFile: string,
  { titles, tarball }: { titles?: readonly string[]; tarball?: string } = {},
): string {
  const archived = archivePath(jsonFile) ?? path.basename(seriesFile(jsonFile));
  // Titles read as a list inside the sentence: "What the run waited on" lower-cased, "CPU per process" as it is.
  const listed = titles?.map((t) => (/^[A-Z][a-z]/.test(t) ? t[0]!.toLowerCase() + t.slice(1) : t));
  return (
    `**Charts**${listed?.length ? ` (${listed.join('; ')})` : ''}: not in this checkout. They are drawn from this night's raw series, ` +
    `\`${archived}\` on the \`${ARCHIVE_BRANCH}\` branch (\`git fetch origin ${ARCHIVE_BRANCH}\`): ` +
    `\`npm run bench:report -- ${repoPath(jsonFile)}\` draws them again` +
    (tarball ? `; as first drawn, they are in \`${tarball}\` on that branch.` : '.')
  );
}
