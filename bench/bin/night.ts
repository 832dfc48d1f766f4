/**
 * `npm run bench [-- --holds 5000 --workers 3 --seed 1 --fault-free --no-ceiling --profile --max-cached-workflows 500]`: the
 * night benchmark (bench/night-bench.ts). Prints the report and writes it to
 * bench/results/night-<holds>[-fault-free][-<n>-workers][-cache-<n>][-batch-<n>][-unbounded|-unreleased-<n>][-region-per-process]
 * [-traced-<ratio>][-latency-<ms>-<ms>...][-shared-origin-<n>][-destination-<rate>][-profile][-cluster-<shards>].{json,md}: the JSON without the
 * raw series, which go to `.series.json.gz` beside it (not committed: bench/results-archive.ts), the charts to
 * bench/results/charts/.
 *
 * `--merchant-latency 3000,10000`: one slow merchant per value, answering every webhook 200 after that many ms
 * (below the 15 s attempt timeout), chosen by volume just below the two biggest (night-workload.ts `slowMerchants`).
 * `--shared-origin 20`: the top 20 merchants by volume with their endpoints on one origin of the fake merchants,
 * each still paced at its own rate; `--declare-destination 5` declares them one destination at 5 req/s.
 *
 * `--max-unreleased 1000` (SWEEP_MAX_UNRELEASED, the sweep's backpressure; twice the page size unless given), or `none`
 * for a sweep that lists its pages without waiting for releases.
 *
 * `--trace-sample-ratio 0.01`: the workers trace that share of the holds (TRACE_SAMPLE_RATIO) and export the spans
 * over OTLP to a sink of the bench's, which counts them: run beside a night without it, the CPU per hold is tracing's
 * cost.
 *
 * `--profile`: the workers under V8's profiler and the ledger under pg_stat_statements, the report saying where a hold's
 * worker CPU and round trips go (bench/profile.ts); the ceiling is not run.
 *
 * `--temporal cluster --shards 4` runs it on the production Temporal server (PostgreSQL, 4 history shards) instead of
 * the dev server (`--synchronous-commit off`: PostgreSQL's, for Temporal's sessions). `--backends
 * dev,cluster:1,cluster:4,cluster:8,cluster:4:async` runs the same night on each, one after the other,
 * and writes the side-by-side comparison to bench/results/backends-<holds>[-fault-free]-<backends>.{json,md}.
 */
import '../../src/node-version.js';
import { parseArgs } from 'node:util';
import { DEFAULT_WORKERS, runNights } from '../night-bench.js';
import { parseTemporalBackend, type TemporalBackend } from '../../dev/local-stack.js';
import { loadDevConfig } from '../../dev/dev-config.js';
import { DEFAULT_DELIVERY_POLICY } from '../../src/contracts/delivery.js';

const { values } = parseArgs({
  options: {
    holds: { type: 'string', default: '50000' },
    merchants: { type: 'string', default: '400' },
    seed: { type: 'string', default: '1' },
    workers: { type: 'string', default: String(DEFAULT_WORKERS) },
    'page-size': { type: 'string', default: '500' },
    /** Holds per batch workflow within a page (SWEEP_BATCH_SIZE); the page size gives one batch per page. */
    'batch-size': { type: 'string', default: '50' },
    /** SWEEP_MAX_UNRELEASED (the sweep's backpressure); `none` for a sweep without it; the product's default when absent. */
    'max-unreleased': { type: 'string' },
    'retry-horizon-seconds': { type: 'string', default: '180' },
    'fault-free': { type: 'boolean', default: false },
    'no-ceiling': { type: 'boolean', default: false },
    /** Skip the night's Prometheus and the on-call dashboard drawn from it. */
    'no-dashboard': { type: 'boolean', default: false },
    /** One region per worker process (as compose runs them), --workers of them per region. */
    'region-per-process': { type: 'boolean', default: false },
    /** TRACE_SAMPLE_RATIO of the workers, their traces exported to a sink of the bench's (its cost: CPU per hold). */
    'trace-sample-ratio': { type: 'string' },
    /** Profile the workers and count the ledger's statements (bench/profile.ts); the ceiling is not run. */
    profile: { type: 'boolean', default: false },
    /** The workers' sticky cache size (WORKER_MAX_CACHED_WORKFLOWS); the product's default when absent. */
    'max-cached-workflows': { type: 'string' },
    temporal: { type: 'string', default: 'dev' },
    shards: { type: 'string', default: '4' },
    'synchronous-commit': { type: 'string', default: 'on' },
    /** Comma-separated: dev, cluster:<shards>. */
    backends: { type: 'string' },
    /** Comma-separated ms: one slow merchant per value. */
    'merchant-latency': { type: 'string' },
    'shared-origin': { type: 'string' },
    /** req/s: with --shared-origin, its merchants declared as one destination at this rate. */
    'declare-destination': { type: 'string' },
  },
});
const number = (name: keyof typeof values) => {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n <= 0)
    throw new Error(`--${name} must be a positive integer, got ${JSON.stringify(values[name])}`);
  return n;
};
const traceSampleRatio = values['trace-sample-ratio'] === undefined ? undefined : Number(values['trace-sample-ratio']);
if (traceSampleRatio !== undefined && !(traceSampleRatio >= 0 && traceSampleRatio <= 1))
  throw new Error(`--trace-sample-ratio must be a share from 0 to 1, got ${values['trace-sample-ratio']}`);
// A slow merchant must answer within its attempt; past the timeout it is the `slow` fault, retried.
const merchantLatencyMs = values['merchant-latency']?.split(',').map((v) => {
  const ms = Number(v.trim());
  if (!Number.isInteger(ms) || ms <= 0)
    throw new Error(`--merchant-latency: each value must be a positive integer of ms, got ${JSON.stringify(v)}`);
  if (ms >= DEFAULT_DELIVERY_POLICY.attemptTimeoutMs)
    throw new Error(
      `--merchant-latency ${ms}: must be below the ${DEFAULT_DELIVERY_POLICY.attemptTimeoutMs} ms attempt timeout (a merchant slower than that is the 'slow' fault, whose attempts time out)`,
    );
  return ms;
});
const declareDestination =
  values['declare-destination'] === undefined ? undefined : Number(values['declare-destination']);
if (declareDestination !== undefined && !(declareDestination > 0 && Number.isFinite(declareDestination)))
  throw new Error(`--declare-destination must be a positive rate (req/s), got ${values['declare-destination']}`);
if (declareDestination !== undefined && values['shared-origin'] === undefined)
  throw new Error(
    '--declare-destination declares the --shared-origin merchants a destination: give --shared-origin too',
  );
const args = process.argv.slice(2).join(' ');
const command = `npm run bench${args ? ` -- ${args}` : ''}`;
const backends: TemporalBackend[] = values.backends
  ? values.backends.split(',').map((spec) => {
      // dev | cluster:<shards>[:async] (async: synchronous_commit off for Temporal's sessions)
      const [kind, shards, commit] = spec.trim().split(':');
      if (commit !== undefined && commit !== 'async')
        throw new Error(`--backends ${spec}: expected dev, cluster:<shards> or cluster:<shards>:async`);
      return parseTemporalBackend([
        '--temporal',
        kind ?? '',
        ...(shards ? ['--shards', shards] : []),
        ...(commit ? ['--synchronous-commit', 'off'] : []),
      ]);
    })
  : [
      parseTemporalBackend([
        '--temporal',
        values.temporal!,
        '--shards',
        values.shards!,
        '--synchronous-commit',
        values['synchronous-commit']!,
      ]),
    ];
const passed = await runNights(
  {
    holds: number('holds'),
    merchants: number('merchants'),
    seed: number('seed'),
    faults: !values['fault-free'],
    workers: number('workers'),
    pageSize: number('page-size'),
    batchSize: number('batch-size'),
    maxUnreleased:
      values['max-unreleased'] === undefined
        ? 2 * number('page-size')
        : values['max-unreleased'] === 'none'
          ? undefined
          : number('max-unreleased'),
    retryHorizonMs: number('retry-horizon-seconds') * 1000,
    ceiling: !values['no-ceiling'] && !values.profile,
    profile: values.profile,
    dashboard: !values['no-dashboard'],
    regionPerProcess: values['region-per-process'],
    ...(values['max-cached-workflows'] === undefined ? {} : { maxCachedWorkflows: number('max-cached-workflows') }),
    ...(traceSampleRatio === undefined ? {} : { traceSampleRatio }),
    ...(merchantLatencyMs === undefined ? {} : { merchantLatencyMs }),
    ...(values['shared-origin'] === undefined ? {} : { sharedOrigin: number('shared-origin') }),
    ...(declareDestination === undefined ? {} : { declareDestinationRate: declareDestination }),
    historiesToScan: 500,
    cacheDir: loadDevConfig().cacheDir,
    log: (line) => console.log(line),
  },
  backends,
  command,
);
process.exit(passed ? 0 : 1);
