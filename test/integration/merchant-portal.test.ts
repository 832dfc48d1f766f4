/**
 * The merchant portal in real Chromium (the system binary, driven by playwright-core) over the merchant API on its own
 * database role, with a worker and the endpoint checks' loop on theirs: a merchant signs in with the link an operator
 * mints (`merchant portal-link`), reads its deliveries and each attempt, rotates its signing secret, sends a test and
 * resends a webhook that failed, with the keyboard where a keyboard user would; each action is audited under the
 * link's key. A revoked link signs nobody in, and what a merchant's endpoint answered is shown as text, never run.
 * SCREENSHOTS_DIR=docs/screenshots (`npm run screenshots`) keeps what it saw.
 */
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ensureChromium } from '../../dev/chromium.js';
import { buildMerchantServer } from '../../src/api/merchant-server.js';
import { localKeyRing } from '../../src/delivery/secret-box.js';
import { mintPortalLink, revokeApiKey } from '../../src/operations/merchant-keys.js';
import { discardHold } from '../../src/operations/operations.js';
import { ensureOutboxSchedule } from '../../src/schedules.js';
import { startEndpointChecks } from '../../src/workers/endpoint-checks.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { visibleText } from '../support/browser.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { seedNight } from '../support/ledger.js';
import { waitUntil } from '../support/wait.js';

const DEV_RULES = { allowInsecureHttp: true, allowPrivateAddresses: true, trustedNetworks: [] };
/** What the merchant's endpoint answers its first webhook: markup that must reach the page as text. */
const HOSTILE = '<img src=x onerror="window.ran=1">refused';

let harness: Harness;
let us: TestRegion;
let app: FastifyInstance;
let portal: string;
let rolePool: pg.Pool;
let workerPool: pg.Pool;
let checks: { stop(): void };
let browser: Browser;
let page: Page;
let merchantId: string;
let failed: string;
/** What the page logged as errors (a CSP violation among them). */
const pageErrors: string[] = [];

const webhookStatus = async (webhookId: string) =>
  (await us.pool.query('SELECT status FROM webhook_deliveries WHERE webhook_id = $1', [webhookId])).rows[0]?.status;

beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
  await harness.startWorker(us);
  const night = await seedNight(us.pool, 'us', `${harness.id}p`, { expired: 2, merchants: 1 }, harness.merchants);
  merchantId = night.merchantIds[0]!;
  harness.merchants.script(merchantId, {
    secrets: [night.secrets.get(merchantId)!],
    responses: [{ status: 400, body: HOSTILE }, { status: 200 }],
  });
  await us.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: us.config.taskQueue,
    workflowId: `sweep-us-${harness.id}-portal`,
    args: [{ region: 'us', releaseWaitMs: 60_000 }],
  });
  const quarantined = async () =>
    (await us.pool.query(`SELECT webhook_id, hold_id FROM webhook_deliveries WHERE status = 'quarantined'`)).rows[0];
  await waitUntil(async () => (await quarantined()) !== undefined, 'the webhook answered 400 quarantined', 30_000);
  const { webhook_id: webhookId, hold_id: holdId } = await quarantined();
  failed = webhookId;
  const ops = { region: us.config, pool: us.pool, client: us.client };
  expect((await discardHold(ops, holdId, 'carol', 'the merchant fixes its endpoint first')).outcome).toBe('applied');
  await waitUntil(async () => (await webhookStatus(failed)) === 'discarded', 'discarded', 30_000);
  // The outbox reconciler as production runs it (its schedule), quick: it starts the resends merchants ask for.
  await ensureOutboxSchedule(us.client, us.config, { intervalMs: 1_000, graceMs: 60_000 });

  const database = new URL(us.databaseUrl).pathname.slice(1);
  rolePool = new pg.Pool({ connectionString: `${inject('ledgerRoleUrls').merchantApi}${database}`, max: 4 });
  app = await buildMerchantServer({
    region: 'us',
    pool: rolePool,
    resendsStartWithinMs: 1_000,
    endpointRules: DEV_RULES,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  portal = `http://127.0.0.1:${(app.server.address() as { port: number }).port}/portal`;
  workerPool = new pg.Pool({ connectionString: `${inject('ledgerRoleUrls').worker}${database}`, max: 4 });
  checks = startEndpointChecks({
    region: 'us',
    pool: workerPool,
    rules: DEV_RULES,
    secrets: { region: 'us', sealer: localKeyRing(us.config.secretKeys) },
    intervalMs: 200,
  });

  browser = await chromium.launch({
    executablePath: await ensureChromium(),
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
  });
  await freshPage();
}, 300_000);

/** A page of its own (no session kept from a test before), its errors collected. */
async function freshPage() {
  await page?.close();
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('console', (m) => m.type() === 'error' && pageErrors.push(m.text()));
  page.on('pageerror', (err) => pageErrors.push(err.message));
}

afterAll(async () => {
  await browser?.close();
  checks?.stop();
  await app?.close();
  await rolePool?.end();
  await workerPool?.end();
  await harness?.close();
});

const shows = (expected: string | RegExp) => {
  const text = expect.poll(() => visibleText(page), { timeout: 30_000 });
  return typeof expected === 'string' ? text.toContain(expected) : text.toMatch(expected);
};

async function screenshot(name: string) {
  const dir = process.env.SCREENSHOTS_DIR;
  if (dir) await page.screenshot({ path: path.join(dir, `portal-${name}.png`), fullPage: true });
}

/** The audited verbs of calls made with `keyId`. */
const auditedVerbs = async (keyId: string) =>
  (
    await us.pool.query<{ verb: string }>(`SELECT verb FROM api_audit WHERE roles = ARRAY[$1]::text[] ORDER BY at`, [
      `key:${keyId}`,
    ])
  ).rows.map((r) => r.verb);

describe('the merchant portal', () => {
  it('signs in with a portal link; deliveries and attempts; rotates a secret, sends a test, resends a failed webhook', async () => {
    const link = await mintPortalLink(us.pool, portal, merchantId, 'mia', 15 * 60_000);
    const served = await page.goto(link.link);
    expect(served!.headers()['content-security-policy']).toContain("script-src 'self'");
    await shows(`Signed in as ${merchantId}`);
    // The key leaves the address bar and the history once it is kept for the tab.
    expect(page.url()).toBe(portal);
    await shows(failed);
    await screenshot('deliveries');

    // With the keyboard: the failed webhook's attempts, and what its endpoint answered, as text.
    await page.getByRole('button', { name: `Attempts of ${failed}` }).focus();
    await page.keyboard.press('Enter');
    await shows(HOSTILE);
    expect(await page.evaluate('window.ran')).toBeUndefined();

    // Only the failed ones, by the filter.
    await page.getByLabel('Status').selectOption('discarded');
    await page.getByRole('button', { name: 'Show' }).click();
    await expect.poll(() => page.getByRole('button', { name: /^Resend / }).count()).toBe(1);

    await page.getByRole('button', { name: 'Rotate secret' }).click();
    await expect.poll(() => page.getByLabel('New secret').inputValue()).toMatch(/^whsec_/);
    await expect.poll(() => page.locator('#secrets tr').count()).toBe(2);
    await screenshot('secrets');

    await page.getByLabel('Requests per second').fill('3');
    await page.getByLabel('Burst').fill('2');
    await page.getByRole('button', { name: 'Save pace' }).click();
    await shows('3 per second, 2 at once');

    await page.getByRole('button', { name: 'Send a test event' }).click();
    await shows(/Your endpoint answered 200 in \d+ ms \(2 signatures\)/);

    const before = harness.merchants.requests(merchantId).filter((r) => r.webhookId === failed).length;
    await page.getByRole('button', { name: `Resend ${failed}` }).press('Enter');
    await shows(`Resend of ${failed} asked for`);
    await waitUntil(async () => (await webhookStatus(failed)) === 'delivered', 'the resend delivered', 60_000);
    const sent = harness.merchants.requests(merchantId).filter((r) => r.webhookId === failed);
    expect(sent).toHaveLength(before + 1);
    expect(sent.at(-1)).toMatchObject({ answer: 200, verified: true });
    await screenshot('endpoint');

    // Each action under the link's own key.
    expect(await auditedVerbs(link.id)).toEqual(
      expect.arrayContaining([
        'merchant-api.endpoint.get',
        'merchant-api.webhooks.list',
        'merchant-api.secrets.rotate',
        'merchant-api.endpoint.test',
        'merchant-api.endpoint.rate',
        'merchant-api.webhooks.resend',
      ]),
    );
    expect(pageErrors).toEqual([]);
    expect(await visibleText(page)).not.toMatch(/undefined|null|NaN|\[object/);
  });

  it('a revoked link signs nobody in', async () => {
    const link = await mintPortalLink(us.pool, portal, merchantId, 'mia', 15 * 60_000);
    await revokeApiKey(us.pool, link.id, 'mia');
    await freshPage();
    await page.goto(link.link);
    await shows('You are signed out: your link or key is no longer valid.');
    expect(await page.getByRole('button', { name: 'Sign in' }).isVisible()).toBe(true);
    expect(await page.locator('#signed-in').isHidden()).toBe(true);
    expect(await auditedVerbs(link.id)).toEqual([]);
  });
});
