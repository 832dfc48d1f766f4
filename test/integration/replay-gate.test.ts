/**
 * Proof that the replay gate works: a copy of the workflow code with a deliberately breaking change (the quarantine's
 * DeliveryStatus upserted before the activity that records it) fails against the golden histories; the same change
 * behind `patched()` passes. The copy is bundled exactly as the worker bundles the real code.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { goldenHistories, replayFailures } from '../support/golden.js';
import { bundleVariant, quarantineUpsertedFirst, type Edit } from '../support/variant.js';

let dir: string;
beforeAll(async () => {
  // The broken variant fails replays on purpose: keep the SDK's warnings about them out of the test output.
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-gate-'));
});
afterAll(async () => {
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

/** A copy of src/ with `edits`, bundled; then the golden histories replayed on it. */
async function replayVariant(name: string, edits: Edit[]): Promise<{ replayed: number; failed: string[] }> {
  const bundle = await bundleVariant(path.join(dir, name), edits);
  const histories = goldenHistories();
  const failed = (await replayFailures(bundle, histories)).map((f) => f.split(':')[0]!);
  return { replayed: histories.length, failed };
}

it('the gate fails a reordered workflow, and passes the same change behind patched()', async () => {
  const broken = await replayVariant('reordered', quarantineUpsertedFirst());
  // Every history that reached a quarantine (quarantined, discarded, abandoned, replayed) no longer replays.
  expect(broken.failed.length).toBeGreaterThanOrEqual(5);
  expect(broken.failed.some((f) => f.includes('completed-discarded'))).toBe(true);
  const patched = await replayVariant('patched', quarantineUpsertedFirst('gate-proof-reorder'));
  expect(patched.failed).toEqual([]);
  expect(patched.replayed).toBe(broken.replayed);
}, 120_000);
