/**
 * Per-merchant rate limits across every worker: three worker processes on one task queue, real HTTP, and the gate's
 * own record as the judge: the attempt log keeps each attempt's admission on the ledger's clock, counted over every
 * sliding 1-second window. The fake merchant's receive clock is reported, not judged: on a busy machine it moves with
 * whatever else the machine does.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createMerchantBudget, RATE_SAFETY_MARGIN } from '../../src/sql/merchant-budget.js';
import { insertMerchants } from '../../dev/seed.js';
import { localKeyRing } from '../../src/delivery/secret-box.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { expectEveryRequestAccounted, holdWorkflowIdOf, seedNight, type Night } from '../support/ledger.js';
import { maxInAnyWindow, windowHeadroomMs } from '../../bench/invariants.js';
import { startWorkerProcesses, workerEnvironment, type WorkerProcesses } from '../../dev/worker-processes.js';

let harness: Harness;
let us: TestRegion;
let workers: WorkerProcesses;
let nights = 0;

beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
  workers = await startWorkerProcesses(
    3,
    workerEnvironment([us.config], harness.address, inject('workflowBundlePath')),
  );
});
afterAll(async () => {
  await workers?.stop();
  await harness?.close();
});

/**
 * The region's merchant secrets as its workers hold them (these merchants have none; the seeder takes the ring all the
 * same).
 */
const secretsOf = (region: TestRegion) => ({
  region: region.config.region,
  sealer: localKeyRing(region.config.secretKeys),
});

async function merchantNight(
  holds: number,
  limits: { rate: number; burst: number },
  policy: Record<string, number> = {},
): Promise<Night> {
  const night = await seedNight(
    us.pool,
    'us',
    `${harness.id}r${++nights}`,
    { expired: holds, merchants: 1 },
    harness.merchants,
  );
  await us.pool.query(
    'UPDATE merchants SET rate_per_second = $2, burst = $3, delivery_policy = $4::jsonb WHERE id = $1',
    [night.merchantIds[0], limits.rate, limits.burst, JSON.stringify(policy)],
  );
  return night;
}

async function sweep(): Promise<void> {
  await us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: us.config.taskQueue,
    workflowId: `sweep-us-${harness.id}-rl-${nights}-${Date.now()}`,
    args: [{ region: 'us', releaseWaitMs: 120_000 }],
  });
}

async function deliveryCounts(night: Night) {
  const { rows } = await us.pool.query<{ status: string; n: number; attempts: number }>(
    `SELECT status, count(*)::integer AS n, sum(attempt_count)::integer AS attempts
       FROM webhook_deliveries WHERE merchant_id = $1 GROUP BY status`,
    [night.merchantIds[0]],
  );
  return Object.fromEntries(rows.map((r) => [r.status, { n: r.n, attempts: r.attempts }]));
}

describe('merchant budget (GCRA in Postgres)', () => {
  it('never over-admits under concurrent acquires, and a rate change applies to the next acquire', async () => {
    const region = await harness.region('us');
    await insertMerchants(region.pool, secretsOf(region), [
      { id: 'm_gcra', endpointUrl: 'https://m.example/h', ratePerSecond: 5, burst: 1 },
    ]);
    const budget = createMerchantBudget(region.pool);

    // 200 callers at once: the first is admitted now (sends are paced, never burst); every other caller gets its own
    // queue place, one emission interval (1.1 / rate) after the one before, or (on a machine slow enough that a
    // caller comes after its place) is admitted then. Either way no two turns are closer than one interval.
    const decisions = await Promise.all(Array.from({ length: 200 }, () => budget.acquire('m_gcra', 'first')));
    expect(decisions.filter((d) => d.outcome === 'send').length).toBeGreaterThanOrEqual(1);
    expect(decisions.filter((d) => d.outcome === 'denied')).toEqual([]);
    // Each wait names the bucket that is empty and the limit that emptied it: what the throttle metrics label.
    expect(new Set(decisions.map((d) => JSON.stringify(d.outcome === 'wait' ? d.limitedBy : d.outcome)))).toEqual(
      new Set(['"send"', JSON.stringify({ bucket: 'merchant:m_gcra', limit: 'rate' })]),
    );
    const turns = decisions.map((d) => (d.outcome === 'send' ? d.nowMs : d.atMs)).sort((x, y) => x - y);
    const gaps = turns.slice(1).map((at, i) => at - turns[i]!);
    expect(Math.min(...gaps)).toBeGreaterThan(200 * (1 + RATE_SAFETY_MARGIN) - 0.5);
    expect(maxInAnyWindow(turns)).toBeLessThanOrEqual(5);
    // The queue is ~40 s long: a retry may not join it (2 s horizon), and is told when its place would be.
    const retry = await budget.acquire('m_gcra', 'retry');
    expect(retry.outcome).toBe('denied');
    expect(retry.atMs).toBeGreaterThan(Math.max(...turns));
    // Queue places all woken at once (late timers) are admitted at the gate one emission interval apart.
    const woken = await Promise.all(Array.from({ length: 20 }, () => budget.acquire('m_gcra', 'first', true)));
    expect(woken.filter((d) => d.outcome === 'send').length).toBeLessThanOrEqual(1);

    await region.pool.query(`UPDATE merchants SET rate_per_second = 1 WHERE id = 'm_gcra'`);
    const [a, b] = [await budget.acquire('m_gcra', 'first'), await budget.acquire('m_gcra', 'first')];
    expect([a.outcome, b.outcome]).toEqual(['wait', 'wait']);
    expect(b.atMs - a.atMs).toBeCloseTo(1000 * (1 + RATE_SAFETY_MARGIN), -1);
  });

  it('a push-back holds every slot until it ends', async () => {
    const region = await harness.region('us');
    await insertMerchants(region.pool, secretsOf(region), [
      { id: 'm_pause', endpointUrl: 'https://m.example/h', ratePerSecond: 50, burst: 5 },
    ]);
    const budget = createMerchantBudget(region.pool);
    const { rows } = await region.pool.query<{ ms: number }>(
      'SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms',
    );
    await budget.pushBack('m_pause', 3000, 'HTTP 429');
    const { pausedUntilMs } = await budget.pause('m_pause');
    expect(pausedUntilMs).toBeGreaterThanOrEqual(rows[0]!.ms + 3000);
    const decision = await budget.acquire('m_pause', 'first');
    expect(decision).toMatchObject({ outcome: 'wait', limitedBy: { bucket: 'merchant:m_pause', limit: 'pushback' } });
    expect(decision.atMs).toBeGreaterThanOrEqual(pausedUntilMs);
    // Holding a queue place does not get a caller past the pause either.
    expect(await budget.acquire('m_pause', 'first', true)).toMatchObject({ outcome: 'wait', atMs: expect.any(Number) });
  });
});

describe('three worker processes, one merchant', () => {
  it('100 webhooks at 5 req/s, burst 1: the gate admits at most 5 in any 1-second window, all delivered, no attempt spent on throttling', async () => {
    // 100 webhooks, every hold's workflow started at once and three processes contending for one budget: 20 s of
    // pacing, a hundred sliding windows. Scale (thousands of holds, many merchants) is the benchmark's.
    const night = await merchantNight(100, { rate: 5, burst: 1 });
    const merchantId = night.merchantIds[0]!;
    const started = Date.now();
    await sweep();
    await expect
      .poll(async () => (await deliveryCounts(night)).delivered?.n ?? 0, { timeout: 90_000, interval: 500 })
      .toBe(100);
    const wallS = (Date.now() - started) / 1000;

    const requests = harness.merchants.requests(merchantId);
    expect(new Set(requests.map((r) => r.webhookId)).size).toBe(100);
    expect(requests.filter((r) => r.answer === 429)).toEqual([]);
    expect(requests.every((r) => r.verified)).toBe(true);
    // Throttling never costs an attempt: the merchant answers every request 200 at once, so no attempt fails with an
    // answer, none a 429.
    const attempts = await expectEveryRequestAccounted(us, harness.merchants, merchantId);
    const failed = attempts.filter((a) => a.outcome !== 'delivered');
    // The gate admits one emission interval (1.1 / rate: 220 ms) after the last admission, never sooner: at most 5 in
    // any second by its clock. The merchant publishes 5 + 1; the burst and the 10 % are its headroom for the time
    // between our admission and its receive, which the receiver-side figure below only reports.
    const admitted = attempts.map((a) => a.admittedAt);
    expect(maxInAnyWindow(admitted)).toBeLessThanOrEqual(5);
    const received = requests.map((r) => r.receivedAt);
    const spanS = (received[received.length - 1]! - received[0]!) / 1000;
    console.log(
      `[rate-limits] 100 webhooks, 3 worker processes, 5 req/s burst 1: max ${maxInAnyWindow(admitted)} admitted in ` +
        `any 1 s window, ${maxInAnyWindow(received)} received (${Math.round(windowHeadroomMs(received, 5 + 1))} ms ` +
        `of headroom); first-to-last request ${spanS.toFixed(1)} s (ideal ${(100 / 5).toFixed(0)} s), sweep-to-done ` +
        `${wallS.toFixed(1)} s, ${failed.length} failed attempts`,
    );
  });

  it('after a 429 with Retry-After, no worker is admitted to the merchant before it elapses', async () => {
    const night = await merchantNight(40, { rate: 10, burst: 2 });
    const merchantId = night.merchantIds[0]!;
    harness.merchants.script(merchantId, {
      secrets: [night.secrets.get(merchantId)!],
      responses: [
        ...Array.from({ length: 5 }, () => ({ status: 200 })),
        { status: 429, retryAfter: '3' },
        { status: 200 },
      ],
    });
    await sweep();
    await expect
      .poll(async () => (await deliveryCounts(night)).delivered?.n ?? 0, { timeout: 60_000, interval: 500 })
      .toBe(40);

    const attempts = await expectEveryRequestAccounted(us, harness.merchants, merchantId, [429]);
    const refused = attempts.find((a) => a.statusCode === 429)!;
    // The push-back the 429 wrote: 3 s from when it was written, by the clock the gate reads, under the budget's lock.
    const { rows } = await us.pool.query<{ until: number; reason: string }>(
      `SELECT (extract(epoch FROM paused_until) * 1000)::float8 AS until, pause_reason AS reason
         FROM send_budgets WHERE key = 'merchant:' || $1`,
      [merchantId],
    );
    const pause = { from: rows[0]!.until - 3000, until: rows[0]!.until };
    expect(rows[0]!.reason).toMatch(/429/);
    expect(pause.from).toBeGreaterThan(refused.admittedAt);
    // Each admission came before the push-back was written (those went out as the 429 came back: they cannot be
    // recalled) or once it had elapsed, the refused webhook's own retry among the latter. None in between.
    expect(attempts.filter((a) => a.admittedAt >= pause.from && a.admittedAt < pause.until)).toEqual([]);
    const retried = attempts.filter(
      (a) => a.webhookId === refused.webhookId && a.attemptNumber > refused.attemptNumber,
    );
    expect(retried.length).toBeGreaterThanOrEqual(1);
    expect(retried.filter((a) => a.admittedAt < pause.until)).toEqual([]);
    expect(maxInAnyWindow(attempts.map((a) => a.admittedAt))).toBeLessThanOrEqual(10);
  });

  it('first attempts go before a backlog of retries', async () => {
    // 1 req/s, no burst: 15 first attempts queue 15 s of slots at once; the first 5 are refused (503) and
    // become retries (8 s later), which may only take a slot at most 2 s away, so they wait behind the queue.
    const night = await merchantNight(15, { rate: 1, burst: 0 }, { initialBackoffMs: 8000 });
    const merchantId = night.merchantIds[0]!;
    harness.merchants.script(merchantId, {
      secrets: [night.secrets.get(merchantId)!],
      responses: [...Array.from({ length: 5 }, () => ({ status: 503 })), { status: 200 }],
    });
    await sweep();
    await expect
      .poll(async () => (await deliveryCounts(night)).delivered?.n ?? 0, { timeout: 90_000, interval: 500 })
      .toBe(15);

    // Throttling is not a failed attempt: the five refused deliveries failed once each, and nothing else failed
    // with an answer.
    const attempts = await expectEveryRequestAccounted(us, harness.merchants, merchantId, [503, 503, 503, 503, 503]);
    const firsts = attempts.filter((a) => a.attemptNumber === 1);
    const retries = attempts.filter((a) => a.attemptNumber > 1);
    expect(retries.length).toBeGreaterThanOrEqual(5);
    // The queue hands out places one emission interval apart (1.1 s at 1 req/s) from the first admission, and the gate
    // admits no one before its place. When each first attempt had certainly taken its place: its admission, or the
    // durable timer its workflow started to wait for that place, whichever came first.
    const tookPlaceBy = new Map<string, number>();
    for (const first of firsts) {
      const { rows } = await us.pool.query<{ hold_id: string }>(
        'SELECT hold_id FROM webhook_deliveries WHERE webhook_id = $1',
        [first.webhookId],
      );
      const { events } = await us.client.workflow
        .getHandle(await holdWorkflowIdOf(us.pool, 'us', rows[0]!.hold_id))
        .fetchHistory();
      const timer = (events ?? []).find(
        (e) =>
          e.timerStartedEventAttributes &&
          Buffer.from(e.userMetadata?.summary?.data ?? [])
            .toString()
            .includes('merchant budget, first lane'),
      );
      const timerAt = timer ? Number(timer.eventTime!.seconds) * 1000 + (timer.eventTime!.nanos ?? 0) / 1e6 : Infinity;
      tookPlaceBy.set(first.webhookId, Math.min(first.admittedAt, timerAt));
    }
    // A retry asks when its backoff ends (its activity's scheduled time, in the attempt log) and may only take a place
    // a couple of seconds away: behind every first attempt that had taken one by then, so the gate admits it no sooner
    // than one interval per such first attempt after the first admission. (A first attempt woken late by its timer may
    // still reach the gate after a retry: the gate admits now or never, in the order callers come to it.)
    const opened = Math.min(...firsts.map((a) => a.admittedAt));
    const { rows: asked } = await us.pool.query<{ webhook_id: string; attempt_number: number; at: number }>(
      `SELECT webhook_id, attempt_number, (extract(epoch FROM scheduled_at) * 1000)::float8 AS at
         FROM delivery_attempts WHERE webhook_id = ANY($1::text[]) AND attempt_number > 1`,
      [retries.map((a) => a.webhookId)],
    );
    const jumped = retries.flatMap((retry) => {
      const askedAt = asked.find(
        (r) => r.webhook_id === retry.webhookId && r.attempt_number === retry.attemptNumber,
      )!.at;
      const ahead = [...tookPlaceBy.values()].filter((at) => at < askedAt).length;
      const earliest = opened + ahead * 1_100;
      return retry.admittedAt < earliest - 1 ? [{ ...retry, askedAt, ahead, earliest }] : [];
    });
    expect(jumped).toEqual([]);
  });

  it('a paused merchant keeps a backlog of 50; re-enabled, it drains at its rate, none dropped', async () => {
    const night = await merchantNight(50, { rate: 5, burst: 1 });
    const merchantId = night.merchantIds[0]!;
    await us.pool.query(`UPDATE merchants SET status = 'paused' WHERE id = $1`, [merchantId]);
    await sweep();
    await expect
      .poll(
        async () => {
          const { rows } = await us.pool.query(
            `SELECT count(*)::integer AS n FROM webhook_deliveries WHERE merchant_id = $1 AND status = 'pending'`,
            [merchantId],
          );
          return rows[0].n;
        },
        { timeout: 30_000 },
      )
      .toBe(50);
    // Every hold's workflow is waiting on the pause (none sent, none failed).
    const heldQuery = `TaskQueue = '${us.config.taskQueue}' AND MerchantId = '${merchantId}' AND DeliveryStatus = 'held'`;
    await expect.poll(async () => (await us.client.workflow.count(heldQuery)).count, { timeout: 30_000 }).toBe(50);
    expect(harness.merchants.requests(merchantId)).toHaveLength(0);

    const enabledAt = Date.now();
    await us.pool.query(`UPDATE merchants SET status = 'active' WHERE id = $1`, [merchantId]);
    await expect
      .poll(async () => (await deliveryCounts(night)).delivered?.n ?? 0, { timeout: 90_000, interval: 500 })
      .toBe(50);
    expect(new Set(harness.merchants.requests(merchantId).map((r) => r.webhookId)).size).toBe(50);
    // None admitted before the merchant was active again (none failed while it was paused: no attempt is spent on
    // waiting), then at most 5 in any second by the gate's clock.
    const admitted = (await expectEveryRequestAccounted(us, harness.merchants, merchantId)).map((a) => a.admittedAt);
    expect(admitted.filter((at) => at < enabledAt)).toEqual([]);
    expect(maxInAnyWindow(admitted)).toBeLessThanOrEqual(5);
  });
});
