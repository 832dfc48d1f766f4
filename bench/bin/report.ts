/**
 * `npm run bench:report -- bench/results/<name>.json [...]`: renders a night report's Markdown and charts again from
 * its JSON (after the report's layout or the charts changed), without running the night again. The charts need the
 * night's raw series: `<name>.series.json.gz` beside the JSON, else the `bench-archive` branch (`git fetch origin
 * bench-archive`), else the JSON as last committed with them (the nights reported before the series moved out); without
 * any the Markdown is written without charts and says so.
 */
import '../../src/node-version.js';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { NightReport, NightSummary } from '../night-bench.js';
import { markdownReport } from '../report.js';
import { writeCharts } from '../charts.js';
import { chartsNote, hasSeries, readSeries, repoPath } from '../results-archive.js';

const files = process.argv.slice(2);
if (files.length === 0) throw new Error('usage: npm run bench:report -- bench/results/<name>.json [...]');
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
