/**
 * The edges of one webhook's delivery, each on the real stack: the shared dev server, real workers, a real ledger, real
 * HTTP to the fake merchants. Each test names the edge it proves.
 */
import { decodeOptionalFailureToOptionalError } from '@temporalio/common/lib/internal-non-workflow/codec-helpers.js';
import { temporal } from '@temporalio/proto';
import type { LogEntry } from '@temporalio/worker';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approveReplayUpdate } from '../../src/contracts/messages.js';
import { eventDeliveryWorkflowId } from '../../src/contracts/ids.js';
import { inTransaction } from '../../src/db/pool.js';
import { OperatorError } from '../../src/errors.js';
import { holdStatus, redeliverEventWebhook, type OpsContext } from '../../src/operations/operations.js';
import { setMerchant } from '../../src/operations/merchants.js';
import { InvalidDeliveryPolicyError } from '../../src/delivery/policy.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import type { SweepInput } from '../../src/contracts/domain.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import {
  expectEveryRequestAccounted,
  holdWorkflowIdOf,
  loggedAttempts,
  recordedDecision,
  seedNight,
  type Night,
} from '../support/ledger.js';
import { startTestReceiver, type TestReceiver } from '../support/processor.js';
import { waitUntil } from '../support/wait.js';

const workerLog: LogEntry[] = [];
let harness: Harness;
let us: TestRegion;
let ops: OpsContext;
let receiver: TestReceiver;
let nights = 0;

beforeAll(async () => {
  // Every warning the workers log, the SDK core's included (TMPRL1104: a workflow task ran longer than 5 s).
  harness = await openHarness({ logSink: (entry) => workerLog.push(entry) });
  us = await harness.region('us');
  await harness.startWorker(us);
  ops = { region: us.config, pool: us.pool, client: us.client };
  receiver = await startTestReceiver(us);
});
afterAll(async () => {
  await receiver?.close();
  await harness?.close();
});

type Responses = NonNullable<Parameters<Harness['merchants']['script']>[1]['responses']>;

async function night(
  counts: { expired?: number; future?: number; merchants?: number },
  responses: Responses,
  policy = {},
): Promise<Night> {
  const n = await seedNight(us.pool, 'us', `${harness.id}e${++nights}`, { expired: 0, ...counts }, harness.merchants);
  for (const merchantId of n.merchantIds) {
    harness.merchants.script(merchantId, { secrets: [n.secrets.get(merchantId)!], responses });
    await us.pool.query('UPDATE merchants SET delivery_policy = $2::jsonb WHERE id = $1', [
      merchantId,
      JSON.stringify(policy),
    ]);
  }
  return n;
}

/** Starts a sweep of every expired hold of the region; `execute` waits for it (its holds released). */
/** `on`: the task queue (and so the worker's rules) the sweep and its holds run on. */
async function sweep(options: { on?: TestRegion; wait?: boolean } = {}): Promise<void> {
  const start = {
    taskQueue: (options.on ?? us).config.taskQueue,
    workflowId: `sweep-us-${harness.id}-e-${++nights}`,
    args: [{ region: 'us' as const, releaseWaitMs: 60_000 }] as [SweepInput],
  };
  if (options.wait === false) await us.client.workflow.start(sweepExpiredHolds, start);
  else await us.client.workflow.execute(sweepExpiredHolds, start);
}

const statusOf = async (webhookOrHold: string) =>
  (
    await us.pool.query<{ status: string; quarantine_reason: string | null }>(
      'SELECT status, quarantine_reason FROM webhook_deliveries WHERE webhook_id = $1 OR (hold_id = $1 AND event_type = $2)',
      [webhookOrHold, 'hold.released'],
    )
  ).rows[0];

const handleOf = async (holdId: string) => us.client.workflow.getHandle(await holdWorkflowIdOf(us.pool, 'us', holdId));

/** The names of the activities the workflow is waiting on now (the server's pending-activity list). */
const pendingActivities = async (holdId: string) =>
  ((await (await handleOf(holdId)).describe()).raw.pendingActivities ?? []).map((a) => a.activityType?.name);

/** Release-to-delivery latency (ms) of these holds' webhooks, delivered ones only, and its 95th percentile. */
async function p95ReleaseToDelivery(holdIds: string[]): Promise<number> {
  const { rows } = await us.pool.query<{ ms: number }>(
    `SELECT (extract(epoch FROM delivered_at - created_at) * 1000)::float8 AS ms FROM webhook_deliveries
      WHERE hold_id = ANY($1::text[]) AND status = 'delivered' ORDER BY 1`,
    [holdIds],
  );
  expect(rows).toHaveLength(holdIds.length);
  return rows[Math.ceil(rows.length * 0.95) - 1]!.ms;
}

async function allDelivered(holdIds: string[]): Promise<boolean> {
  const { rows } = await us.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM webhook_deliveries WHERE hold_id = ANY($1::text[]) AND status = 'delivered'`,
    [holdIds],
  );
  return rows[0]!.n === holdIds.length;
}

describe('a decision while the abandon is being recorded', () => {
  it('is refused (never answered "applied" and then dropped) while decideQuarantine(abandon) waits on a row lock', async () => {
    const n = await night({ expired: 1, merchants: 1 }, [{ status: 400, body: 'bad schema' }]);
    const holdId = n.expired[0]!.id;
    // Quarantined at once (400), abandoned 4 s later: the lock below is taken before then.
    await sweep({ on: await harness.abandoningAfter(us, 4_000) });
    await expect.poll(async () => (await statusOf(holdId))?.status, { timeout: 30_000 }).toBe('quarantined');
    // An approval recorded in the ledger, sent while the abandon is being recorded.
    const approval = await recordedDecision(us.pool, holdId, 'approveReplay', 'dave', 'merchant fixed it');
    const locker = new pg.Client({ connectionString: us.databaseUrl });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query(
        `SELECT 1 FROM webhook_deliveries WHERE hold_id = $1 AND event_type = 'hold.released' FOR UPDATE`,
        [holdId],
      );
      // The timeout fires; recording the abandon waits on the lock (its retries too, each ended by the lock timeout).
      await expect
        .poll(() => pendingActivities(holdId), { timeout: 30_000, interval: 250 })
        .toContain('decideQuarantine');

      const answer = await (await handleOf(holdId)).executeUpdate(approveReplayUpdate, { args: [approval] }).then(
        (applied) => ({ applied }),
        (err: Error & { cause?: Error }) => ({ refused: err.cause?.message ?? err.message }),
      );
      expect(answer).toEqual({ refused: 'already decided: abandon by hold-sweeper' });
    } finally {
      await locker.query('COMMIT');
      await locker.end();
    }
    await expect.poll(async () => (await statusOf(holdId))?.status, { timeout: 30_000 }).toBe('abandoned');
    expect(await (await handleOf(holdId)).result()).toMatchObject({ delivery: { status: 'abandoned' } });
    const { rows } = await us.pool.query<{ decision: string }>(
      `SELECT x.decision FROM delivery_decisions x JOIN webhook_deliveries d USING (webhook_id) WHERE d.hold_id = $1`,
      [holdId],
    );
    expect(rows.map((r) => r.decision)).toEqual(['abandon']);
  });
});

describe('slow merchants cost no duplicate, no long workflow task, no wait of anyone else', () => {
  it('merchants answering 200 in 3 s and only when told (within their 30 s timeout): every webhook once, a second only with a lost task, no TMPRL1104, a healthy night delivered while every slow request is open', async () => {
    const slowTasks = () => workerLog.filter((e) => e.message.includes('TMPRL1104'));
    // Two slow merchants, at 10 req/s, each with room for all 8 of its requests in flight: one answers each webhook
    // after 3 s, one holds every request open until the healthy night below is delivered. Both well inside their
    // attempt timeout: neither is sent a webhook twice but by the fast path's at-least-once (a workflow task lost on a
    // busy machine while its attempt was open, in the hold's history).
    const slowNight = async (answer: Responses[number]) => {
      const n = await night({ expired: 8, merchants: 1 }, [answer], { attemptTimeoutMs: 30_000, maxInFlight: 8 });
      await us.pool.query('UPDATE merchants SET rate_per_second = 10, burst = 1 WHERE id = ANY($1::text[])', [
        n.merchantIds,
      ]);
      return { merchantId: n.merchantIds[0]!, holds: n.expired.map((h) => h.id) };
    };
    const slow = {
      threeSeconds: await slowNight({ status: 200, delayMs: 3_000 }),
      whenTold: await slowNight({ status: 200, untilReleased: true }),
    };
    await sweep();
    await waitUntil(
      async () => harness.merchants.openRequests(slow.whenTold.merchantId).length === 8,
      'every webhook of the merchant that answers when told is open at it',
    );

    // A healthy night swept while those 8 requests are open: 4 merchants at 2 req/s answering at once.
    const healthy = await night({ expired: 32, merchants: 4 }, [{ status: 200 }]);
    await us.pool.query('UPDATE merchants SET rate_per_second = 2, burst = 1 WHERE id = ANY($1::text[])', [
      healthy.merchantIds,
    ]);
    const healthyHolds = healthy.expired.map((h) => h.id);
    await sweep();
    await waitUntil(() => allDelivered(healthyHolds), 'the healthy holds are delivered');
    // A healthy webhook held behind a slow merchant (a slot, a workflow task, a connection) could only have been
    // delivered once a slow request ended: each of that merchant's 8 webhooks has its request still open, one each. (A
    // request the worker gave up on when its workflow task was lost is closed and sent again: accounted for below.)
    const openAtWhenTold = harness.merchants
      .requests(slow.whenTold.merchantId)
      .filter((r) => r.closedAt === undefined)
      .map((r) => r.webhookId);
    expect(openAtWhenTold).toHaveLength(8);
    expect(new Set(openAtWhenTold).size).toBe(8);
    const healthyP95 = await p95ReleaseToDelivery(healthyHolds);

    harness.merchants.release(slow.whenTold.merchantId);
    for (const { holds } of Object.values(slow))
      await waitUntil(() => allDelivered(holds), "the slow merchants' holds are delivered", 90_000);
    const perWebhook = Object.entries(slow).map(([merchant, { merchantId, holds }]) => {
      const received = harness.merchants.requests(merchantId);
      return { merchant, webhooks: new Set(received.map((r) => r.webhookId)).size, requests: received.length, holds };
    });
    console.log(
      `[slow merchants] requests per webhook: ${perWebhook.map((p) => `${p.merchant} ${(p.requests / p.webhooks).toFixed(2)} (${p.requests} for ${p.webhooks})`).join(', ')}; healthy release-to-delivery p95 beside them: ${Math.round(healthyP95)} ms`,
    );
    for (const p of perWebhook) expect({ ...p, holds: p.holds.length }).toEqual({ ...p, webhooks: 8, holds: 8 });
    for (const { merchantId } of Object.values(slow))
      await expectEveryRequestAccounted(us, harness.merchants, merchantId);
    expect(slowTasks().map((e) => e.message)).toEqual([]);
  });
});

describe('database timeouts and cancellation', () => {
  it("a release meeting the hold's row locked fails fast, never queues a second transaction behind it, and succeeds once the lock is gone", async () => {
    const n = await night({ expired: 1, merchants: 1 }, [{ status: 200 }]);
    const holdId = n.expired[0]!.id;
    const locker = new pg.Client({ connectionString: us.databaseUrl });
    await locker.connect();
    const waitingOnLocks: number[] = [];
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM auth_holds WHERE id = $1 FOR UPDATE', [holdId]);
      const lockerPid = (await locker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await sweep({ wait: false });
      const handle = await handleOf(holdId);
      // A failed release attempt is in the history within seconds, not when a 30 s attempt timed out.
      const failedAttempts = async () => {
        const { rows } = await us.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> $1 AND wait_event_type = 'Lock'`,
          [lockerPid],
        );
        waitingOnLocks.push(rows[0]!.n);
        const history = await handle.fetchHistory().catch(() => undefined);
        return (history?.events ?? []).filter(
          (e) =>
            e.eventType === temporal.api.enums.v1.EventType.EVENT_TYPE_MARKER_RECORDED &&
            e.markerRecordedEventAttributes?.failure,
        );
      };
      // A failed attempt of the release as a local activity (a marker), which the lock timeout or the local
      // activity's start-to-close ends within seconds (below). How soon the worker records it is the machine's; the
      // bound is for a hang.
      await expect.poll(failedAttempts, { timeout: 60_000, interval: 100 }).not.toHaveLength(0);
      const [failed] = await failedAttempts();
      // Its lock wait ended by the lock timeout (1 s), or the attempt and its in-worker retry by the local activity's
      // 3 s start-to-close (which the SDK core counts from the first attempt): either way bounded by seconds.
      // The region encrypts failure messages ("Encoded failure" in the history): read with its keys.
      const failure = await decodeOptionalFailureToOptionalError(
        us.client.workflow.options.loadedDataConverter,
        failed!.markerRecordedEventAttributes!.failure,
      );
      expect(failure?.message).toMatch(/lock timeout|Activity timed out/);
      for (let i = 0; i < 20; i++) await failedAttempts();
    } finally {
      await locker.query('COMMIT');
      await locker.end();
    }
    // Never more than the one release transaction waiting on the lock at a time.
    expect(Math.max(...waitingOnLocks)).toBe(1);
    await expect.poll(async () => (await statusOf(holdId))?.status, { timeout: 30_000 }).toBe('delivered');
    const { rows } = await us.pool.query('SELECT kind FROM ledger_entries WHERE hold_id = $1', [holdId]);
    expect(rows).toHaveLength(1);
  });

  it('a transaction is bounded by its statement timeout, and cancelled on the server when its caller aborts', async () => {
    // Ended by the server's statement timeout (its own error), not by the 10 s sleep finishing.
    await expect(
      inTransaction(us.pool, (c) => c.query('SELECT pg_sleep(10)'), { statementTimeoutMs: 300 }),
    ).rejects.toThrow(/canceling statement due to statement timeout/);

    const abort = new AbortController();
    const sleeping = inTransaction(us.pool, (c) => c.query(`SELECT pg_sleep(60), 'abort-me'`), {
      signal: abort.signal,
    });
    const running = async () =>
      (
        await us.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE '%abort-me%' AND state = 'active' AND pid <> pg_backend_pid()`,
        )
      ).rows[0]!.n;
    await expect.poll(running, { timeout: 30_000, interval: 50 }).toBe(1);
    abort.abort();
    // Cancelled on the server (its own error, before the sleep could end), and no longer running there.
    await expect(sleeping).rejects.toThrow(/canceling statement due to user request/);
    expect(await running()).toBe(0);
  });
});

describe('cases 4 and 5: requests in flight', () => {
  it('a merchant that hangs: at most 4 of its requests open at once, never two for one webhook id, each closed at its timeout', async () => {
    const n = await night({ expired: 12, merchants: 1 }, [{ hang: true }], {
      attemptTimeoutMs: 3_000,
      initialBackoffMs: 1_000,
    });
    const [merchantId] = n.merchantIds;
    await us.pool.query('UPDATE merchants SET rate_per_second = 20, burst = 5 WHERE id = $1', [merchantId]);
    await sweep({ wait: false });
    // Enough attempts that every hold has been tried and several retried while others were still open.
    await waitUntil(
      async () => harness.merchants.requests(merchantId).length >= 24,
      '24 requests reach the hanging merchant',
      90_000,
    );
    const peak = harness.merchants.peakOpen(merchantId!);
    // What Temporal's retries look like to an operator: its own pending-activity information, shown by `ops status`.
    const retryingShown = async () =>
      (await Promise.all(n.expired.map((h) => holdStatus(ops, h.id)))).some(
        (r) =>
          (r.workflow?.retrying?.attempt ?? 0) >= 2 &&
          /AttemptTimeout from merchant/.test(r.workflow?.retrying?.lastFailure ?? ''),
      );
    await expect.poll(retryingShown, { timeout: 30_000, interval: 250 }).toBe(true);
    harness.merchants.script(merchantId!, { secrets: [n.secrets.get(merchantId!)!], responses: [{ status: 200 }] });
    expect(peak).toEqual({ requests: 4, perWebhook: 1 });
    await waitUntil(
      () => allDelivered(n.expired.map((h) => h.id)),
      'the merchant, answering again, gets every webhook',
      90_000,
    );
    // Never left open: every request the merchant held was closed by its sender, each an attempt the log records as
    // timed out by the sender's own timer, after the whole 3 s (its measure is whole milliseconds).
    await expect.poll(() => harness.merchants.openRequests(merchantId!), { timeout: 30_000 }).toEqual([]);
    const hung = harness.merchants.requests(merchantId).filter((r) => r.answer === 'hang');
    const log = await loggedAttempts(us.pool, [merchantId!]);
    const timedOut = log.filter((a) => a.errorClass === 'AttemptTimeout');
    expect(timedOut.filter((a) => a.durationMs < 3_000 - 1)).toEqual([]);
    expect(log.filter((a) => a.errorClass !== 'AttemptTimeout' && a.outcome !== 'delivered')).toEqual([]);
    const count = (ids: (string | undefined)[]) =>
      ids.reduce((m, id) => m.set(id!, (m.get(id!) ?? 0) + 1), new Map<string, number>());
    const timedOutOf = count(timedOut.map((a) => a.webhookId));
    expect([...count(hung.map((r) => r.webhookId))].filter(([id, n]) => n > (timedOutOf.get(id) ?? 0))).toEqual([]);
  });

  it('an attempt timeout past the bound is refused: by merchant set (named error, nothing written) and, written directly, by the delivery', async () => {
    const n = await night({ expired: 1, merchants: 1 }, [{ status: 200 }]);
    const [merchantId] = n.merchantIds;
    const rules = { allowInsecureHttp: true, allowPrivateAddresses: true, trustedNetworks: [] };
    await expect(
      setMerchant(us.pool, rules, merchantId!, { deliveryPolicy: { attemptTimeoutMs: 600_000 } }),
    ).rejects.toThrow(InvalidDeliveryPolicyError);
    await us.pool.query('UPDATE merchants SET delivery_policy = $2::jsonb WHERE id = $1', [
      merchantId,
      '{"attemptTimeoutMs": 600000}',
    ]);
    await sweep();
    await expect
      .poll(() => statusOf(n.expired[0]!.id), { timeout: 30_000 })
      .toEqual({ status: 'quarantined', quarantine_reason: 'invalid_policy' });
    expect(harness.merchants.requests(merchantId)).toEqual([]);
  });
});

describe("an orphaned event webhook never blocks its hold's later ones", () => {
  it("one whose delivery workflow was terminated: the next event's webhook is delivered, and `events redeliver` delivers it", async () => {
    const n = await night({ future: 1, merchants: 1 }, [{ status: 500 }], { initialBackoffMs: 600_000 });
    const [merchantId] = n.merchantIds;
    const holdId = n.future[0]!.id;
    await us.pool.query('UPDATE merchants SET rate_per_second = 50, burst = 5 WHERE id = $1', [merchantId]);
    const event = (sequence: number) => ({
      eventId: `evt_${holdId}_${sequence}`,
      holdId,
      sequence,
      type: 'hold.incremented' as const,
      amountMinor: 100 * sequence,
      currency: 'USD',
    });
    expect((await receiver.processor.send(event(1))).status).toBe(202);
    const webhookOf = async (sequence: number) =>
      (
        await us.pool.query<{ webhook_id: string }>(
          'SELECT webhook_id FROM processor_events WHERE hold_id = $1 AND sequence = $2',
          [holdId, sequence],
        )
      ).rows[0]?.webhook_id ?? undefined;
    await waitUntil(
      async () => (await webhookOf(1)) !== undefined && harness.merchants.requests(merchantId).length >= 1,
      'event 1 is tried',
    );
    const first = (await webhookOf(1))!;
    // The orphan: its delivery run ends without finishing it (an operator terminated it, or it timed out).
    await us.client.workflow.getHandle(eventDeliveryWorkflowId('us', first)).terminate('test: orphan the webhook');
    expect(await statusOf(first)).toMatchObject({ status: 'pending' });

    harness.merchants.script(merchantId!, { secrets: [n.secrets.get(merchantId!)!], responses: [{ status: 200 }] });
    expect((await receiver.processor.send(event(2))).status).toBe(202);
    await waitUntil(async () => (await webhookOf(2)) !== undefined, 'event 2 is applied');
    const second = (await webhookOf(2))!;
    await expect.poll(async () => (await statusOf(second))?.status, { timeout: 30_000 }).toBe('delivered');
    expect(await statusOf(first)).toMatchObject({ status: 'pending' });

    // A new delivery run for the orphan: refused while one runs or for a delivered webhook, started for the orphan.
    await redeliverEventWebhook(ops, first);
    await expect.poll(async () => (await statusOf(first))?.status, { timeout: 30_000 }).toBe('delivered');
    await expect(redeliverEventWebhook(ops, first)).rejects.toThrow(OperatorError);
    await expect(redeliverEventWebhook(ops, second)).rejects.toThrow(/is delivered: nothing to deliver/);
  });
});
