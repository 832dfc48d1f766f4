/**
 * `npm run chaos [-- --seed 7 --holds 3000 --workers 3 --temporal cluster --shards 4 --history-hosts 2]`: the chaos run
 * (bench/chaos-run.ts) with its report printed and written to
 * bench/results/chaos-<seed>[-cluster-<shards>[-2hosts]].json.
 * `--history-hosts 2` (cluster only) runs a second history host and SIGKILLs it mid-night; `--only history-host-kill`
 * (a comma-separated list of FAULT_KINDS) injects only those faults, to see what one does alone.
 * Exit code 0 only when every invariant holds and no workflow task failed in the workers.
 */
import '../../src/node-version.js';
import { parseArgs } from 'node:util';
import { loadDevConfig } from '../../dev/dev-config.js';
import { FAULT_KINDS, runChaosAndWrite, type FaultKind } from '../chaos-run.js';
import { parseTemporalBackend } from '../../dev/local-stack.js';

const { values } = parseArgs({
  options: {
    seed: { type: 'string', default: '1' },
    holds: { type: 'string', default: '3000' },
    merchants: { type: 'string', default: '12' },
    workers: { type: 'string', default: '3' },
    'freeze-seconds': { type: 'string', default: '30' },
    'fault-window-seconds': { type: 'string', default: '60' },
    temporal: { type: 'string', default: 'dev' },
    shards: { type: 'string', default: '4' },
    'history-hosts': { type: 'string', default: '1' },
    only: { type: 'string' },
  },
});
const only = values.only?.split(',').map((k) => k.trim()) as FaultKind[] | undefined;
for (const kind of only ?? [])
  if (!FAULT_KINDS.includes(kind)) throw new Error(`--only ${kind}: one of ${FAULT_KINDS.join(', ')}`);
const historyHosts = Number(values['history-hosts']);
if (historyHosts !== 1 && historyHosts !== 2) throw new Error(`--history-hosts ${values['history-hosts']}: 1 or 2`);
const temporal = parseTemporalBackend(['--temporal', values.temporal!, '--shards', values.shards!]);
const passed = await runChaosAndWrite({
  seed: Number(values.seed),
  holds: Number(values.holds),
  merchantsPerRegion: Number(values.merchants),
  workers: Number(values.workers),
  kills: 3,
  freezeMs: Number(values['freeze-seconds']) * 1000,
  faultWindowMs: Number(values['fault-window-seconds']) * 1000,
  quiescenceTimeoutMs: 15 * 60_000,
  historiesToScan: 2000,
  temporal,
  historyHosts,
  only,
  cacheDir: loadDevConfig().cacheDir,
  log: (line) => console.log(line),
});
process.exit(passed ? 0 : 1);
