/**
 * Operator decisions are idempotent: a decision sent again is applied once and answered `applied` both times; a bulk
 * replay interrupted half way (the CLI killed -9) and run again decides every frozen item exactly once; a skip is an
 * Update whose validator refuses what the workflow does not wait for, and a retried skip gets the first answer.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { holdEventsWorkflowId } from '../../src/contracts/ids.js';
import { holdEventsStatusQuery } from '../../src/contracts/processor.js';
import { statusQuery } from '../../src/contracts/messages.js';
import { approveHold, discardHold, previewReplay, type OpsContext } from '../../src/operations/operations.js';
import { skipMissingEvent } from '../../src/operations/processor-events.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { holdWorkflowIdOf, seedNight, type Night } from '../support/ledger.js';
import { withOps } from '../support/ops.js';
import { startTestReceiver } from '../support/processor.js';
import { waitUntil } from '../support/wait.js';

let harness: Harness;
let us: TestRegion;
let ctx: OpsContext;
let nights = 0;

beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
  await harness.startWorker(us);
  ctx = { region: us.config, pool: us.pool, client: us.client };
});
afterAll(async () => {
  await harness?.close();
});

/** `holds` holds of one merchant that rejects them (400), swept, each quarantined by its workflow. */
async function quarantined(holds: number): Promise<Night> {
  const n = await seedNight(
    us.pool,
    'us',
    `${harness.id}i${++nights}`,
    { expired: holds, merchants: 1 },
    harness.merchants,
  );
  const merchant = n.merchantIds[0]!;
  harness.merchants.script(merchant, { secrets: [n.secrets.get(merchant)!], responses: [{ status: 400 }] });
  await us.pool.query('UPDATE merchants SET rate_per_second = 500, burst = 50 WHERE id = $1', [merchant]);
  await us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: us.config.taskQueue,
    workflowId: `sweep-us-${harness.id}-i${nights}`,
    args: [{ region: 'us', releaseWaitMs: 60_000 }],
  });
  for (const hold of n.expired) {
    const handle = us.client.workflow.getHandle(await holdWorkflowIdOf(us.pool, 'us', hold.id));
    await expect.poll(async () => (await handle.query(statusQuery)).stage, { timeout: 30_000 }).toBe('quarantined');
  }
  harness.merchants.script(merchant, { secrets: [n.secrets.get(merchant)!], responses: [{ status: 200 }] });
  return n;
}

async function decisionsOf(
  holdIds: readonly string[],
): Promise<{ hold_id: string; policy_run: number; decision: string }[]> {
  const { rows } = await us.pool.query(
    `SELECT d.hold_id, x.policy_run, x.decision FROM delivery_decisions x JOIN webhook_deliveries d ON d.webhook_id = x.webhook_id
      WHERE d.hold_id = ANY($1) ORDER BY d.hold_id, x.policy_run`,
    [holdIds],
  );
  return rows;
}

describe('a decision sent again', () => {
  it('is applied once and answered applied both times (a retried CLI call, a second run of the command)', async () => {
    const n = await quarantined(2);
    const [approved, discarded] = n.expired.map((h) => h.id) as [string, string];
    const first = await approveHold(ctx, approved, 'bob', 'merchant fixed its parser');
    const again = await approveHold(ctx, approved, ' BOB ', 'merchant fixed its parser');
    expect(first).toMatchObject({ outcome: 'applied', answer: { decision: 'replay', policyRun: 1 } });
    expect(again).toMatchObject({ outcome: 'applied', answer: { decision: 'replay', policyRun: 1 } });
    expect(await discardHold(ctx, discarded, 'grace', 'duplicate')).toMatchObject({ outcome: 'applied' });
    expect(await discardHold(ctx, discarded, 'grace', 'duplicate')).toMatchObject({
      outcome: 'applied',
      answer: { stage: 'discarded' },
    });
    // Someone else's decision on the same webhook is not a retry: it is refused as already decided.
    expect(await discardHold(ctx, approved, 'mallory', 'late')).toMatchObject({ outcome: 'ignored' });
    expect(await decisionsOf([approved, discarded])).toEqual(
      [
        { hold_id: approved, policy_run: 1, decision: 'replay' },
        { hold_id: discarded, policy_run: 1, decision: 'discard' },
      ].sort((a, b) => a.hold_id.localeCompare(b.hold_id)),
    );
  });
});

describe('a bulk replay', () => {
  it('killed -9 half way and run again by its approver decides every frozen item exactly once, each delivered once', async () => {
    const n = await quarantined(8);
    const holdIds = n.expired.map((h) => h.id);
    const request = await previewReplay(us.pool, { merchantId: n.merchantIds[0]! }, 'alice');
    const outcomes = async () =>
      (
        await us.pool.query<{ n: number }>(
          'SELECT count(*)::integer AS n FROM replay_request_items WHERE request_id = $1 AND outcome IS NOT NULL',
          [request.id],
        )
      ).rows[0]!.n;

    // The real CLI, paced at 2 approvals a second, killed once a few items are done.
    const cli = spawn(
      process.execPath,
      ['--import', 'tsx', 'src/bin/ops.ts', 'replay', 'approve', request.id, '--by', 'bob', '--rate', '2'],
      {
        cwd: path.resolve(import.meta.dirname, '../..'),
        env: {
          ...process.env,
          HOLD_SWEEPER_MODE: 'dev',
          HOLD_SWEEPER_REGIONS: 'us',
          DATABASE_URL_US: us.databaseUrl,
          TEMPORAL_ADDRESS: harness.address,
          TASK_QUEUE_US: us.config.taskQueue,
        },
        stdio: 'ignore',
      },
    );
    const exited = new Promise<void>((resolve) => cli.once('exit', () => resolve()));
    await waitUntil(async () => (await outcomes()) >= 3, 'the first run has decided a few items', 60_000, 50);
    cli.kill('SIGKILL');
    await exited;
    const doneByFirst = await outcomes();
    expect(doneByFirst).toBeLessThan(holdIds.length);

    // Someone else cannot take it over; its approver resumes it.
    await withOps(us, 'dev', async (ops) => {
      await expect(ops('replay', 'approve', request.id, '--by', 'carol')).rejects.toMatchObject({
        code: 'ReplayAlreadyApproved',
      });
    });
    await withOps(us, 'dev', async (ops, lines) => {
      expect(await ops('replay', 'approve', request.id, '--by', 'Bob', '--json')).toBe(0);
      const result = JSON.parse(lines.pop()!) as { applied: number; alreadyDone: number; ignored: unknown[] };
      expect(result.alreadyDone).toBe(doneByFirst);
      expect(result.applied + result.alreadyDone).toBe(holdIds.length);
      expect(result.ignored).toEqual([]);
    });

    for (const holdId of holdIds) {
      const handle = us.client.workflow.getHandle(await holdWorkflowIdOf(us.pool, 'us', holdId));
      expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered', policyRuns: 2 } });
    }
    expect(await decisionsOf(holdIds)).toEqual(
      holdIds
        .map((hold_id) => ({ hold_id, policy_run: 1, decision: 'replay' }))
        .sort((a, b) => a.hold_id.localeCompare(b.hold_id)),
    );
    const { rows: items } = await us.pool.query(
      'SELECT DISTINCT outcome FROM replay_request_items WHERE request_id = $1',
      [request.id],
    );
    expect(items).toEqual([{ outcome: 'applied' }]);
    // One 2xx per webhook after the replay: nothing was sent twice.
    const delivered = harness.merchants.requests(n.merchantIds[0]!).filter((r) => r.answer === 200);
    expect(delivered.map((r) => r.webhookId).sort()).toEqual([...new Set(delivered.map((r) => r.webhookId))].sort());
    expect(delivered).toHaveLength(holdIds.length);
  });
});

describe('a skip', () => {
  it('is an Update: refused with why when the workflow waits for another sequence, and a retry gets the first answer', async () => {
    const n = await seedNight(
      us.pool,
      'us',
      `${harness.id}sk`,
      { expired: 0, future: 1, merchants: 1 },
      harness.merchants,
    );
    const holdId = n.future[0]!.id;
    const receiver = await startTestReceiver(us, { gapWaitMs: 60_000 });
    try {
      const reversal = { eventId: `evt_${holdId}_3`, holdId, sequence: 3, type: 'hold.reversed' as const };
      expect((await receiver.processor.send(reversal)).status).toBe(202);
      const handle = us.client.workflow.getHandle(holdEventsWorkflowId('us', holdId));
      await expect
        .poll(async () => (await handle.query(holdEventsStatusQuery).catch(() => undefined))?.stage, {
          timeout: 30_000,
        })
        .toMatchObject({ stage: 'waiting_for_predecessor', expected: 1 });
      await expect(skipMissingEvent(ctx, holdId, 2, 'ops@example.com', 'wrong one')).rejects.toMatchObject({
        code: 'NotWaitingForSequence',
        message: expect.stringMatching(
          /refused the skip: not waiting for sequence 2 \(stage waiting_for_predecessor, waiting for 1\)/,
        ),
      });
      expect(await skipMissingEvent(ctx, holdId, 1, 'ops@example.com', 'never issued')).toMatchObject({
        skipped: true,
      });
      // Sequence 2 is missing too: the workflow waits for it now. The same skip of 1, sent again, is the same Update.
      await expect
        .poll(async () => (await handle.query(holdEventsStatusQuery)).stage, { timeout: 30_000 })
        .toMatchObject({ expected: 2 });
      expect(await skipMissingEvent(ctx, holdId, 1, 'ops@example.com', 'never issued')).toMatchObject({
        skipped: true,
      });
      const { rows } = await us.pool.query('SELECT sequence FROM processor_sequence_skips WHERE hold_id = $1', [
        holdId,
      ]);
      expect(rows).toEqual([{ sequence: 1 }]);
    } finally {
      await receiver.close();
    }
  });
});
