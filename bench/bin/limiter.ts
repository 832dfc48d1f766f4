/**
 * `npm run bench:limiter [-- --seconds 10 --clients 8 --merchants 500]`: the merchant budget's cost per acquire
 * (bench/limiter-bench.ts), printed.
 */
import '../../src/node-version.js';
import { parseArgs } from 'node:util';
import { runLimiterBench } from '../limiter-bench.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    clients: { type: 'string', default: '8' },
    merchants: { type: 'string', default: '500' },
  },
});
await runLimiterBench({
  seconds: Number(values.seconds),
  clients: Number(values.clients),
  merchantCount: Number(values.merchants),
});
