/**
 * `npm run bench:receiver [-- --holds 1000 --senders 32 --lock-seconds 20 --flood 5000]`: the processor-event receiver
 * under load (bench/receiver-bench.ts), its report printed and written to bench/results/receiver-<date>.json.
 */
import '../../src/node-version.js';
import { parseArgs } from 'node:util';
import { runReceiverBench } from '../receiver-bench.js';

const { values } = parseArgs({
  options: {
    holds: { type: 'string', default: '1000' },
    senders: { type: 'string', default: '32' },
    'lock-seconds': { type: 'string', default: '20' },
    flood: { type: 'string', default: '5000' },
  },
});
await runReceiverBench({
  holdsPerPhase: Number(values.holds),
  senders: Number(values.senders),
  lockSeconds: Number(values['lock-seconds']),
  floodRequests: Number(values.flood),
});
