/**
 * `npm run bench [-- --holds 5000 --workers 3 --seed 1 --fault-free --no-ceiling --max-cached-workflows 500]`: the night benchmark
 * (bench/night-bench.ts). Prints the report and writes it to
 * bench/results/night-<holds>[-fault-free][-<n>-workers][-cache-<n>].{json,md}.
 */
import fs from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { runNightBench } from '../night-bench.js';
import { markdownReport } from '../report.js';
import { loadDevConfig } from '../../dev/dev-config.js';

/** The design's rate-limit target is stated for three worker processes. */
const DEFAULT_WORKERS = 3;
const { values } = parseArgs({
  options: {
    holds: { type: 'string', default: '50000' },
    merchants: { type: 'string', default: '400' },
    seed: { type: 'string', default: '1' },
    workers: { type: 'string', default: String(DEFAULT_WORKERS) },
    'page-size': { type: 'string', default: '500' },
    'retry-horizon-seconds': { type: 'string', default: '180' },
    'fault-free': { type: 'boolean', default: false },
    'no-ceiling': { type: 'boolean', default: false },
    /** The workers' sticky cache size (WORKER_MAX_CACHED_WORKFLOWS); the product's default when absent. */
    'max-cached-workflows': { type: 'string' },
  },
});
const number = (name: keyof typeof values) => {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer, got ${JSON.stringify(values[name])}`);
  return n;
};
const args = process.argv.slice(2).join(' ');
const command = `npm run bench${args ? ` -- ${args}` : ''}`;
const report = await runNightBench(
  {
    holds: number('holds'),
    merchants: number('merchants'),
    seed: number('seed'),
    faults: !values['fault-free'],
    workers: number('workers'),
    pageSize: number('page-size'),
    retryHorizonMs: number('retry-horizon-seconds') * 1000,
    ceiling: !values['no-ceiling'],
    ...(values['max-cached-workflows'] === undefined ? {} : { maxCachedWorkflows: number('max-cached-workflows') }),
    historiesToScan: 500,
    cacheDir: loadDevConfig().cacheDir,
    log: (line) => console.log(line),
  },
  command,
);
const markdown = markdownReport(report);
console.log(`\n${markdown}`);
const name = `bench/results/night-${report.workload.holds}${report.options.faults ? '' : '-fault-free'}${report.options.workers === DEFAULT_WORKERS ? '' : `-${report.options.workers}-workers`}${report.options.maxCachedWorkflows === undefined ? '' : `-cache-${report.options.maxCachedWorkflows}`}`;
await fs.mkdir('bench/results', { recursive: true });
await fs.writeFile(`${name}.json`, JSON.stringify(report, null, 2) + '\n');
await fs.writeFile(`${name}.md`, markdown);
console.log(`written: ${name}.json, ${name}.md\nreproduce: ${command}`);
process.exit(report.violations.length === 0 ? 0 : 1);
