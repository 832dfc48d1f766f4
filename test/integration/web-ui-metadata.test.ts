/**
 * What the Temporal Web UI shows (its user metadata: src/contracts/story.ts), read through the same APIs the UI reads:
 * each hold workflow's static
 * summary and details, its current details at every stage, the labels of its timers and activities on the
 * timeline, and the sweep's progress, with the holds it started findable from it.
 */
import { workflowMetadataQuery } from '@temporalio/workflow';
import type { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { statusQuery } from '../../src/contracts/messages.js';
import { holdSummary } from '../../src/contracts/story.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { holdWorkflowIdOf, seedNight, type Night } from '../support/ledger.js';

let harness: Harness;
let us: TestRegion;
let night: Night;
let sweepId: string;

const holdsOf = async (merchantId: string) =>
  (
    await us.pool.query<{ id: string }>('SELECT id FROM auth_holds WHERE merchant_id = $1 ORDER BY id', [merchantId])
  ).rows.map((r) => r.id);
const handleOf = async (holdId: string) => us.client.workflow.getHandle(await holdWorkflowIdOf(us.pool, 'us', holdId));
const currentDetails = async (workflowId: string) =>
  (await us.client.workflow.getHandle(workflowId).query(workflowMetadataQuery)).currentDetails ?? '';
/** Each event's one-line summary (user metadata), decoded, with its kind (e.g. timerStartedEventAttributes). */
async function summaries(workflowId: string): Promise<{ type: string; summary: string }[]> {
  const history = await us.client.workflow.getHandle(workflowId).fetchHistory();
  const out: { type: string; summary: string }[] = [];
  for (const event of (history.events ?? []) as temporal.api.history.v1.IHistoryEvent[]) {
    const payload = event.userMetadata?.summary;
    if (!payload?.data) continue;
    const type = Object.keys(event).find((k) => k.endsWith('EventAttributes') && event[k as keyof typeof event]) ?? '?';
    out.push({ type, summary: JSON.parse(Buffer.from(payload.data).toString('utf8')) as string });
  }
  return out;
}

beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
  await harness.startWorker(us);
  night = await seedNight(us.pool, 'us', `${harness.id}ui`, { expired: 6, merchants: 3 }, harness.merchants);
  const [, rejecting, slow] = night.merchantIds as [string, string, string];
  harness.merchants.script(rejecting, {
    secrets: [night.secrets.get(rejecting)!],
    responses: [{ status: 400, body: 'unknown merchant reference' }],
  });
  // One request per 100 s: its second hold waits for the merchant's budget on a durable timer.
  await us.pool.query(`UPDATE merchants SET rate_per_second = 0.01, burst = 0 WHERE id = $1`, [slow]);
  sweepId = `sweep-us-${harness.id}-ui`;
  await us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: us.config.taskQueue,
    workflowId: sweepId,
    args: [{ region: 'us', pageSize: 4, batchSize: 2, releaseWaitMs: 30_000 }],
  });
});
afterAll(async () => {
  await harness?.close();
});

describe('a hold workflow in the Web UI', () => {
  it('starts with a summary (hold, merchant, region; no amount) and details that say what to run', async () => {
    const [holdId] = await holdsOf(night.merchantIds[0]!);
    const description = await (await handleOf(holdId!)).describe();
    expect(await description.staticSummary()).toBe(holdSummary('us', holdId!, night.merchantIds[0]!));
    const details = await description.staticDetails();
    expect(details).toContain(`npm run ops -- status ${holdId} --region us`);
    expect(details).toContain('docs/runbook.md#webhooksquarantined');
    const amount = (
      await us.pool.query<{ a: string }>('SELECT amount_minor::text AS a FROM auth_holds WHERE id = $1', [holdId])
    ).rows[0]!.a;
    expect(`${await description.staticSummary()} ${details}`).not.toContain(amount);
  });

  it('keeps its current details true: a quarantined hold says why and since when, as its status query does', async () => {
    const [holdId] = await holdsOf(night.merchantIds[1]!);
    const handle = await handleOf(holdId!);
    await expect.poll(async () => (await handle.query(statusQuery)).stage, { timeout: 30_000 }).toBe('quarantined');
    const status = await handle.query(statusQuery);
    const details = await currentDetails(handle.workflowId);
    expect(details).toContain('### Quarantined: waiting for a human');
    expect(details).toContain('- Reason: **rejected**');
    expect(details).toContain(`- Since: ${(status as { since: string }).since}`);
    expect(details).toContain('HTTP 400');
    expect(details).toContain('Runbook: docs/runbook.md#webhooksquarantined');
    // The timeline: the release with the first attempt, the quarantine's record and the wait for a human, labelled.
    const labels = (await summaries(handle.workflowId)).map((s) => s.summary);
    expect(labels).toEqual(
      expect.arrayContaining([
        `release hold ${holdId}, then deliver its webhook (attempt 1)`,
        expect.stringMatching(/^quarantine wh_\S+ \(rejected\)$/),
        expect.stringMatching(/^waiting for a human: approveReplay or discard, abandons at \d{4}-\d\d-\d\dT/),
      ]),
    );
  });

  it("labels a wait for the merchant's budget with its lane and end, and says so in its details", async () => {
    const holds = await holdsOf(night.merchantIds[2]!);
    const stages = async () =>
      Promise.all(holds.map(async (id) => ({ id, stage: (await (await handleOf(id)).query(statusQuery)).stage })));
    await expect
      .poll(async () => (await stages()).some((s) => s.stage === 'waiting_for_budget'), { timeout: 30_000 })
      .toBe(true);
    const waiting = (await stages()).find((s) => s.stage === 'waiting_for_budget')!;
    const handle = await handleOf(waiting.id);
    expect(await currentDetails(handle.workflowId)).toMatch(
      /### Waiting for the merchant's rate budget[\s\S]*- Lane: first[\s\S]*- Until: \d{4}-/,
    );
    const timers = (await summaries(handle.workflowId)).filter((s) => s.type === 'timerStartedEventAttributes');
    expect(timers.map((t) => t.summary)).toEqual([
      expect.stringMatching(/^merchant budget, first lane, until \d{4}-\d\d-\d\dT/),
    ]);
  });

  it('a delivered hold ends with details that say so', async () => {
    const [holdId] = await holdsOf(night.merchantIds[0]!);
    const handle = await handleOf(holdId!);
    await handle.result();
    expect(await currentDetails(handle.workflowId)).toMatch(/^### Delivered\n\n- Stage: `delivered`\n- Attempts: 1/);
  });
});

describe('the sweep in the Web UI', () => {
  it('shows its progress and how to find what it started', async () => {
    const details = await currentDetails(sweepId);
    expect(details).toContain('### Waiting for the last releases');
    expect(details).toContain('- Found: 6 · started: 6 · already handled: 0 · rejected: 0');
    expect(details).toContain(`ParentWorkflowId STARTS_WITH "${sweepId}/"`);
    // The queries it names find its batches and every hold it started.
    // Pages of 4 in batches of 2: 2 + 1 batches.
    expect((await us.client.workflow.count(`WorkflowId STARTS_WITH "${sweepId}/"`)).count).toBe(3);
    await expect
      .poll(async () => (await us.client.workflow.count(`ParentWorkflowId STARTS_WITH "${sweepId}/"`)).count, {
        timeout: 15_000,
      })
      .toBe(6);
    const batch = await us.client.workflow.getHandle(`${sweepId}/page-1/batch-1`).describe();
    expect(await batch.staticSummary()).toBe('page 1, batch 1: starts 2 hold workflows');
  });
});
