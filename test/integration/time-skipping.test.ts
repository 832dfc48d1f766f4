/**
 * The real default delivery policy, not a shortened one, run to quarantine: a merchant that answers 500
 * forever, driven through the whole 3-day horizon in seconds on Temporal's time-skipping test server (the
 * Java test server, obtained from PyPI). Real Postgres, real HTTP; only the server's clock is skipped.
 */
import { temporal } from '@temporalio/proto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { createActivities } from '../../src/activities/index.js';
import { localKeyRing } from '../../src/delivery/secret-box.js';
import { loadDevConfig } from '../../dev/dev-config.js';
import { retryDelay } from '../../src/delivery/policy.js';
import { DEFAULT_DELIVERY_POLICY } from '../../src/contracts/delivery.js';
import { resolveTestServerPath } from '../../dev/temporal-cli.js';
import { merchantResumedSignal, statusQuery } from '../../src/contracts/messages.js';
import { SEARCH_ATTRIBUTES } from '../../src/contracts/search-attributes.js';
import { releaseExpiredHold } from '../../src/workflows/release-expired-hold.js';
import { openHarness, type Harness } from '../support/harness.js';
import { seedNight } from '../support/ledger.js';
import { startTimeSkippingServer } from '../support/workflow-env.js';

let harness: Harness;
let env: TestWorkflowEnvironment;

beforeAll(async () => {
  harness = await openHarness();
  const dev = loadDevConfig();
  const path = await resolveTestServerPath({ explicitPath: dev.temporalTestServerPath, cacheDir: dev.cacheDir });
  env = await startTimeSkippingServer(path);
  // The test server starts with no custom search attributes; the workflow upserts DeliveryStatus.
  await env.connection.operatorService.addSearchAttributes({
    namespace: env.namespace ?? 'default',
    searchAttributes: Object.fromEntries(
      SEARCH_ATTRIBUTES.map((key) => [key.name, temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD]),
    ),
  });
});
afterAll(async () => {
  await env?.teardown();
  await harness?.close();
});

/** Attempts the default policy makes within its horizon when every jitter draw is `r` (0: shortest delays). */
function attemptsWithin(r: number): number {
  const policy = DEFAULT_DELIVERY_POLICY;
  let elapsed = 0;
  let attempts = 1;
  for (;;) {
    const { delayMs } = retryDelay(policy, attempts, () => r);
    if (elapsed + delayMs > policy.retryHorizonMs) return attempts;
    elapsed += delayMs;
    attempts++;
  }
}

it('500 forever under the default policy: retried across the whole 3-day horizon, then quarantined as exhausted', async () => {
  const region = await harness.region('us');
  const night = await seedNight(region.pool, 'us', `${harness.id}ts`, { expired: 1, merchants: 1 }, harness.merchants);
  const merchantId = night.merchantIds[0]!;
  harness.merchants.script(merchantId, { secrets: [night.secrets.get(merchantId)!], responses: [{ status: 500 }] });
  const hold = night.expired[0]!;
  const taskQueue = `ts-${harness.id}`;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: { code: inject('workflowBundleCode') },
    activities: createActivities({
      region: 'us',
      pool: region.pool,
      endpointRules: { allowInsecureHttp: true, allowPrivateAddresses: true },
      sealer: localKeyRing(region.config.secretKeys),
    }),
  });

  const result = await worker.runUntil(async () => {
    const handle = await env.client.workflow.start(releaseExpiredHold, {
      taskQueue,
      workflowId: `ts-${hold.id}`,
      args: [{ region: 'us', holdId: hold.id, expiresAt: new Date().toISOString(), merchantId }],
    });
    // Awaiting the result is what lets the test server skip time: through the retries, then the quarantine wait.
    return handle.result();
  });

  // Quarantined as exhausted, then (nobody deciding within the default 14 days, skipped too) abandoned.
  expect(result.delivery).toEqual({ status: 'abandoned', policyRuns: 1 });
  const { rows } = await region.pool.query('SELECT status, quarantine_reason FROM webhook_deliveries');
  expect(rows).toEqual([{ status: 'abandoned', quarantine_reason: 'exhausted' }]);
  const { rows: log } = await region.pool.query<{
    next_retry_delay_ms: string;
    status_code: number;
    retry_reason: string;
  }>('SELECT next_retry_delay_ms, status_code, retry_reason FROM delivery_attempts ORDER BY attempt_number');
  expect(log.length).toBeGreaterThanOrEqual(attemptsWithin(1));
  expect(log.length).toBeLessThanOrEqual(attemptsWithin(0));
  expect(log.every((a) => a.status_code === 500)).toBe(true);
  expect(harness.merchants.requests(merchantId)).toHaveLength(log.length);
  log.forEach((a, i) => {
    const step = Math.min(DEFAULT_DELIVERY_POLICY.maxBackoffMs, DEFAULT_DELIVERY_POLICY.initialBackoffMs * 2 ** i);
    expect(a.retry_reason).toBe(`backoff attempt ${i + 1}`);
    expect(Number(a.next_retry_delay_ms)).toBeGreaterThanOrEqual(step / 2);
    expect(Number(a.next_retry_delay_ms)).toBeLessThanOrEqual(step);
  });

  // The server's own account (history, server clock): the attempt count, and a span from scheduling the
  // activity to its final failure that reaches past the point where one more maximal step fits, but not past
  // the 72 h horizon.
  const history = await env.client.workflow.getHandle(`ts-${hold.id}`).fetchHistory();
  const events = history.events ?? [];
  const deliverScheduled = events.find(
    (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'deliverWebhook',
  )!;
  const started = events.find(
    (e) => e.activityTaskStartedEventAttributes && Number(e.eventId) > Number(deliverScheduled.eventId),
  )!;
  const failed = events.find((e) => e.activityTaskFailedEventAttributes)!;
  // The first attempt ran on the local fast path (a marker event); the regular activity made all the others.
  expect(started.activityTaskStartedEventAttributes!.attempt).toBe(log.length - 1);
  expect(failed.activityTaskFailedEventAttributes!.retryState).toBe(
    temporal.api.enums.v1.RetryState.RETRY_STATE_TIMEOUT,
  );
  const at = (e: typeof failed) => Number(e.eventTime!.seconds) * 1000 + Math.floor((e.eventTime!.nanos ?? 0) / 1e6);
  const span = at(failed) - at(deliverScheduled);
  expect(span).toBeLessThanOrEqual(DEFAULT_DELIVERY_POLICY.retryHorizonMs);
  expect(span).toBeGreaterThan(DEFAULT_DELIVERY_POLICY.retryHorizonMs - DEFAULT_DELIVERY_POLICY.maxBackoffMs);
  console.log(`[time-skipping] ${log.length} attempts over ${(span / 3_600_000).toFixed(1)} h of server time`);
});

/** Thirty days of a paused merchant: three weeks of a 410-disabled endpoint, and then some. */
const HELD_DAYS = 30;

it('held for 30 days behind a paused merchant: every run stays far below the event limit, DeliveryStatus does not flap, then it drains', async () => {
  const region = await harness.region('us');
  const night = await seedNight(
    region.pool,
    'us',
    `${harness.id}held`,
    { expired: 1, merchants: 1 },
    harness.merchants,
  );
  const merchantId = night.merchantIds[0]!;
  await region.pool.query(`UPDATE merchants SET status = 'paused' WHERE id = $1::text`, [merchantId]);
  const hold = night.expired[0]!;
  const taskQueue = `ts-held-${harness.id}`;
  const workflowId = `ts-held-${hold.id}`;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: { code: inject('workflowBundleCode') },
    activities: createActivities({
      region: 'us',
      pool: region.pool,
      endpointRules: { allowInsecureHttp: true, allowPrivateAddresses: true },
      sealer: localKeyRing(region.config.secretKeys),
    }),
  });

  const startedAt = Date.now();
  const result = await worker.runUntil(async () => {
    const handle = await env.client.workflow.start(releaseExpiredHold, {
      taskQueue,
      workflowId,
      args: [{ region: 'us', holdId: hold.id, expiresAt: new Date().toISOString(), merchantId }],
    });
    // Awaiting the result lets the test server skip time at the workflow's own pace; meanwhile, once 30 days of
    // server time have passed, the merchant comes back (in the ledger, and by the signal its operator sends).
    const serverStart = await env.currentTimeMs();
    const merchantBack = (async () => {
      while ((await env.currentTimeMs()) < serverStart + HELD_DAYS * 86_400_000)
        await new Promise((resolve) => setTimeout(resolve, 250));
      expect(await handle.query(statusQuery)).toMatchObject({ stage: 'held', merchantStatus: 'paused' });
      await region.pool.query(`UPDATE merchants SET status = 'active' WHERE id = $1::text`, [merchantId]);
      await handle.signal(merchantResumedSignal);
    })();
    const [outcome] = await Promise.all([handle.result(), merchantBack]);
    return outcome;
  });
  expect(result.delivery).toMatchObject({ status: 'delivered', attempts: 1, policyRuns: 1 });
  expect(harness.merchants.requests(merchantId)).toHaveLength(1);

  // Every run of the chain, newest first, following each first event's link to the run it continued.
  const runs: temporal.api.history.v1.IHistory[] = [];
  for (let runId: string | undefined = undefined; ;) {
    const history = await env.client.workflow.getHandle(workflowId, runId).fetchHistory();
    runs.push(history);
    runId = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
    if (!runId) break;
  }
  const lengths = runs.map((h) => h.events?.length ?? 0);
  const upserts = runs
    .reverse()
    .flatMap((h) => h.events ?? [])
    .map((e) => e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields?.DeliveryStatus)
    .filter((payload) => payload !== undefined)
    .map((payload) => JSON.parse(Buffer.from(payload!.data!).toString()) as string);
  console.log(
    `[time-skipping] held ${HELD_DAYS} days: ${runs.length} runs, longest ${Math.max(...lengths)} events, ${(Date.now() - startedAt) / 1000} s`,
  );
  // Re-checks every 30 minutes after the first hour: ~1,400 in 30 days, ~6 events each, so several runs, each
  // far below Temporal's 51,200-event limit.
  expect(runs.length).toBeGreaterThanOrEqual(4);
  expect(Math.max(...lengths)).toBeLessThanOrEqual(2_100);
  // held once, then delivered once the merchant is back: no flapping on every re-check, nor on the one that sends.
  expect(upserts).toEqual(['held', 'delivered']);
  // ~1,400 workflow tasks and activities, one after another: ~50 s alone on these 2 cores, twice that beside the
  // other test files. The bound is for a hang.
}, 300_000);
