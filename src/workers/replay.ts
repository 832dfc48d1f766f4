/**
 * Replaying the region's real histories on a new build before it takes traffic (docs/deploys.md, "Rolling out"), and
 * the file format those histories are kept in: the golden sets' (test/golden/), so a history that refused a build can
 * be committed beside the fix that makes it replay.
 *
 * What is replayed: the workflows whose next task may run on the new build, on the region's task queue: open ones
 * first, then those closed in the last 24 hours, every workflow type given a fair share of the sample. Pinned
 * workflows (a sweep) are left out: they finish on the build that started them, never on the new one.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { Client, type WorkflowExecutionInfo } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { historyFromJSON, historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { makeTelemetryFilterString, Runtime, Worker, type ReplayWorkerOptions } from '@temporalio/worker';
import { dataConverterFor } from '../codec/encryption-codec.js';
import type { Config, RegionConfig } from '../config.js';
import { addressesIn } from '../dev-stack.js';
import { ConfigError } from '../errors.js';
import { temporalLogger, type Logger } from '../observability/logger.js';
import { connectClient, PLAINTEXT } from '../temporal-connection.js';
import { workflowSinks } from '../observability/tracing.js';

type History = temporal.api.history.v1.IHistory;

/** Beside a set of histories: each file's workflow id (a replay runs under it: a sweep derives its children's ids). */
export const WORKFLOW_IDS_FILE = 'workflow-ids.json';

/** The files of a set that are histories: compact JSON, gzipped, as `temporal workflow show --output json` writes it. */
export const isHistoryFile = (file: string) => file.endsWith('.json.gz');

/** What a set holds of a history: compact JSON, gzipped (a set is a few hundred kB, not megabytes). */
export const historyFileContent = (history: History) =>
  gzipSync(JSON.stringify(JSON.parse(historyToJSON(history))), { level: 9 });

/** A history, read back from what `historyFileContent` wrote. */
export const historyOfFileContent = (content: Buffer): History =>
  historyFromJSON(JSON.parse(gunzipSync(content).toString('utf8')));

/** Every history of the set in `dir`, by file name, with the workflow id it ran under (when the set kept it). */
export async function readHistorySet(dir: string): Promise<{ file: string; workflowId?: string; history: History }[]> {
  const ids: Record<string, string> = JSON.parse(
    await fs.readFile(path.join(dir, WORKFLOW_IDS_FILE), 'utf8').catch(() => '{}'),
  );
  const files = (await fs.readdir(dir)).filter(isHistoryFile).sort();
  return Promise.all(
    files.map(async (file) => ({
      file,
      workflowId: ids[file],
      history: historyOfFileContent(await fs.readFile(path.join(dir, file))),
    })),
  );
}

/**
 * Adds one history to the set in `dir` as `<name>-<n>.json.gz` (n: the files already there, so names never collide),
 * and its workflow id to the set's workflow-ids.json. Never removes a file: several writers add to one set.
 */
export async function addHistoryFile(dir: string, name: string, workflowId: string, history: History): Promise<string> {
  await fs.mkdir(dir, { recursive: true });
  const file = `${name}-${(await fs.readdir(dir)).length}.json.gz`;
  await fs.writeFile(path.join(dir, file), historyFileContent(history));
  const idsFile = path.join(dir, WORKFLOW_IDS_FILE);
  const ids: Record<string, string> = JSON.parse(await fs.readFile(idsFile, 'utf8').catch(() => '{}'));
  ids[file] = workflowId;
  await fs.writeFile(idsFile, `${JSON.stringify(ids, null, 2)}\n`);
  return file;
}

interface ReplayOptions {
  client: Client;
  /** The region's (dataConverterFor): an encrypted region's histories decode with its payload keys. */
  dataConverter: ReplayWorkerOptions['dataConverter'];
  taskQueue: string;
  /** The new build's workflow code (the bundle its workers run). */
  workflowBundle: { code: string };
  /** How many histories at most; default 500. */
  sample?: number;
  /** When to stop replaying (epoch ms); what is left is not replayed, and the replay is refused. */
  deadline: number;
  /** Where a refused history is written, in the golden sets' format; nothing is written when none is refused. */
  saveDir: string;
}

interface Refusal {
  workflowId: string;
  runId: string;
  type: string;
  /** The first history event the new code does not reproduce, when the error names it. */
  event?: { id: number; type: string };
  /** The error's name (DeterminismViolationError for a non-determinism error) and first line. */
  error: string;
  /** The saved history, in `saveDir`. */
  file: string;
}

interface ReplayReport {
  /** Workflows chosen to replay, by type. */
  sampled: Record<string, number>;
  replayed: number;
  refused: Refusal[];
  /** The deadline passed before every chosen history was replayed. */
  deadlineReached: boolean;
  seconds: number;
}

export const DEFAULT_SAMPLE = 500;
/** Ample for the default sample: docs/deploys.md has a measured rate (over a thousand histories a minute, loaded). */
export const DEFAULT_REPLAY_DEADLINE = '5m';
/** Histories fetched ahead of the replay. */
const FETCH_AHEAD = 8;
const LAST_NIGHT_MS = 24 * 60 * 60 * 1000;

const quote = (s: string) => `'${s.replaceAll("'", "\\'")}'`;

/**
 * For a process that replays (the deploy step, `npm run replay`): the SDK's lines through `log`, its errors only. A
 * history that does not replay is a line of `logReplay`'s, not also the core's warning and the replay worker's states.
 */
export function installReplayRuntime(log: Logger): void {
  Runtime.install({
    logger: temporalLogger(log.child({}, { level: 'error' })),
    telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR', other: 'ERROR' }) } },
  });
}

/** Where refused histories go unless told: a directory of their own under the system's temporary one, made on need. */
export const defaultSaveDir = () => path.join(os.tmpdir(), `hold-sweeper-refused-${Date.now()}-${process.pid}`);

/** The workflow bundle at `file` (`npm run build:bundle` writes one; the image has its own at WORKFLOW_BUNDLE_PATH). */
export const readBundle = (file: string): Promise<string> =>
  fs.readFile(file, 'utf8').catch((err: Error) => {
    throw new ConfigError('--bundle', file, `a workflow bundle file (${err.message})`);
  });

/** Replays a sample of the region's histories on `workflowBundle` (see the top of this file for which). */
async function replayRegion(options: ReplayOptions): Promise<ReplayReport> {
  const started = Date.now();
  const { client, sample = DEFAULT_SAMPLE } = options;
  const since = new Date(started - LAST_NIGHT_MS).toISOString();
  const base =
    `TaskQueue = ${quote(options.taskQueue)}` +
    // A workflow with no task completed yet has no versioning behaviour (and nothing to replay but its start).
    ` AND (TemporalWorkflowVersioningBehavior IS NULL OR TemporalWorkflowVersioningBehavior != 'Pinned')`;
  const first = async (query: string, limit: number) => {
    const found: WorkflowExecutionInfo[] = [];
    if (limit <= 0) return found;
    for await (const execution of client.workflow.list({ query, pageSize: Math.min(limit, 1000) })) {
      found.push(execution);
      if (found.length >= limit) break;
    }
    return found;
  };
  const recent = `(ExecutionStatus = 'Running' OR CloseTime > ${quote(since)})`;

  // The types present: each query finds one execution of a type not seen yet.
  const types: string[] = [];
  for (;;) {
    const unseen = types.length ? ` AND WorkflowType NOT IN (${types.map(quote).join(', ')})` : '';
    const [execution] = await first(`${base} AND ${recent}${unseen}`, 1);
    if (!execution) break;
    types.push(execution.type);
  }
  // Per type, open ones first, then last night's closed ones, at most the whole sample.
  const candidates = await Promise.all(
    types.map(async (type) => {
      const ofType = `${base} AND WorkflowType = ${quote(type)}`;
      const open = await first(`${ofType} AND ExecutionStatus = 'Running'`, sample);
      const closed = await first(
        `${ofType} AND ExecutionStatus != 'Running' AND CloseTime > ${quote(since)}`,
        sample - open.length,
      );
      return [...open, ...closed];
    }),
  );
  // A fair share each: a type with fewer than its share leaves the rest to the others.
  let left = sample;
  const chosen: WorkflowExecutionInfo[] = [];
  const sampled: Record<string, number> = {};
  candidates
    .sort((a, b) => a.length - b.length)
    .forEach((ofType, i) => {
      const take = ofType.slice(0, Math.ceil(left / (candidates.length - i)));
      left -= take.length;
      chosen.push(...take);
      if (take[0]) sampled[take[0].type] = take.length;
    });

  const histories: (History | undefined)[] = [];
  async function* fetched() {
    const ahead: Promise<History>[] = [];
    let next = 0;
    for (;;) {
      while (ahead.length < FETCH_AHEAD && next < chosen.length) {
        const { workflowId, runId } = chosen[next++]!;
        ahead.push(client.workflow.getHandle(workflowId, runId).fetchHistory());
      }
      const history = ahead.shift();
      if (!history || Date.now() > options.deadline) {
        // Not replayed: their fetches may still fail, unheard.
        for (const p of [history, ...ahead]) p?.catch(() => undefined);
        return;
      }
      histories.push(await history);
      yield { workflowId: chosen[histories.length - 1]!.workflowId, history: histories.at(-1)! };
    }
  }

  const refused: Refusal[] = [];
  let replayed = 0;
  // Results come one per history, in order.
  for await (const result of Worker.runReplayHistories(
    {
      workflowBundle: options.workflowBundle,
      replayName: 'replay-before-promote',
      dataConverter: options.dataConverter,
      sinks: workflowSinks(),
    },
    fetched(),
  )) {
    const { workflowId, runId, type } = chosen[replayed]!;
    const history = histories[replayed]!;
    histories[replayed++] = undefined;
    if (!result.error) continue;
    // The core's own message when the error wraps one ("[TMPRL1100] Nondeterminism error: ..."), which names the
    // event as "HistoryEvent(id: 12, ActivityTaskScheduled)".
    const message = /message: "([^"]+)"/.exec(result.error.message)?.[1] ?? result.error.message.split('\n')[0]!;
    const at = /HistoryEvent\(id: (\d+), (\w+)/.exec(message);
    refused.push({
      workflowId,
      runId,
      type,
      ...(at ? { event: { id: Number(at[1]), type: at[2]! } } : {}),
      error: `${result.error.name}: ${message}`,
      file: await addHistoryFile(options.saveDir, `${type}-refused`, workflowId, history),
    });
  }
  return {
    sampled,
    replayed,
    refused,
    deadlineReached: replayed < chosen.length,
    seconds: (Date.now() - started) / 1000,
  };
}

/** How to replay a saved set on one's own machine: `npm run replay -- --from <dir>` (no cluster needed). */
const localReplayCommand = (bundlePath: string, saveDir: string, region: string) =>
  `npm run replay -- --bundle ${bundlePath} --from ${saveDir} --region ${region}`;

/**
 * Logs what a replay found: each refusal (its workflow, the first event the new code diverges at, the command that
 * replays it locally), then the figures. True when every chosen history replayed before the deadline.
 */
function logReplay(
  log: Logger,
  region: string,
  report: ReplayReport,
  local: { bundlePath: string; saveDir: string },
): boolean {
  const replay = localReplayCommand(local.bundlePath, local.saveDir, region);
  for (const r of report.refused) {
    const at = r.event ? `event ${r.event.id} (${r.event.type})` : 'an event the error does not name';
    log.error(
      {
        region,
        workflowId: r.workflowId,
        runId: r.runId,
        workflowType: r.type,
        event: r.event,
        error: r.error,
        replay,
      },
      `refused: ${r.type} ${r.workflowId} (run ${r.runId}) does not replay on the new build: it diverges at ${at} ` +
        `(${r.error}). Replay it locally: ${replay}`,
    );
  }
  const figures = { region, sampled: report.sampled, replayed: report.replayed, seconds: report.seconds };
  if (report.refused.length > 0) {
    log.error(
      { ...figures, saved: local.saveDir },
      `${report.refused.length} of ${report.replayed} histories refused the new build`,
    );
    return false;
  }
  if (report.deadlineReached) {
    const chosen = Object.values(report.sampled).reduce((a, b) => a + b, 0);
    log.error(
      figures,
      `refused: the deadline passed after ${report.replayed} of ${chosen} histories; give it a longer deadline or a smaller --sample`,
    );
    return false;
  }
  log.info(figures, `replayed ${report.replayed} histories on the new build in ${report.seconds.toFixed(1)} s`);
  return true;
}

/**
 * `replayRegion` on each of `regions`, connected as the deploy step connects (its Temporal settings, its payload keys),
 * each region's refused histories saved under `<save>/<region>`. True when every region's replay passed.
 */
export async function replayRegions(
  config: Config,
  regions: readonly RegionConfig[],
  options: {
    workflowBundle: { code: string };
    bundlePath: string;
    sample: number;
    deadlineMs: number;
    save: string;
    log: Logger;
  },
): Promise<boolean> {
  const addresses = await addressesIn(config.mode);
  const deadline = Date.now() + options.deadlineMs;
  let ok = true;
  for (const region of regions) {
    const address = addresses(region).temporalAddress;
    if (!address) throw new ConfigError(`TEMPORAL_ADDRESS_${region.region.toUpperCase()}`, undefined, 'host:port');
    const connection = await connectClient(region.temporal ?? PLAINTEXT, address);
    try {
      const dataConverter = dataConverterFor(region);
      const client = new Client({ connection, namespace: region.namespace, dataConverter });
      const saveDir = path.join(options.save, region.region);
      const report = await replayRegion({
        client,
        dataConverter,
        taskQueue: region.taskQueue,
        workflowBundle: options.workflowBundle,
        sample: options.sample,
        deadline,
        saveDir,
      });
      ok = logReplay(options.log, region.region, report, { bundlePath: options.bundlePath, saveDir }) && ok;
    } finally {
      await connection.close();
    }
  }
  return ok;
}

/**
 * Replays a saved set (`readHistorySet`) under the workflow ids it kept; the names of the files that do not replay,
 * with their error's first line.
 */
export async function replaySet(
  workflowBundle: { code: string },
  histories: readonly { file: string; workflowId?: string; history: History }[],
  dataConverter?: ReplayWorkerOptions['dataConverter'],
): Promise<string[]> {
  const failures: string[] = [];
  let i = 0;
  for await (const result of Worker.runReplayHistories(
    { workflowBundle, replayName: 'replay-saved', dataConverter, sinks: workflowSinks() },
    histories.map((h) => ({ workflowId: h.workflowId ?? `saved/${h.file}`, history: h.history })),
  )) {
    const { file } = histories[i++]!;
    if (result.error) failures.push(`${file}: ${result.error.message.split('\n')[0]}`);
  }
  if (i !== histories.length) failures.push(`replayed ${i} of ${histories.length} histories`);
  return failures;
}
