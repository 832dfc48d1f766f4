/**
 * `npm run bench:report -- bench/results/<name>.json`: renders a night report's Markdown and charts again from its
 * JSON (after the report's layout or the charts changed), without running the night again.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { NightReport } from '../night-bench.js';
import { markdownReport } from '../report.js';
import { writeCharts } from '../charts.js';

const files = process.argv.slice(2);
if (files.length === 0) throw new Error('usage: npm run bench:report -- bench/results/<name>.json [...]');
for (const file of files) {
  const report = JSON.parse(await fs.readFile(file, 'utf8')) as NightReport;
  const name = path.basename(file, '.json');
  const charts = await writeCharts(report, path.dirname(file), name);
  await fs.writeFile(path.join(path.dirname(file), `${name}.md`), markdownReport(report, charts));
  console.log(`written: ${path.join(path.dirname(file), `${name}.md`)} and ${charts.length} charts`);
}
