/**
 * The Temporal Web UI in a real browser (docs/operating-quarantines.md): headless Chromium (Debian's, installed by
 * dev/chromium.ts when missing; a machine where it cannot be fails here with the reason) driven by playwright-core
 * opens the shared dev server's UI (test/integration/global-setup.ts: UI on, codec endpoint as `npm start` runs it)
 * after a small night with a quarantined merchant, and checks what a person sees. Screenshots go to
 * test-results/screenshots/;
 * `npm run screenshots` writes them to docs/screenshots/, which the README embeds (the list, a quarantined hold).
 */
import path from 'node:path';
import { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ensureChromium } from '../../dev/chromium.js';
import { ENCRYPTED_ENCODING } from '../../src/codec/encryption-codec.js';
import { statusQuery } from '../../src/contracts/messages.js';
import { holdEventsSummary, holdSummary } from '../../src/contracts/story.js';
import { holdEventsWorkflowId } from '../../src/contracts/ids.js';
import { holdEventsStatusQuery } from '../../src/contracts/processor.js';
import { startTestReceiver } from '../support/processor.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { holdWorkflowIdOf, seedNight, type Night } from '../support/ledger.js';
import { visibleText } from '../support/browser.js';
import { waitUntil } from '../support/wait.js';

/** Where the screenshots go: test-results/ (ignored) on every run; `npm run screenshots` refreshes the README's. */
const SCREENSHOTS = path.resolve(
  import.meta.dirname,
  '../..',
  process.env.SCREENSHOTS_DIR ?? 'test-results/screenshots',
);
const UI = inject('uiUrl');
/** What an operator configures once with *Configure columns* (the UI keeps it in the browser's storage). */
const COLUMNS = ['Status', 'Workflow ID', 'MerchantId', 'HoldId', 'DeliveryStatus', 'Start'];

let harness: Harness;
let browser: Browser;
let page: Page;
let us: TestRegion;
let eu: TestRegion;
let usNight: Night;
let euNight: Night;
let gapped: { holdId: string; merchantId: string };

const holdsOf = async (region: TestRegion, merchantId: string) =>
  (
    await region.pool.query<{ id: string }>('SELECT id FROM auth_holds WHERE merchant_id = $1 ORDER BY id', [
      merchantId,
    ])
  ).rows.map((r) => r.id);

async function nightWithQuarantine(region: TestRegion, prefix: string): Promise<Night> {
  const night = await seedNight(
    region.pool,
    region.config.region,
    prefix,
    { expired: 6, merchants: 3 },
    harness.merchants,
  );
  const [, rejecting, slow] = night.merchantIds as [string, string, string];
  harness.merchants.script(rejecting, {
    secrets: [night.secrets.get(rejecting)!],
    responses: [{ status: 400, body: 'unknown merchant reference' }],
  });
  // One request per 100 s: its second hold waits for the merchant's budget on a durable timer.
  await region.pool.query(`UPDATE merchants SET rate_per_second = 0.01, burst = 0 WHERE id = $1`, [slow]);
  await region.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: region.config.taskQueue,
    workflowId: `sweep-${region.config.region}-${harness.id}-browser`,
    args: [{ region: region.config.region, pageSize: 10, releaseWaitMs: 30_000 }],
  });
  for (const id of await holdsOf(region, rejecting)) {
    const handle = region.client.workflow.getHandle(await holdWorkflowIdOf(region.pool, region.config.region, id));
    await waitUntil(
      async () => (await handle.query(statusQuery)).stage === 'quarantined',
      `hold ${id} is quarantined`,
      30_000,
    );
  }
  return night;
}

const pageText = () => visibleText(page);
const shows = (expected: string | RegExp) =>
  typeof expected === 'string'
    ? expect.poll(pageText, { timeout: 30_000 }).toContain(expected)
    : expect.poll(pageText, { timeout: 30_000 }).toMatch(expected);

async function openWorkflow(region: TestRegion, holdId: string, tab: 'user-metadata' | 'timeline' | 'history') {
  const workflowId = await holdWorkflowIdOf(region.pool, region.config.region, holdId);
  const { runId } = await region.client.workflow.getHandle(workflowId).describe();
  await page.goto(
    `${UI}/namespaces/${region.config.namespace}/workflows/${encodeURIComponent(workflowId)}/${runId}/${tab}`,
  );
}

beforeAll(async () => {
  const executablePath = await ensureChromium();
  browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
  });
  page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  const columns = Object.fromEntries(
    ['hold-sweeper-us', 'hold-sweeper-eu'].map((ns) => [ns, COLUMNS.map((label, i) => ({ label, pinned: i < 2 }))]),
  );
  await page.addInitScript({
    content: `window.localStorage.setItem('namespace-workflow-table-columns', ${JSON.stringify(JSON.stringify(columns))});`,
  });

  harness = await openHarness();
  us = await harness.region('us');
  // EU encrypts with the key the UI's codec endpoint decodes with.
  const uiKey = inject('uiPayloadKey');
  eu = await harness.region('eu', { payloadKeys: [{ id: uiKey.id, key: Buffer.from(uiKey.key, 'base64') }] });
  await harness.startWorker(us);
  await harness.startWorker(eu);
  [usNight, euNight] = await Promise.all([
    nightWithQuarantine(us, `${harness.id}b`),
    nightWithQuarantine(eu, `${harness.id}e`),
  ]);
  gapped = await holdStoppedAtAGap(us, `${harness.id}g`);
}, 300_000);

/** An active hold whose processor sent sequence 2 but never 1: its event workflow stops for a human (2 s here). */
async function holdStoppedAtAGap(region: TestRegion, prefix: string): Promise<{ holdId: string; merchantId: string }> {
  const night = await seedNight(
    region.pool,
    region.config.region,
    prefix,
    { expired: 0, future: 1, merchants: 1 },
    harness.merchants,
  );
  const { id: holdId, merchantId } = night.future[0]!;
  const { processor, close } = await startTestReceiver(region, { gapWaitMs: 2_000 });
  try {
    const { status } = await processor.send({ eventId: `evt_${holdId}_2`, holdId, sequence: 2, type: 'hold.reversed' });
    if (status !== 202) throw new Error(`the receiver answered ${status}`);
  } finally {
    await close();
  }
  const handle = region.client.workflow.getHandle(holdEventsWorkflowId(region.config.region, holdId));
  await waitUntil(
    async () => (await handle.query(holdEventsStatusQuery).catch(() => undefined))?.stage.stage === 'stopped_for_human',
    `hold ${holdId}'s event workflow stops at the gap`,
    30_000,
  );
  return { holdId, merchantId };
}
afterAll(async () => {
  await browser?.close();
  await harness?.close();
});

describe('the Web UI, as an operator sees it', () => {
  it('the list filtered to quarantined holds says which hold and merchant each row is', async () => {
    const rejecting = usNight.merchantIds[1]!;
    const query = `DeliveryStatus="quarantined" AND MerchantId="${rejecting}"`;
    await page.goto(`${UI}/namespaces/hold-sweeper-us/workflows?query=${encodeURIComponent(query)}`);
    const holds = await holdsOf(us, rejecting);
    await shows(`1–${holds.length} of ${holds.length}`);
    for (const id of holds) await shows(new RegExp(`hold-release-us-${id}-\\S+ ${rejecting} ${id} quarantined`));
    await page.screenshot({ path: path.join(SCREENSHOTS, 'web-ui-list.png') });
  });

  it("a quarantined hold's page shows its summary, what to run, and its current details with the reason and since when", async () => {
    const rejecting = usNight.merchantIds[1]!;
    const [holdId] = await holdsOf(us, rejecting);
    const handle = us.client.workflow.getHandle(await holdWorkflowIdOf(us.pool, 'us', holdId!));
    const status = (await handle.query(statusQuery)) as { stage: string; since: string };
    await openWorkflow(us, holdId!, 'user-metadata');
    await shows(holdSummary('us', holdId!, rejecting));
    await shows(`npm run ops -- status ${holdId} --region us`);
    await shows('Quarantined: waiting for a human');
    await shows('Reason: rejected');
    await shows(`Since: ${status.since}`);
    await shows(`Detail: HTTP 400 from merchant ${rejecting} (not retryable)`);
    // The merchant's own words stay in the ledger (ops status shows them, escaped): what a
    // merchant writes in a response body is not the cluster's to display.
    expect(await pageText()).not.toContain('unknown merchant reference');
    await page.screenshot({ path: path.join(SCREENSHOTS, 'web-ui-quarantined-hold.png') });
  });

  it('the timeline labels the calls and the waits: release, delivery, quarantine, the wait for a human, the budget timer', async () => {
    const [quarantined] = await holdsOf(us, usNight.merchantIds[1]!);
    await openWorkflow(us, quarantined!, 'timeline');
    await shows(`quarantine wh_${quarantined}_`);
    await shows(/waiting for a human: approveReplay or discard, abandons at \d{4}-\d\d-\d\dT/);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'web-ui-timeline.png') });

    // The slow merchant's second hold waits on a durable timer for its turn in the budget.
    const slowHolds = await holdsOf(us, usNight.merchantIds[2]!);
    const stages = await Promise.all(
      slowHolds.map(async (id) => ({
        id,
        stage: (await us.client.workflow.getHandle(await holdWorkflowIdOf(us.pool, 'us', id)).query(statusQuery)).stage,
      })),
    );
    const waiting = stages.find((s) => s.stage === 'waiting_for_budget');
    expect(waiting, JSON.stringify(stages)).toBeDefined();
    await openWorkflow(us, waiting!.id, 'history');
    await shows(`release hold ${waiting!.id}`);
    await shows(/merchant budget, first lane, until \d{4}-\d\d-\d\dT/);
  });

  it('a hold stopped at a processor-event gap: the list filtered to event_gap finds it by merchant; its page says what is missing and what to run', async () => {
    const { holdId, merchantId } = gapped;
    const query = `DeliveryStatus="event_gap" AND MerchantId="${merchantId}"`;
    await page.goto(`${UI}/namespaces/hold-sweeper-us/workflows?query=${encodeURIComponent(query)}`);
    await shows(new RegExp(`hold-events-us-${holdId} ${merchantId} ${holdId} event_gap`));
    const workflowId = holdEventsWorkflowId('us', holdId);
    const { runId } = await us.client.workflow.getHandle(workflowId).describe();
    await page.goto(
      `${UI}/namespaces/hold-sweeper-us/workflows/${encodeURIComponent(workflowId)}/${runId}/user-metadata`,
    );
    await shows(holdEventsSummary('us', holdId));
    await shows('Stopped: a processor event is missing');
    await shows('Missing: sequence 1');
    await shows(`npm run ops -- events skip ${holdId} --sequence 1`);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'web-ui-event-gap.png') });
  });

  it('with payload keys set, the UI shows the decoded text through the codec endpoint, and the server holds ciphertext', async () => {
    const rejecting = euNight.merchantIds[1]!;
    const [holdId] = await holdsOf(eu, rejecting);
    await openWorkflow(eu, holdId!, 'user-metadata');
    await shows(holdSummary('eu', holdId!, rejecting));
    await shows('Quarantined: waiting for a human');
    // What the server stores (a client with no codec): the summary is ciphertext.
    const raw = new Client({ connection: eu.client.connection, namespace: eu.config.namespace });
    const history = await raw.workflow.getHandle(await holdWorkflowIdOf(eu.pool, 'eu', holdId!)).fetchHistory();
    const started = (history.events as temporal.api.history.v1.IHistoryEvent[])[0]!;
    const summary = started.userMetadata?.summary;
    expect(Buffer.from(summary!.metadata!.encoding!).toString()).toBe(ENCRYPTED_ENCODING);
    expect(Buffer.from(summary!.data!).toString('latin1')).not.toContain(holdId!);
  });
});
