/**
 * What a night of the benchmark says (bench/night-bench.ts runs it): the options it ran with, what it measured, and
 * the raw series its charts are drawn from. The report, the charts and the archive read it without the runner.
 */
import type { TemporalBackend } from '../dev/local-stack.js';
import type { Region } from '../src/contracts/regions.js';
import type { ActionCount } from './actions.js';
import type { PageRuns, PhaseSignals } from './analysis.js';
import type { DashboardNight } from './dashboard.js';
import type { Violation } from './invariants.js';
import type { NightWorkload } from './night-workload.js';
import type { NightProfile } from './profile.js';
import type { Sample } from './sampler.js';

export interface NightBenchOptions {
  holds: number;
  merchants: number;
  seed: number;
  faults: boolean;
  workers: number;
  pageSize: number;
  /** Holds per batch workflow within a page (SWEEP_BATCH_SIZE), for the sweep and the ceiling alike. */
  batchSize: number;
  /** SWEEP_MAX_UNRELEASED of the product's sweep; undefined: none (pages follow each other at once). */
  maxUnreleased: number | undefined;
  /** Per-merchant retry horizon override, so a dead endpoint is quarantined within the run. */
  retryHorizonMs: number;
  /** Skip the bare fan-out (quicker iterations on the product alone). */
  ceiling: boolean;
  /** WORKER_MAX_CACHED_WORKFLOWS for the worker processes; undefined = the product's default. */
  maxCachedWorkflows?: number;
  /** How many child histories to scan for secrets (all parents' are scanned). */
  historiesToScan: number;
  /** The Temporal under test: the dev server (default) or the production server with N shards on PostgreSQL. */
  temporal: TemporalBackend;
  /**
   * One region per worker process, as production (compose) runs them: `workers` processes per region. Otherwise
   * each of the `workers` processes serves both regions.
   */
  regionPerProcess: boolean;
  /** Profile the workers and count the ledger's statements per hold (bench/profile.ts). */
  profile: boolean;
  /**
   * Run a real Prometheus beside the stack and draw the on-call dashboard's panels from it (bench/dashboard.ts).
   * Prometheus is built once from the Go module proxy (dev/prometheus-tools.ts).
   */
  dashboard: boolean;
  /** One slow merchant per value, answering every webhook 200 after that many ms (night-workload.ts `slowMerchants`). */
  merchantLatencyMs?: readonly number[];
  /** How many merchants (the top by volume) have their endpoints on one origin (`sharedOriginMerchants`). */
  sharedOrigin?: number;
  /**
   * With `sharedOrigin`: a destination declared for those merchants at this rate (req/s for all of them together),
   * so they are paced in one budget instead of each at its own published rate.
   */
  declareDestinationRate?: number;
  /** TRACE_SAMPLE_RATIO of the workers, their traces exported over OTLP to a sink of the bench's that counts them. */
  traceSampleRatio?: number;
  cacheDir: string;
  log: (line: string) => void;
}

/** A slow merchant's night: what its latency cost in requests and in time from release to delivery. */
export interface SlowMerchantReport {
  merchantId: string;
  latencyMs: number;
  ratePerSecond: number;
  holds: number;
  /** Its webhooks in the ledger (webhook_deliveries), and how many of them were delivered. */
  webhooks: number;
  delivered: number;
  /** Requests it received, receiver side: every attempt, the fast path's included. */
  requests: number;
  requestsPerWebhook: number;
  /** From each hold's release to its webhook's delivery (ledger times, delivered webhooks only). */
  releaseToDeliveryP50Seconds?: number;
  releaseToDeliveryP95Seconds?: number;
}

export interface PhaseMeasure {
  seconds: number;
  holdsPerSecond: number;
  /** CPU seconds used during the phase. */
  cpu: { temporal: number; postgres: number; workers: number; merchants: number; total: number };
  historyEvents: { parentPerHold: number; childPerHold: number; totalPerHold: number; parentRuns: number };
}

/**
 * Every event of every history of the night's workflow types, counted by workflow type and event type: two nights of
 * the same workload whose censuses are equal wrote the same events (a refactor's "no behaviour change", measured).
 */
export type EventCensus = Record<string, Record<string, number>>;

/**
 * What a night's report says: bench/results/<name>.json, committed. The raw series its charts are drawn from are
 * `NightSeries`, kept apart (bench/results-archive.ts): megabytes a night, and no statement of their own.
 */
export interface NightSummary {
  command: string;
  date: string;
  machine: { cpus: number; cpuModel: string; memoryGiB: number; node: string };
  options: Omit<NightBenchOptions, 'log' | 'cacheDir'>;
  workload: {
    holds: number;
    merchants: number;
    byRegion: Record<Region, number>;
    faultyMerchants: Record<string, number>;
    merchantBound: NightWorkload['merchantBound'];
    /** The merchants whose endpoints share one origin, their holds, and the destination declared for them if any. */
    sharedOrigin?: { merchants: string[]; holds: number; destination?: { id: string; ratePerSecond: number } };
  };
  ceiling?: PhaseMeasure;
  product: PhaseMeasure & {
    eventCensus?: EventCensus;
    /** Seconds from the trigger until the last hold was released. */
    releasedBySeconds: number;
    /** Holds released per second from the first release to the last (ledger times). Absent from older reports. */
    releaseRatePerSecond?: number;
    /** `releasedBySeconds`, by the name the release rate goes with. */
    lastReleaseSeconds?: number;
    /** Seconds from the trigger until every delivery settled: `seconds` (the ledger polled once a second). */
    settleSeconds?: number;
    /** Per slow merchant (`merchantLatencyMs`), in the order of the latencies. */
    slowMerchants?: SlowMerchantReport[];
    ratioToCeiling?: number;
    makespanVsMerchantBound: number;
    deliveries: Record<string, number>;
    quarantinedByReason: Record<string, number>;
    heldForDisabledMerchants: number;
    requests: number;
    deliveredWebhooks: number;
    requestsPerDelivered: number;
    received429: number;
    unverifiedRequests: number;
    deliveredTwice: number;
    /** Receiver side: the most requests any merchant saw in one second, against its rate + burst. */
    worstMerchantRate: { merchantId: string; maxPerSecond: number; limit: number; ratePerSecond: number };
    merchantsOverLimit: string[];
  };
  /** Per worker process: peak RSS, and what bounds its memory as it reported at start (sticky cache, V8 heap limit). */
  workers: { index: number; regions: string; peakRssMiB: number; maxCachedWorkflows?: number; heapLimitMiB?: number }[];
  /** What binds: the sampled series summarised per phase, and how the sweep's page runs went. */
  analysis: BenchAnalysis;
  /** Temporal Cloud Actions per hold (bench/actions.ts), by how the hold went, and for the whole night. */
  actions: ActionsReport;
  /**
   * Seconds, p50 and p95: a hold workflow's wait for its first workflow task (its start to that task's start, in the
   * sampled histories), and its release to its webhook's delivery (every delivered hold, the ledger's clock).
   */
  holdLatency?: { firstTaskWait: Percentiles; releaseToDelivered: Percentiles };
  /** With `traceSampleRatio`: what the workers exported (OTLP/HTTP requests and their bytes). */
  traces?: { requests: number; bytes: number };
  violations: Violation[];
  /** With `profile`: the workers' CPU by owner and the ledger's statements, per hold. */
  profile?: NightProfile;
}

export interface Percentiles {
  p50: number;
  p95: number;
}

/** A night's raw series, what its charts are drawn from: bench/results/<name>.series.json.gz, not committed. */
export interface NightSeries {
  /** The time series behind the charts (bench/sampler.ts), both phases. */
  series: Sample[];
  /** Receiver side: requests per second over the product phase for the busiest merchants, against their limit. */
  merchantSeries: MerchantSeries[];
  /** The on-call dashboard's panels over the product phase, as the night's Prometheus answered them. */
  dashboard?: DashboardNight;
}

export type NightReport = NightSummary & NightSeries;

interface BenchAnalysis {
  ceiling?: PhaseSignals;
  product?: PhaseSignals;
  ceilingPages?: PageRuns;
  productPages: PageRuns;
}

export interface ActionsReport {
  /** Per hold by how it went (from the sampled hold histories, with the ledger's word on each), the child alone. */
  byOutcome: { outcome: string; holds: number; sampled: number; perHold: ActionCount }[];
  /** A quarantined hold that a human replayed (not part of an unattended night): from the golden history. */
  quarantinedThenReplayed: { source: string; perHold: ActionCount };
  /** The sweep's share per hold: 2 per child started, its runs (continue-as-new), its activities, the schedule's 3. */
  sweepPerHold: ActionCount & { scheduleActions: number; finishHeartbeats: number };
  /** The night: every hold's child (by outcome) + the sweeps. */
  nightTotal: number;
  perHold: number;
}

export interface MerchantSeries {
  merchantId: string;
  ratePerSecond: number;
  limit: number;
  /** [second since the trigger, requests received in that second]. */
  perSecond: [number, number][];
}
