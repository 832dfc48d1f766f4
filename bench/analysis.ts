/**
 * What binds, from evidence: the sampled series (bench/sampler.ts) summarised per phase, and the sweep's page runs
 * read from their histories (how long a page takes to start its children, what else lands in the run meanwhile).
 */
import proto, { type temporal } from '@temporalio/proto';
import { round, type Phase, type Sample } from './sampler.js';

const EventType = proto.temporal.api.enums.v1.EventType;
const Cause = proto.temporal.api.enums.v1.WorkflowTaskFailedCause;

export interface PhaseSignals {
  seconds: number;
  /** Mean CPU cores per process over the phase. */
  coresByProcess: Record<string, number>;
  server: {
    /** Persistence calls per second, and their mean latency (ms), overall and for the busiest operations. */
    persistenceRequestsPerSecond: number;
    persistenceMeanMs: number;
    persistenceByOperation: { operation: string; perSecond: number; meanMs: number }[];
    /** Matching: task schedule-to-start (ms) by task type. */
    scheduleToStartMs: Record<string, number>;
    /** History: mean time a task waited in its queue (ms, retries included) and tasks per second, busiest first. */
    queueByTask: { task: string; perSecond: number; meanMs: number }[];
    /** A workflow execution's lock: mean wait to get it, mean hold (ms), acquisitions that gave up per second. */
    executionLockWaitMs: number | undefined;
    executionLockHoldMs: number | undefined;
    executionLockFailuresPerSecond: number;
    /** The shard's lock: mean wait (ms). */
    shardLockMs: number | undefined;
  };
  sdk: {
    workflowTaskScheduleToStartMs: number | undefined;
    workflowTaskExecutionMs: number | undefined;
    workflowTasksPerSecond: number;
    localActivityExecutionMs: number | undefined;
    /** Mean slots in use per worker type, over every worker process together. */
    slotsUsed: Record<string, number>;
    stickyCacheHitRatio: number | undefined;
    stickyCacheSize: number | undefined;
  };
}

/** Seconds → ms for a histogram's sum/count difference, in whatever unit the endpoint exports it. */
function meanOf(
  first: Record<string, number>,
  last: Record<string, number>,
  base: string,
  scale: number,
): number | undefined {
  const count = (last[`${base}_count`] ?? 0) - (first[`${base}_count`] ?? 0);
  const sum = (last[`${base}_sum`] ?? 0) - (first[`${base}_sum`] ?? 0);
  return count > 0 ? round((sum / count) * scale, 1) : undefined;
}

/** Series keys of `name{label=value}` in a sample, by label value. */
function byLabel(record: Record<string, number>, name: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const [key, value] of Object.entries(record)) {
    if (!key.startsWith(`${name}{`)) continue;
    const label = key
      .slice(name.length + 1, -1)
      .split('=')
      .slice(1)
      .join('=');
    out.set(label, (out.get(label) ?? 0) + value);
  }
  return out;
}

/** A histogram's count and sum differences between two samples, by its label values. */
function histogramByLabel(first: Record<string, number>, last: Record<string, number>, base: string) {
  const [c0, c1, s0, s1] = [
    byLabel(first, `${base}_count`),
    byLabel(last, `${base}_count`),
    byLabel(first, `${base}_sum`),
    byLabel(last, `${base}_sum`),
  ];
  return [...c1.keys()].map((label) => ({
    label,
    n: (c1.get(label) ?? 0) - (c0.get(label) ?? 0),
    total: (s1.get(label) ?? 0) - (s0.get(label) ?? 0),
  }));
}

/** The server exports seconds (Prometheus convention); the SDK's core exports milliseconds unless told otherwise. */
const SERVER_SCALE = 1000;
const SDK_SCALE = 1;

export function phaseSignals(samples: readonly Sample[], phase: Phase): PhaseSignals | undefined {
  const ofPhase = samples.filter((s) => s.phase === phase);
  if (ofPhase.length < 2) return undefined;
  const first = ofPhase[0]!;
  const last = ofPhase[ofPhase.length - 1]!;
  const seconds = last.t - first.t;
  const coresByProcess: Record<string, number> = {};
  for (const name of Object.keys(last.cpu))
    coresByProcess[name] = round(((last.cpu[name] ?? 0) - (first.cpu[name] ?? 0)) / seconds);

  const operations = histogramByLabel(first.server, last.server, 'persistence_latency').map(({ label, n, total }) => ({
    operation: label,
    n,
    total,
  }));
  const queue = histogramByLabel(first.server, last.server, 'task_latency_queue')
    .sort((a, b) => b.total - a.total)
    .slice(0, 5)
    .map(({ label, n, total }) => ({
      task: label,
      perSecond: round(n / seconds, 1),
      meanMs: n > 0 ? round((total / n) * SERVER_SCALE, 1) : 0,
    }));
  const lockWait = histogramByLabel(first.server, last.server, 'cache_latency').find(
    (h) => h.label === 'mutablestate,operation=HistoryCacheGetOrCreate',
  );
  const calls = operations.reduce((a, o) => a + o.n, 0);
  const time = operations.reduce((a, o) => a + o.total, 0);
  const scheduleToStartMs: Record<string, number> = {};
  const stsCount = [
    byLabel(first.server, 'task_schedule_to_start_latency_count'),
    byLabel(last.server, 'task_schedule_to_start_latency_count'),
  ];
  const stsSum = [
    byLabel(first.server, 'task_schedule_to_start_latency_sum'),
    byLabel(last.server, 'task_schedule_to_start_latency_sum'),
  ];
  for (const [type, n] of stsCount[1]!) {
    const d = n - (stsCount[0]!.get(type) ?? 0);
    if (d > 0)
      scheduleToStartMs[type || 'all'] = round(
        (((stsSum[1]!.get(type) ?? 0) - (stsSum[0]!.get(type) ?? 0)) / d) * SERVER_SCALE,
        1,
      );
  }

  const slotsUsed: Record<string, number> = {};
  for (const [type] of byLabel(last.sdk, 'temporal_worker_task_slots_used')) {
    const values = ofPhase.map((s) => byLabel(s.sdk, 'temporal_worker_task_slots_used').get(type) ?? 0);
    slotsUsed[type] = round(values.reduce((a, b) => a + b, 0) / values.length, 1);
  }
  const hits = (last.sdk.temporal_sticky_cache_hit ?? 0) - (first.sdk.temporal_sticky_cache_hit ?? 0);
  const misses = (last.sdk.temporal_sticky_cache_miss ?? 0) - (first.sdk.temporal_sticky_cache_miss ?? 0);
  const sizes = ofPhase.map((s) => s.sdk.temporal_sticky_cache_size).filter((v): v is number => v !== undefined);
  const wfts =
    (last.sdk.temporal_workflow_task_execution_latency_count ?? 0) -
    (first.sdk.temporal_workflow_task_execution_latency_count ?? 0);
  return {
    seconds: round(seconds, 1),
    coresByProcess,
    server: {
      persistenceRequestsPerSecond: round(calls / seconds, 0),
      persistenceMeanMs: calls > 0 ? round((time / calls) * SERVER_SCALE, 2) : 0,
      persistenceByOperation: operations
        .sort((a, b) => b.total - a.total)
        .slice(0, 6)
        .map((o) => ({
          operation: o.operation,
          perSecond: round(o.n / seconds, 0),
          meanMs: o.n > 0 ? round((o.total / o.n) * SERVER_SCALE, 2) : 0,
        })),
      scheduleToStartMs,
      queueByTask: queue,
      executionLockWaitMs:
        lockWait && lockWait.n > 0 ? round((lockWait.total / lockWait.n) * SERVER_SCALE, 1) : undefined,
      executionLockHoldMs: meanOf(
        first.server,
        last.server,
        'history_workflow_execution_cache_lock_hold_duration',
        SERVER_SCALE,
      ),
      executionLockFailuresPerSecond: round(
        ((last.server.acquire_lock_failed ?? 0) - (first.server.acquire_lock_failed ?? 0)) / seconds,
        1,
      ),
      shardLockMs: meanOf(first.server, last.server, 'lock_latency', SERVER_SCALE),
    },
    sdk: {
      workflowTaskScheduleToStartMs: meanOf(
        first.sdk,
        last.sdk,
        'temporal_workflow_task_schedule_to_start_latency',
        SDK_SCALE,
      ),
      workflowTaskExecutionMs: meanOf(first.sdk, last.sdk, 'temporal_workflow_task_execution_latency', SDK_SCALE),
      workflowTasksPerSecond: round(wfts / seconds, 1),
      localActivityExecutionMs: meanOf(first.sdk, last.sdk, 'temporal_local_activity_execution_latency', SDK_SCALE),
      slotsUsed,
      stickyCacheHitRatio: hits + misses > 0 ? round(hits / (hits + misses), 3) : undefined,
      stickyCacheSize: sizes.length > 0 ? round(sizes.reduce((a, b) => a + b, 0) / sizes.length, 0) : undefined,
    },
  };
}

export interface PageRuns {
  /** Runs that started children (pages). */
  pages: number;
  /** Seconds from a page run's start to its last child started: mean, p50, max. */
  startChildrenSeconds: { mean: number; p50: number; max: number };
  /** Children started per second within a page run (mean over pages). */
  childStartsPerSecond: number;
  /** Per page run, mean: child completions that landed in the open run, workflow tasks, and failed ones by cause. */
  completionsPerPage: number;
  workflowTasksPerPage: number;
  failedWorkflowTasks: Record<string, number>;
}

const seconds = (t: temporal.api.history.v1.IHistoryEvent['eventTime']) =>
  Number(t?.seconds ?? 0) + (t?.nanos ?? 0) / 1e9;

/**
 * How the runs that start the holds' children went (the page's batches; a page run itself before batches), from
 * their histories: only runs that started children of `childType` count.
 */
export function pageRuns(histories: readonly temporal.api.history.v1.IHistory[], childType: string): PageRuns {
  const durations: number[] = [];
  const rates: number[] = [];
  let completions = 0;
  let tasks = 0;
  const failed: Record<string, number> = {};
  for (const history of histories) {
    const events = history.events ?? [];
    const started = events.filter(
      (e) => e.childWorkflowExecutionStartedEventAttributes?.workflowType?.name === childType,
    );
    if (started.length === 0) continue;
    const duration = seconds(started[started.length - 1]!.eventTime) - seconds(events[0]!.eventTime);
    durations.push(duration);
    rates.push(started.length / Math.max(duration, 0.001));
    completions += events.filter(
      (e) => e.childWorkflowExecutionCompletedEventAttributes?.workflowType?.name === childType,
    ).length;
    tasks += events.filter((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED).length;
    for (const e of events) {
      if (e.eventType !== EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) continue;
      const cause =
        Cause[e.workflowTaskFailedEventAttributes?.cause ?? 0]?.replace('WORKFLOW_TASK_FAILED_CAUSE_', '') ?? '?';
      failed[cause] = (failed[cause] ?? 0) + 1;
    }
  }
  const sorted = [...durations].sort((a, b) => a - b);
  const pages = durations.length;
  return {
    pages,
    startChildrenSeconds: {
      mean: round(durations.reduce((a, b) => a + b, 0) / Math.max(1, pages), 1),
      p50: round(sorted[Math.floor(pages / 2)] ?? 0, 1),
      max: round(sorted[pages - 1] ?? 0, 1),
    },
    childStartsPerSecond: round(rates.reduce((a, b) => a + b, 0) / Math.max(1, pages), 1),
    completionsPerPage: round(completions / Math.max(1, pages), 1),
    workflowTasksPerPage: round(tasks / Math.max(1, pages), 1),
    failedWorkflowTasks: failed,
  };
}
