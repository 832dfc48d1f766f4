/**
 * `npm run bench:retention [-- --days 455 --holds 1000 --night 10000 --clients 8]`: a simulated year of one region's
 * ledger and the retention job on it (bench/retention-bench.ts), its report printed and written to
 * bench/results/retention-<days>d-<holds>.md.
 */
import '../../src/node-version.js';
import { parseArgs } from 'node:util';
import { runRetentionBench } from '../retention-bench.js';

const { values } = parseArgs({
  options: {
    days: { type: 'string', default: '455' },
    holds: { type: 'string', default: '1000' },
    night: { type: 'string', default: '10000' },
    clients: { type: 'string', default: '8' },
  },
});
await runRetentionBench({
  days: Number(values.days),
  holdsPerNight: Number(values.holds),
  nightHolds: Number(values.night),
  clients: Number(values.clients),
});
