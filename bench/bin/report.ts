/**
 * `npm run bench:report -- bench/results/<name>.json [...]`: renders a night report's Markdown and charts again from
 * its JSON (after the report's layout or the charts changed), without running the night again. The charts need the
 * night's raw series: `<name>.series.json.gz` beside the JSON, else the `bench-archive` branch (`git fetch origin
 * bench-archive`), else the JSON as last committed with them (the nights reported before the series moved out); without
 * any the Markdown is written without charts and says so.
 */
import '../../src/node-version.js';
import { redrawReports } from '../results-archive.js';

const files = process.argv.slice(2);
if (files.length === 0) throw new Error('usage: npm run bench:report -- bench/results/<name>.json [...]');
await redrawReports(files);
