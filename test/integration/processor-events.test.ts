/**
 * The card processor's callbacks end to end (docs/processor-events.md): the receiver over real HTTP, signed by the
 * Standard Webhooks reference library; events recorded in the real ledger and applied by real hold-event workflows on
 * the shared dev server; the merchants told by the real delivery machinery; and the race with the expiry release, many
 * times.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  accountTotals,
  checkBalanced,
  checkInvariants,
  checkLedgerInvariants,
  checkProcessorEventInvariants,
} from '../../bench/invariants.js';
import { FakeProcessor, type ProcessorEvent } from '../../dev/fake-processor.js';
import { freePort } from '../../dev/embedded-postgres.js';
import { startReceiverProcess } from '../../dev/receiver-process.js';
import { holdEventsWorkflowId, holdWorkflowId } from '../../src/contracts/ids.js';
import { isoUtc } from '../../src/db/sql.js';
import {
  HOLD_EVENT_WEBHOOK_TYPES,
  holdEventsStatusQuery,
  skipMissingEventSignal,
} from '../../src/contracts/processor.js';
import { HOLD_RELEASED_EVENT } from '../../src/contracts/delivery.js';
import { generateSigningSecret } from '../../src/delivery/standard-webhooks.js';
import { WorkflowNotFoundError } from '@temporalio/client';
import { releaseExpiredHold } from '../../src/workflows/release-expired-hold.js';
import { catalogMismatches } from '../support/event-types.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { loggedAttempts, seedNight, type Night } from '../support/ledger.js';
import { waitUntil } from '../support/wait.js';
import { withOps, type Ops } from '../support/ops.js';
import { startTestReceiver, type TestReceiver } from '../support/processor.js';
import { capturedLogger } from '../support/logs.js';
import type { Logger } from '../../src/observability/logger.js';

const PROCESSOR_SECRET = generateSigningSecret();
/** Short, so the gap cases reach the human stage in seconds; production waits 15 minutes (PROCESSOR_GAP_WAIT). */
const GAP_WAIT_MS = 3_000;

let harness: Harness;
let us: TestRegion;
let receiver: TestReceiver;
let processor: FakeProcessor;
let opening: Map<string, bigint>;
let nights = 0;

/** This file's receiver settings: short waits, so gaps and the relay act within a test. */
const receiverFor = (
  region: TestRegion,
  options: { gapWaitMs?: number; workflowIdleMs?: number; logger?: Logger } = {},
) =>
  startTestReceiver(region, {
    secret: PROCESSOR_SECRET,
    gapWaitMs: GAP_WAIT_MS,
    recordTimeoutMs: 1_000,
    relayIntervalMs: 500,
    relayAfterMs: 2_000,
    ...options,
  });
/** What the file's own receiver logs. */
const receiverLog = capturedLogger('receiver');

beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
  await harness.startWorker(us);
  receiver = await receiverFor(us, { logger: receiverLog.logger });
  processor = receiver.processor;
});
afterAll(async () => {
  const bodies = harness?.merchants.requests().map((r) => r.body) ?? [];
  await receiver?.close();
  await harness?.close();
  // Every body the merchants received in this file, of every type the processor's events write, is what the
  // event-type catalog says of its type.
  const types = new Set(bodies.map((body) => (JSON.parse(body) as { type: string }).type));
  expect([...types].sort()).toEqual([HOLD_RELEASED_EVENT, ...Object.values(HOLD_EVENT_WEBHOOK_TYPES)].sort());
  expect(catalogMismatches(bodies)).toEqual([]);
});

/** A night of holds whose merchants take webhooks fast (the pace is not under test here). */
async function night(counts: { expired?: number; future?: number }): Promise<Night> {
  const n = await seedNight(
    us.pool,
    'us',
    `${harness.id}p${++nights}`,
    { expired: counts.expired ?? 0, future: counts.future ?? 0, merchants: 2 },
    harness.merchants,
  );
  await us.pool.query('UPDATE merchants SET rate_per_second = 500, burst = 50 WHERE id = ANY($1::text[])', [
    n.merchantIds,
  ]);
  // Each night's accounts as they open; accounts of earlier nights keep their own opening.
  opening = new Map([...(await accountTotals(us.pool)), ...(opening ?? new Map())]);
  return n;
}

const ev = (holdId: string, sequence: number, type: ProcessorEvent['type'], amountMinor?: number): ProcessorEvent => ({
  eventId: `evt_${holdId}_${sequence}_${type.split('.')[1]}`,
  holdId,
  sequence,
  type,
  ...(amountMinor === undefined ? {} : { amountMinor, currency: 'USD' }),
});

async function eventRows(holdId: string) {
  const { rows } = await us.pool.query<{
    event_id: string;
    sequence: number;
    outcome: string | null;
    applied_at: Date | null;
    webhook_id: string | null;
  }>(
    'SELECT event_id, sequence, outcome, applied_at, webhook_id FROM processor_events WHERE hold_id = $1 ORDER BY sequence',
    [holdId],
  );
  return rows;
}

async function hold(holdId: string) {
  const { rows } = await us.pool.query<{ state: string; event_seq: number; amount_minor: string }>(
    'SELECT state, event_seq, amount_minor FROM auth_holds WHERE id = $1',
    [holdId],
  );
  return rows[0]!;
}

async function entries(holdId: string): Promise<{ kind: string; amount_minor: string }[]> {
  const { rows } = await us.pool.query('SELECT kind, amount_minor FROM ledger_entries WHERE hold_id = $1 ORDER BY id', [
    holdId,
  ]);
  return rows;
}

/** Every event of these holds applied, and every webhook they wrote delivered. */
async function settled(holdIds: readonly string[]): Promise<boolean> {
  const { rows } = await us.pool.query<{ open: number }>(
    `SELECT (SELECT count(*) FROM processor_events WHERE hold_id = ANY($1::text[]) AND applied_at IS NULL)
          + (SELECT count(*) FROM webhook_deliveries WHERE hold_id = ANY($1::text[]) AND status = 'pending') AS open`,
    [holdIds],
  );
  return Number(rows[0]!.open) === 0;
}

/** `npm run ops -- ...` against this file's region, its output lines collected. */
const withRegionOps = (work: (ops: Ops, lines: string[]) => Promise<void>) => withOps(us, 'dev', work);

async function allInvariants(): Promise<void> {
  expect(await checkLedgerInvariants(us.pool)).toEqual([]);
  expect(await checkProcessorEventInvariants(us.pool)).toEqual([]);
  expect(await checkBalanced(us.pool, opening)).toEqual([]);
}

describe('the receiver', () => {
  it('records a verified event before answering 202, and the hold workflow applies it: an active hold captured, a reversal, an increment', async () => {
    const n = await night({ future: 3 });
    const [a, b, c] = n.future.map((h) => h.id) as [string, string, string];
    const amountA = n.future[0]!.amountMinor;
    const results = await Promise.all([
      processor.send(ev(a, 1, 'hold.captured', amountA - 100)),
      processor.send(ev(b, 1, 'hold.reversed')),
      processor.send(ev(c, 1, 'hold.incremented', 500)),
    ]);
    expect(results.map((r) => r.status)).toEqual([202, 202, 202]);
    await waitUntil(() => settled([a, b, c]), 'the three events are applied and their webhooks delivered');

    expect(await hold(a)).toMatchObject({ state: 'captured', event_seq: 1 });
    expect(await entries(a)).toEqual([{ kind: 'hold_capture', amount_minor: String(amountA - 100) }]);
    expect(await hold(b)).toMatchObject({ state: 'reversed', event_seq: 1 });
    expect(await hold(c)).toMatchObject({
      state: 'active',
      event_seq: 1,
      amount_minor: String(n.future[2]!.amountMinor + 500),
    });
    // Each merchant got the event's webhook, signed (the fake merchant verifies with the reference library).
    const received = harness.merchants.requests().filter((r) => [a, b, c].some((id) => r.body.includes(`"${id}"`)));
    expect(received.map((r) => JSON.parse(r.body).type).sort()).toEqual([
      'hold.captured',
      'hold.incremented',
      'hold.reversed',
    ]);
    expect(received.every((r) => r.verified)).toBe(true);
    await allInvariants();
  });

  it('refuses what is unsigned, badly signed, stale or malformed with a named 4xx, counts it, records only what was signed, and applies nothing', async () => {
    const n = await night({ future: 1 });
    const holdId = n.future[0]!.id;
    const good = FakeProcessor.body(ev(holdId, 1, 'hold.captured', 100));
    const cases: [string, Promise<{ status: number; body: string }>, number, string][] = [
      ['unsigned', processor.post('evt_r1', good, { 'webhook-signature': undefined }), 401, 'MissingSignature'],
      [
        'wrong secret',
        new FakeProcessor(processor.url, generateSigningSecret()).post('evt_r2', good),
        401,
        'BadSignature',
      ],
      [
        'stale',
        processor.post('evt_r3', good, { 'webhook-timestamp': String(Math.floor(Date.now() / 1000) - 3600) }),
        401,
        'StaleTimestamp',
      ],
      ['not JSON', processor.post('evt_r4', '{"type": "hold.captured",'), 400, 'MalformedJson'],
      [
        'negative amount',
        processor.post(
          'evt_r5',
          FakeProcessor.body({ ...ev(holdId, 1, 'hold.captured'), amountMinor: -5, currency: 'USD' }),
        ),
        400,
        'NegativeAmount',
      ],
      [
        'unknown type',
        processor.post('evt_r6', good.replace('hold.captured', 'hold.settled')),
        400,
        'UnknownEventType',
      ],
      ['no sequence', processor.post('evt_r7', good.replace('"sequence":1', '"sequence":0')), 400, 'InvalidSequence'],
      ['bad event id', processor.post('evt r8/../', good), 400, 'InvalidEventId'],
    ];
    const before = await receiver.receiver.metrics.metrics();
    expect(cases.some((c) => before.includes(`reason="${c[3]}"`))).toBe(false);
    for (const [what, response, status, error] of cases) {
      const res = await response;
      expect({ what, status: res.status, error: JSON.parse(res.body).error }).toEqual({ what, status, error });
    }
    // Every refusal is counted by reason; only the signed ones (malformed by the processor itself) are written, for
    // someone to read. What anyone can send without the secret costs the database nothing.
    const metrics = await receiver.receiver.metrics.metrics();
    for (const [, , , error] of cases) {
      expect(metrics).toContain(`hold_sweeper_processor_requests_refused_total{region="us",reason="${error}"} 1`);
    }
    const written = async () =>
      (
        await us.pool.query<{ error_code: string }>('SELECT error_code FROM processor_requests_refused ORDER BY id')
      ).rows.map((r) => r.error_code);
    // Each signed refusal is written, or, when its pool could not take it in time (it waits at most a second, and
    // never for the connections events are recorded with), the receiver says so of that request in its log.
    const requestOf = (code: string) =>
      receiverLog.lines.find((l) => l.msg === 'processor request refused' && l.error === code)?.requestId;
    const saidNotRecorded = (code: string) =>
      receiverLog.lines.some(
        (l) => l.msg === 'refused processor request not recorded' && l.requestId === requestOf(code),
      );
    const signed = cases.filter((c) => c[2] === 400).map((c) => c[3]);
    const unaccounted = async () => {
      const rows = await written();
      return signed.filter((code) => !rows.includes(code) && !saidNotRecorded(code));
    };
    await expect.poll(unaccounted, { timeout: 30_000 }).toEqual([]);
    expect(
      (await written()).filter((code) => ['MissingSignature', 'BadSignature', 'StaleTimestamp'].includes(code)),
    ).toEqual([]);
    expect((await us.pool.query('SELECT 1 FROM processor_events WHERE hold_id = $1', [holdId])).rowCount).toBe(0);
    expect(await hold(holdId)).toMatchObject({ state: 'active', event_seq: 0 });
  });

  it('deduplicates forever: the same event ten times at once is recorded and applied once; the same id with another body is a 409', async () => {
    const n = await night({ future: 1 });
    const holdId = n.future[0]!.id;
    const event = ev(holdId, 1, 'hold.incremented', 250);
    const answers = await Promise.all(Array.from({ length: 10 }, () => processor.send(event)));
    expect(answers.filter((a) => a.status === 202)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 200)).toHaveLength(9);
    await waitUntil(() => settled([holdId]), 'the increment is applied and told');
    // Hours later, by the processor's clock, the same id again: still a duplicate (there is no window).
    await us.pool.query(
      `UPDATE processor_events SET received_at = received_at - interval '30 days' WHERE hold_id = $1`,
      [holdId],
    );
    expect((await processor.send(event)).status).toBe(200);
    const conflict = await processor.send({ ...event, amountMinor: 999 });
    expect({ status: conflict.status, error: JSON.parse(conflict.body).error }).toEqual({
      status: 409,
      error: 'EventConflict',
    });

    expect(await entries(holdId)).toEqual([{ kind: 'hold_increment', amount_minor: '250' }]);
    expect(await hold(holdId)).toMatchObject({ event_seq: 1, amount_minor: String(n.future[0]!.amountMinor + 250) });
    expect(harness.merchants.requests().filter((r) => r.body.includes(`"${holdId}"`))).toHaveLength(1);
    await allInvariants();
  });
});

describe('an operator', () => {
  it('skips a missing event while the workflow still waits for it (before it stops): what follows applies at once', async () => {
    const n = await night({ future: 1 });
    const holdId = n.future[0]!.id;
    const patient = await receiverFor(us, { gapWaitMs: 10 * 60_000 });
    const sender = patient.processor;
    try {
      expect((await sender.send(ev(holdId, 2, 'hold.incremented', 7))).status).toBe(202);
      const handle = us.client.workflow.getHandle(holdEventsWorkflowId('us', holdId));
      await expect
        .poll(async () => (await handle.query(holdEventsStatusQuery)).stage, { timeout: 30_000 })
        .toMatchObject({ stage: 'waiting_for_predecessor', expected: 1 });
      await withRegionOps(async (ops) => {
        expect(
          await ops(
            'events',
            'skip',
            holdId,
            '--sequence',
            '1',
            '--by',
            'ops@example.com',
            '--reason',
            'processor: never issued',
          ),
        ).toBe(0);
      });
      await waitUntil(() => settled([holdId]), 'sequence 2 applies after the skip');
      expect(await hold(holdId)).toMatchObject({ state: 'active', event_seq: 2 });
      expect((await handle.query(holdEventsStatusQuery)).skipped).toEqual([
        { sequence: 1, by: 'ops@example.com', reason: 'processor: never issued' },
      ]);
      // It never stopped: no event_gap was set.
      expect((await handle.describe()).searchAttributes.DeliveryStatus).toBeUndefined();
    } finally {
      await patient.close();
    }
    await allInvariants();
  });
});

describe('a slow ledger', () => {
  it('does not slow the answer: with the hold row locked by a long ledger transaction the event is recorded and acknowledged, and applies once the lock goes', async () => {
    const n = await night({ future: 1 });
    const holdId = n.future[0]!.id;
    const blocker = await us.pool.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query('SELECT 1 FROM auth_holds WHERE id = $1 FOR UPDATE', [holdId]);
      await blocker.query('LOCK TABLE accounts IN EXCLUSIVE MODE');
      expect((await processor.send(ev(holdId, 1, 'hold.captured', 100), { maxAttempts: 1 })).status).toBe(202);
      // Recorded, handed over, and waiting on the row lock: not applied while the ledger holds it.
      await waitUntil(
        async () =>
          (
            await us.pool.query(
              `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`,
            )
          ).rowCount! > 0,
        'the apply waits on the lock',
      );
      expect((await eventRows(holdId))[0]).toMatchObject({ outcome: null });
    } finally {
      await blocker.query('ROLLBACK');
      blocker.release();
    }
    await waitUntil(() => settled([holdId]), 'the capture applies once the ledger lets go');
    expect(await hold(holdId)).toMatchObject({ state: 'captured' });
    await allInvariants();
  });

  it('answers 503 when the event cannot be recorded in time, never 2xx; the processor retry records and applies it once', async () => {
    const n = await night({ future: 1 });
    const holdId = n.future[0]!.id;
    const event = ev(holdId, 1, 'hold.incremented', 30);
    const blocker = await us.pool.connect();
    let first: Awaited<ReturnType<FakeProcessor['send']>>;
    try {
      await blocker.query('BEGIN');
      await blocker.query('LOCK TABLE processor_events IN ACCESS EXCLUSIVE MODE');
      first = await processor.send(event, { maxAttempts: 1 });
    } finally {
      await blocker.query('ROLLBACK');
      blocker.release();
    }
    expect({ status: first.status, error: JSON.parse(first.body).error }).toEqual({
      status: 503,
      error: 'NotRecorded',
    });
    // The INSERT that timed out for the answer still lands once the lock goes: the retry finds it, a duplicate.
    const retry = await processor.send(event);
    expect([200, 202]).toContain(retry.status);
    await waitUntil(() => settled([holdId]), 'the increment is applied');
    expect(await entries(holdId)).toEqual([{ kind: 'hold_increment', amount_minor: '30' }]);
    await allInvariants();
  });
});

describe('order per hold', () => {
  it('shuffled sequences over many holds apply in each hold sequence, and each merchant hears of them in order', async () => {
    const n = await night({ future: 12 });
    const events = n.future.flatMap((h) => [
      ev(h.id, 1, 'hold.incremented', 100),
      ev(h.id, 2, 'hold.incremented', 200),
      ev(h.id, 3, 'hold.incremented', 300),
      ev(h.id, 4, 'hold.captured', 50),
    ]);
    // A deterministic shuffle (seeded), sent with a little concurrency: later sequences often arrive first.
    let seed = 7;
    const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    const shuffled = [...events].sort(() => random() - 0.5);
    for (let i = 0; i < shuffled.length; i += 6)
      await Promise.all(shuffled.slice(i, i + 6).map((e) => processor.send(e)));
    const holdIds = n.future.map((h) => h.id);
    await waitUntil(() => settled(holdIds), 'every shuffled event is applied and told', 90_000);

    for (const h of n.future) {
      const rows = await eventRows(h.id);
      expect(rows.map((r) => r.outcome)).toEqual(['incremented', 'incremented', 'incremented', 'captured']);
      const appliedAt = rows.map((r) => r.applied_at!.getTime());
      expect([...appliedAt].sort((x, y) => x - y)).toEqual(appliedAt);
      expect(await hold(h.id)).toMatchObject({ state: 'captured', event_seq: 4 });
      // The merchant first heard of this hold's events in their order: a hold's next webhook goes only once the last
      // is delivered, so their first arrivals are ordered whatever the machine's load. A webhook may arrive twice (a
      // worker starved past its fast path's timeout sends it again), but never more than its logged attempts and that
      // one unlogged send.
      const requests = harness.merchants
        .requests()
        .filter((r) => JSON.parse(r.body).data.hold_id === h.id)
        .sort((x, y) => x.receivedAt - y.receivedAt);
      const firstHeard = new Map<number, string>();
      for (const r of requests) {
        const sequence = JSON.parse(r.body).data.processor_sequence as number;
        if (!firstHeard.has(sequence)) firstHeard.set(sequence, r.webhookId!);
      }
      expect([...firstHeard.keys()]).toEqual([1, 2, 3, 4]);
      const logged = await loggedAttempts(us.pool, [h.merchantId]);
      for (const webhookId of firstHeard.values()) {
        const sent = requests.filter((r) => r.webhookId === webhookId).length;
        expect(sent, webhookId).toBeLessThanOrEqual(logged.filter((a) => a.webhookId === webhookId).length + 1);
      }
    }
    await allInvariants();
  });

  it('a hold with nothing left to apply completes its run; its next event starts a new one, in sequence', async () => {
    const n = await night({ future: 1 });
    const holdId = n.future[0]!.id;
    const quick = await receiverFor(us, { workflowIdleMs: 300 });
    const sender = quick.processor;
    try {
      const handle = us.client.workflow.getHandle(holdEventsWorkflowId('us', holdId));
      expect((await sender.send(ev(holdId, 1, 'hold.incremented', 5))).status).toBe(202);
      // The 202 comes before the hand-over: the workflow may not exist yet when the answer does.
      const described = () =>
        handle
          .describe()
          .catch((err: unknown) => (err instanceof WorkflowNotFoundError ? undefined : Promise.reject(err)));
      await waitUntil(
        async () => (await described())?.status.name === 'COMPLETED',
        'the first run completes once idle',
      );
      const firstRun = (await handle.describe()).runId;
      expect((await sender.send(ev(holdId, 2, 'hold.captured', 5))).status).toBe(202);
      await waitUntil(
        async () =>
          (await handle.describe()).runId !== firstRun && (await handle.describe()).status.name === 'COMPLETED',
        'a second run',
      );
      expect(await us.client.workflow.getHandle(handle.workflowId, firstRun).result()).toEqual({ holdId, applied: 1 });
      expect(await handle.result()).toEqual({ holdId, applied: 1 });
      expect(await hold(holdId)).toMatchObject({ state: 'captured', event_seq: 2 });
    } finally {
      await quick.close();
    }
  });

  it('a gap waits for its predecessor, then stops for a human (DeliveryStatus event_gap); the missing event arriving late resumes it', async () => {
    const n = await night({ future: 1 });
    const holdId = n.future[0]!.id;
    expect((await processor.send(ev(holdId, 2, 'hold.captured', 100))).status).toBe(202);
    const handle = us.client.workflow.getHandle(holdEventsWorkflowId('us', holdId));
    await expect
      .poll(async () => (await handle.query(holdEventsStatusQuery)).stage, { timeout: 30_000 })
      .toMatchObject({ stage: 'stopped_for_human', expected: 1, pending: [2] });
    const { searchAttributes } = await handle.describe();
    expect(searchAttributes.DeliveryStatus).toEqual(['event_gap']);
    expect(await hold(holdId)).toMatchObject({ state: 'active', event_seq: 0 });

    expect((await processor.send(ev(holdId, 1, 'hold.incremented', 40))).status).toBe(202);
    await waitUntil(() => settled([holdId]), 'both events are applied once the missing one came');
    expect((await eventRows(holdId)).map((r) => r.outcome)).toEqual(['incremented', 'captured']);
    expect(await hold(holdId)).toMatchObject({ state: 'captured', event_seq: 2 });
    await allInvariants();
  });

  it('an operator skips a missing event from the CLI: what follows applies; the skipped one, arriving later, is recorded, not applied, and flagged for review', async () => {
    const n = await night({ future: 1 });
    const holdId = n.future[0]!.id;
    expect((await processor.send(ev(holdId, 2, 'hold.reversed'))).status).toBe(202);
    const handle = us.client.workflow.getHandle(holdEventsWorkflowId('us', holdId));
    await expect
      .poll(async () => (await handle.query(holdEventsStatusQuery)).stage.stage, { timeout: 30_000 })
      .toBe('stopped_for_human');
    await withRegionOps(async (ops, lines) => {
      expect(await ops('events', 'show', holdId)).toBe(0);
      expect(lines.pop()).toMatch(
        /hold \S+: 1 processor event\(s\)[\s\S]*workflow: hold-events-us-\S+ RUNNING, \{"stage":"stopped_for_human","expected":1/,
      );
      // Refused without sending anything: not the sequence it waits for; a raw signal naming it is ignored too.
      await expect(
        ops('events', 'skip', holdId, '--sequence', '5', '--by', 'ops@example.com', '--reason', 'wrong one'),
      ).rejects.toMatchObject({
        code: 'NotWaitingForSequence',
      });
      await handle.signal(skipMissingEventSignal, { sequence: 5, by: 'ops@example.com', reason: 'wrong one' });
      expect(
        await ops(
          'events',
          'skip',
          holdId,
          '--sequence',
          '1',
          '--by',
          'ops@example.com',
          '--reason',
          'processor confirmed seq 1 was never issued',
        ),
      ).toBe(0);
    });
    await waitUntil(() => settled([holdId]), 'the reversal is applied after the skip');
    expect(await hold(holdId)).toMatchObject({ state: 'reversed', event_seq: 2 });

    expect((await processor.send(ev(holdId, 1, 'hold.incremented', 10))).status).toBe(202);
    await waitUntil(
      async () => (await eventRows(holdId))[0]?.outcome === 'skipped_over',
      'the late event is recorded as skipped over',
    );
    expect(await entries(holdId)).toEqual([{ kind: 'hold_reversal', amount_minor: String(n.future[0]!.amountMinor) }]);
    await withRegionOps(async (ops, lines) => {
      expect(await ops('reviews', 'list', '--json')).toBe(0);
      const open = (JSON.parse(lines.pop()!) as { event_id: string; hold_id: string; reason: string }[]).filter(
        (r) => r.hold_id === holdId,
      );
      expect(open).toEqual([
        expect.objectContaining({
          event_id: ev(holdId, 1, 'hold.incremented').eventId,
          reason: expect.stringMatching(/skipped by an operator/),
        }),
      ]);
      expect(await ops('reviews', 'resolve', open[0]!.event_id, '--by', 'ops@example.com')).toBe(0);
      await expect(ops('reviews', 'resolve', open[0]!.event_id, '--by', 'ops@example.com')).rejects.toMatchObject({
        code: 'ReviewNotOpen',
      });
    });
    await allInvariants();
  });
});

describe('the same delivery machinery', () => {
  it('an event webhook the merchant rejects is quarantined like a release’s, and an operator replays it by webhook id; status shows the hold’s events', async () => {
    const n = await night({ future: 1 });
    const { id: holdId, merchantId } = n.future[0]!;
    const secrets = [n.secrets.get(merchantId)!];
    harness.merchants.script(merchantId, {
      secrets,
      responses: [{ status: 400, body: '{"error":"unknown event type"}' }],
    });
    expect((await processor.send(ev(holdId, 1, 'hold.reversed'))).status).toBe(202);
    const webhookId = `wh_${holdId}_ev1`;
    await waitUntil(
      async () =>
        (
          await us.pool.query(`SELECT 1 FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'quarantined'`, [
            webhookId,
          ])
        ).rowCount === 1,
      'the hold.reversed webhook is quarantined',
    );
    harness.merchants.script(merchantId, { secrets, responses: [{ status: 200 }] });
    await withRegionOps(async (ops, lines) => {
      expect(await ops('quarantine', 'list', '--merchant', merchantId, '--json')).toBe(0);
      expect((JSON.parse(lines.pop()!) as { webhookId: string }[]).map((q) => q.webhookId)).toEqual([webhookId]);
      expect(
        await ops('approve', webhookId, '--by', 'ops@example.com', '--reason', 'merchant added hold.reversed'),
      ).toBe(0);
      expect(lines.pop()).toMatch(/approve applied to hold wh_\S+: the workflow answered replay of policy run 1/);
    });
    await waitUntil(() => settled([holdId]), 'the replayed webhook is delivered');
    const told = harness.merchants.requests(merchantId).filter((r) => JSON.parse(r.body).data.hold_id === holdId);
    expect(told.map((r) => [JSON.parse(r.body).type, r.answer])).toEqual([
      ['hold.reversed', 400],
      ['hold.reversed', 200],
    ]);
    await withRegionOps(async (ops, lines) => {
      expect(await ops('status', holdId)).toBe(0);
      expect(lines.pop()).toMatch(
        /hold \S+: reversed[\s\S]*processor events: 1 hold.reversed reversed \(npm run ops -- events show/,
      );
    });
    await allInvariants();
  });
});

describe('the race with the expiry release', () => {
  it('a capture racing the release of the same hold, both orders, many times: captured and never released, or released and late-captured, never lost', async () => {
    const ROUNDS = 30;
    const n = await night({ expired: ROUNDS });
    const applied = (holdId: string) => async () => (await eventRows(holdId))[0]?.applied_at != null;
    const expiryOf = async (holdId: string) =>
      (
        await us.pool.query<{ at: string }>(`SELECT ${isoUtc('expires_at')} AS at FROM auth_holds WHERE id = $1`, [
          holdId,
        ])
      ).rows[0]!.at;
    const modes = ['capture first', 'release first', 'together'] as const;
    const results = await Promise.all(
      n.expired.map(async (h, i) => {
        const mode = modes[i % 3]!;
        const capture = () => processor.send(ev(h.id, 1, 'hold.captured', h.amountMinor));
        // Under the id a sweep gives it (the hold's expiry, as the ledger writes it): the capture's webhook waits for
        // the release's while its workflow runs; under any other id that workflow reads as gone, and it would not.
        const release = async () =>
          us.client.workflow.execute(releaseExpiredHold, {
            taskQueue: us.config.taskQueue,
            workflowId: holdWorkflowId('us', h.id, await expiryOf(h.id)),
            args: [
              {
                region: 'us',
                holdId: h.id,
                expiresAt: new Date(Date.now() - 1000).toISOString(),
                merchantId: h.merchantId,
              },
            ],
          });
        if (mode === 'capture first') {
          await capture();
          await waitUntil(applied(h.id), `${h.id}'s capture is applied`);
          return { h, mode, release: (await release()).release.status };
        }
        if (mode === 'release first') {
          const released = await release();
          await capture();
          return { h, mode, release: released.release.status };
        }
        // Together, a few milliseconds apart either way.
        const jitter = (i * 37) % 60;
        const [released] = await Promise.all([
          new Promise((resolve) => setTimeout(resolve, jitter % 2 ? jitter : 0)).then(release),
          new Promise((resolve) => setTimeout(resolve, jitter % 2 ? 0 : jitter)).then(capture),
        ]);
        return { h, mode, release: released.release.status };
      }),
    );
    const holdIds = n.expired.map((h) => h.id);
    await waitUntil(() => settled(holdIds), 'every capture is applied and every webhook delivered', 90_000);

    const seen = { captured: 0, late: 0 };
    for (const { h, mode, release } of results) {
      const state = (await hold(h.id)).state;
      const kinds = (await entries(h.id)).map((e) => e.kind);
      const told = harness.merchants
        .requests()
        .filter((r) => JSON.parse(r.body).data.hold_id === h.id)
        .sort((x, y) => x.receivedAt - y.receivedAt)
        .map((r) => JSON.parse(r.body).type as string);
      if (state === 'captured') {
        // The capture took the row lock first: the release found it settled and released nothing.
        expect({ mode, release, kinds, told }).toEqual({
          mode,
          release: 'settled',
          kinds: ['hold_capture'],
          told: ['hold.captured'],
        });
        seen.captured++;
      } else {
        expect({ mode, state, release, kinds, told }).toEqual({
          mode,
          state: 'released',
          release: 'released',
          kinds: ['hold_release', 'late_capture'],
          told: ['hold.released', 'hold.late_captured'],
        });
        seen.late++;
      }
      if (mode === 'capture first') expect(state).toBe('captured');
      if (mode === 'release first') expect(state).toBe('released');
    }
    console.log(
      `[processor-events] race over ${ROUNDS} holds: ${seen.captured} captured before the release, ${seen.late} late-captured after it`,
    );
    await allInvariants();
    // The merchant-facing invariants too: every webhook sent belongs to a committed release or applied event.
    expect(
      await checkInvariants({
        regions: [{ region: 'us', pool: us.pool, secretKeys: us.config.secretKeys }],
        requests: harness.merchants.requests(),
        texts: [],
      }),
    ).toEqual([]);
  });
});

describe('a receiver killed between recording and applying', () => {
  it('recorded events survive kill -9 before their hand-over, and another receiver hands them over: each applied exactly once', async () => {
    const n = await night({ future: 3 });
    // A receiver that records but cannot reach Temporal (nothing listens at its address): it answers 202 with the
    // event only in the ledger; then it is killed -9.
    const doomed = await startReceiverProcess({
      region: us.config,
      databaseUrl: us.databaseUrl,
      temporalAddress: `127.0.0.1:${await freePort()}`,
      secret: PROCESSOR_SECRET,
    });
    const sender = new FakeProcessor(doomed.url, PROCESSOR_SECRET);
    const events = n.future.flatMap((h) => [ev(h.id, 1, 'hold.incremented', 70), ev(h.id, 2, 'hold.captured', 20)]);
    for (const e of events) expect((await sender.send(e, { maxAttempts: 1 })).status).toBe(202);
    await doomed.kill();
    const undispatched = await us.pool.query(
      'SELECT event_id FROM processor_events WHERE hold_id = ANY($1::text[]) AND dispatched_at IS NULL',
      [n.future.map((h) => h.id)],
    );
    expect(undispatched.rowCount).toBe(events.length);

    // The processor's retries would reach the surviving receiver as duplicates; its relay hands the rest over.
    expect((await processor.send(events[0]!)).status).toBe(200);
    const holdIds = n.future.map((h) => h.id);
    await waitUntil(() => settled(holdIds), 'the relay hands every recorded event over and each is applied', 60_000);
    for (const h of n.future) {
      expect((await eventRows(h.id)).map((r) => r.outcome)).toEqual(['incremented', 'captured']);
      expect((await entries(h.id)).map((e) => e.kind)).toEqual(['hold_increment', 'hold_capture']);
    }
    await allInvariants();
  });
});
