/**
 * Go-built tools the stack needs (Temporal's server and Web UI, Prometheus's promtool and server, Alertmanager's
 * amtool), built once from the Go module proxy into the cache directory and reused: `go` with the proxy is all a fresh
 * machine needs.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { EmbeddedServiceError } from '../src/errors.js';

const exec = promisify(execFile);

/** The lock of the `go` commands that build from one module (`lock`): a directory, made atomically, its holder's pid inside. */
export const goLockPath = (lock: string): string => path.join(os.tmpdir(), `hold-sweeper-go-${lock}.lock`);

/**
 * Runs `go` for `service`, failing with a named error that says what to install. With `lock`, one such command at a
 * time on the machine (across processes): two commands built from the same module (Prometheus and promtool) would
 * otherwise compile the same packages twice at once on two cores, as two test files did on a fresh machine (12 min);
 * one after the other, the second finds them in Go's build cache. Builds from different modules still run side by side.
 */
export async function goCommand(
  service: string,
  args: string[],
  options: { cwd?: string; GOBIN: string; env?: Record<string, string>; remedy?: string; lock?: string },
): Promise<string> {
  const release = options.lock === undefined ? async () => undefined : await machineLock(goLockPath(options.lock));
  try {
    return (
      await exec('go', args, {
        cwd: options.cwd,
        env: { ...process.env, GOBIN: options.GOBIN, GOFLAGS: '-mod=mod', ...options.env },
        maxBuffer: 64 * 1024 * 1024,
      })
    ).stdout;
  } catch (err) {
    throw new EmbeddedServiceError(
      service,
      `go ${args.join(' ')}: ${(err as Error).message.split('\n').slice(0, 12).join('\n')}`,
      `install Go (https://go.dev/dl/) with access to the Go module proxy${options.remedy ? `, or ${options.remedy}` : ''}`,
      { cause: err },
    );
  } finally {
    await release();
  }
}

/**
 * Takes the lock directory `lock` (waiting while a live process holds it; one whose holder died is taken over) and
 * returns its release.
 */
export async function machineLock(lock: string, pollMs = 500): Promise<() => Promise<void>> {
  for (;;) {
    try {
      await fs.mkdir(lock);
      await fs.writeFile(path.join(lock, 'pid'), String(process.pid));
      return () => fs.rm(lock, { recursive: true, force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (await heldByTheDead(lock)) await fs.rm(lock, { recursive: true, force: true });
    else await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

/** The lock's holder is gone: its pid names no process, or it never wrote one in the 10 s since it took the lock. */
async function heldByTheDead(lock: string): Promise<boolean> {
  const pid = Number(await fs.readFile(path.join(lock, 'pid'), 'utf8').catch(() => ''));
  if (!pid) {
    const made = await fs.stat(lock).then(
      (s) => s.mtimeMs,
      () => Date.now(),
    );
    return Date.now() - made > 10_000;
  }
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}
