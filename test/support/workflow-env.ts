/**
 * The `workflow` test project's world: Temporal's time-skipping test server (the only process), the product's
 * workflow bundle, and workers whose activities are plain stub functions. No Postgres, no HTTP, no dev server. A file
 * that needs a real server's behaviour under load (a flood of signals racing a continue-as-new) runs the same world on
 * the integration tests' shared dev server instead (`withWorkflowEnv(use, 'dev-server')`).
 *
 * One environment per test file (`openWorkflowEnv` in beforeAll, `close` in afterAll), with one worker for the file
 * (creating one costs about a second): `runWorker` makes a test's stubs serve the workflows it starts, or runs a worker
 * of its own on a task queue the test names (to stop it and let the next worker's first task carry several messages).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, inject } from 'vitest';
import { Context } from '@temporalio/activity';
import type { WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { loadDevConfig } from '../../dev/dev-config.js';
import { resolveTestServerPath } from '../../dev/temporal-cli.js';
import type { Activities } from '../../src/activities/index.js';
import {
  DEFAULT_QUARANTINE_TIMEOUT_MS,
  DELIVERY_WORKFLOW_TASK_TIMEOUT_MS,
  type AttemptFailedDetails,
  type DeliverWebhookInput,
  type DeliverWebhookResult,
  type QuarantineDecision,
  type QuarantineDecisionAnswer,
  type QuarantineRecorded,
} from '../../src/contracts/delivery.js';
import type { ReleaseOutcome } from '../../src/contracts/domain.js';
import { RETRYABLE_DELIVERY_FAILURE, type QuarantineReason } from '../../src/contracts/failures.js';
import { DeliveryStatusKey, SEARCH_ATTRIBUTES } from '../../src/contracts/search-attributes.js';
import { statusQuery, type HoldStatus } from '../../src/contracts/messages.js';
import { deliverHoldEvent } from '../../src/workflows/hold-events.js';
import { releaseExpiredHold } from '../../src/workflows/release-expired-hold.js';
import { releaseAndDeliver } from '../../src/activities/release-and-deliver.js';

/** The activities a delivery workflow calls, stubbed; each is called with what the workflow passed. */
export type DeliveryStubs = Pick<
  Activities,
  'releaseHold' | 'deliverWebhook' | 'releaseAndDeliver' | 'quarantineDelivery' | 'decideQuarantine'
>;

let runtimeInstalled = false;
function installQuietRuntime() {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  // ERROR: the workflows log a WARN on every quarantine and ignored signal, by design (TEST_LOG_LEVEL=WARN to see
  // them); the core warns once per worker that the test server lacks a capability of recent servers.
  const level = (process.env.TEST_LOG_LEVEL as 'ERROR' | undefined) ?? 'ERROR';
  Runtime.install({
    logger: new DefaultLogger(level),
    telemetryOptions: { logging: { filter: { core: level, other: level }, forward: {} } },
    shutdownSignals: [],
  });
}

export interface WorkflowEnv {
  env: TestWorkflowEnvironment;
  /** The product's workflows, bundled once for the run (test/workflow/global-setup.ts). */
  bundle: { code: string };
  /** The file's worker (see `runWorker`): its task queue; `serve` says whose stubs serve the workflows started next. */
  worker: { taskQueue: string; failed: Promise<never>; serve(activities: object | undefined): void };
  close(): Promise<void>;
}

/** The activity names a delivery workflow calls (the file's worker serves these). */
const STUBBED: readonly (keyof DeliveryStubs)[] = [
  'releaseHold',
  'deliverWebhook',
  'releaseAndDeliver',
  'quarantineDelivery',
  'decideQuarantine',
];

/** Attempts at starting the time-skipping test server: the SDK gives it 5 s, which a loaded 2-core machine can miss. */
const TEST_SERVER_START_ATTEMPTS = 3;

/**
 * Temporal's time-skipping test server, from the binary the local stack resolved. Its start is retried: a server that
 * misses the SDK's fixed 5 s start deadline (the whole suite runs two files at a time on two cores) is infrastructure
 * failing to start, not a test failing; the third miss is thrown.
 */
export async function startTimeSkippingServer(path: string): Promise<TestWorkflowEnvironment> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await TestWorkflowEnvironment.createTimeSkipping({
        server: { executable: { type: 'existing-path', path } },
      });
    } catch (err) {
      if (attempt >= TEST_SERVER_START_ATTEMPTS || !/did not start within/.test((err as Error).message)) throw err;
    }
  }
}

/**
 * Where a file's workflows run: the time-skipping test server, or the shared dev server (test/integration/global-setup.ts,
 * its `hold-sweeper-us` namespace, whose search attributes it registered). The test server holds a signal sent as a
 * run continues as new until the client's connection is reset (~90 s, when it refuses the client's keepalive pings),
 * and the client then sends again what was in flight: a file that races signals with a continue-as-new needs the
 * real server.
 */
export type WorkflowServer = 'time-skipping' | 'dev-server';

async function openServer(server: WorkflowServer): Promise<TestWorkflowEnvironment> {
  if (server === 'dev-server')
    return TestWorkflowEnvironment.createFromExistingServer({
      address: inject('temporalAddress'),
      namespace: 'hold-sweeper-us',
    });
  const dev = loadDevConfig();
  const path = await resolveTestServerPath({ explicitPath: dev.temporalTestServerPath, cacheDir: dev.cacheDir });
  const env = await startTimeSkippingServer(path);
  // The test server starts with no custom search attributes; the workflows upsert DeliveryStatus.
  await env.connection.operatorService.addSearchAttributes({
    namespace: env.namespace ?? 'default',
    searchAttributes: Object.fromEntries(
      SEARCH_ATTRIBUTES.map((key) => [key.name, temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD]),
    ),
  });
  return env;
}

export async function openWorkflowEnv(server: WorkflowServer = 'time-skipping'): Promise<WorkflowEnv> {
  installQuietRuntime();
  const env = await openServer(server);
  // Bundled once for the run (the project's global setup), not per file or per worker.
  const bundle = { code: inject('workflowBundleCode') };

  // One worker for the file (creating one costs about a second): each activity call is served by the stubs of the
  // test that was running when its workflow first called an activity, whatever runs later (continue-as-new included).
  const stubsOf = new Map<string, object>();
  const taskQueue = `wf-${randomUUID()}`;
  let current: object | undefined;
  const route = (name: keyof DeliveryStubs) =>
    async function (...args: unknown[]): Promise<unknown> {
      const workflowId = Context.current().info.workflowExecution?.workflowId ?? '';
      let stubs = stubsOf.get(workflowId);
      if (!stubs) {
        if (!current)
          throw ApplicationFailure.nonRetryable(`no stubs for workflow ${workflowId}: started outside runWorker`);
        stubs = current;
        stubsOf.set(workflowId, stubs);
      }
      const stub = (stubs as Record<string, ((...a: unknown[]) => Promise<unknown>) | undefined>)[name];
      if (!stub) throw ApplicationFailure.nonRetryable(`activity ${name} is not stubbed`);
      return stub(...args);
    };
  const worker = await Worker.create({
    connection: env.nativeConnection,
    namespace: env.namespace ?? 'default',
    taskQueue,
    workflowBundle: bundle,
    activities: Object.fromEntries(STUBBED.map((name) => [name, route(name)])),
  });
  const running = worker.run();
  const failed = running.then((): never => {
    throw new Error('the worker stopped');
  });
  // Observed by runWorker; not a failure until a test waits on it.
  failed.catch(() => undefined);
  return {
    env,
    bundle,
    worker: {
      taskQueue,
      failed,
      serve(activities) {
        current = activities;
      },
    },
    async close() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.catch(() => undefined);
      await env.teardown();
    },
  };
}

/**
 * Runs `fn` with `activities` serving the workflows it starts on the task queue it is given: the file's worker, or with
 * `options.taskQueue` a worker of its own on that queue, running while `fn` runs and without a sticky cache (a test
 * that stops it and starts another: the next task goes to whichever polls).
 */
export async function runWorker<T>(
  w: WorkflowEnv,
  activities: object,
  fn: (taskQueue: string) => Promise<T>,
  options: { taskQueue?: string } = {},
): Promise<T> {
  if (options.taskQueue === undefined) {
    w.worker.serve(activities);
    try {
      return await Promise.race([fn(w.worker.taskQueue), w.worker.failed]);
    } finally {
      w.worker.serve(undefined);
    }
  }
  const worker = await Worker.create({
    connection: w.env.nativeConnection,
    namespace: w.env.namespace ?? 'default',
    taskQueue: options.taskQueue,
    workflowBundle: w.bundle,
    activities,
    maxCachedWorkflows: 0,
  });
  return worker.runUntil(fn(options.taskQueue));
}

/** A task queue no worker polls yet (for `runWorker`'s `taskQueue`). */
export const ownTaskQueue = () => `wf-own-${randomUUID()}`;

/** Opens the file's environment before its tests and closes it after them; `use` gets it once open. */
export function withWorkflowEnv(use: (env: WorkflowEnv) => void, server?: WorkflowServer): void {
  let env: WorkflowEnv | undefined;
  beforeAll(async () => {
    env = await openWorkflowEnv(server);
    use(env);
  });
  afterAll(async () => {
    await env?.close();
  });
}

/** Polls the delivery's status query until it says `stage`; that answer. */
export function reachesStage(handle: WorkflowHandle, stage: HoldStatus['stage']): Promise<HoldStatus> {
  return eventually(
    () => handle.query(statusQuery),
    (s) => s.stage === stage,
    `the status says ${stage}`,
  );
}

/** Polls `probe` until `predicate` holds of its value (no fixed sleeps in the tests); the value that satisfied it. */
export async function eventually<T>(
  probe: () => Promise<T>,
  predicate: (value: T) => boolean,
  what: string,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  let lastError: unknown;
  for (;;) {
    try {
      last = await probe();
      if (predicate(last)) return last;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting until ${what}; last seen ${JSON.stringify(last) ?? String(lastError)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The DeliveryStatus search attribute, as the server describes the workflow. */
export async function deliveryStatusOf(handle: WorkflowHandle): Promise<string | undefined> {
  const description = await handle.describe();
  return description.typedSearchAttributes.get(DeliveryStatusKey);
}

/** The events of every run of `workflowId`, oldest run first (following continue-as-new back from the current run). */
export async function runsOf(
  env: TestWorkflowEnvironment,
  workflowId: string,
): Promise<temporal.api.history.v1.IHistoryEvent[][]> {
  const runs: temporal.api.history.v1.IHistoryEvent[][] = [];
  for (let runId: string | undefined = undefined; ;) {
    const history = await env.client.workflow.getHandle(workflowId, runId).fetchHistory();
    runs.unshift(history.events ?? []);
    runId = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
    if (!runId) break;
  }
  return runs;
}

/** Every value DeliveryStatus was upserted to, in order, across the runs of `workflowId`. */
export async function deliveryStatusHistory(env: TestWorkflowEnvironment, workflowId: string): Promise<string[]> {
  return (await runsOf(env, workflowId))
    .flat()
    .map((e) => e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields?.DeliveryStatus)
    .filter((payload) => payload != null)
    .map((payload) => JSON.parse(Buffer.from(payload.data!).toString()) as string);
}

/** One call of the `deliverWebhook` stub, as the stub saw it. */
export interface DeliverCall {
  input: DeliverWebhookInput;
  /** The fast path (a local activity) or the regular activity. */
  isLocal: boolean;
  /** Temporal's attempt counter of this activity (1 on the fast path). */
  attempt: number;
  /** 0-based index among this workflow's deliverWebhook calls. */
  index: number;
  /** The test server's clock (the workflows' clock), skipped along with it. */
  serverNow(): Promise<number>;
}

/** What the `deliverWebhook` stub does on one call: answer (return) or fail (throw). */
export type DeliverStep = (call: DeliverCall) => DeliverWebhookResult | Promise<DeliverWebhookResult>;

export interface StubScript {
  /** The release's outcome; `released` with a fresh webhook id and a 1-hour horizon unless said. */
  release?: ReleaseOutcome;
  /** One step per call, in order; the last repeats. */
  deliver: DeliverStep[];
  /** `quarantineDelivery`'s answer: four eyes (false unless said) and how long to wait for a human (14 days). */
  fourEyes?: boolean;
  decideWithinMs?: number;
  /**
   * `decideQuarantine`: records the decision (as sent, unless this answers otherwise: a refusal); may block (a promise
   * the test resolves).
   */
  decide?: (decision: QuarantineDecision) => Promise<QuarantineDecisionAnswer | void> | QuarantineDecisionAnswer | void;
}

export interface StubCalls {
  release: Parameters<Activities['releaseHold']>[0][];
  deliver: DeliverCall[];
  quarantine: { webhookId: string; reason: QuarantineReason; detail: string }[];
  decide: QuarantineDecision[];
}

export const HOUR = 3_600_000;

/** A release's outcome with its webhook (`released` or `already_released`). */
export type Released = Extract<ReleaseOutcome, { webhookId: string }>;

export function released(overrides: Partial<Released> = {}): Released {
  const id = randomUUID().slice(0, 8);
  return {
    status: 'released',
    holdId: `hold-${id}`,
    ledgerEntryId: `le-${id}`,
    amountMinor: '1250',
    currency: 'USD',
    merchantId: 'm-1',
    releasedAt: new Date().toISOString(),
    webhookId: `wh-${id}`,
    retryHorizonMs: HOUR,
    ...overrides,
  };
}

/** Plain functions for `Worker.create({ activities })`, following `script`, and what they were called with. */
export function stubActivities(w: WorkflowEnv, script: StubScript): { activities: DeliveryStubs; calls: StubCalls } {
  const calls: StubCalls = { release: [], deliver: [], quarantine: [], decide: [] };
  const release = script.release ?? released();
  const releaseHold: DeliveryStubs['releaseHold'] = async (input) => {
    calls.release.push(input);
    return release;
  };
  const deliverWebhook: DeliveryStubs['deliverWebhook'] = async (input) => {
    const { info } = Context.current();
    const index = calls.deliver.length;
    const call: DeliverCall = {
      input,
      isLocal: info.isLocal,
      attempt: info.attempt,
      index,
      serverNow: () => w.env.currentTimeMs(),
    };
    calls.deliver.push(call);
    const step = script.deliver[Math.min(index, script.deliver.length - 1)];
    if (!step) throw new Error('no deliverWebhook step scripted');
    return step(call);
  };
  const activities: DeliveryStubs = {
    releaseHold,
    deliverWebhook,
    // The product's composition, of the stubs.
    releaseAndDeliver: releaseAndDeliver(releaseHold, deliverWebhook),
    async quarantineDelivery(input): Promise<QuarantineRecorded> {
      calls.quarantine.push(input);
      return {
        fourEyes: script.fourEyes ?? false,
        decideWithinMs: script.decideWithinMs ?? DEFAULT_QUARANTINE_TIMEOUT_MS,
      };
    },
    async decideQuarantine(decision) {
      calls.decide.push(decision);
      return (
        (await script.decide?.(decision)) ?? {
          recorded: true,
          decision: decision.decision,
          by: decision.by,
          reason: decision.reason,
        }
      );
    },
  };
  return { activities, calls };
}

// deliverWebhook steps, by the attempt contract (src/workflows/webhook-delivery.ts).

export const delivered =
  (attempts = 1): DeliverStep =>
  () => ({ status: 'delivered', attempts, statusCode: 200 });

export const alreadyTerminal =
  (
    deliveryStatus: Extract<DeliverWebhookResult, { status: 'already_terminal' }>['deliveryStatus'],
    attempts = 1,
  ): DeliverStep =>
  () => ({ status: 'already_terminal', deliveryStatus, attempts });

export const held =
  (merchantStatus: 'paused' | 'disabled' = 'paused'): DeliverStep =>
  () => ({ status: 'held', merchantStatus });

/** The merchant's budget has no slot for `inMs` (`after`: an earlier webhook of the hold goes first instead). */
export const throttled =
  (inMs: number, after?: string): DeliverStep =>
  () =>
    after
      ? { status: 'wait', why: 'earlier', lane: 'first', waitMs: inMs, after }
      : { status: 'wait', why: 'budget', lane: 'first', waitMs: inMs };

/** Every request the merchant may have open is open: ask again in `inMs` (the workflow backs off on its own). */
export const busy =
  (inMs: number): DeliverStep =>
  () => ({ status: 'wait', why: 'in_flight', lane: 'first', waitMs: inMs });

/**
 * A slot reserved `inMs` from now; its token is remembered in `slots` so a test can expect it back as reservedSlotMs.
 */
export const scheduled =
  (inMs: number, slots: number[]): DeliverStep =>
  async (call) => {
    const reservedSlotMs = (await call.serverNow()) + inMs;
    slots.push(reservedSlotMs);
    return { status: 'wait', why: 'budget', lane: 'first', waitMs: inMs, reservedSlotMs };
  };

export interface AttemptFailure {
  attemptNumber: number;
  /** When the next attempt may go, relative to the server clock at the call: 0 for at once. */
  inMs: number;
  /** 'backoff attempt N' (backing off) or 'Retry-After N s' (honouring it). */
  reason?: string;
  outcome?: string;
}

/** The retryable failure of one attempt, as the delivery activity throws it. */
export function attemptFailed({
  attemptNumber,
  inMs,
  reason = `backoff attempt ${attemptNumber}`,
  outcome = 'HTTP 503',
}: AttemptFailure) {
  return ApplicationFailure.create({
    type: RETRYABLE_DELIVERY_FAILURE,
    message: `${outcome} from merchant m-1 on attempt ${attemptNumber}; next in ${(inMs / 1000).toFixed(1)} s (${reason})`,
    nextRetryDelay: Math.max(1, inMs),
    details: [
      {
        merchantId: 'm-1',
        attemptNumber,
        statusCode: 503,
        outcome,
        reason,
        delayMs: inMs,
      } satisfies AttemptFailedDetails,
    ],
  });
}

export const failsRetryably =
  (failure: AttemptFailure): DeliverStep =>
  () => {
    throw attemptFailed(failure);
  };

/** A named, non-retryable failure (a key of DELIVERY_FAILURE_TYPES). */
export const failsWith =
  (type: string, attemptNumber = 1, message = `${type} (stub)`): DeliverStep =>
  () => {
    throw ApplicationFailure.create({
      type,
      message,
      nonRetryable: true,
      details: [{ merchantId: 'm-1', attemptNumber }],
    });
  };

/** Anything unexpected: a plain Error (the ledger down, a bug). */
export const crashes =
  (message = 'connection terminated unexpectedly'): DeliverStep =>
  () => {
    throw new Error(message);
  };

/** A promise the test resolves when it chooses (a stub that blocks until then). */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

/**
 * Starts `releaseExpiredHold` for the release the stubs answer, as the sweep starts it (DeliveryStatus `pending`, the
 * delivery workflows' task timeout, the release and the first attempt in one local activity); `asReleased`: as 1.0.0's
 * batch started it (the two apart).
 */
export async function startHold(
  w: WorkflowEnv,
  taskQueue: string,
  release: ReleaseOutcome,
  { asReleased = false } = {},
): Promise<WorkflowHandle<typeof releaseExpiredHold>> {
  const holdId = release.holdId;
  const merchantId = 'merchantId' in release ? release.merchantId : 'm-1';
  return w.env.client.workflow.start(releaseExpiredHold, {
    taskQueue,
    workflowId: `hold-${holdId}-${randomUUID().slice(0, 4)}`,
    typedSearchAttributes: [{ key: DeliveryStatusKey, value: 'pending' }],
    workflowTaskTimeout: DELIVERY_WORKFLOW_TASK_TIMEOUT_MS,
    args: [
      {
        region: 'us',
        holdId,
        expiresAt: new Date().toISOString(),
        merchantId,
        ...(asReleased ? {} : { releaseDelivers: true as const }),
      },
    ],
  });
}

/** Starts `deliverHoldEvent` for `webhookId`, as the hold's event workflow starts it (DeliveryStatus `pending`). */
export function startEventDelivery(w: WorkflowEnv, taskQueue: string, webhookId: string) {
  return w.env.client.workflow.start(deliverHoldEvent, {
    taskQueue,
    workflowId: `event-${webhookId}`,
    typedSearchAttributes: [{ key: DeliveryStatusKey, value: 'pending' }],
    workflowTaskTimeout: DELIVERY_WORKFLOW_TASK_TIMEOUT_MS,
    args: [{ region: 'us', holdId: 'hold-ev', webhookId, retryHorizonMs: HOUR }],
  });
}
