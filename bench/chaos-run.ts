/**
 * The chaos run: a scaled night in both regions on real services (file-backed Temporal dev server, embedded
 * PostgreSQL, worker processes, fake merchants with every fault kind), while faults are injected at seeded
 * random times: worker SIGKILLs (each restarted), a Temporal restart, a PostgreSQL restart, a second sweep and
 * a schedule trigger at the same moment, a merchant frozen for a compressed "ten minutes", and a merchant that
 * closes the connection without answering. Meanwhile the card processor calls back about some of the same holds
 * (captures racing their release, reversals, increments; duplicated and out of order) through each region's
 * receiver process, which is itself killed -9 once. Then it waits for quiescence and checks every invariant.
 */
import fs from 'node:fs/promises';
import { generateSigningSecret } from '../src/delivery/standard-webhooks.js';
import { localKeyRing } from '../src/delivery/secret-box.js';
import { FakeMerchants, type MerchantScript } from '../dev/fake-merchants.js';
import { seededRandom, type HoldSeed } from '../dev/seed.js';
import type { TemporalBackend } from '../dev/local-stack.js';
import type { UnexpectedExit, WorkerProcesses } from '../dev/worker-processes.js';
import {
  accountTotals,
  checkBalanced,
  checkInvariants,
  tightestMerchantWindow,
  type MerchantWindow,
  type Violation,
} from './invariants.js';
import {
  FakeProcessor,
  planCallbacks,
  sendCallbacks,
  type CallbackPlan,
  type CallbackTally,
} from '../dev/fake-processor.js';
import { startReceiverProcess, type ReceiverProcess } from '../dev/receiver-process.js';
import type { Region } from '../src/contracts/regions.js';
import proto, { type temporal } from '@temporalio/proto';
import { DEFAULT_DEPLOYMENT_NAME, DEFAULT_SWEEP_TIMEOUT_MS } from '../src/config.js';
import { buildIdOf, currentBuildId, pinnedToVersionQuery } from '../src/workers/deployment.js';
import { ensureSweepSchedule, sweepNow } from '../src/schedules.js';
import { sweepExpiredHolds } from '../src/workflows/sweep-expired-holds.js';
import { seedLedger, startBenchStack } from './stack.js';

/** The faults a run injects (all of them unless `only` names some). */
export const FAULT_KINDS = [
  'second-sweep',
  'freeze',
  'worker-kill',
  'receiver-kill',
  'history-host-kill',
  'temporal-restart',
  'deploy',
  'postgres-restart',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

interface ChaosOptions {
  seed: number;
  holds: number;
  merchantsPerRegion: number;
  workers: number;
  /** How many worker processes are SIGKILLed (one at a time, each restarted). */
  kills: number;
  /** The frozen merchant's "ten minutes", compressed. */
  freezeMs: number;
  /** Faults are injected at random times within this window from the start of the sweeps. */
  faultWindowMs: number;
  quiescenceTimeoutMs: number;
  /** How many histories to scan for secrets (all of them on small runs). */
  historiesToScan: number;
  /** The Temporal under test: the dev server (default) or the production server with N shards on PostgreSQL. */
  temporal?: TemporalBackend;
  /**
   * The cluster's history hosts (cluster only): 2 runs a second server process with the history service alone, same
   * persistence and membership, and a fault SIGKILLs it mid-night (its shards move to the other host).
   */
  historyHosts?: 1 | 2;
  /** Only these faults (e.g. one, to measure what it alone does); every one unless said. */
  only?: readonly FaultKind[];
  /** The share of holds the processor calls back about (captures, reversals, increments); 0.15 unless said. */
  callbackShare?: number;
  cacheDir: string;
  log: (line: string) => void;
  /**
   * Give up this long after the start (a named error listing what the run was still waiting on, then every service
   * stopped), instead of waiting on a fault that never ends; no limit unless said.
   */
  deadlineMs?: number;
}

interface ChaosReport {
  seed: number;
  holds: number;
  faults: { atSeconds: number; kind: string; detail: string }[];
  deliveries: Record<string, number>;
  requests: number;
  /** The processor's callbacks: what was sent (per region, summed) and what applying them did, by outcome. */
  processorCallbacks: Omit<CallbackTally, 'refused'> & {
    holds: number;
    refused: string[];
    outcomes: Record<string, number>;
  };
  /**
   * The merchant that came closest to receiving more than rate + burst in one second: how much later than its
   * neighbours one of its requests could have arrived without doing so (negative: invariant 4 is broken).
   */
  tightestMerchantWindow?: MerchantWindow;
  violations: Violation[];
  /**
   * Workflow tasks the workers failed in the scanned histories: a non-determinism error after the deploy fault, or
   * workflow code that threw, would show here.
   */
  workflowTaskFailures: { workflowId: string; cause: string; message: string }[];
  /**
   * Workflow tasks the server failed and rescheduled on its own, by cause (not a code problem): UNHANDLED_COMMAND (an
   * event arrived while a task completed), FORCE_CLOSE_COMMAND (too many events buffered behind a running task, e.g.
   * a page of child starts), RESET_STICKY_TASK_QUEUE (a worker gone).
   */
  serverFailedWorkflowTasks: Record<string, number>;
  quiescenceSeconds: number;
  /** Worker processes that ended on their own (none killed by a fault), each started again. */
  workerExits: UnexpectedExit[];
  /** With two history hosts: when one was killed, and how the releases of both regions went on around it. */
  historyHostKill?: ReleasePause;
}

/** Releases around a moment (a history host's kill): per second, and the longest time none happened. */
interface ReleasePause {
  atSeconds: number;
  /** Releases in each second from 10 s before the moment to 60 s after it (index 10: the second it began). */
  releasesPerSecond: number[];
  /** The longest run of whole seconds without a release, from the moment on, while releases were still to come. */
  longestPauseSeconds: number;
  /** The longest gap between two consecutive releases that spans or follows the moment (ms). */
  longestGapMs: number;
  /** The median gap between consecutive releases in the 10 s before the moment (ms), for comparison. */
  medianGapBeforeMs: number;
}

/** `releasedAt` (ms), all regions: how releases went on around `atMs`. */
export function releasePause(releasedAt: readonly number[], atMs: number, startedAtMs: number): ReleasePause {
  const times = [...releasedAt].sort((a, b) => a - b);
  const releasesPerSecond = Array.from({ length: 70 }, (_, i) => {
    const from = atMs + (i - 10) * 1000;
    return times.filter((t) => t >= from && t < from + 1000).length;
  });
  const last = times.at(-1) ?? atMs;
  let longestPauseSeconds = 0;
  for (let i = 10, run = 0; i < releasesPerSecond.length && atMs + (i - 10) * 1000 < last; i++) {
    run = releasesPerSecond[i] === 0 ? run + 1 : 0;
    longestPauseSeconds = Math.max(longestPauseSeconds, run);
  }
  let longestGapMs = 0;
  for (let i = 1; i < times.length; i++)
    if (times[i]! > atMs) longestGapMs = Math.max(longestGapMs, times[i]! - Math.max(times[i - 1]!, atMs));
  const before = times.filter((t) => t >= atMs - 10_000 && t < atMs);
  const gaps = before
    .slice(1)
    .map((t, i) => t - before[i]!)
    .sort((a, b) => a - b);
  return {
    atSeconds: Math.round((atMs - startedAtMs) / 100) / 10,
    releasesPerSecond,
    longestPauseSeconds,
    longestGapMs: Math.round(longestGapMs),
    medianGapBeforeMs: gaps.length ? Math.round(gaps[Math.floor(gaps.length / 2)]!) : 0,
  };
}

const REGION_SHARE: Record<Region, number> = { us: 0.6, eu: 0.4 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A chaos run that passed its deadline: what it was still waiting on, and for how long. */
class ChaosDeadlineError extends Error {
  constructor(
    readonly deadlineMs: number,
    readonly waitingOn: string[],
  ) {
    super(
      `the chaos run passed its deadline (${deadlineMs / 1000} s) waiting on: ${waitingOn.join('; ') || 'nothing'}`,
    );
    this.name = 'ChaosDeadlineError';
  }
}

/**
 * What a run is waiting on right now: every wait of the run goes through `on`, which names it; while any is open, they
 * are logged every `everyMs`, and past the deadline each open wait fails with ChaosDeadlineError naming them all. A
 * hang names itself.
 */
function waitWatch(log: (line: string) => void, deadlineMs: number | undefined, everyMs = 30_000) {
  const open = new Set<{ what: () => string; since: number }>();
  const seconds = (ms: number) => Math.round(ms / 1000);
  const waitingOn = () => [...open].map((w) => `${w.what()} (${seconds(Date.now() - w.since)} s)`);
  const timer = setInterval(() => {
    if (open.size > 0) log(`[chaos] still waiting on: ${waitingOn().join('; ')}`);
  }, everyMs);
  let expire: (err: Error) => void = () => undefined;
  const expired = new Promise<never>((_, reject) => (expire = reject));
  expired.catch(() => undefined); // rejected only for the waits racing it
  const deadline =
    deadlineMs === undefined
      ? undefined
      : setTimeout(() => expire(new ChaosDeadlineError(deadlineMs, waitingOn())), deadlineMs);
  return {
    /** `work`, named by `what` (a function: read each time it is logged) while it runs. */
    async on<T>(what: string | (() => string), work: () => Promise<T>): Promise<T> {
      const wait = { what: typeof what === 'string' ? () => what : what, since: Date.now() };
      open.add(wait);
      try {
        return await Promise.race([work(), expired]);
      } finally {
        open.delete(wait);
      }
    },
    stop() {
      clearInterval(timer);
      clearTimeout(deadline);
    },
  };
}

/** A merchant's behaviour by its number: one of each fault kind, the rest healthy (and a little slow). */
function scriptFor(n: number, secret: string): MerchantScript {
  const secrets = [secret];
  switch (n) {
    case 1: // closes the connection after reading the first requests, then recovers
      return { secrets, responses: [{ close: true }, { close: true }, { close: true }, { status: 200 }] };
    case 2: // rate-limits hard now and then
      return {
        secrets,
        responses: [
          { status: 200 },
          { status: 429, retryAfter: '1' },
          { status: 200 },
          { status: 200 },
          { status: 429 },
          { status: 200 },
        ],
      };
    case 3: // a short 503 outage
      return { secrets, responses: [{ status: 503 }, { status: 503 }, { status: 503 }, { status: 200 }] };
    case 4: // rejects everything: quarantined
      return { secrets, responses: [{ status: 400, body: '{"error":"unsupported"}' }] };
    default:
      return { secrets, responses: [{ status: 200, delayMs: 5 + (n % 4) * 5 }] };
  }
}

type History = temporal.api.history.v1.IHistory;
const Cause = proto.temporal.api.enums.v1.WorkflowTaskFailedCause;
/** Causes the server sets when it fails a task itself (and schedules another): no fault of the workflow code. */
export const SERVER_SIDE_CAUSES: ReadonlySet<number> = new Set([
  Cause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND,
  Cause.WORKFLOW_TASK_FAILED_CAUSE_RESET_STICKY_TASK_QUEUE,
  Cause.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND,
  Cause.WORKFLOW_TASK_FAILED_CAUSE_FAILOVER_CLOSE_COMMAND,
  Cause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW,
  Cause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_UPDATE,
]);

/**
 * Every failed workflow task in `history`: its cause, whether the server failed it itself, and the failure's message.
 */
export function failedWorkflowTasks(history: History): { cause: string; serverSide: boolean; message: string }[] {
  return (history.events ?? []).flatMap((e) => {
    const failed = e.workflowTaskFailedEventAttributes;
    if (!failed) return [];
    const cause = failed.cause ?? 0;
    return [
      {
        cause: Cause[cause] ?? String(cause),
        serverSide: SERVER_SIDE_CAUSES.has(cause),
        message: failed.failure?.message ?? '',
      },
    ];
  });
}

async function retrying<T>(what: () => Promise<T>, attempts = 60): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await what();
    } catch (err) {
      if (i >= attempts) throw err;
      await sleep(1000);
    }
  }
}

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const { log } = options;
  const watch = waitWatch(log, options.deadlineMs);
  const random = seededRandom(options.seed);
  const backend: TemporalBackend = options.temporal ?? { kind: 'dev', shards: 1 };
  const merchants = new FakeMerchants();
  const stack = await startBenchStack({
    tmpPrefix: 'hold-sweeper-chaos-',
    databasePrefix: 'chaos',
    temporal: backend,
    historyHosts: options.historyHosts,
    concurrentStart: false,
    merchants,
    regionNames: { taskQueuePrefix: 'chaos', schedulePrefix: 'chaos-sweep', poolMax: 5 },
    cacheDir: options.cacheDir,
  });
  const { regions, postgres, bundle } = stack;
  const temporalName = backend.kind === 'dev' ? 'dev server' : `cluster (${backend.shards} shards)`;
  const faults: ChaosReport['faults'] = [];
  const processorSecret = generateSigningSecret();
  const callbackPlans = new Map<Region, CallbackPlan>();
  const openingTotals = new Map<Region, Map<string, bigint>>();
  const receivers: ReceiverProcess[] = [];
  let workers: WorkerProcesses | undefined;
  const workerExits: UnexpectedExit[] = [];
  // One change to the worker processes at a time: a kill's restart and a deploy's replacement never meet.
  let workerChanges = Promise.resolve();
  const exclusively = (change: () => Promise<void>) => (workerChanges = workerChanges.then(change));
  let startedAt = Date.now();
  let historyHostKilledAt: number | undefined;
  const fault = (kind: string, detail: string) => {
    faults.push({ atSeconds: Math.round((Date.now() - startedAt) / 100) / 10, kind, detail });
    log(`[chaos] +${faults.at(-1)!.atSeconds}s ${kind}: ${detail}`);
  };

  try {
    await stack.prepareLedgers(async (region, sealer) => {
      const n = Math.round(options.holds * REGION_SHARE[region.region]);
      const ids = Array.from({ length: options.merchantsPerRegion }, (_, i) => `m_${region.region}_${i}`);
      const secrets = ids.map(() => generateSigningSecret());
      ids.forEach((id, i) => merchants.script(id, scriptFor(i, secrets[i]!)));
      const currency = region.region === 'us' ? 'USD' : 'EUR';
      const accounts = Array.from({ length: Math.ceil(n / 5) }, (_, i) => ({
        id: `a_${region.region}_${i}`,
        currency,
        availableMinor: 1_000_000,
      }));
      const holds: HoldSeed[] = Array.from({ length: n }, (_, i) => ({
        id: `h_${region.region}_${i}`,
        accountId: accounts[Math.floor(random() * accounts.length)]!.id,
        // Skewed: a third of the holds on merchant 0 (the one that freezes), the rest spread.
        merchantId: random() < 0.33 ? ids[0]! : ids[Math.floor(random() * ids.length)]!,
        amountMinor: 100 + Math.floor(random() * 10_000),
        currency,
        expiresInSeconds: -60 - random() * 3600,
      }));
      await seedLedger(region, sealer, {
        merchants: ids.map((id, i) => ({
          id,
          endpointUrl: merchants.endpointFor(id),
          signingSecret: secrets[i]!,
          ratePerSecond: i % 7 === 5 ? 1 : i % 7 === 6 ? 50 : 5,
          burst: 1,
        })),
        // Short backoff so the faulty merchants settle within a run; the policy itself is the real one.
        deliveryPolicy: { initialBackoffMs: 500, maxBackoffMs: 5000 },
        accounts,
        holds,
      });
      callbackPlans.set(region.region, planCallbacks(holds, options.callbackShare ?? 0.15, random));
      openingTotals.set(region.region, await accountTotals(region.pool));
    });
    log(
      `[chaos] seed ${options.seed}: ${options.holds} holds, ${options.merchantsPerRegion} merchants per region, ${options.workers} worker processes`,
    );

    workers = await watch.on(`${options.workers} worker processes starting`, () =>
      stack.startWorkers(regions, options.workers, {
        // Supervised, as production's are: one that ends on its own is noted (the report says how and why) and
        // started again, rather than leaving its build without workers for the rest of the night.
        supervise: true,
        onExit: (exit) => {
          workerExits.push(exit);
          log(
            `[chaos] worker process ${exit.index} ended on its own (${exit.how}), started again; its last lines:\n${exit.lastLines.join('\n')}`,
          );
        },
      }),
    );
    for (const region of regions) {
      receivers.push(
        await watch.on(`the ${region.region} receiver starting`, () =>
          startReceiverProcess({
            region,
            databaseUrl: region.databaseUrl!,
            temporalAddress: stack.temporalAddress,
            secret: processorSecret,
            gapWait: '2m',
          }),
        ),
      );
    }
    for (const region of regions)
      await ensureSweepSchedule(region.client, region, {
        intervalMs: 86_400_000,
        catchupWindowMs: 600_000,
        pageSize: 200,
        timeoutMs: DEFAULT_SWEEP_TIMEOUT_MS,
      });
    startedAt = Date.now();
    for (const region of regions) await sweepNow(region.client, region);
    // The processor calls back while the sweeps run: captures race the releases of the same holds.
    const callbacks = Promise.all(
      regions.map((region, i) =>
        sendCallbacks(
          new FakeProcessor(receivers[i]!.url, processorSecret),
          callbackPlans.get(region.region)!,
          0.6 * options.faultWindowMs,
          random,
        ),
      ),
    );

    // The faults, at seeded random times inside the window.
    const at = (fromMs: number, toMs: number) => fromMs + random() * (toMs - fromMs);
    const window = options.faultWindowMs;
    const planned: { kind: FaultKind; atMs: number; run: () => Promise<void> }[] = [
      {
        kind: 'second-sweep' as const,
        atMs: at(0.05 * window, 0.2 * window),
        run: async () => {
          const region = regions[Math.floor(random() * regions.length)]!;
          fault('second sweep', `a manual sweep and a schedule trigger at once in ${region.region}`);
          await Promise.all([
            region.client.workflow.start(sweepExpiredHolds, {
              taskQueue: region.taskQueue,
              workflowId: `chaos-manual-${region.region}-${Date.now()}`,
              args: [{ region: region.region, pageSize: 200 }],
            }),
            sweepNow(region.client, region),
          ]);
        },
      },
      {
        kind: 'freeze' as const,
        atMs: at(0.05 * window, 0.3 * window),
        run: async () => {
          fault('freeze', `m_us_0 and m_eu_0 accept connections and never answer for ${options.freezeMs / 1000} s`);
          const frozen = ['m_us_0', 'm_eu_0'];
          // Sealed in the ledger: opened with the region's ring, as its workers open it.
          const secrets = await Promise.all(
            regions.map(async (r, i) =>
              localKeyRing(r.secretKeys).open(
                (await r.pool.query('SELECT signing_secret FROM merchants WHERE id = $1', [frozen[i]])).rows[0]
                  .signing_secret as string,
                { region: r.region, merchantId: frozen[i]! },
              ),
            ),
          );
          frozen.forEach((id, i) => merchants.script(id, { secrets: [secrets[i]!], responses: [{ hang: true }] }));
          setTimeout(() => {
            fault('thaw', 'the frozen merchants answer again');
            frozen.forEach((id, i) => merchants.script(id, scriptFor(0, secrets[i]!)));
          }, options.freezeMs);
        },
      },
      ...Array.from({ length: options.kills }, () => ({
        kind: 'worker-kill' as const,
        atMs: at(0.1 * window, window),
        run: async () => {
          const index = Math.floor(random() * options.workers);
          const downMs = 2000 + random() * 2000;
          await exclusively(async () => {
            fault('kill', `SIGKILL worker process ${index}`);
            workers!.kill(index);
            await sleep(downMs);
            await watch.on(`worker process ${index} restarting after its kill`, () => workers!.restart(index));
            fault('restart', `worker process ${index} is running again`);
          });
        },
      })),
      {
        kind: 'receiver-kill' as const,
        atMs: at(0.1 * window, 0.5 * window),
        run: async () => {
          const index = Math.floor(random() * receivers.length);
          fault(
            'receiver kill',
            `SIGKILL the ${regions[index]!.region} processor-event receiver (recorded events not yet handed over stay recorded)`,
          );
          await receivers[index]!.kill();
          await sleep(1000 + random() * 1000);
          await receivers[index]!.restart();
          fault(
            'receiver restart',
            `the ${regions[index]!.region} receiver is running again; its relay hands over what is left`,
          );
        },
      },
      ...(options.historyHosts === 2
        ? [
            {
              // Before the Temporal restart's range: the restart brings up a new pair of hosts.
              kind: 'history-host-kill' as const,
              atMs: at(0.1 * window, 0.25 * window),
              run: async () => {
                const historyHost = stack.historyHost!;
                fault(
                  'history host kill',
                  `SIGKILL history host 2 (pid ${historyHost.pid}); its shards move to the other host`,
                );
                historyHostKilledAt = Date.now();
                await historyHost.kill();
              },
            },
          ]
        : []),
      {
        kind: 'temporal-restart' as const,
        atMs: at(0.3 * window, 0.6 * window),
        run: async () => {
          fault('temporal restart', `${temporalName} stopped (its state survives, in SQLite or PostgreSQL)`);
          await stack.restartTemporal(1000);
          fault('temporal restart', `${temporalName} running again`);
        },
      },
      {
        kind: 'deploy' as const,
        atMs: at(0.2 * window, 0.7 * window),
        run: async () => {
          // A rolling deploy (docs/deploys.md): each worker process in turn drains and comes back as build B, the
          // first of them making B current (dev's WORKER_SET_CURRENT=always); the last worker of the old build
          // stays until no sweep is pinned to it any more.
          const from = { deploymentName: DEFAULT_DEPLOYMENT_NAME, buildId: buildIdOf(bundle) };
          const to = { ...from, buildId: `chaos-b-${options.seed}` };
          fault('deploy', `rolling ${options.workers} worker processes from build ${from.buildId} to ${to.buildId}`);
          for (let index = 0; index < options.workers; index++) {
            if (index === options.workers - 1 && index > 0) {
              // As docs/deploys.md orders it: first the new build current (the replaced workers make it so as they
              // start, not before), so no new sweep pins to the old one; then nothing left pinned to the old one.
              // Counted before B is current, a sweep the schedule starts a moment later would pin to A and strand.
              const currentBy = Date.now() + 60_000;
              for (const region of regions) {
                const { namespace } = region.client.options;
                await watch.on(`deploy: build ${to.buildId} current in ${namespace}`, async () => {
                  while (
                    (await retrying(() => currentBuildId(region.client, namespace, to.deploymentName))) !== to.buildId
                  ) {
                    if (Date.now() > currentBy)
                      throw new Error(`deploy: build ${to.buildId} is not current in ${namespace}`);
                    await sleep(500);
                  }
                });
              }
              // A sweep started just before that reaches visibility (what `pinned` counts) a moment after it starts.
              await sleep(2_000);
              let stillPinned: string[] = [];
              const pinned = async () => {
                const ids: string[] = [];
                for (const region of regions)
                  for await (const w of region.client.workflow.list({ query: pinnedToVersionQuery(from) }))
                    ids.push(w.workflowId);
                return (stillPinned = ids);
              };
              await watch.on(
                () => `deploy: nothing pinned to ${from.buildId} (still: ${stillPinned.join(', ') || 'none'})`,
                async () => {
                  while ((await retrying(pinned)).length > 0) await sleep(500);
                },
              );
            }
            await exclusively(() =>
              watch.on(`deploy: worker process ${index} replaced by build ${to.buildId}`, () =>
                workers!.replace(index, { WORKER_BUILD_ID: to.buildId }),
              ),
            );
          }
          fault('deploy', `every worker process runs build ${to.buildId}, nothing was left pinned to ${from.buildId}`);
        },
      },
      {
        kind: 'postgres-restart' as const,
        atMs: at(0.5 * window, 0.9 * window),
        run: async () => {
          fault('postgres restart', 'ledger database stopped');
          await postgres.restart();
          fault('postgres restart', 'ledger database running again');
        },
      },
    ];
    const plan = planned
      .filter((step) => !options.only || options.only.includes(step.kind))
      .sort((a, b) => a.atMs - b.atMs);
    // Faults overlap in time the way they would in life: each runs when its moment comes.
    await Promise.all(
      plan.map(async (step) => {
        await sleep(Math.max(0, startedAt + step.atMs - Date.now()));
        // Named as a whole; a fault with stages (the deploy, a kill's restart queued behind it) names each stage too.
        await watch.on(`fault ${step.kind}`, step.run);
      }),
    );

    const tallies = await watch.on('every processor callback acknowledged', () => callbacks);
    // Quiescence: the sweeps are done, a final sweep found nothing left, every processor event is applied, and no
    // webhook is pending.
    const deadline = Date.now() + options.quiescenceTimeoutMs;
    const pending = async () => {
      let total = 0;
      for (const region of regions) {
        const { rows } = await region.pool.query<{ n: number }>(
          `SELECT (SELECT count(*) FROM auth_holds WHERE state = 'active' AND expires_at <= now())::integer
                + (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending')::integer
                + (SELECT count(*) FROM processor_events WHERE applied_at IS NULL)::integer AS n`,
        );
        total += rows[0]!.n;
      }
      return total;
    };
    for (const region of regions) await retrying(() => sweepNow(region.client, region));
    let left = 0;
    await watch.on(
      () => `quiescence (${left} holds, events or webhooks pending)`,
      async () => {
        for (;;) {
          left = await retrying(pending);
          if (left === 0) break;
          if (Date.now() > deadline)
            throw new Error(
              `no quiescence after ${options.quiescenceTimeoutMs / 1000} s: ${left} holds, events or webhooks still pending`,
            );
          await sleep(1000);
        }
      },
    );
    const quiescenceSeconds = Math.round((Date.now() - startedAt) / 100) / 10;
    log(`[chaos] quiescent after ${quiescenceSeconds} s; checking invariants`);

    const workflowTaskFailures: ChaosReport['workflowTaskFailures'] = [];
    const serverFailedWorkflowTasks: ChaosReport['serverFailedWorkflowTasks'] = {};
    const texts: { source: string; text: string }[] = [
      ...workers.output().map((text, i) => ({ source: `worker ${i} logs`, text })),
      ...receivers.map((r, i) => ({ source: `${regions[i]!.region} receiver logs`, text: r.output() })),
    ];
    let scanned = 0;
    await watch.on(
      () => `reading histories (${scanned} so far)`,
      async () => {
        for (const region of regions) {
          let inRegion = 0;
          for await (const { workflowId, history } of region.client.workflow
            .list({ query: `TaskQueue = '${region.taskQueue}'` })
            .intoHistories()) {
            texts.push({ source: `history ${workflowId}`, text: JSON.stringify(history) });
            for (const { serverSide, ...failed } of failedWorkflowTasks(history as History)) {
              if (serverSide)
                serverFailedWorkflowTasks[failed.cause] = (serverFailedWorkflowTasks[failed.cause] ?? 0) + 1;
              else workflowTaskFailures.push({ workflowId, ...failed });
            }
            scanned++;
            if (++inRegion >= options.historiesToScan) break;
          }
        }
      },
    );
    const violations = await watch.on('checking the invariants', () =>
      checkInvariants({
        regions,
        requests: merchants.requests(),
        texts,
        secrets: [processorSecret],
      }),
    );
    for (const region of regions) {
      for (const v of await checkBalanced(region.pool, openingTotals.get(region.region)!))
        violations.push({ ...v, message: `${region.region}: ${v.message}` });
    }
    const outcomes: Record<string, number> = {};
    for (const region of regions) {
      const { rows } = await region.pool.query<{ outcome: string; n: number }>(
        'SELECT outcome, count(*)::integer AS n FROM processor_events GROUP BY 1',
      );
      for (const r of rows) outcomes[r.outcome] = (outcomes[r.outcome] ?? 0) + r.n;
    }
    const processorCallbacks: ChaosReport['processorCallbacks'] = {
      holds: [...callbackPlans.values()].reduce((n, p) => n + p.holds, 0),
      events: tallies.reduce((n, t) => n + t.events, 0),
      requests: tallies.reduce((n, t) => n + t.requests, 0),
      duplicates: tallies.reduce((n, t) => n + t.duplicates, 0),
      reordered: tallies.reduce((n, t) => n + t.reordered, 0),
      refused: tallies.flatMap((t) => t.refused),
      outcomes,
    };
    log(
      `[chaos] processor callbacks: ${processorCallbacks.events} events about ${processorCallbacks.holds} holds, ${processorCallbacks.requests} requests (${processorCallbacks.duplicates} duplicates, ${processorCallbacks.reordered} out of order); applied: ${JSON.stringify(outcomes)}`,
    );
    if (processorCallbacks.refused.length > 0)
      violations.push({
        invariant: 8,
        message: 'processor callback refused by the receiver',
        ids: processorCallbacks.refused.slice(0, 20),
      });
    const deliveries: Record<string, number> = {};
    for (const region of regions) {
      const { rows } = await region.pool.query<{ status: string; n: number }>(
        'SELECT status, count(*)::integer AS n FROM webhook_deliveries GROUP BY 1',
      );
      for (const r of rows) deliveries[r.status] = (deliveries[r.status] ?? 0) + r.n;
    }
    const tightest = await tightestMerchantWindow(regions, merchants.requests());
    log(
      `[chaos] tightest receiver-side second: ${tightest ? `${tightest.merchantId} (limit ${tightest.limit}), ${tightest.headroomMs} ms of headroom` : 'none'}`,
    );
    let historyHostKill: ReleasePause | undefined;
    if (historyHostKilledAt !== undefined) {
      const releasedAt: number[] = [];
      for (const region of regions) {
        const { rows } = await region.pool.query<{ ms: number }>(
          `SELECT extract(epoch FROM released_at) * 1000 AS ms FROM auth_holds WHERE released_at IS NOT NULL`,
        );
        releasedAt.push(...rows.map((r) => Number(r.ms)));
      }
      historyHostKill = releasePause(releasedAt, historyHostKilledAt, startedAt);
      log(
        `[chaos] history host killed at +${historyHostKill.atSeconds}s: releases paused at most ${historyHostKill.longestPauseSeconds} whole s ` +
          `(longest gap ${historyHostKill.longestGapMs} ms; median gap before ${historyHostKill.medianGapBeforeMs} ms); per second from -10 s: ` +
          historyHostKill.releasesPerSecond.join(' '),
      );
    }
    return {
      seed: options.seed,
      holds: options.holds,
      historyHostKill,
      faults,
      deliveries,
      requests: merchants.requests().length,
      processorCallbacks,
      tightestMerchantWindow: tightest,
      violations,
      workflowTaskFailures,
      serverFailedWorkflowTasks,
      quiescenceSeconds,
      workerExits,
    };
  } finally {
    watch.stop();
    await Promise.all(receivers.map((r) => r.stop()));
    await stack.stop();
  }
}

/**
 * `npm run chaos` (bench/bin/chaos.ts): the run, its report printed and written to bench/results/. True when every
 * invariant held and no workflow task failed in the workers.
 */
export async function runChaosAndWrite(options: ChaosOptions): Promise<boolean> {
  const { temporal: backend, historyHosts, only } = options;
  const report = await runChaos(options);
  console.log(JSON.stringify({ ...report, violations: report.violations.length }, null, 2));
  for (const v of report.violations)
    console.log(`VIOLATION invariant ${v.invariant}: ${v.message}: ${v.ids.join(', ')}`);
  await fs.mkdir('bench/results', { recursive: true });
  const suffix =
    (backend?.kind === 'cluster' ? `-cluster-${backend.shards}${historyHosts === 2 ? '-2hosts' : ''}` : '') +
    (only ? `-only-${only.join('+')}` : '');
  await fs.writeFile(`bench/results/chaos-${report.seed}${suffix}.json`, JSON.stringify(report, null, 2));
  console.log(
    `reproduce: npm run chaos -- --seed ${options.seed} --holds ${options.holds} --workers ${options.workers}` +
      (backend?.kind === 'cluster'
        ? ` --temporal cluster --shards ${backend.shards}${historyHosts === 2 ? ' --history-hosts 2' : ''}`
        : '') +
      (only ? ` --only ${only.join(',')}` : ''),
  );
  return report.violations.length === 0 && report.workflowTaskFailures.length === 0;
}
