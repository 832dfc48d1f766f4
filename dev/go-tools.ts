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

/** A machine-wide lock by name: a directory, made atomically, its holder's pid inside. */
const goLockPath = (lock: string): string => path.join(os.tmpdir(), `hold-sweeper-go-${lock}.lock`);

/** Runs `go` for `service`, failing with a named error that says what to install. */
export async function goCommand(
  service: string,
  args: string[],
  options: { cwd?: string; GOBIN: string; env?: Record<string, string>; remedy?: string },
): Promise<string> {
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

const exists = (file: string) =>
  fs.access(file).then(
    () => true,
    () => false,
  );

/** A tool built with Go into its own cache directory: where, which files make it whole, and how it is built. */
export interface GoTool {
  /** A short name: its lock's and the command line's (`npm run tools -- prometheus`). */
  readonly id: string;
  /** What the logs call it. */
  readonly name: string;
  /** Its directory in the cache (versioned: another version is another directory). */
  dir(cacheDir: string): Promise<string>;
  /** The files that are there once it is built. */
  readonly files: readonly string[];
  /** Builds it into `into`, a fresh directory that becomes `dir` once the build succeeds. */
  build(into: string): Promise<void>;
}

/** Whether `tool` is in the cache, whole. */
export async function isBuilt(tool: GoTool, cacheDir: string): Promise<boolean> {
  const dir = await tool.dir(cacheDir);
  return (await Promise.all(tool.files.map((file) => exists(path.join(dir, file))))).every(Boolean);
}

/**
 * `tool`'s directory, from the cache or built now. One build of a tool at a time on the machine: whoever needs it while
 * another process builds it (the suite's background build, test/integration/global-setup.ts) waits for that build and
 * then finds it in the cache, instead of compiling the same packages a second time beside it on the same cores.
 */
export async function obtainTool(
  tool: GoTool,
  cacheDir: string,
  log: (line: string) => void = () => undefined,
): Promise<string> {
  const dir = await tool.dir(cacheDir);
  if (await isBuilt(tool, cacheDir)) return dir;
  const release = await machineLock(goLockPath(`tool-${tool.id}`));
  try {
    if (await isBuilt(tool, cacheDir)) return dir;
    log(`Building ${tool.name} from the Go module proxy (once; cached in ${dir})...`);
    const started = Date.now();
    const building = `${dir}.building-${process.pid}`;
    await fs.rm(building, { recursive: true, force: true });
    await fs.mkdir(building, { recursive: true });
    await tool.build(building);
    await fs.rm(dir, { recursive: true, force: true });
    await fs.rename(building, dir);
    log(`Built ${tool.name} in ${Math.round((Date.now() - started) / 1000)} s`);
    return dir;
  } finally {
    await release();
  }
}
