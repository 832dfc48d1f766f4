/**
 * The standalone Temporal Web UI server (built once from the Go module proxy, dev/temporal-cluster.ts) signing people
 * in with OIDC against a real provider on loopback (dev/oidc-provider.ts: its login and consent pages, the
 * authorization-code flow), passing each signed-in user's access token to the codec endpoint, which verifies it like
 * the admin API and decodes over TLS. In headless Chromium: a user with a role reads an encrypted workflow's input in
 * clear; a signed-in user without a role does not (the codec endpoint refuses); nobody reads it without signing in.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureChromium } from '../../dev/chromium.js';
import { loadDevConfig } from '../../dev/dev-config.js';
import { freePort } from '../../dev/embedded-postgres.js';
import { startDevOidcProvider, type DevOidcProvider } from '../../dev/oidc-provider.js';
import { createClusterPki } from '../../dev/pki.js';
import { obtainTemporalUi, startUi } from '../../dev/temporal-cluster.js';
import { byNamespace, createTokenVerifier } from '../../src/api/identity.js';
import { CODEC_AUDIENCE } from '../../src/contracts/identity.js';
import { startCodecServer } from '../../src/codec/codec-server.js';
import { EncryptionCodec } from '../../src/codec/encryption-codec.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { holdWorkflowIdOf, seedNight } from '../support/ledger.js';
import { capturedLogger } from '../support/logs.js';
import { visibleText } from '../support/browser.js';
import { waitUntil } from '../support/wait.js';

let harness: Harness;
let eu: TestRegion;
let oidc: DevOidcProvider;
let codec: { url: string; stop(): Promise<void> };
let ui: { url: string; stop(): Promise<void> };
let browser: Browser;
let dir: string;
let holdId: string;
let merchantId: string;
const decodeLog = capturedLogger('codec-server');
const decodedFor = () => decodeLog.lines.filter((line) => line.subject !== undefined).map((line) => line.subject);

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-ui-oidc-'));
  const binary = await obtainTemporalUi(loadDevConfig().cacheDir, (line) => console.log(line));
  harness = await openHarness();
  const key = { id: 'k1', key: randomBytes(32) };
  eu = await harness.region('eu', { payloadKeys: [key] });
  await harness.startWorker(eu);
  // One hold whose webhook is quarantined (its merchant answers 400): its workflow waits, its summary encrypted.
  const night = await seedNight(eu.pool, 'eu', `${harness.id}u`, { expired: 1, merchants: 1 }, harness.merchants);
  [holdId, merchantId] = [night.expired[0]!.id, night.merchantIds[0]!];
  harness.merchants.script(merchantId, { secrets: [night.secrets.get(merchantId)!], responses: [{ status: 400 }] });
  await eu.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: eu.config.taskQueue,
    workflowId: `sweep-eu-${harness.id}-ui-oidc`,
    args: [{ region: 'eu', releaseWaitMs: 60_000 }],
  });
  await waitUntil(
    async () =>
      (await eu.pool.query(`SELECT status FROM webhook_deliveries WHERE hold_id = $1`, [holdId])).rows[0]?.status ===
      'quarantined',
    'the webhook quarantined',
  );

  const uiPort = await freePort();
  const uiUrl = `http://127.0.0.1:${uiPort}`;
  oidc = await startDevOidcProvider([], {
    webClients: [{ clientId: 'temporal-ui', redirectUris: [`${uiUrl}/auth/sso/callback`] }],
    accounts: { alice: ['viewer'], bob: [] },
  });
  const pki = await createClusterPki(path.join(dir, 'pki'));
  codec = await startCodecServer({
    codecs: new Map([
      [eu.config.namespace, new EncryptionCodec([key], { namespace: eu.config.namespace, unencrypted: 'pass' })],
    ]),
    corsOrigins: [uiUrl],
    authToken: undefined,
    identity: byNamespace(
      await createTokenVerifier({
        issuer: oidc.issuer,
        audience: CODEC_AUDIENCE,
        rolesClaim: 'roles',
        clockToleranceSeconds: 5,
        maxTokenAgeSeconds: 86_400,
      }),
      [{ namespace: eu.config.namespace, region: 'eu' }],
    ),
    https: { cert: await fs.readFile(pki.frontend.cert), key: await fs.readFile(pki.frontend.key) },
    logger: decodeLog.logger,
  });
  ui = await startUi(
    binary,
    harness.address,
    eu.config.namespace,
    {
      port: uiPort,
      codecEndpoint: codec.url,
      signIn: {
        issuer: oidc.issuer,
        clientId: 'temporal-ui',
        clientSecret: oidc.secrets.get('temporal-ui')!,
        scopes: ['openid', 'profile', 'email', 'api'],
      },
    },
    dir,
  );
  browser = await chromium.launch({
    executablePath: await ensureChromium(),
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
  });
}, 600_000);

afterAll(async () => {
  await browser?.close();
  await ui?.stop();
  await codec?.stop();
  await oidc?.stop();
  await harness?.close();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

/**
 * A fresh browser (its own cookies; the codec's certificate is the test CA's), signed in as `login` unless undefined.
 */
async function browse(login: string | undefined): Promise<Page> {
  const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  if (login !== undefined) {
    // The UI's "Continue to SSO": the provider's own sign-in page (any name signs in; its roles are the provider's).
    await page.goto(`${ui.url}/auth/sso`);
    await page.locator('input[name="login"]').fill(login, { timeout: 30_000 });
    await page.locator('input[name="password"]').fill('any');
    await page.locator('button[type="submit"]').click();
    // Consent, asked once per user and client; then back to the UI, signed in.
    await page.locator('button[type="submit"]').click({ timeout: 30_000 });
    await expect.poll(() => page.url(), { timeout: 30_000 }).toMatch(new RegExp(`^${ui.url}/`));
  }
  return page;
}

/**
 * The hold's workflow page, reached as a person does: the list filtered to it, then its row. (The UI server answers
 * a deep link to it with 404: the workflow id's `.` makes the path look like a static file to it.)
 */
async function openWorkflow(page: Page): Promise<void> {
  const workflowId = await holdWorkflowIdOf(eu.pool, 'eu', holdId);
  await page.goto(
    `${ui.url}/namespaces/${eu.config.namespace}/workflows?query=${encodeURIComponent(`WorkflowId = "${workflowId}"`)}`,
  );
  await page.locator(`a:has-text("${workflowId}")`).first().click({ timeout: 30_000 });
}

const text = visibleText;

/** What the page shows of the workflow's input decoded: its hold id as JSON (the server holds it encrypted). */
const decodedInput = () => `"holdId": "${holdId}"`;

/** The codec endpoint's answers to this page's requests (the browser calls it directly). */
function codecAnswers(page: Page): number[] {
  const statuses: number[] = [];
  page.on('response', (response) => {
    if (response.url().startsWith(`${codec.url}/decode`)) statuses.push(response.status());
  });
  return statuses;
}

describe('the standalone Web UI, signing people in with OIDC', () => {
  it('nobody reads a workflow without signing in: the UI asks them to sign in at the provider', async () => {
    const page = await browse(undefined);
    const answers = codecAnswers(page);
    await page.goto(`${ui.url}/namespaces/${eu.config.namespace}/workflows`);
    await expect.poll(() => page.url(), { timeout: 30_000 }).toContain(`${ui.url}/login`);
    await expect.poll(() => text(page), { timeout: 30_000 }).toContain('Continue to SSO');
    expect(await text(page)).not.toContain(decodedInput());
    expect(answers).toEqual([]);
    expect(decodedFor()).toEqual([]);
    await page.context().close();
  });

  it('a signed-in user with a role reads the encrypted input in clear, decoded for them by name', async () => {
    const page = await browse('alice');
    const answers = codecAnswers(page);
    await openWorkflow(page);
    await expect.poll(() => text(page), { timeout: 60_000 }).toContain(decodedInput());
    expect(answers.length).toBeGreaterThan(0);
    expect(answers.every((status) => status === 200)).toBe(true);
    expect(decodedFor()).toContain('alice');
    await page.context().close();
  });

  it('a signed-in user without a role does not: the codec endpoint refuses to decode for them', async () => {
    const page = await browse('bob');
    const answers = codecAnswers(page);
    await openWorkflow(page);
    // The page is there (the workflow's type), and the codec endpoint said no to this user.
    await expect.poll(() => text(page), { timeout: 30_000 }).toContain('releaseExpiredHold');
    await expect.poll(() => answers, { timeout: 30_000 }).toContain(403);
    expect(answers).not.toContain(200);
    expect(await text(page)).not.toContain(decodedInput());
    expect(decodedFor()).not.toContain('bob');
    await page.context().close();
  });
});
