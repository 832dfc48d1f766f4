/**
 * The benchmark's time series: every few seconds through both phases, what was done (progress the phase's own poll
 * reports), what each process used (CPU seconds, resident memory, from /proc), and what the Temporal server and the
 * workers say about themselves (their Prometheus endpoints). The report derives rates, latencies and charts from it.
 */
import { cpuSeconds, rssBytes } from './proc-stats.js';
import { scrape, sumScrapes, type Alias, type Scrape } from './prometheus.js';

export type Phase = 'ceiling' | 'product';

export interface Sample {
  phase: Phase;
  /** Seconds since the phase started. */
  t: number;
  /** Cumulative counts the phase's poll last saw (released, delivered, or completed no-op children). */
  progress: Record<string, number>;
  /** Cumulative CPU seconds per process (name → seconds). */
  cpu: Record<string, number>;
  /** Resident memory per worker process, MiB. */
  rssMiB: Record<string, number>;
  /** The server's metrics (counters and histogram sums/counts, cumulative), summed over the labels not asked for. */
  server: Record<string, number>;
  /** The workers' SDK metrics, summed over every worker process. */
  sdk: Record<string, number>;
}

interface SampledProcess {
  name: string;
  pid: number | undefined;
  /** Count its descendants too (PostgreSQL's backends). */
  tree?: boolean;
  /** Record its resident memory. */
  rss?: boolean;
}

/** What the report reads from the server (metric → the labels that tell its series apart). */
export const SERVER_METRICS: ReadonlyMap<string, readonly string[]> = new Map([
  ['persistence_latency_sum', ['operation']],
  ['persistence_latency_count', ['operation']],
  // Matching: how long a task waited for a poller.
  ['task_schedule_to_start_latency_sum', ['task_type']],
  ['task_schedule_to_start_latency_count', ['task_type']],
  // History: how long a task waited in its queue (retries after a failed lock included), by task.
  ['task_latency_queue_sum', ['operation']],
  ['task_latency_queue_count', ['operation']],
  // A workflow execution's lock: the wait to get it (the mutable-state cache), how long it is held, and the
  // acquisitions that gave up.
  ['cache_latency_sum', ['cache_type', 'operation']],
  ['cache_latency_count', ['cache_type', 'operation']],
  ['history_workflow_execution_cache_lock_hold_duration_sum', []],
  ['history_workflow_execution_cache_lock_hold_duration_count', []],
  ['acquire_lock_failed', []],
  // The shard's own lock.
  ['lock_latency_sum', []],
  ['lock_latency_count', []],
]);

/** What the report reads from the workers' SDK metrics. */
const SDK_METRICS: ReadonlyMap<string, readonly string[]> = new Map([
  ['temporal_workflow_task_schedule_to_start_latency_sum', []],
  ['temporal_workflow_task_schedule_to_start_latency_count', []],
  ['temporal_workflow_task_execution_latency_sum', []],
  ['temporal_workflow_task_execution_latency_count', []],
  ['temporal_workflow_task_replay_latency_sum', []],
  ['temporal_workflow_task_replay_latency_count', []],
  ['temporal_activity_schedule_to_start_latency_sum', []],
  ['temporal_activity_schedule_to_start_latency_count', []],
  ['temporal_local_activity_execution_latency_sum', []],
  ['temporal_local_activity_execution_latency_count', []],
  ['temporal_worker_task_slots_used', ['worker_type']],
  ['temporal_worker_task_slots_available', ['worker_type']],
  ['temporal_sticky_cache_hit', []],
  ['temporal_sticky_cache_miss', []],
  ['temporal_sticky_cache_size', []],
  ['temporal_sticky_cache_total_forced_eviction', []],
  ['temporal_workflow_task_queue_poll_succeed', []],
  ['temporal_workflow_task_queue_poll_empty', []],
]);

/**
 * The workers export the SDK's metrics with Prometheus's conventions (src/observability/metrics.ts, PROMETHEUS_EXPORT):
 * latencies in seconds (`_seconds_sum`), counters with `_total`. The report keeps its keys (milliseconds, no suffix),
 * so reports of every release read alike: each exported name maps back to its key here.
 */
const SDK_EXPORTED_AS: ReadonlyMap<string, Alias> = new Map([
  ...[
    'workflow_task_schedule_to_start',
    'workflow_task_execution',
    'workflow_task_replay',
    'activity_schedule_to_start',
    'local_activity_execution',
  ].flatMap((latency): [string, Alias][] => [
    [`temporal_${latency}_latency_seconds_sum`, { name: `temporal_${latency}_latency_sum`, scale: 1000 }],
    [`temporal_${latency}_latency_seconds_count`, { name: `temporal_${latency}_latency_count`, scale: 1 }],
  ]),
  ...[
    'sticky_cache_hit',
    'sticky_cache_miss',
    'sticky_cache_total_forced_eviction',
    'workflow_task_queue_poll_succeed',
    'workflow_task_queue_poll_empty',
  ].map((counter): [string, Alias] => [`temporal_${counter}_total`, { name: `temporal_${counter}`, scale: 1 }]),
]);

interface SamplerOptions {
  processes: () => readonly SampledProcess[];
  serverMetricsUrl: string | undefined;
  workerMetricsUrls: readonly string[];
  intervalMs: number;
}

const toRecord = (s: Scrape) => Object.fromEntries(s);
export const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;

export class Sampler {
  readonly samples: Sample[] = [];
  private phase: Phase | undefined;
  private startedAt = 0;
  private progress: Record<string, number> = {};
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();

  constructor(private readonly options: SamplerOptions) {}

  /** Starts sampling a phase (t = 0 now); the phase's poll reports its progress with `report`. */
  begin(phase: Phase): void {
    this.phase = phase;
    this.startedAt = Date.now();
    this.progress = {};
    this.timer = setInterval(() => {
      // One sample at a time: a slow scrape delays the next, never overlaps it.
      this.running = this.running.then(() => this.sample());
    }, this.options.intervalMs);
    this.running = this.running.then(() => this.sample());
  }

  report(progress: Record<string, number>): void {
    this.progress = { ...progress };
  }

  /** Takes the phase's last sample (with the final progress) and stops. */
  async end(progress: Record<string, number>): Promise<void> {
    clearInterval(this.timer);
    this.progress = { ...progress };
    await this.running;
    await this.sample();
    this.phase = undefined;
  }

  private async sample(): Promise<void> {
    const phase = this.phase;
    if (phase === undefined) return;
    const t = (Date.now() - this.startedAt) / 1000;
    const processes = this.options.processes();
    const [cpu, rss, server, sdk] = await Promise.all([
      Promise.all(
        processes.map(
          async (p) => [p.name, p.pid === undefined ? 0 : round(await cpuSeconds(p.pid, p.tree), 2)] as const,
        ),
      ),
      Promise.all(
        processes
          .filter((p) => p.rss && p.pid !== undefined)
          .map(async (p) => [p.name, round(((await rssBytes(p.pid!)) ?? 0) / 2 ** 20, 0)] as const),
      ),
      this.options.serverMetricsUrl
        ? scrape(this.options.serverMetricsUrl, SERVER_METRICS)
        : Promise.resolve(undefined),
      Promise.all(this.options.workerMetricsUrls.map((url) => scrape(url, SDK_METRICS, SDK_EXPORTED_AS))).then(
        sumScrapes,
      ),
    ]);
    this.samples.push({
      phase,
      t: round(t, 2),
      progress: { ...this.progress },
      cpu: Object.fromEntries(cpu),
      rssMiB: Object.fromEntries(rss),
      server: server ? toRecord(server) : {},
      sdk: toRecord(sdk),
    });
  }
}
