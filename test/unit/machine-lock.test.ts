/**
 * The machine-wide lock Go builds take (dev/go-tools.ts): one holder at a time, across processes, and a lock whose
 * holder died is taken over rather than waited on for ever.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { machineLock } from '../../dev/go-tools.js';

let dir: string;
afterEach(async () => fs.rm(dir, { recursive: true, force: true }));
const lockIn = async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'machine-lock-'));
  return path.join(dir, 'go.lock');
};

it('holds one taker at a time: the second gets the lock only once the first releases it', async () => {
  const lock = await lockIn();
  const order: string[] = [];
  const releaseFirst = await machineLock(lock, 20);
  order.push('first has it');
  const second = machineLock(lock, 20).then((release) => {
    order.push('second has it');
    return release;
  });
  await new Promise((resolve) => setTimeout(resolve, 200));
  expect(order).toEqual(['first has it']);
  order.push('first releases');
  await releaseFirst();
  await (
    await second
  )();
  expect(order).toEqual(['first has it', 'first releases', 'second has it']);
  await expect(fs.access(lock)).rejects.toThrow();
});

it('takes over a lock whose holder is dead (its pid names no process)', async () => {
  const lock = await lockIn();
  const gone = spawn(process.execPath, ['-e', '']);
  const pid = gone.pid!;
  await new Promise((resolve) => gone.once('exit', resolve));
  await fs.mkdir(lock);
  await fs.writeFile(path.join(lock, 'pid'), String(pid));
  const release = await machineLock(lock, 20);
  expect(await fs.readFile(path.join(lock, 'pid'), 'utf8')).toBe(String(process.pid));
  await release();
});
