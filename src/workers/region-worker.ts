/**
 * Builds one Temporal worker per region from one binary: the workflow bundle is built once and shared, and
 * each worker gets only its own region's ledger pool, namespace and task queue.
 */
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import {
  bundleWorkflowCode,
  DefaultLogger,
  Worker,
  type NativeConnection,
  type WorkerOptions,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import type { MetricMeter, WorkerDeploymentVersion } from '@temporalio/common';
import type pg from 'pg';
import { createActivities } from '../activities/index.js';
import { dataConverterFor, FAILURE_CONVERTER_PATH } from '../codec/encryption-codec.js';
import type { MerchantLabel, RegionConfig, SetCurrentMode, WebhookConfig } from '../config.js';
import { createAgents } from '../delivery/http-sender.js';
import type { SecretSealer } from '../delivery/secret-box.js';
import { withMerchantLabel } from '../observability/metrics.js';
import {
  clientTracedWithin,
  tracedActivities,
  untraced,
  workflowSinks,
  type Tracing,
} from '../observability/tracing.js';
import { setCurrentVersionIfWanted, type SetCurrentOutcome } from './deployment.js';

/** The workflow entry point, as source under tsx and vitest, as compiled JavaScript under dist/. */
export const WORKFLOWS_PATH = fileURLToPath(
  new URL(`../workflows/index${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url),
);

/**
 * The workflow interceptors (src/workflows/interceptors.ts): a workflow started with unencrypted input in an encrypted
 * region fails; a workflow that returns completes once its signal and Update handlers have finished.
 */
export const WORKFLOW_INTERCEPTORS_PATH = fileURLToPath(
  new URL(`../workflows/interceptors${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url),
);

/**
 * The SDK's OpenTelemetry workflow interceptors, on the workflows a trace reached (src/workflows/tracing.cjs): they
 * continue the caller's trace in the workflow and carry it in the headers of what it schedules; they add no command,
 * so histories replay as they were.
 */
export const TRACING_INTERCEPTORS_PATH = fileURLToPath(new URL('../workflows/tracing.cjs', import.meta.url));

/** The product's workflows; the benchmark passes its own entry (the same workflows plus its ceiling). */
export async function bundleWorkflows(workflowsPath = WORKFLOWS_PATH): Promise<WorkflowBundleWithSourceMap> {
  // The bundle carries the failure converter: workflow-side failures are encoded (encrypted) like the rest.
  return bundleWorkflowCode({
    workflowsPath,
    workflowInterceptorModules: [WORKFLOW_INTERCEPTORS_PATH, TRACING_INTERCEPTORS_PATH],
    failureConverterPath: FAILURE_CONVERTER_PATH,
    logger: new DefaultLogger('WARN'),
  });
}

export interface RegionWorkerOptions {
  connection: NativeConnection;
  region: RegionConfig;
  pool: pg.Pool;
  /**
   * Opens the merchants' sealed signing secrets where a webhook is signed: localKeyRing(region.secretKeys), or a KMS.
   */
  sealer: SecretSealer;
  /** The bundle's code is hashed into the default build id (buildIdOf). */
  workflowBundle: { code: string };
  /** This worker's `<deployment>.<build id>` (src/workers/deployment.ts): every worker is versioned. */
  version: WorkerDeploymentVersion;
  webhooks: WebhookConfig;
  /** Four eyes on operator decisions (DecisionsConfig); off unless said. */
  fourEyes?: boolean;
  /** How long a quarantine waits for a human (DecisionsConfig); 14 days unless said. */
  quarantineTimeoutMs?: number;
  /** The outbox reconciler's budget per run (OUTBOX_RUN_BUDGET unless said). */
  outboxBudget?: { webhooks: number; ms: number };
  /** Fast-path attempts at once (half the workflow task slots unless said; 0: every first attempt a regular one). */
  fastPathSlots?: number;
  /** The server's workflow id limit (TemporalLimitsConfig); 255 unless said. */
  maxWorkflowIdLength?: number;
  /** Product metrics (the runtime's meter, exported with the SDK's on the Prometheus endpoint). */
  meter?: MetricMeter;
  /** The merchant_id label on the product metrics (METRICS_MERCHANT_LABEL); `all` (bounded) unless said otherwise. */
  merchantLabel?: MerchantLabel;
  /** Where its spans go (src/observability/tracing.ts); made and dropped unless given. */
  tracing?: Pick<Tracing, 'resource' | 'processor'>;
  /** Worker tuning (concurrency, pollers); TASK_SLOTS and the SDK's defaults otherwise. */
  tuning?: Partial<
    Pick<
      WorkerOptions,
      | 'maxConcurrentActivityTaskExecutions'
      | 'maxConcurrentLocalActivityExecutions'
      | 'maxConcurrentWorkflowTaskExecutions'
      | 'maxCachedWorkflows'
    >
  >;
}

/**
 * The activity slots of each regional worker: the SDK's defaults, written out because the ledger pool is sized from
 * them (`ledgerPoolOptions`). The benchmark found the worker is not bound by them (bench/README.md).
 */
export const TASK_SLOTS = {
  // Deliveries past their first attempt (retries, replays) and the sweep's paging and finish.
  maxConcurrentActivityTaskExecutions: 100,
  // Every hold's release and its delivery's first attempt (the fast path, src/workflows/activity-profiles.ts).
  maxConcurrentLocalActivityExecutions: 100,
  // A workflow task keeps its slot while its local activities run: fast-path attempts may take half of them (the
  // activities' fastPathSlots), the rest are the releases' and every other workflow's.
  maxConcurrentWorkflowTaskExecutions: 40,
} as const;

/**
 * How long a stopping worker (SIGTERM on a deploy) lets activities in flight finish before cancelling them: the
 * longest delivery attempt is a 2 s wait for the merchant's budget, one HTTP attempt of 15 s at most
 * (DEFAULT_DELIVERY_POLICY.attemptTimeoutMs), then its ledger writes; 30 s covers that with room for a slow
 * database. Local activities (releases, first attempts) are always waited for. docker-compose.yml's
 * `stop_grace_period` is longer, so the container is not killed while it drains.
 */
export const SHUTDOWN_GRACE_MS = 30_000;

/**
 * How long a ledger query waits for a connection before it fails and its activity is retried: a new connection
 * (TCP, TLS, SCRAM) takes well under a second even on a loaded database; 5 s is far past that and well inside the
 * ledger activities' 30 s start-to-close, so a database that stops accepting connections fails the attempt with
 * a named cause instead of a silent activity timeout.
 */
const LEDGER_CONNECTION_TIMEOUT_MS = 5_000;
/**
 * Every statement of the worker's ledger work ends within 10 s, and waits at most 5 s for a lock: well inside the
 * ledger activities' 30 s start-to-close, so a slow or locked ledger fails the attempt (and frees its connection)
 * before Temporal gives up on it and starts the next. Transactions that must be shorter say so (`inTransaction`'s
 * limits).
 */
const LEDGER_STATEMENT_TIMEOUT_MS = 10_000;
const LEDGER_LOCK_TIMEOUT_MS = 5_000;

/**
 * The region's ledger pool for a worker with `tuning`: a connection for every activity and local-activity slot.
 * Each activity holds at most one connection, and only while a query or a transaction runs (never across an HTTP
 * attempt or a wait), so no activity waits for another's connection. pg opens connections only when they are
 * needed and closes them after 10 s idle: a quiet worker holds a few. The ledger gauges' refresh (a few reads every
 * METRICS_GAUGE_INTERVAL) shares the pool and waits its turn when it is full. Not configurable on its own: fewer
 * connections than slots only moves the queue into the pool; to open fewer, run fewer slots.
 */
export function ledgerPoolOptions(tuning: RegionWorkerOptions['tuning'] = {}) {
  const activities = tuning.maxConcurrentActivityTaskExecutions ?? TASK_SLOTS.maxConcurrentActivityTaskExecutions;
  const localActivities =
    tuning.maxConcurrentLocalActivityExecutions ?? TASK_SLOTS.maxConcurrentLocalActivityExecutions;
  return {
    max: activities + localActivities,
    connectionTimeoutMillis: LEDGER_CONNECTION_TIMEOUT_MS,
    statement_timeout: LEDGER_STATEMENT_TIMEOUT_MS,
    lock_timeout: LEDGER_LOCK_TIMEOUT_MS,
  };
}

export function createRegionWorker({
  connection,
  region,
  pool,
  sealer,
  workflowBundle,
  version,
  webhooks,
  fourEyes = false,
  quarantineTimeoutMs,
  outboxBudget,
  fastPathSlots,
  maxWorkflowIdLength,
  meter,
  merchantLabel = 'all',
  tracing = untraced(),
  tuning,
}: RegionWorkerOptions): Promise<Worker> {
  return Worker.create({
    connection,
    namespace: region.namespace,
    taskQueue: region.taskQueue,
    workflowBundle,
    // Versioned: a sweep declares itself PINNED (it finishes on the build that started it); every other workflow,
    // the hold's included, moves to the deployment's current version at its next task, so a change to it must replay
    // the released build's histories (the golden-history gate, docs/deploys.md).
    workerDeploymentOptions: { version, useWorkerVersioning: true, defaultVersioningBehavior: 'AUTO_UPGRADE' },
    // Inputs and results leave this process encrypted when the region has keys, bound to its namespace; what comes
    // in unencrypted is refused (src/codec/encryption-codec.ts).
    dataConverter: dataConverterFor(region, 'refuse'),
    activities: createActivities({
      region: region.region,
      pool,
      endpointRules: webhooks,
      maxInFlightPerMerchant: webhooks.maxInFlightPerMerchant,
      destinationRateShare: webhooks.destinationRateShare,
      sealer,
      fourEyes,
      quarantineTimeoutMs,
      outboxBudget,
      fastPathSlots:
        fastPathSlots ??
        Math.floor((tuning?.maxConcurrentWorkflowTaskExecutions ?? TASK_SLOTS.maxConcurrentWorkflowTaskExecutions) / 2),
      maxWorkflowIdLength,
      agents: createAgents(),
      meter: meter && withMerchantLabel(meter, merchantLabel),
    }),
    // One trace from a callback to the last attempt (src/observability/tracing.ts): activities continue the context
    // their workflow scheduled them with, and the workflows they start (a delivery, a resend) carry it on; an
    // activity no trace reached starts its workflows untraced.
    interceptors: {
      activity: [tracedActivities],
      client: { workflow: [clientTracedWithin()] },
    },
    sinks: workflowSinks(tracing),
    shutdownGraceTime: SHUTDOWN_GRACE_MS,
    ...TASK_SLOTS,
    ...tuning,
  });
}

interface RunningRegionWorker {
  /** Resolves when the worker has shut down (drained). */
  run: Promise<void>;
  setCurrent: SetCurrentOutcome;
}

/**
 * Runs the worker and, once it polls (the server only promotes a version it has seen), makes its build the
 * deployment's current version as `setCurrent` says (WORKER_SET_CURRENT). A worker that cannot be promoted when
 * it should be is shut down and the DeploymentError thrown: left running, it would poll a version nothing routes to.
 */
export async function runRegionWorker(
  worker: Worker,
  client: Client,
  setCurrent: SetCurrentMode,
): Promise<RunningRegionWorker> {
  const run = worker.run();
  const { version } = worker.options.workerDeploymentOptions!;
  try {
    return { run, setCurrent: await setCurrentVersionIfWanted(client, worker.options.namespace, version, setCurrent) };
  } catch (err) {
    worker.shutdown();
    await run;
    throw err;
  }
}
