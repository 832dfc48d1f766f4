/**
 * Proof that the replay gate works: a copy of the workflow code with a deliberately breaking change (two calls
 * reordered: the quarantine's DeliveryStatus upsert before the activity that records it) fails against the
 * golden histories; the same change behind `patched()` passes. The copy is bundled exactly as the worker bundles
 * the real code.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { goldenHistories, replayFailures } from '../support/golden.js';
import { bundleVariant } from '../support/variant.js';

// As src/workflows/webhook-delivery.ts writes it (prettier, width 120): the edit below matches its exact text.
const QUARANTINE = `await ledgerWith(holdLabels.quarantine(webhookId, reason)).quarantineDelivery({
    webhookId,
    reason,
    detail,
  })`;
const ORIGINAL = `  const recorded = ${QUARANTINE};
  log.warn('webhook quarantined: waiting for a human', { ...d.ctx, webhookId, reason, policyRun });
  const since = new Date().toISOString();
  d.tracker.enter({ stage: 'quarantined', policyRun, reason, since, detail }, 'quarantined');
`;
const REORDERED = `  const since = new Date().toISOString();
  d.tracker.enter({ stage: 'quarantined', policyRun, reason, since, detail }, 'quarantined');
  const recorded = ${QUARANTINE};
  log.warn('webhook quarantined: waiting for a human', { ...d.ctx, webhookId, reason, policyRun });
`;
const PATCHED = `  const since = new Date().toISOString();
  let recorded;
  if (patched('gate-proof-reorder')) {
    d.tracker.enter({ stage: 'quarantined', policyRun, reason, since, detail }, 'quarantined');
    recorded = ${QUARANTINE};
  } else {
    recorded = ${QUARANTINE};
    d.tracker.enter({ stage: 'quarantined', policyRun, reason, since, detail }, 'quarantined');
  }
  log.warn('webhook quarantined: waiting for a human', { ...d.ctx, webhookId, reason, policyRun });
`;

let dir: string;
beforeAll(async () => {
  // The broken variant fails replays on purpose: keep the SDK's warnings about them out of the test output.
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-gate-'));
});
afterAll(async () => {
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

/** A copy of src/ with `variant` in place of the quarantine step, bundled; then the golden histories replayed on it. */
async function replayVariant(name: string, variant: string): Promise<{ replayed: number; failed: string[] }> {
  const bundle = await bundleVariant(path.join(dir, name), [
    { file: 'workflows/webhook-delivery.ts', from: ORIGINAL, to: variant },
  ]);
  const histories = goldenHistories();
  const failed = (await replayFailures(bundle, histories)).map((f) => f.split(':')[0]!);
  return { replayed: histories.length, failed };
}

it('the gate fails a reordered workflow, and passes the same change behind patched()', async () => {
  const broken = await replayVariant('reordered', REORDERED);
  // Every history that reached a quarantine (quarantined, discarded, abandoned, replayed) no longer replays.
  expect(broken.failed.length).toBeGreaterThanOrEqual(5);
  expect(broken.failed.some((f) => f.includes('completed-discarded'))).toBe(true);
  const patched = await replayVariant('patched', PATCHED);
  expect(patched.failed).toEqual([]);
  expect(patched.replayed).toBe(broken.replayed);
}, 120_000);

it("the gate fails the unpatched change to a gap wait (a skip cancels its timer, f4ae648's shape) on 24b3de0's history of such a skip", async () => {
  const unpatched = await bundleVariant(path.join(dir, 'unpatched-skip'), [
    {
      file: 'workflows/hold-events.ts',
      from: 'const skipEndsWait = patched(SKIP_ENDS_GAP_WAIT_PATCH);',
      to: 'const skipEndsWait = true;',
    },
  ]);
  const skipsDuringTheWait = goldenHistories().filter((h) =>
    h.file.startsWith('applyHoldEvents-waiting_for_predecessor-skip'),
  );
  expect(skipsDuringTheWait.map((h) => h.release)).toContain('24b3de0');
  const failures = await replayFailures(unpatched, skipsDuringTheWait);
  expect(failures).toEqual(
    // The timer the history saw fire, the variant had cancelled: the replay is not deterministic (core reports it
    // fatal).
    expect.arrayContaining([
      expect.stringMatching(
        /^24b3de0\/applyHoldEvents-waiting_for_predecessor-skip-c\d+\.json\.gz: .*TimerMachine in state CancelTimerCommandSent says the transition is invalid during event .*TimerFired/,
      ),
    ]),
  );
  // The same histories replay on the code as it is: the patch keeps 24b3de0's rule for a wait that began there.
  expect(await replayFailures({ code: inject('workflowBundleCode') }, skipsDuringTheWait)).toEqual([]);
}, 120_000);
