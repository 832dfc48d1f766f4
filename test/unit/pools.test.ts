/**
 * Every pool the product opens bounds how long a query waits for a connection: pg's own default is to wait for ever,
 * which turned a burst of refused requests into a receiver that could not record a valid event
 * (test/integration/receiver-edges.test.ts).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createPool, DEFAULT_CONNECTION_TIMEOUT_MS } from '../../src/db/pool.js';
import { RECORDING_POOL_OPTIONS, REFUSAL_POOL_OPTIONS } from '../../src/processor/receiver.js';

const SRC = path.resolve(import.meta.dirname, '../../src');

async function sources(dir: string): Promise<string[]> {
  const entries = await fs.readdir(dir, { withFileTypes: true });
  const files = await Promise.all(
    entries.map((e) =>
      e.isDirectory() ? sources(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
    ),
  );
  return files.flat();
}

describe('database pools', () => {
  it('createPool bounds the wait for a connection unless told otherwise, and the receiver’s two pools are bounded tighter', async () => {
    const pool = createPool('postgres://nobody@127.0.0.1:1/none');
    expect(pool.options.connectionTimeoutMillis).toBe(DEFAULT_CONNECTION_TIMEOUT_MS);
    await pool.end();
    expect(RECORDING_POOL_OPTIONS.connectionTimeoutMillis).toBeLessThanOrEqual(2_000);
    expect(REFUSAL_POOL_OPTIONS).toMatchObject({ max: 2 });
    expect(REFUSAL_POOL_OPTIONS.connectionTimeoutMillis).toBeLessThanOrEqual(1_000);
  });

  it('no pool in src/ is made any other way', async () => {
    const offenders: string[] = [];
    for (const file of await sources(SRC)) {
      if (file.endsWith(path.join('db', 'pool.ts'))) continue;
      if (/new\s+(pg\.)?Pool\s*\(/.test(await fs.readFile(file, 'utf8'))) offenders.push(path.relative(SRC, file));
    }
    expect(offenders).toEqual([]);
  });
});
