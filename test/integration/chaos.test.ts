/**
 * The chaos run, short: every fault kind once (a worker SIGKILL, a rolling deploy to a new build, a Temporal restart, a
 * PostgreSQL restart, a second sweep with a schedule trigger, a frozen merchant, a merchant closing connections
 * unanswered, plus 429, 503 and 400 merchants, a processor-event receiver SIGKILL while the processor calls back,
 * duplicated and out of order, about holds the sweep is releasing) on a small night in both regions, then every
 * invariant checked. It runs its own Temporal dev server and PostgreSQL, because it restarts them. The long version is
 * `npm run chaos`.
 */
import { expect, it, onTestFailed } from 'vitest';
import { runChaos } from '../../bench/chaos-run.js';
import { loadDevConfig } from '../../dev/dev-config.js';

it('a small night survives every fault kind with no invariant violated', async () => {
  // The run's own log (faults, what it waits on every 30 s) is printed only if the test fails: a hang names itself.
  const lines: string[] = [];
  onTestFailed(() => console.log(`[chaos] the run's log:\n${lines.join('\n')}`));
  const startedAt = Date.now();
  const report = await runChaos({
    seed: 20261130,
    holds: 200,
    merchantsPerRegion: 8,
    workers: 2,
    kills: 1,
    freezeMs: 8_000,
    faultWindowMs: 20_000,
    quiescenceTimeoutMs: 300_000,
    historiesToScan: 1000,
    cacheDir: loadDevConfig().cacheDir,
    log: (line) => lines.push(`${((Date.now() - startedAt) / 1000).toFixed(1)} s ${line}`),
    // Inside the test's own timeout, so that a run that does not end says what it was waiting on.
    deadlineMs: 540_000,
  });
  const tightest = report.tightestMerchantWindow!;
  console.log(
    `[chaos] ${report.requests} requests; tightest receiver-side second: ${tightest.merchantId} (limit ${tightest.limit}) with ${tightest.headroomMs} ms of headroom`,
  );
  expect(report.violations).toEqual([]);
  expect(report.workflowTaskFailures).toEqual([]);
  // No worker process ended on its own (a database or Temporal restart is survived in place, not by a supervisor).
  expect(report.workerExits).toEqual([]);
  expect(new Set(report.faults.map((f) => f.kind))).toEqual(
    new Set([
      'second sweep',
      'freeze',
      'thaw',
      'kill',
      'restart',
      'deploy',
      'temporal restart',
      'postgres restart',
      'receiver kill',
      'receiver restart',
    ]),
  );
  // Every webhook (each release's, each applied processor event's) reached a final state: delivered, or quarantined
  // (the merchant that answers 400).
  expect(Object.keys(report.deliveries).sort()).toEqual(['delivered', 'quarantined']);
  // The processor called back about some of the holds, duplicated and out of order, racing their release; every
  // event was applied exactly once (invariant 8 above), each with an outcome.
  const callbacks = report.processorCallbacks;
  console.log(`[chaos] processor callbacks: ${JSON.stringify(callbacks)}`);
  expect(callbacks.events).toBeGreaterThan(0);
  expect(callbacks.duplicates).toBeGreaterThan(0);
  expect(callbacks.reordered).toBeGreaterThan(0);
  expect(callbacks.refused).toEqual([]);
  expect(Object.values(callbacks.outcomes).reduce((a, b) => a + b, 0)).toBe(callbacks.events);
}, 600_000);
