/**
 * Promote only what replays (docs/deploys.md, "Rolling out"): `npm run promote` replays the region's real histories
 * on the new build before it makes it current. A build whose hold workflow changed without `patched()` is refused
 * while a hold waits in quarantine: the refusal names that hold, the current build stays, and the history is saved in
 * the golden sets' format, where it replays as refused again (the command the refusal prints does it). The same change
 * behind `patched()` replays and is promoted. An encrypted region's histories replay through its payload keys.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { statusQuery } from '../../src/contracts/messages.js';
import { currentBuildId } from '../../src/workers/deployment.js';
import { readHistorySet, replaySet } from '../../src/workers/replay.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { holdWorkflowIdOf, seedNight } from '../support/ledger.js';
import { bundleVariant, quarantineUpsertedFirst, type Edit } from '../support/variant.js';

const REPO = path.resolve(import.meta.dirname, '../..');
const UNPATCHED = quarantineUpsertedFirst();
const PATCHED = quarantineUpsertedFirst('replay-promote');

let harness: Harness;
let dir: string;
beforeAll(async () => {
  harness = await openHarness();
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-promote-replay-'));
});
afterAll(async () => {
  await harness?.close();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

/** A bundle written to a file, as the image has its own (WORKFLOW_BUNDLE_PATH). */
async function bundleFile(name: string, edits: Edit[]): Promise<{ code: string; file: string }> {
  const { code } = await bundleVariant(path.join(dir, name), edits);
  const file = path.join(dir, `${name}.js`);
  await fs.writeFile(file, code);
  return { code, file };
}

interface Run {
  code: number;
  stdout: string;
  lines: { msg: string; workflowId?: string; replay?: string; replayed?: number }[];
}
/** `npm run <bin> -- <args>` in dev mode against `region`'s namespace and task queue. */
const run = (bin: 'promote' | 'replay', region: TestRegion, env: Record<string, string>, ...args: string[]) =>
  new Promise<Run>((resolve) => {
    const r = region.config.region.toUpperCase();
    execFile(
      process.execPath,
      ['--import', 'tsx', path.join(REPO, `src/bin/${bin}.ts`), ...args],
      {
        env: {
          ...process.env,
          HOLD_SWEEPER_MODE: 'dev',
          HOLD_SWEEPER_REGIONS: region.config.region,
          TEMPORAL_ADDRESS: harness.address,
          [`TEMPORAL_NAMESPACE_${r}`]: region.config.namespace,
          [`TASK_QUEUE_${r}`]: region.config.taskQueue,
          ...env,
        },
        timeout: 180_000,
      },
      (err, stdout, stderr) =>
        resolve({
          code: err ? (typeof err.code === 'number' ? err.code : 1) : 0,
          stdout: stdout + stderr,
          lines: stdout
            .split('\n')
            .filter((l) => l.startsWith('{'))
            .map((l) => JSON.parse(l) as Run['lines'][number]),
        }),
    );
  });

/** A night on `region`'s worker: one merchant refuses every webhook, so its holds wait in quarantine. */
async function nightWithQuarantine(region: TestRegion, prefix: string): Promise<string[]> {
  const night = await seedNight(
    region.pool,
    region.config.region,
    prefix,
    { expired: 6, merchants: 3 },
    harness.merchants,
  );
  const refusing = night.merchantIds[0]!;
  harness.merchants.script(refusing, { secrets: [night.secrets.get(refusing)!], responses: [{ status: 400 }] });
  await region.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: region.config.taskQueue,
    workflowId: `sweep-${prefix}`,
    args: [{ region: region.config.region, pageSize: 4, releaseWaitMs: 1000 }],
  });
  const holds = night.expired.filter((h) => h.merchantId === refusing);
  expect(holds.length).toBeGreaterThan(0);
  const ids = await Promise.all(holds.map((h) => holdWorkflowIdOf(region.pool, region.config.region, h.id)));
  for (const id of ids)
    await expect
      .poll(async () => (await region.client.workflow.getHandle(id).query(statusQuery)).stage, { timeout: 60_000 })
      .toBe('quarantined');
  return ids.sort();
}

it('promote refuses a build that cannot replay a quarantined hold, saves the history, and promotes the patched one', async () => {
  const us = await harness.region('us');
  const deploymentName = `t-${harness.id}-replay`;
  const env = { WORKER_DEPLOYMENT_NAME: deploymentName };
  await harness.startWorker(us, undefined, undefined, { version: { deploymentName, buildId: 'build-a' } });
  const quarantined = await nightWithQuarantine(us, `${harness.id}q`);

  const unpatched = await bundleFile('unpatched', UNPATCHED);
  const saved = path.join(dir, 'refused');
  const refused = await run('promote', us, env, '--bundle', unpatched.file, '--build-id', 'build-x', '--save', saved);
  expect(refused.code, refused.stdout).toBe(1);
  const refusals = refused.lines.filter((l) => l.msg.startsWith('refused:'));
  expect(refusals.map((l) => l.workflowId).sort()).toEqual(quarantined);
  expect(refusals[0]!.msg).toMatch(/diverges at event \d+ \(\w+\)/);
  expect(refused.stdout).toContain('"msg":"not promoted: build-x does not replay what runs now (see above)"');
  expect(refused.stdout).not.toContain('"msg":"promoted"');
  expect(await currentBuildId(us.client, us.config.namespace, deploymentName)).toBe('build-a');

  // Saved in the golden sets' format, under the ids they ran with: refused again by the unpatched build, replayed by
  // today's code; and the command the refusal prints replays it locally, refused.
  const set = await readHistorySet(path.join(saved, 'us'));
  expect(set.map((h) => h.workflowId).sort()).toEqual(quarantined);
  expect(set.every((h) => /^releaseExpiredHold-refused-\d+\.json\.gz$/.test(h.file))).toBe(true);
  expect(await replaySet(unpatched, set)).toHaveLength(quarantined.length);
  expect(await replaySet({ code: inject('workflowBundleCode') }, set)).toEqual([]);
  const local = refusals[0]!.replay!;
  expect(local).toBe(`npm run replay -- --bundle ${unpatched.file} --from ${path.join(saved, 'us')} --region us`);
  const again = await run('replay', us, env, ...local.replace('npm run replay -- ', '').split(' '));
  expect(again.code, again.stdout).toBe(1);
  expect(again.lines.filter((l) => l.msg.startsWith('refused:'))).toHaveLength(quarantined.length);

  // The same change behind patched(): every history replays, and the build is promoted once its workers poll.
  const patched = await bundleFile('patched', PATCHED);
  await harness.startWorker(us, undefined, undefined, {
    workflowBundle: patched,
    version: { deploymentName, buildId: 'build-b' },
    setCurrent: 'never',
  });
  const promoted = await run('promote', us, env, '--bundle', patched.file, '--build-id', 'build-b', '--deadline', '2m');
  expect(promoted.code, promoted.stdout).toBe(0);
  const figures = promoted.lines.find((l) => l.msg.startsWith('replayed '));
  // Every hold and batch of the night (the pinned sweep finishes on its build: not replayed).
  expect(figures?.replayed).toBeGreaterThanOrEqual(6);
  expect(promoted.stdout).toContain('"msg":"promoted"');
  expect(await currentBuildId(us.client, us.config.namespace, deploymentName)).toBe('build-b');

  // No bundle: a configuration error, unless the operator says --skip-replay (which is logged as what it skips).
  const bare = await run('promote', us, env, '--build-id', 'build-b');
  expect(bare.code).toBe(2);
  expect(bare.stdout).toContain('--bundle is not set');
  const skipped = await run('promote', us, env, '--build-id', 'build-b', '--skip-replay');
  expect(skipped.code, skipped.stdout).toBe(0);
  expect(skipped.stdout).toContain('WITHOUT replaying');
}, 300_000);

it('an encrypted region replays through its payload keys', async () => {
  const key = { id: 'replay-k1', key: randomBytes(32) };
  const eu = await harness.region('eu', { payloadKeys: [key] });
  const deploymentName = `t-${harness.id}-replay-eu`;
  await harness.startWorker(eu, undefined, undefined, { version: { deploymentName, buildId: 'build-a' } });
  const quarantined = await nightWithQuarantine(eu, `${harness.id}e`);
  const env = { WORKER_DEPLOYMENT_NAME: deploymentName };
  const keys = { PAYLOAD_KEYS_EU: `${key.id}:${key.key.toString('base64')}` };
  const bundle = inject('workflowBundlePath');

  const keyed = await run('replay', eu, { ...env, ...keys }, '--bundle', bundle);
  expect(keyed.code, keyed.stdout).toBe(0);
  expect(keyed.lines.find((l) => l.msg.startsWith('replayed '))?.replayed).toBeGreaterThanOrEqual(6);
  // A deadline reached before the sample is replayed is a refusal, not a pass on what it had time for.
  const late = await run('replay', eu, { ...keys, ...env }, '--bundle', bundle, '--deadline', '1ms');
  expect(late.code, late.stdout).toBe(1);
  expect(late.stdout).toMatch(/refused: the deadline passed after 0 of \d+ histories/);
  // Without the keys the workflow code is handed ciphertext: nothing that reached a payload replays.
  const keyless = await run('replay', eu, env, '--bundle', bundle, '--save', path.join(dir, 'keyless'));
  expect(keyless.code, keyless.stdout).toBe(1);
  expect(keyless.lines.filter((l) => l.msg.startsWith('refused:')).map((l) => l.workflowId)).toEqual(
    expect.arrayContaining(quarantined),
  );
}, 300_000);
