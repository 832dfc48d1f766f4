/**
 * What the benchmark reads about processes from Linux's /proc: CPU seconds (own, and of reaped children, which
 * is how PostgreSQL's short-lived backends are counted through the postmaster), peak resident memory, and
 * finding a process by its command line.
 */
import fs from 'node:fs/promises';

const TICKS_PER_SECOND = 100; // USER_HZ: 100 on every Linux this runs on.

interface Stat {
  pid: number;
  ppid: number;
  /** utime + stime, seconds. */
  own: number;
  /** cutime + cstime: children that exited and were waited for, seconds. */
  reapedChildren: number;
}

async function stat(pid: number): Promise<Stat | undefined> {
  try {
    const text = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis are plain.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    const n = (i: number) => Number(fields[i - 3]);
    return {
      pid,
      ppid: n(4),
      own: (n(14) + n(15)) / TICKS_PER_SECOND,
      reapedChildren: (n(16) + n(17)) / TICKS_PER_SECOND,
    };
  } catch {
    return undefined;
  }
}

async function allPids(): Promise<number[]> {
  return (await fs.readdir('/proc')).filter((d) => /^\d+$/.test(d)).map(Number);
}

/** CPU seconds used so far by `pid` and, with `tree`, by its descendants (live and reaped). */
export async function cpuSeconds(pid: number, tree = false): Promise<number> {
  const root = await stat(pid);
  if (!root) return 0;
  if (!tree) return root.own;
  const stats = (await Promise.all((await allPids()).map(stat))).filter((s): s is Stat => s !== undefined);
  const children = new Map<number, Stat[]>();
  for (const s of stats) children.set(s.ppid, [...(children.get(s.ppid) ?? []), s]);
  let total = 0;
  const visit = (s: Stat) => {
    total += s.own + s.reapedChildren;
    for (const c of children.get(s.pid) ?? []) visit(c);
  };
  visit(root);
  return total;
}

async function statusField(pid: number, field: 'VmHWM' | 'VmRSS'): Promise<number | undefined> {
  try {
    const status = await fs.readFile(`/proc/${pid}/status`, 'utf8');
    const kb = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

/** Peak resident set size (VmHWM) in bytes. */
export const peakRssBytes = (pid: number) => statusField(pid, 'VmHWM');

/** Resident set size now (VmRSS) in bytes. */
export const rssBytes = (pid: number) => statusField(pid, 'VmRSS');

/** The oldest process whose command line contains every one of `parts`. */
export async function findProcess(...parts: string[]): Promise<number | undefined> {
  const found: number[] = [];
  for (const pid of await allPids()) {
    const cmdline = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (pid !== process.pid && parts.every((p) => cmdline.includes(p))) found.push(pid);
  }
  return found.sort((a, b) => a - b)[0];
}
