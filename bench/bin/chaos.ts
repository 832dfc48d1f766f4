/**
 * `npm run chaos [-- --seed 7 --holds 3000 --workers 3]`: the chaos run (bench/chaos-run.ts) with its
 * report printed and written to bench/results/chaos-<seed>.json. Exit code 0 only when every invariant holds.
 */
import fs from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { loadDevConfig } from '../../dev/dev-config.js';
import { runChaos } from '../chaos-run.js';

const { values } = parseArgs({
  options: {
    seed: { type: 'string', default: '1' },
    holds: { type: 'string', default: '3000' },
    merchants: { type: 'string', default: '12' },
    workers: { type: 'string', default: '3' },
    'freeze-seconds': { type: 'string', default: '30' },
    'fault-window-seconds': { type: 'string', default: '60' },
  },
});
const report = await runChaos({
  seed: Number(values.seed),
  holds: Number(values.holds),
  merchantsPerRegion: Number(values.merchants),
  workers: Number(values.workers),
  kills: 3,
  freezeMs: Number(values['freeze-seconds']) * 1000,
  faultWindowMs: Number(values['fault-window-seconds']) * 1000,
  quiescenceTimeoutMs: 15 * 60_000,
  historiesToScan: 2000,
  cacheDir: loadDevConfig().cacheDir,
  log: (line) => console.log(line),
});
console.log(JSON.stringify({ ...report, violations: report.violations.length }, null, 2));
for (const v of report.violations) console.log(`VIOLATION invariant ${v.invariant}: ${v.message}: ${v.ids.join(', ')}`);
await fs.mkdir('bench/results', { recursive: true });
await fs.writeFile(`bench/results/chaos-${report.seed}.json`, JSON.stringify(report, null, 2));
console.log(`reproduce: npm run chaos -- --seed ${values.seed} --holds ${values.holds} --workers ${values.workers}`);
process.exit(report.violations.length === 0 && report.workflowTaskFailures.length === 0 ? 0 : 1);
