/**
 * Regional workers as separate OS processes (the production entry point, src/workers/region-worker.ts), all on
 * one task queue: what "across every worker" means for the rate limiter.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { inject } from 'vitest';
import type { TestRegion } from './harness.js';

export interface WorkerProcesses {
  pids: number[];
  /** Everything each process wrote so far (stdout and stderr). */
  output(): string[];
  stop(): Promise<void>;
}

export async function startWorkerProcesses(
  count: number,
  region: TestRegion,
  address: string,
  extraEnv: (index: number) => Record<string, string> = () => ({}),
): Promise<WorkerProcesses> {
  const up = region.config.region.toUpperCase();
  const children: ChildProcess[] = [];
  const outputs: string[] = [];
  const started = Array.from({ length: count }, (_, index) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/workers/region-worker.ts'], {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        // Dev rules: the fake merchants listen on loopback over plain http.
        HOLD_SWEEPER_MODE: 'dev',
        HOLD_SWEEPER_REGIONS: region.config.region,
        TEMPORAL_ADDRESS: address,
        [`DATABASE_URL_${up}`]: region.databaseUrl,
        [`TEMPORAL_NAMESPACE_${up}`]: region.config.namespace,
        [`TASK_QUEUE_${up}`]: region.config.taskQueue,
        [`SCHEDULE_ID_${up}`]: region.config.scheduleId,
        // The schedule is ensured at start-up; a day's interval keeps it from firing during the test.
        SWEEP_INTERVAL: '24h',
        WORKFLOW_BUNDLE_PATH: inject('workflowBundlePath'),
        ...extraEnv(index),
      } as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    outputs[index] = '';
    return new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', (d: Buffer) => {
        outputs[index] += d.toString();
        if (outputs[index]!.includes('"msg":"worker running"')) resolve();
      });
      child.stderr!.on('data', (d: Buffer) => (outputs[index] += d.toString()));
      child.on('exit', (code) => reject(new Error(`worker process exited (${code}) before it was ready:\n${outputs[index]}`)));
    });
  });
  await Promise.all(started);
  return {
    pids: children.map((c) => c.pid!),
    output: () => [...outputs],
    async stop() {
      await Promise.all(
        children.map(
          (child) =>
            new Promise<void>((resolve) => {
              if (child.exitCode !== null) return resolve();
              const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
              child.once('exit', () => {
                clearTimeout(kill);
                resolve();
              });
              child.kill('SIGTERM');
            }),
        ),
      );
    },
  };
}

/** The most arrivals in any window of `windowMs` (half-open), sliding over every arrival. */
export function maxInAnyWindow(times: readonly number[], windowMs = 1000): number {
  const sorted = [...times].sort((a, b) => a - b);
  let max = 0;
  let start = 0;
  for (let end = 0; end < sorted.length; end++) {
    while (sorted[end]! - sorted[start]! >= windowMs) start++;
    max = Math.max(max, end - start + 1);
  }
  return max;
}
