/**
 * Regional workers as separate OS processes (the production entry point, src/bin/worker.ts), all on
 * one task queue: what "across every worker" means for the rate limiter, and what the chaos run kills.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { RegionConfig } from '../src/config.js';
import type { EncryptionKey } from '../src/crypto/key-ring.js';

export interface WorkerProcesses {
  pids: number[];
  /** Everything each process wrote so far (stdout and stderr), restarts included. */
  output(): string[];
  /** SIGKILL worker `index` (no drain, no goodbye). */
  kill(index: number): void;
  /** Starts worker `index` again after a kill; resolves when it is running. */
  restart(index: number): Promise<void>;
  /**
   * A deploy of worker `index`: SIGTERM (it drains), then started again with `env` added for good (a kill's restart
   * keeps it); resolves when the new process is running.
   */
  replace(index: number, env: Record<string, string>): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The worker's node flags, as the Dockerfile's CMD and `npm run worker` give them too (a test keeps the three equal):
 * an isolate's young generation held to two 8 MiB semi-spaces, where Node 24 lets it grow to 128 MiB (bench/README.md).
 */
export const WORKER_NODE_FLAGS = ['--max-semi-space-size=8'] as const;

/** A key ring as its variable spells it (PAYLOAD_KEYS_<R>, MERCHANT_SECRET_KEYS_<R>): `id:base64`, current first. */
export function keyRingVariable(keys: readonly EncryptionKey[]): string {
  return keys.map((k) => `${k.id}:${k.key.toString('base64')}`).join(',');
}

/**
 * The environment a worker process needs for `regions` (dev rules: loopback http merchants allowed), with each
 * region's merchant-secret key ring: the processes open what the caller's seeders sealed.
 */
export function workerEnvironment(
  regions: readonly RegionConfig[],
  address: string,
  workflowBundlePath: string,
): Record<string, string> {
  const env: Record<string, string> = {
    HOLD_SWEEPER_MODE: 'dev',
    HOLD_SWEEPER_REGIONS: regions.map((r) => r.region).join(','),
    TEMPORAL_ADDRESS: address,
    // The schedules are ensured at start-up; a day's interval keeps them from firing on their own during a run.
    SWEEP_INTERVAL: '24h',
    RETENTION_INTERVAL: '24h',
    WORKFLOW_BUNDLE_PATH: workflowBundlePath,
  };
  for (const region of regions) {
    const up = region.region.toUpperCase();
    env[`DATABASE_URL_${up}`] = region.databaseUrl!;
    env[`TEMPORAL_NAMESPACE_${up}`] = region.namespace;
    env[`TASK_QUEUE_${up}`] = region.taskQueue;
    env[`SCHEDULE_ID_${up}`] = region.scheduleId;
    env[`MERCHANT_SECRET_KEYS_${up}`] = keyRingVariable(region.secretKeys);
  }
  return env;
}

export interface WorkerProcessOptions {
  extraEnv?: (index: number) => Record<string, string>;
  /**
   * Write each process's output to `<logDir>/worker-<index>.log` instead of keeping it in memory: a night's
   * worth of JSON log lines is hundreds of megabytes.
   */
  logDir?: string;
  /** The log files' name before `-<index>.log` (two sets of processes in one directory). */
  logName?: string;
  /** Node flags for each process (e.g. `--cpu-prof`, which NODE_OPTIONS does not allow). */
  nodeArgs?: readonly string[];
  /**
   * The worker's entry point: the source through tsx unless said, or the compiled `dist/bin/worker.js` (npm run build),
   * run as it is.
   */
  entry?: string;
  /**
   * How long a process may take to say it is running before it is killed and its start fails, naming what it printed
   * (120 s unless said): a worker stuck at start-up fails its caller instead of hanging it.
   */
  readyTimeoutMs?: number;
  /**
   * A process that exits on its own once running (not by `kill`, `replace` or `stop`): told here with how it ended and
   * the last lines it wrote, then, with `supervise`, started again, as a supervisor (systemd, Kubernetes) would.
   */
  onExit?: (exit: UnexpectedExit) => void;
  supervise?: boolean;
}

/** A worker process that ended on its own. */
export interface UnexpectedExit {
  index: number;
  /** `exit code 1`, `signal SIGSEGV`. */
  how: string;
  /** The last lines it wrote. */
  lastLines: string[];
}

/** SIGTERM (the worker drains), SIGKILL if it has not exited 15 s later. */
function drain(child: ChildProcess): Promise<void> {
  return new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

export async function startWorkerProcesses(
  count: number,
  environment: Record<string, string>,
  {
    extraEnv = () => ({}),
    logDir,
    logName = 'worker',
    nodeArgs = [],
    entry = 'src/bin/worker.ts',
    readyTimeoutMs = 120_000,
    onExit,
    supervise = false,
  }: WorkerProcessOptions = {},
): Promise<WorkerProcesses> {
  const children: ChildProcess[] = [];
  // The processes we end ourselves: their exit is not news.
  const ended = new WeakSet<ChildProcess>();
  const deployed: Record<string, string>[] = Array.from({ length: count }, () => ({}));
  const outputs: string[] = Array.from({ length: count }, () => '');
  const logFile = (index: number) => path.join(logDir!, `${logName}-${index}.log`);
  const argv = [...WORKER_NODE_FLAGS, ...nodeArgs, ...(entry.endsWith('.ts') ? ['--import', 'tsx'] : []), entry];
  const start = (index: number) => {
    const child = spawn(process.execPath, argv, {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        ...environment,
        ...extraEnv(index),
        ...deployed[index],
      } as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children[index] = child;
    const before = outputs[index]!.length;
    const file = logDir ? fs.createWriteStream(logFile(index), { flags: 'a' }) : undefined;
    let ready = false;
    // With a log file, memory keeps only what start-up printed (to see "worker running" or why it died).
    const keep = (d: Buffer) => {
      file?.write(d);
      if (!file || !ready) outputs[index] += d.toString();
    };
    return new Promise<void>((resolve, reject) => {
      const late = setTimeout(() => {
        child.kill('SIGKILL');
        reject(
          new Error(
            `worker process ${index} did not say it was running within ${readyTimeoutMs / 1000} s (killed):\n${outputs[index]!.slice(before)}`,
          ),
        );
      }, readyTimeoutMs);
      child.stdout!.on('data', (d: Buffer) => {
        keep(d);
        if (!ready && outputs[index]!.slice(before).includes('"msg":"worker running"')) {
          ready = true;
          clearTimeout(late);
          resolve();
        }
      });
      child.stderr!.on('data', keep);
      child.on('exit', (code, signal) => {
        clearTimeout(late);
        reject(new Error(`worker process exited (${code}) before it was ready:\n${outputs[index]!.slice(before)}`));
        if (!ready || ended.has(child)) return;
        const lastLines = (file ? '' : outputs[index]!.slice(before)).trimEnd().split('\n').slice(-60);
        onExit?.({ index, how: code === null ? `signal ${signal}` : `exit code ${code}`, lastLines });
        if (supervise) void restart(index).catch(() => undefined);
      });
    });
  };
  // Like a supervisor: a worker that dies while starting (its database restarting too) is started again.
  const restart = async (index: number) => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await start(index);
      } catch (err) {
        // One that never said it was running is not started again: a start-up that hangs would hang five times.
        if (attempt >= 5 || !(err as Error).message.startsWith('worker process exited')) throw err;
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    }
  };
  const end = (child: ChildProcess) => {
    ended.add(child);
    return child;
  };
  await Promise.all(Array.from({ length: count }, (_, index) => start(index)));
  return {
    get pids() {
      return children.map((c) => c.pid!);
    },
    output: () => (logDir ? outputs.map((_, index) => fs.readFileSync(logFile(index), 'utf8')) : [...outputs]),
    kill: (index) => void end(children[index]!).kill('SIGKILL'),
    restart,
    replace: async (index, env) => {
      await drain(end(children[index]!));
      deployed[index] = { ...deployed[index], ...env };
      await start(index);
    },
    async stop() {
      await Promise.all(children.map((child) => drain(end(child))));
    },
  };
}
