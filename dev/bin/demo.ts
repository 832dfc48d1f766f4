/**
 * `npm start`: a whole hold-release night on one machine, offline (dev/demo.ts).
 *
 *   npm start               run the demo and keep the workers up (the schedules keep sweeping)
 *   npm start -- --once     exit after the summary (scripts, CI smoke runs)
 *   npm start -- --temporal cluster [--shards 4]   the production server on PostgreSQL instead of the dev server
 */
import '../../src/node-version.js';
import { runDemo } from '../demo.js';
import { parseTemporalBackend } from '../local-stack.js';

try {
  await runDemo({ once: process.argv.includes('--once'), temporal: parseTemporalBackend(process.argv) });
} catch (err) {
  console.error(err instanceof Error ? `${err.name}: ${err.message}` : err);
  process.exit(1);
}
