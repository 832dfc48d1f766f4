/**
 * Quarantine and approval-gated replay, operated through our operations (what the ops CLI runs), the
 * workflow's status query, and the real `temporal` CLI against the shared dev server.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { OperatorError } from '../../src/errors.js';
import {
  approveHold,
  approveReplayRequest,
  discardHold,
  holdStatus,
  listQuarantined,
  previewReplay,
  type OpsContext,
} from '../../src/operations/operations.js';
import { runOps } from '../../src/operations/cli.js';
import { statusQuery } from '../../src/contracts/messages.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { holdWorkflowIdOf, loggedAttempts, recordedDecision, seedNight, type Night } from '../support/ledger.js';

const run = promisify(execFile);
let harness: Harness;
let us: TestRegion;
let ops: OpsContext;
let nights = 0;

beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
  await harness.startWorker(us);
  ops = { region: us.config, pool: us.pool, client: us.client };
});
afterAll(async () => {
  await harness?.close();
});

async function night(
  holds: number,
  responses: Parameters<Harness['merchants']['script']>[1]['responses'],
  merchants = 1,
  policy = {},
): Promise<Night> {
  const n = await seedNight(
    us.pool,
    'us',
    `${harness.id}q${++nights}`,
    { expired: holds, merchants },
    harness.merchants,
  );
  for (const merchantId of n.merchantIds) {
    harness.merchants.script(merchantId, { secrets: [n.secrets.get(merchantId)!], responses });
    await us.pool.query('UPDATE merchants SET delivery_policy = $2::jsonb WHERE id = $1', [
      merchantId,
      JSON.stringify(policy),
    ]);
  }
  return n;
}

/** A sweep of the region's expired holds, on `on`'s task queue (its worker's rules). */
async function sweep(on: TestRegion = us): Promise<void> {
  await us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: on.config.taskQueue,
    workflowId: `sweep-us-${harness.id}-q-${nights}-${Date.now()}`,
    args: [{ region: 'us', releaseWaitMs: 60_000 }],
  });
}

const statuses = async (n: Night) =>
  (
    await us.pool.query<{ status: string }>(
      'SELECT status FROM webhook_deliveries WHERE hold_id = ANY($1) ORDER BY hold_id',
      [n.expired.map((h) => h.id)],
    )
  ).rows.map((r) => r.status);

const handleOf = async (holdId: string) => us.client.workflow.getHandle(await holdWorkflowIdOf(us.pool, 'us', holdId));

/**
 * Each hold's stage as its workflow tells it (a moment behind the ledger: the workflow moves when the activity
 * returns).
 */
const stages = async (n: Night) =>
  Promise.all(
    [...n.expired]
      .sort((a, b) => a.id.localeCompare(b.id))
      .map(async (h) => (await (await handleOf(h.id)).query(statusQuery)).stage),
  );

describe('quarantine decisions', () => {
  it('a 400 quarantines; approveReplay after the merchant is fixed delivers once, same webhook id, approver recorded', async () => {
    const n = await night(1, [{ status: 400, body: 'bad schema' }]);
    const holdId = n.expired[0]!.id;
    await sweep();
    await expect.poll(() => statuses(n), { timeout: 30_000 }).toEqual(['quarantined']);
    harness.merchants.script(n.merchantIds[0]!, {
      secrets: [n.secrets.get(n.merchantIds[0]!)!],
      responses: [{ status: 200 }],
    });

    expect(await approveHold(ops, holdId, 'alice', 'merchant fixed its schema', 'OPS-7')).toEqual({
      outcome: 'applied',
      answer: { decision: 'replay', policyRun: 1, stage: 'delivering' },
    });
    await expect.poll(() => statuses(n), { timeout: 30_000 }).toEqual(['delivered']);

    const requests = harness.merchants.requests(n.merchantIds[0]);
    expect(requests.map((r) => r.answer)).toEqual([400, 200]);
    expect(new Set(requests.map((r) => r.webhookId)).size).toBe(1);
    expect(requests.every((r) => r.verified)).toBe(true);
    // The ledger says delivered as soon as the activity records it; the workflow completes right after.
    expect((await (await handleOf(holdId)).result()).delivery).toEqual({
      status: 'delivered',
      attempts: 2,
      policyRuns: 2,
    });
    const report = await holdStatus(ops, holdId);
    expect(report.attempts.map((a) => [a.attempt_number, a.policy_run, a.status_code, a.outcome])).toEqual([
      [1, 1, 400, 'quarantine'],
      [2, 2, 200, 'delivered'],
    ]);
    expect(report.decisions).toMatchObject([
      { policy_run: 1, decision: 'replay', decided_by: 'alice', ticket: 'OPS-7' },
    ]);
    expect(report.workflow).toMatchObject({ status: 'COMPLETED', waiting: { stage: 'delivered', attempts: 2 } });
  });

  it('discard ends it; a later approveReplay is ignored and recorded', async () => {
    const n = await night(1, [{ status: 403 }]);
    const holdId = n.expired[0]!.id;
    await sweep();
    await expect.poll(() => statuses(n), { timeout: 30_000 }).toEqual(['quarantined']);
    expect(await discardHold(ops, holdId, 'bob', 'merchant offboarded')).toEqual({
      outcome: 'applied',
      answer: { decision: 'discard', policyRun: 1, stage: 'discarded' },
    });
    await expect.poll(() => statuses(n), { timeout: 30_000 }).toEqual(['discarded']);
    expect((await (await handleOf(holdId)).result()).delivery).toEqual({ status: 'discarded', policyRuns: 1 });

    expect(await approveHold(ops, holdId, 'carol', 'second thoughts')).toEqual({
      outcome: 'ignored',
      detail: 'delivery is discarded, not quarantined',
    });
    const log = await us.pool.query(
      'SELECT signal, sent_by, outcome, detail FROM operator_decisions s JOIN webhook_deliveries d USING (webhook_id) WHERE d.hold_id = $1 ORDER BY s.id',
      [holdId],
    );
    expect(log.rows).toEqual([
      { signal: 'discard', sent_by: 'bob', outcome: 'applied', detail: 'discard of policy run 1; now discarded' },
      {
        signal: 'approveReplay',
        sent_by: 'carol',
        outcome: 'ignored',
        detail: 'delivery is discarded, not quarantined',
      },
    ]);
    expect(harness.merchants.requests(n.merchantIds[0])).toHaveLength(1);
  });

  it('a signal that does not apply while the workflow runs is recorded by it and ignored', async () => {
    const n = await night(1, [{ status: 503 }], 1, { initialBackoffMs: 60_000 });
    await sweep();
    const handle = await handleOf(n.expired[0]!.id);
    await expect.poll(async () => (await handle.query(statusQuery)).stage, { timeout: 30_000 }).toBe('backing_off');
    // Well formed (it names a decision), but the workflow is not waiting for one.
    await handle.signal('approveReplay', {
      approvedBy: 'dave',
      reason: 'too eager',
      decisionId: `dc_${'0'.repeat(32)}`,
    });
    await expect
      .poll(async () => (await handle.query(statusQuery)).ignoredSignals, { timeout: 10_000 })
      .toMatchObject([
        {
          signal: 'approveReplay',
          payload: { type: 'object' },
          stage: 'backing_off',
          why: 'not waiting for a decision (stage backing_off)',
        },
      ]);
    expect((await handle.describe()).status.name).toBe('RUNNING');
  });

  it('a malformed signal wedges nothing: no input, null and {} are recorded as ignored with why, and a valid one still decides', async () => {
    const n = await night(1, [{ status: 400 }]);
    await sweep();
    const handle = await handleOf(n.expired[0]!.id);
    await expect.poll(async () => (await handle.query(statusQuery)).stage, { timeout: 30_000 }).toBe('quarantined');
    // What `temporal workflow signal --name discard` sends with no --input, --input null and --input '{}'.
    await handle.signal('discard');
    await handle.signal('discard', null);
    await handle.signal('discard', {});
    await handle.signal('approveReplay', { approvedBy: '  ', reason: 'blank approver' });
    await expect
      .poll(async () => (await handle.query(statusQuery)).ignoredSignals.map((s) => s.why), { timeout: 10_000 })
      .toEqual([
        'malformed discard: expected a JSON object, got no input',
        'malformed discard: expected a JSON object, got null',
        'malformed discard: "by" must be a non-empty string of at most 500 characters',
        'malformed approveReplay: "approvedBy" must be a non-empty string of at most 500 characters',
      ]);
    expect(await handle.query(statusQuery)).toMatchObject({ stage: 'quarantined' });
    expect(await statuses(n)).toEqual(['quarantined']);

    await handle.signal('discard', await recordedDecision(us.pool, n.expired[0]!.id, 'discard', 'erin', 'duplicate'));
    expect((await handle.result()).delivery).toEqual({ status: 'discarded', policyRuns: 1 });
    const history = await handle.fetchHistory();
    expect(history.events!.filter((e) => e.workflowTaskFailedEventAttributes)).toEqual([]);
  });

  it('operators get an answer: Updates refuse malformed input, a workflow not waiting and a stale run, before anything enters history', async () => {
    const n = await night(1, [{ status: 400 }]);
    const holdId = n.expired[0]!.id;
    await sweep();
    const handle = await handleOf(holdId);
    await expect.poll(async () => (await handle.query(statusQuery)).stage, { timeout: 30_000 }).toBe('quarantined');
    const refusal = (update: Promise<unknown>) =>
      update.then(
        () => 'accepted',
        (err: Error & { cause?: Error }) => `${err.name}: ${err.cause?.message}`,
      );
    expect(await refusal(handle.executeUpdate('discard', { args: [{}] }))).toBe(
      'WorkflowUpdateFailedError: malformed discard: "by" must be a non-empty string of at most 500 characters',
    );
    expect(
      await refusal(handle.executeUpdate('approveReplay', { args: [{ approvedBy: 'frank', reason: 'unrecorded' }] })),
    ).toMatch(/^WorkflowUpdateFailedError: approveReplay names no decision in the ledger/);
    const decisionId = `dc_${'0'.repeat(32)}`;
    expect(
      await refusal(
        handle.executeUpdate('approveReplay', {
          args: [{ approvedBy: 'frank', reason: 'old', policyRun: 2, decisionId }],
        }),
      ),
    ).toBe('WorkflowUpdateFailedError: stale: for policy run 2, but the quarantine is policy run 1');
    // Rejected by the validators: no trace in history, and the workflow still waits.
    const updateEvents = (await handle.fetchHistory()).events!.filter(
      (e) => e.workflowExecutionUpdateAcceptedEventAttributes || e.workflowExecutionUpdateCompletedEventAttributes,
    );
    expect(updateEvents).toEqual([]);
    expect(await handle.query(statusQuery)).toMatchObject({ stage: 'quarantined', ignoredSignals: [] });

    // The ops CLI sends Updates and prints the workflow's answer.
    const lines: string[] = [];
    const env = { ...process.env };
    Object.assign(process.env, {
      HOLD_SWEEPER_MODE: 'dev',
      HOLD_SWEEPER_REGIONS: 'us',
      DATABASE_URL_US: us.databaseUrl,
      TEMPORAL_ADDRESS: harness.address,
    });
    try {
      expect(
        await runOps(['discard', holdId, '--by', 'grace', '--reason', 'merchant gone'], (line) => lines.push(line)),
      ).toBe(0);
    } finally {
      process.env = env;
    }
    expect(lines.join('\n')).toContain(
      `discard applied to hold ${holdId}: the workflow answered discard of policy run 1, now discarded`,
    );
    expect(await refusal(handle.executeUpdate('discard', { args: [{ by: 'heidi', reason: 'again' }] }))).toMatch(
      /^WorkflowNotFoundError/,
    );
  });

  it('never "applied" when the workflow did not apply it: the ledger a moment ahead of the stage is refused by the workflow', async () => {
    const n = await night(1, [{ status: 503 }], 1, { initialBackoffMs: 60_000 });
    const holdId = n.expired[0]!.id;
    await sweep();
    const handle = await handleOf(holdId);
    await expect.poll(async () => (await handle.query(statusQuery)).stage, { timeout: 30_000 }).toBe('backing_off');
    // The window between the two records: the ledger row is quarantined before the workflow's stage says so.
    await us.pool.query(
      `UPDATE webhook_deliveries SET status = 'quarantined', quarantine_reason = 'exhausted', quarantined_at = now() WHERE hold_id = $1`,
      [holdId],
    );
    expect(await approveHold(ops, holdId, 'ivan', 'looks stuck')).toEqual({
      outcome: 'ignored',
      detail: 'refused by the workflow: not waiting for a decision (stage backing_off)',
    });
    const log = await us.pool.query(
      'SELECT outcome FROM operator_decisions s JOIN webhook_deliveries d USING (webhook_id) WHERE d.hold_id = $1',
      [holdId],
    );
    expect(log.rows).toEqual([{ outcome: 'ignored' }]);
    await handle.terminate('test done');
  });

  it('a quarantine nobody decides ends as abandoned after the configured time', async () => {
    const n = await night(1, [{ status: 400 }]);
    await sweep(await harness.abandoningAfter(us, 2_000));
    await expect.poll(() => statuses(n), { timeout: 30_000 }).toEqual(['abandoned']);
    const handle = await handleOf(n.expired[0]!.id);
    expect((await handle.result()).delivery).toEqual({ status: 'abandoned', policyRuns: 1 });
    expect((await holdStatus(ops, n.expired[0]!.id)).decisions).toMatchObject([
      { decision: 'abandon', decided_by: 'hold-sweeper' },
    ]);
  });
});

describe('bulk replay', () => {
  it('approves exactly the frozen set, never a requester approving their own request', async () => {
    const n = await night(20, [{ status: 422 }], 2);
    await sweep();
    await expect
      .poll(async () => (await statuses(n)).filter((s) => s === 'quarantined').length, { timeout: 60_000 })
      .toBe(20);
    const [m0, m1] = n.merchantIds as [string, string];
    const before = await listQuarantined(us.pool, { merchantId: m0 });
    expect(before).toHaveLength(10);

    const request = await previewReplay(us.pool, { merchantId: m0, reason: 'rejected' }, 'erin');
    expect(request.count).toBe(10);

    // Three more of the same merchant are quarantined after the preview: not part of the request.
    const later = await seedNight(
      us.pool,
      'us',
      `${harness.id}q${++nights}`,
      { expired: 3, merchants: 1 },
      harness.merchants,
    );
    await us.pool.query('UPDATE auth_holds SET merchant_id = $1 WHERE id = ANY($2)', [
      m0,
      later.expired.map((h) => h.id),
    ]);
    await sweep();
    await expect
      .poll(async () => (await listQuarantined(us.pool, { merchantId: m0 })).length, { timeout: 60_000 })
      .toBe(13);

    for (const merchantId of [m0, m1])
      harness.merchants.script(merchantId, { secrets: [n.secrets.get(merchantId)!], responses: [{ status: 200 }] });
    await expect(approveReplayRequest(ops, request.id, 'erin')).rejects.toMatchObject({ code: 'SelfApprovalRefused' });
    const approved = await approveReplayRequest(ops, request.id, 'frank', { signalsPerSecond: 50 });
    expect(approved).toMatchObject({ applied: 10, ignored: [] });
    await expect(approveReplayRequest(ops, request.id, 'gina')).rejects.toBeInstanceOf(OperatorError);

    const delivered = async () =>
      (
        await us.pool.query<{ webhook_id: string }>(
          `SELECT webhook_id FROM webhook_deliveries WHERE status = 'delivered' AND merchant_id = $1 ORDER BY webhook_id`,
          [m0],
        )
      ).rows.map((r) => r.webhook_id);
    await expect.poll(delivered, { timeout: 60_000 }).toEqual(request.items.map((i) => i.webhookId).sort());
    expect(await listQuarantined(us.pool, { merchantId: m0 })).toHaveLength(3);
    expect(await listQuarantined(us.pool, { merchantId: m1 })).toHaveLength(10);
  });
});

describe('four eyes is a check, not a convention', () => {
  it('an approval naming a replay request is checked against the ledger: approved, by that approver, covering this run', async () => {
    const n = await night(2, [{ status: 409 }]);
    await sweep();
    await expect.poll(() => stages(n), { timeout: 30_000 }).toEqual(['quarantined', 'quarantined']);
    const [covered, other] = n.expired.map((h) => h.id) as [string, string];
    const request = await previewReplay(us.pool, { merchantId: n.merchantIds[0]! }, 'kim');
    // Freeze only the first hold's webhook in this request: the other hold is not covered by it.
    await us.pool.query(
      'DELETE FROM replay_request_items WHERE request_id = $1 AND webhook_id = (SELECT webhook_id FROM webhook_deliveries WHERE hold_id = $2)',
      [request.id, other],
    );
    const approve = async (holdId: string, approvedBy: string, replayRequestId: string) =>
      (await handleOf(holdId))
        .executeUpdate('approveReplay', { args: [{ approvedBy, reason: 'reviewed', replayRequestId }] })
        .then(
          (answer) => answer,
          (err: Error & { cause?: Error }) => `refused: ${err.cause?.message}`,
        );

    // Not approved yet: a direct approval that only claims the request is refused, and the workflow keeps waiting.
    expect(await approve(covered, 'lee', request.id)).toBe(`refused: replay request ${request.id} is not approved`);
    expect(await approve(covered, 'lee', 'rr_nope')).toBe('refused: replay request rr_nope is not in the ledger');
    await us.pool.query(
      `UPDATE replay_requests SET status = 'approved', approved_by = 'lee', approved_at = now() WHERE id = $1`,
      [request.id],
    );
    expect(await approve(covered, 'mallory', request.id)).toBe(
      `refused: replay request ${request.id} was approved by lee, not mallory`,
    );
    expect(await approve(other, 'lee', request.id)).toMatch(
      new RegExp(`^refused: replay request ${request.id} does not cover webhook \\S+'s policy run 1$`),
    );
    expect(await statuses(n)).toEqual(['quarantined', 'quarantined']);

    harness.merchants.script(n.merchantIds[0]!, {
      secrets: [n.secrets.get(n.merchantIds[0]!)!],
      responses: [{ status: 200 }],
    });
    expect(await approve(covered, 'lee', request.id)).toEqual({
      decision: 'replay',
      policyRun: 1,
      stage: 'delivering',
    });
    await expect
      .poll(() => statuses(n), { timeout: 30_000 })
      .toEqual([covered, other].sort().map((id) => (id === covered ? 'delivered' : 'quarantined')));
    // The same check on the signal path (Web UI, temporal CLI): a claim that does not hold is ignored, with why.
    const otherHandle = await handleOf(other);
    await otherHandle.signal('approveReplay', { approvedBy: 'lee', reason: 'reviewed', replayRequestId: request.id });
    await expect
      .poll(async () => (await otherHandle.query(statusQuery)).ignoredSignals.map((i) => i.why), { timeout: 10_000 })
      .toEqual([
        expect.stringMatching(new RegExp(`^replay request ${request.id} does not cover webhook \\S+'s policy run 1$`)),
      ]);
  });
});

describe('why is it waiting?', () => {
  it('the status query names each waiting stage with its deadline and the last attempt', async () => {
    // Budget: 1 request per 20 s, so the second hold waits for the merchant's budget.
    const budget = await night(2, [{ status: 200 }]);
    await us.pool.query('UPDATE merchants SET rate_per_second = 0.05, burst = 0 WHERE id = $1', [
      budget.merchantIds[0],
    ]);
    const retryAfter = await night(1, [{ status: 429, retryAfter: '30' }, { status: 200 }]);
    const backoff = await night(1, [{ status: 500 }, { status: 200 }], 1, { initialBackoffMs: 60_000 });
    const rejected = await night(1, [{ status: 400 }]);
    // Every deadline below is counted by a workflow's clock from a moment after this one.
    const before = Date.now();
    await sweep();

    const waitingFor = async (n: Night) => await (await handleOf(n.expired[0]!.id)).query(statusQuery);
    const second = async () => {
      const stages = await Promise.all(
        budget.expired.map(async (h) => (await (await handleOf(h.id)).query(statusQuery)).stage),
      );
      return stages.sort();
    };
    await expect.poll(second, { timeout: 30_000 }).toEqual(['delivered', 'waiting_for_budget']);
    await expect
      .poll(async () => (await waitingFor(retryAfter)).stage, { timeout: 30_000 })
      .toBe('honouring_retry_after');
    await expect.poll(async () => (await waitingFor(backoff)).stage, { timeout: 30_000 }).toBe('backing_off');
    await expect.poll(async () => (await waitingFor(rejected)).stage, { timeout: 30_000 }).toBe('quarantined');

    // Each wait's deadline is the delay its attempt's answer set (the attempt log's), past the time it was answered.
    const delayOf = async (n: Night) => (await loggedAttempts(us.pool, n.merchantIds))[0]!.nextRetryDelayMs!;
    const r = await waitingFor(retryAfter);
    expect(r).toMatchObject({
      reason: 'Retry-After 30 s',
      attempt: 1,
      lastAttempt: { attemptNumber: 1, outcome: 'HTTP 429' },
    });
    expect(await delayOf(retryAfter)).toBe(30_000);
    expect(Date.parse((r as { until: string }).until)).toBeGreaterThanOrEqual(before + 30_000);
    const b = await waitingFor(backoff);
    expect(b).toMatchObject({ reason: 'backoff attempt 1', lastAttempt: { outcome: 'HTTP 500' } });
    expect(await delayOf(backoff)).toBeGreaterThanOrEqual(30_000);
    expect(Date.parse((b as { until: string }).until)).toBeGreaterThanOrEqual(before + (await delayOf(backoff)));
    expect(await waitingFor(rejected)).toMatchObject({
      reason: 'rejected',
      lastAttempt: { attemptNumber: 1 },
      detail: expect.stringContaining('HTTP 400'),
    });
    const waiting = (
      await Promise.all(budget.expired.map(async (h) => (await handleOf(h.id)).query(statusQuery)))
    ).find((s) => s.stage === 'waiting_for_budget');
    expect(waiting).toMatchObject({ lane: 'first', reserved: true });
    expect(Date.parse((waiting as { until: string }).until)).toBeGreaterThan(before);
  });
});

describe('operator surfaces', () => {
  it('`temporal workflow list --query` with the search attributes finds exactly the quarantined deliveries of a merchant', async () => {
    const n = await night(4, [{ status: 200 }, { status: 400 }], 2);
    await sweep();
    await expect
      .poll(async () => (await statuses(n)).filter((s) => s !== 'pending').length, { timeout: 30_000 })
      .toBe(4);
    const m0 = n.merchantIds[0]!;
    const expected = (await listQuarantined(us.pool, { merchantId: m0 })).map((q) => q.holdId);
    const expectedIds = await Promise.all(expected.map((h) => holdWorkflowIdOf(us.pool, 'us', h)));
    const cli = inject('temporalCliPath');
    expect(cli, 'the global setup has a real temporal binary').toBeTruthy();
    const list = async () => {
      const { stdout } = await run(cli!, [
        'workflow',
        'list',
        '--address',
        harness.address,
        '--namespace',
        'hold-sweeper-us',
        '--output',
        'json',
        '--query',
        `DeliveryStatus="quarantined" AND MerchantId="${m0}"`,
      ]);
      return (JSON.parse(stdout || '[]') as { execution: { workflowId: string } }[])
        .map((e) => e.execution.workflowId)
        .sort();
    };
    await expect.poll(list, { timeout: 15_000 }).toEqual(expectedIds.sort());
    expect(expectedIds.length).toBeGreaterThan(0);
  });

  it('the ops CLI lists, previews and refuses with named errors, in text and JSON', async () => {
    const n = await night(2, [{ status: 404 }]);
    await sweep();
    await expect.poll(() => statuses(n), { timeout: 30_000 }).toEqual(['quarantined', 'quarantined']);
    const env = { ...process.env };
    process.env.HOLD_SWEEPER_MODE = 'dev';
    process.env.HOLD_SWEEPER_REGIONS = 'us';
    process.env.DATABASE_URL_US = us.databaseUrl;
    process.env.TEMPORAL_ADDRESS = harness.address;
    process.env.TASK_QUEUE_US = us.config.taskQueue;
    process.env.SCHEDULE_ID_US = us.config.scheduleId;
    try {
      const lines: string[] = [];
      expect(
        await runOps(['quarantine', 'list', '--merchant', n.merchantIds[0]!, '--json'], (l) => lines.push(l)),
      ).toBe(0);
      expect(JSON.parse(lines.pop()!)).toHaveLength(2);
      expect(
        await runOps(['replay', 'preview', '--merchant', n.merchantIds[0]!, '--requested-by', 'hana'], (l) =>
          lines.push(l),
        ),
      ).toBe(0);
      const id = /replay request (rr_\w+): 2 quarantined/.exec(lines.pop()!)![1]!;
      await expect(runOps(['replay', 'approve', id, '--by', 'hana'])).rejects.toMatchObject({
        code: 'SelfApprovalRefused',
      });
      await expect(runOps(['quarantine', 'list', '--reason', 'sad'])).rejects.toThrow(/--reason/);
      expect(await runOps(['status', n.expired[0]!.id], (l) => lines.push(l))).toBe(0);
      expect(lines.pop()).toMatch(/webhook: wh_\S+ quarantined \(rejected\), 1 attempt/);
      expect(await runOps(['--help'], (l) => lines.push(l))).toBe(0);
      expect(lines.pop()).toContain('replay approve <request id>');
    } finally {
      process.env = env;
    }
  });
});
