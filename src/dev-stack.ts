/**
 * How a running `npm start` tells the operator CLI (and a hand-started `npm run worker` in dev mode) where its
 * local services are: the embedded PostgreSQL's port is chosen at start-up, so it cannot be configured ahead.
 * The local stack (dev/local-stack.ts) writes this file; the entry points read it, and only in dev mode, which is why
 * it is product code and not dev/'s.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Region } from './contracts/regions.js';

export interface DevStackFile {
  pid: number;
  temporalAddress: Partial<Record<Region, string>>;
  databaseUrl: Partial<Record<Region, string>>;
  uiUrl?: string;
}

/** HOLD_SWEEPER_CACHE_DIR, else $XDG_CACHE_HOME/hold-sweeper, else ~/.cache/hold-sweeper (outside the clone). */
export function devCacheDir(env: Readonly<Record<string, string | undefined>> = process.env): string {
  if (env.HOLD_SWEEPER_CACHE_DIR) return env.HOLD_SWEEPER_CACHE_DIR;
  return path.join(env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'hold-sweeper');
}

export const devStackFilePath = (cacheDir: string) => path.join(cacheDir, 'dev-stack.json');

/**
 * The running stack's addresses, or undefined when no `npm start` is running (a file left by a dead one is ignored).
 */
async function readDevStackFile(cacheDir: string): Promise<DevStackFile | undefined> {
  try {
    const file = JSON.parse(await fs.readFile(devStackFilePath(cacheDir), 'utf8')) as DevStackFile;
    process.kill(file.pid, 0);
    return file;
  } catch {
    return undefined;
  }
}

/** Where a region's ledger and Temporal are: as configured, else in dev mode the running `npm start`'s. */
export async function addressesIn(mode: 'dev' | 'production') {
  const stack = mode === 'dev' ? await readDevStackFile(devCacheDir()) : undefined;
  return (r: { region: Region; databaseUrl?: string; temporalAddress?: string }) => ({
    databaseUrl: r.databaseUrl ?? stack?.databaseUrl[r.region],
    temporalAddress: r.temporalAddress ?? stack?.temporalAddress[r.region],
  });
}
