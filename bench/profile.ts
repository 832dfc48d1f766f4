/**
 * `npm run bench -- --profile`: where a hold's worker CPU and ledger round trips go. Each worker process runs with
 * V8's sampling profiler (`--cpu-prof`, one profile per thread, written at exit), and the ledger's PostgreSQL with
 * pg_stat_statements (top-level statements: one row per round trip, whatever a function does inside it). The night
 * then runs without the ceiling, so that the profiles cover the product alone (start-up and shutdown included).
 *
 * A sample is charged to the code that owns it: the nearest frame, from the sampled one towards the root, that
 * belongs to a known owner (our source, the SDK, the pg driver, the HTTP stack, payload conversion, the workflow
 * bundle); Node's internals and V8's builtins count for whoever called them. What V8 does not sample is the rest of
 * the process's CPU: Temporal core's Rust threads, libuv's, the garbage collector's helper threads.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type pg from 'pg';

/** The worker processes' Node flags for a profile written into `dir`. */
export function profilingNodeArgs(dir: string): string[] {
  return ['--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-interval=${SAMPLE_INTERVAL_US}`];
}

/**
 * V8 samples a thread by a signal its handler answers on that thread: a sample is taken only while the thread runs,
 * so a sample stands for one interval of CPU, not for the wall time between samples (longer on a busy machine).
 */
const SAMPLE_INTERVAL_US = 1000;

/** PostgreSQL's flags that load pg_stat_statements (its extension is created per database by `resetStatements`). */
export const STATEMENT_STATS_FLAGS = ['-c', 'shared_preload_libraries=pg_stat_statements'];

/**
 * The benchmark's own queries carry this comment after their first word (pg_stat_statements keeps a statement's text
 * from its first token), so that the ledger's statements per hold leave them out.
 */
export const BENCH_QUERY = '/* bench */';

/** Starts counting the ledger's statements from zero (the extension created on the first call; superuser). */
export async function resetStatements(pool: pg.Pool): Promise<void> {
  await pool.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  await pool.query(`SELECT ${BENCH_QUERY} pg_stat_statements_reset()`);
}

interface StatementStat {
  query: string;
  callsPerHold: number;
  meanMs: number;
}

interface StatementProfile {
  callsPerHold: number;
  /** Less the `SET LOCAL`s that ride in their BEGIN's round trip (src/db/pool.ts `inTransaction`). */
  roundTripsPerHold: number;
  /** Server time per hold, every statement's execution summed (ms). */
  execMsPerHold: number;
  top: StatementStat[];
}

/** The statements the workers sent since `resetStatements`, per hold, over every region's ledger. */
export async function readStatements(pools: readonly pg.Pool[], holds: number, top = 12): Promise<StatementProfile> {
  const byQuery = new Map<string, { calls: number; ms: number }>();
  for (const pool of pools) {
    const { rows } = await pool.query<{ query: string; calls: string; ms: number }>(
      `SELECT ${BENCH_QUERY} s.query, s.calls, s.total_exec_time AS ms
         FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
        WHERE d.datname = current_database() AND s.query NOT LIKE '%${BENCH_QUERY}%'`,
    );
    for (const row of rows) {
      // One text per statement whatever its layout: the same statement from two regions is one row.
      const query = row.query.replace(/\s+/g, ' ').trim();
      const seen = byQuery.get(query) ?? { calls: 0, ms: 0 };
      byQuery.set(query, { calls: seen.calls + Number(row.calls), ms: seen.ms + row.ms });
    }
  }
  const all = [...byQuery].map(([query, s]) => ({ query, ...s }));
  const round = (n: number, digits = 2) => Number(n.toFixed(digits));
  return {
    callsPerHold: round(all.reduce((a, s) => a + s.calls, 0) / holds),
    roundTripsPerHold: round(all.filter((s) => !/^SET LOCAL /i.test(s.query)).reduce((a, s) => a + s.calls, 0) / holds),
    execMsPerHold: round(all.reduce((a, s) => a + s.ms, 0) / holds, 3),
    top: all
      .sort((a, b) => b.calls - a.calls)
      .slice(0, top)
      .map((s) => ({
        query: s.query.length > 160 ? `${s.query.slice(0, 157)}...` : s.query,
        callsPerHold: round(s.calls / holds, 3),
        meanMs: round(s.ms / Math.max(1, s.calls), 3),
      })),
  };
}

/** Whose code a sample ran, in the order a frame is tested. */
const OWNERS: readonly [owner: string, test: (url: string) => boolean][] = [
  ['workflow code (the bundle: SDK workflow runtime and our workflows)', (url) => url.includes('workflow-bundle')],
  [
    'payload conversion (protobuf, codec, data converter)',
    (url) => /protobufjs|@temporalio\/proto|converter|codec/.test(url),
  ],
  ['TypeScript compiled at start-up (tsx: production runs dist/)', (url) => /\/(tsx|esbuild)\//.test(url)],
  ['Temporal SDK (JS side of the worker)', (url) => /@temporalio\/|\/rxjs\/|@grpc\/|\/source-map\//.test(url)],
  ['pg driver', (url) => /\/node_modules\/(pg|pg-protocol|pg-pool|pg-types)\//.test(url)],
  ['HTTP to merchants (undici, http, tls)', (url) => /undici|node:_?http|node:https|node:tls|node:_tls/.test(url)],
  ['metrics, logs and traces (libraries)', (url) => /prom-client|\/pino|sonic-boom|@opentelemetry/.test(url)],
  ['our code (src/)', (url) => url.includes('/src/')],
  ['other libraries', (url) => url.includes('/node_modules/')],
];

/**
 * Frames with no script, charged by their name: V8's own work, the idle loop, and Node's `runInContext`, through
 * which the SDK enters a workflow's sandbox several times an activation. With a `timeout` (the SDK always passes its
 * isolateExecutionTimeout) each entry starts and joins a watchdog thread, ~40 times the entry's own cost
 * (nodejs/node#47739).
 */
const NAMED: Readonly<Record<string, string | undefined>> = {
  '(garbage collector)': 'garbage collection (main thread)',
  '(program)': 'V8 and native code outside JS frames',
  runInContext: "the SDK entering the workflow sandbox (Node's vm timeout: a watchdog thread per entry)",
  '(idle)': undefined,
  '(root)': undefined,
};

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string }; hitCount?: number; children?: number[] }[];
}

interface CpuBreakdown {
  /** Profiles read (threads of every worker process). */
  profiles: number;
  /** Sampled, not idle, every profile together (s). */
  sampledSeconds: number;
  /** ms per hold by owner, largest first. */
  perHold: { owner: string; ms: number }[];
}

/** Every profile in `dir`, each sample charged to its owner (see the module comment), per hold. */
export async function cpuBreakdown(dir: string, holds: number): Promise<CpuBreakdown> {
  const files = (await fs.readdir(dir)).filter((f) => f.endsWith('.cpuprofile'));
  const byOwner = new Map<string, number>();
  let sampledUs = 0;
  for (const file of files) {
    const profile = JSON.parse(await fs.readFile(path.join(dir, file), 'utf8')) as CpuProfile;
    const parent = new Map<number, number>();
    for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
    const byId = new Map(profile.nodes.map((n) => [n.id, n]));
    const ownerOf = new Map<number, string | undefined>();
    const owner = (id: number): string | undefined => {
      if (ownerOf.has(id)) return ownerOf.get(id);
      const { functionName, url } = byId.get(id)!.callFrame;
      const named = url === '' && functionName in NAMED;
      const found = named
        ? NAMED[functionName]
        : (OWNERS.find(([, test]) => test(url))?.[0] ??
          (parent.has(id) ? owner(parent.get(id)!) : 'Node internals and builtins, uncalled by any of the above'));
      ownerOf.set(id, found);
      return found;
    };
    for (const n of profile.nodes) {
      if (!n.hitCount) continue;
      const o = owner(n.id);
      if (o === undefined) continue;
      const us = n.hitCount * SAMPLE_INTERVAL_US;
      byOwner.set(o, (byOwner.get(o) ?? 0) + us);
      sampledUs += us;
    }
  }
  return {
    profiles: files.length,
    sampledSeconds: Number((sampledUs / 1e6).toFixed(3)),
    perHold: [...byOwner]
      .map(([o, us]) => ({ owner: o, ms: Number((us / 1000 / holds).toFixed(2)) }))
      .sort((a, b) => b.ms - a.ms),
  };
}

export interface NightProfile {
  cpu: CpuBreakdown;
  /** The workers' CPU over their whole life (/proc), per hold, against what V8 sampled of it. */
  workerCpuMsPerHold: number;
  statements: StatementProfile;
}

/** The report's section: the profile's two tables. */
export function profileSection(p: NightProfile): string {
  const sampled = p.cpu.perHold.reduce((a, r) => a + r.ms, 0);
  return [
    '## Where a hold goes: the workers profiled, the ledger counted',
    '',
    `Worker CPU per hold (process CPU from /proc, start-up included): **${p.workerCpuMsPerHold} ms**, of which V8 sampled ${sampled.toFixed(1)} ms on ${p.cpu.profiles} JS threads (one sample a millisecond of CPU); the rest (${(p.workerCpuMsPerHold - sampled).toFixed(1)} ms) is Temporal core's Rust threads, libuv's and V8's helper threads.`,
    '',
    '| owner of the sampled code | ms per hold | share of sampled |',
    '|---|---|---|',
    ...p.cpu.perHold.map((r) => `| ${r.owner} | ${r.ms} | ${Math.round((100 * r.ms) / sampled)} % |`),
    '',
    `Ledger: **${p.statements.roundTripsPerHold} round trips per hold** (${p.statements.callsPerHold} statements: a transaction's \`SET LOCAL\`s travel with its BEGIN), ${p.statements.execMsPerHold} ms of PostgreSQL execution per hold; the workers' background polls (endpoint checks, gauges) are in these figures, spread over the holds. The most frequent:`,
    '',
    '| statement | per hold | mean ms |',
    '|---|---|---|',
    ...p.statements.top.map((s) => `| \`${s.query.replace(/\|/g, '\\|')}\` | ${s.callsPerHold} | ${s.meanMs} |`),
  ].join('\n');
}
