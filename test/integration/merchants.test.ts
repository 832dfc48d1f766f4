/**
 * Merchant endpoints managed from the ops CLI (issue 19): onboarded, changed, paused, rotated and pinged against a
 * real ledger and a real HTTP receiver that verifies every request with the Standard Webhooks reference verifier.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidEndpointUrl } from '../../src/delivery/endpoint.js';
import { InvalidDeliveryPolicyError } from '../../src/delivery/policy.js';
import { InvalidMerchantSetting } from '../../src/errors.js';
import { runOps } from '../../src/ops/cli.js';
import { addMerchant, pauseMerchant, pingMerchant, resumeMerchant, rotateSigningSecret, setMerchant, showMerchant } from '../../src/ops/merchants.js';
import { disableMerchant } from '../../src/sql/merchants.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';

const DEV_RULES = { allowInsecureHttp: true, allowPrivateAddresses: true, trustedNetworks: [] };
const PRODUCTION_RULES = { allowInsecureHttp: false, allowPrivateAddresses: false, trustedNetworks: [] };

let harness: Harness;
let us: TestRegion;
beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
});
afterAll(async () => {
  await harness?.close();
});

const merchantCount = async () => Number((await us.pool.query<{ n: string }>('SELECT count(*) AS n FROM merchants')).rows[0]!.n);

describe('merchant add', () => {
  it('onboards a merchant a delivery can send to, and hands out its secret once', async () => {
    const id = `m_${harness.id}_add`;
    const { merchant, signingSecret } = await addMerchant(us.pool, DEV_RULES, {
      id,
      name: 'Acme Books',
      endpointUrl: harness.merchants.endpointFor(id),
      ratePerSecond: 2.5,
      burst: 3,
      deliveryPolicy: { retryHorizonMs: 3_600_000 },
    });
    expect(signingSecret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(merchant).toMatchObject({
      id,
      name: 'Acme Books',
      ratePerSecond: 2.5,
      burst: 3,
      status: 'active',
      hasSigningSecret: true,
      hasPreviousSecret: false,
    });
    expect(merchant.deliveryPolicy).toEqual({ retryHorizonMs: 3_600_000 });
    // `show` never gives the secret back, in any form.
    expect(JSON.stringify(await showMerchant(us.pool, id))).not.toContain(signingSecret.slice(6, 20));
    // Its rate-limit row exists (the budget every worker shares).
    expect((await us.pool.query('SELECT 1 FROM merchant_rate_limits WHERE merchant_id = $1', [id])).rowCount).toBe(1);
    await expect(addMerchant(us.pool, DEV_RULES, { id, name: 'again', endpointUrl: 'http://127.0.0.1:1/x' })).rejects.toMatchObject({
      code: 'MerchantExists',
    });
  });

  it('refuses bad input with a named error and writes nothing', async () => {
    const before = await merchantCount();
    const add = (overrides: Record<string, unknown>, rules = DEV_RULES) =>
      addMerchant(us.pool, rules, { id: `m_${harness.id}_bad`, name: 'Bad', endpointUrl: 'https://merchant.example/hooks', ...overrides });
    await expect(add({ endpointUrl: 'not a url' })).rejects.toBeInstanceOf(InvalidEndpointUrl);
    await expect(add({ endpointUrl: 'http://merchant.example/hooks' }, PRODUCTION_RULES)).rejects.toThrow(/scheme http: is not allowed/);
    await expect(add({ endpointUrl: 'https://10.0.0.7/hooks' }, PRODUCTION_RULES)).rejects.toThrow(/private, loopback or reserved/);
    await expect(add({ endpointUrl: 'https://user:pw@merchant.example/' })).rejects.toThrow(/credentials/);
    await expect(add({ ratePerSecond: -5 })).rejects.toMatchObject({ name: 'InvalidMerchantSetting', setting: 'rate' });
    await expect(add({ ratePerSecond: Number.NaN })).rejects.toBeInstanceOf(InvalidMerchantSetting);
    await expect(add({ ratePerSecond: 5000 })).rejects.toMatchObject({ setting: 'rate' });
    await expect(add({ burst: 1.5 })).rejects.toMatchObject({ setting: 'burst' });
    await expect(add({ deliveryPolicy: { retryHorizonMs: -1 } })).rejects.toBeInstanceOf(InvalidDeliveryPolicyError);
    await expect(add({ deliveryPolicy: { noSuchKey: 1 } })).rejects.toBeInstanceOf(InvalidDeliveryPolicyError);
    await expect(add({ id: 'has space' })).rejects.toMatchObject({ setting: 'id' });
    await expect(add({ name: '  ' })).rejects.toMatchObject({ setting: 'name' });
    expect(await merchantCount()).toBe(before);
  });
});

describe('merchant set, pause, resume', () => {
  it('changes only what is given, checked first; pause and resume move its status', async () => {
    const id = `m_${harness.id}_set`;
    await addMerchant(us.pool, DEV_RULES, { id, name: 'Set Me', endpointUrl: 'https://merchant.example/a' });
    expect(await setMerchant(us.pool, DEV_RULES, id, { ratePerSecond: 50 })).toMatchObject({ ratePerSecond: 50, burst: 1, name: 'Set Me' });
    await expect(setMerchant(us.pool, PRODUCTION_RULES, id, { endpointUrl: 'https://127.0.0.1/x' })).rejects.toBeInstanceOf(InvalidEndpointUrl);
    await expect(setMerchant(us.pool, DEV_RULES, id, {})).rejects.toMatchObject({ setting: 'changes' });
    await expect(setMerchant(us.pool, DEV_RULES, 'm_nobody', { burst: 2 })).rejects.toMatchObject({ code: 'MerchantNotFound' });
    expect((await showMerchant(us.pool, id)).endpointUrl).toBe('https://merchant.example/a');

    const paused = await pauseMerchant(us.pool, id, 'merchant asked: maintenance until 06:00');
    expect(paused).toMatchObject({ changed: true, merchant: { status: 'paused', statusReason: 'merchant asked: maintenance until 06:00' } });
    expect((await pauseMerchant(us.pool, id, 'again')).changed).toBe(false);
    await expect(pauseMerchant(us.pool, id, ' ')).rejects.toMatchObject({ setting: 'reason' });
    expect(await resumeMerchant(us.pool, id)).toMatchObject({ changed: true, merchant: { status: 'active', statusReason: null } });
    // A merchant disabled by a 410 Gone is re-enabled the same way.
    await disableMerchant(us.pool, id, '410 Gone on webhook wh_x');
    expect((await resumeMerchant(us.pool, id)).merchant.status).toBe('active');
  });
});

describe('merchant ping and rotate-secret', () => {
  it('pings with a signed event the reference verifier accepts, within the budget, and says what the policy would do', async () => {
    const id = `m_${harness.id}_ping`;
    const { signingSecret } = await addMerchant(us.pool, DEV_RULES, { id, name: 'Ping', endpointUrl: harness.merchants.endpointFor(id) });
    harness.merchants.script(id, { secrets: [signingSecret], responses: [{ status: 204 }, { status: 503, body: 'down for a moment' }] });
    const ok = await pingMerchant(us.pool, DEV_RULES, id, 'us');
    expect(ok).toMatchObject({ statusCode: 204, policyAction: 'delivered', signatures: 1 });
    const [received] = harness.merchants.requests(id);
    expect(received).toMatchObject({ verified: true, webhookId: ok.webhookId });
    expect(JSON.parse(received!.body)).toMatchObject({ type: 'merchant.ping', data: { merchant_id: id, region: 'us' } });
    // Nothing secret in what the operator sees.
    expect(JSON.stringify(ok)).not.toContain(signingSecret.slice(6));

    const down = await pingMerchant(us.pool, DEV_RULES, id, 'us');
    expect(down).toMatchObject({ statusCode: 503, policyAction: 'retry', policyRule: '5xx', responseExcerpt: 'down for a moment' });
    // The budget was used: the merchant's gate moved.
    const gate = await us.pool.query<{ moved: boolean }>(`SELECT gate_tat > '-infinity' AS moved FROM merchant_rate_limits WHERE merchant_id = $1`, [
      id,
    ]);
    expect(gate.rows[0]!.moved).toBe(true);
  });

  it('after a rotation both secrets sign until the overlap ends, then only the new one', async () => {
    const id = `m_${harness.id}_rot`;
    const { signingSecret: oldSecret } = await addMerchant(us.pool, DEV_RULES, {
      id,
      name: 'Rotating',
      endpointUrl: harness.merchants.endpointFor(id),
    });
    const rotated = await rotateSigningSecret(us.pool, id, 3_600_000);
    expect(rotated.signingSecret).not.toBe(oldSecret);
    expect(rotated.merchant).toMatchObject({ hasSigningSecret: true, hasPreviousSecret: true, previousSecretSignsUntil: rotated.previousSignsUntil });
    expect(Date.parse(rotated.previousSignsUntil) - Date.now()).toBeGreaterThan(3_500_000);

    // A receiver that still has only the old secret, and one that has only the new: both verify.
    harness.merchants.script(id, { secrets: [oldSecret] });
    expect(await pingMerchant(us.pool, DEV_RULES, id, 'us')).toMatchObject({ signatures: 2, policyAction: 'delivered' });
    harness.merchants.script(id, { secrets: [rotated.signingSecret] });
    expect(await pingMerchant(us.pool, DEV_RULES, id, 'us')).toMatchObject({ signatures: 2 });
    expect(harness.merchants.requests(id).map((r) => r.verified)).toEqual([true, true]);

    // With no overlap, the old secret signs no more: a receiver holding only it rejects the ping.
    const again = await rotateSigningSecret(us.pool, id, 0);
    harness.merchants.script(id, { secrets: [rotated.signingSecret] });
    expect(await pingMerchant(us.pool, DEV_RULES, id, 'us')).toMatchObject({ signatures: 1 });
    harness.merchants.script(id, { secrets: [again.signingSecret] });
    await pingMerchant(us.pool, DEV_RULES, id, 'us');
    expect(
      harness.merchants
        .requests(id)
        .slice(2)
        .map((r) => r.verified),
    ).toEqual([false, true]);
    await expect(rotateSigningSecret(us.pool, id, -1)).rejects.toMatchObject({ setting: 'overlap' });
  });
});

describe('the CLI', () => {
  it('onboards, rotates and pings from `npm run ops -- merchant`, in text and JSON, and names bad input', async () => {
    const env = { ...process.env };
    Object.assign(process.env, {
      HOLD_SWEEPER_MODE: 'dev',
      HOLD_SWEEPER_REGIONS: 'us',
      DATABASE_URL_US: us.databaseUrl,
      TEMPORAL_ADDRESS: harness.address,
    });
    try {
      const id = `m_${harness.id}_cli`;
      const lines: string[] = [];
      const ops = (...args: string[]) => runOps(['merchant', ...args], (l) => lines.push(l));
      expect(await ops('add', id, '--name', 'Cli Shop', '--url', harness.merchants.endpointFor(id), '--rate', '5', '--burst', '1', '--json')).toBe(0);
      const added = JSON.parse(lines.pop()!) as { signingSecret: string; merchant: { id: string } };
      expect(added.merchant.id).toBe(id);
      harness.merchants.script(id, { secrets: [added.signingSecret] });

      expect(await ops('ping', id)).toBe(0);
      expect(lines.pop()).toMatch(/^ping ping_\S+ to http:\/\/127\.0\.0\.1:\d+\/webhooks\/\S+: HTTP 200 in \d+ ms \(signed with 1 key\(s\)/m);
      expect(await ops('rotate-secret', id, '--overlap', '2h')).toBe(0);
      expect(lines.pop()).toMatch(/signing secret \(shown once.*\): whsec_\S+\nevery webhook is signed with both secrets until \d{4}-/);
      expect(await ops('ping', id, '--json')).toBe(0);
      expect(JSON.parse(lines.pop()!)).toMatchObject({ signatures: 2, statusCode: 200 });
      expect(harness.merchants.requests(id).every((r) => r.verified)).toBe(true);

      expect(await ops('pause', id, '--reason', 'chargeback review')).toBe(0);
      expect(lines.pop()).toMatch(/^merchant \S+ \(Cli Shop\): paused since \S+: chargeback review/);
      expect(await ops('show', id)).toBe(0);
      expect(lines.pop()).not.toMatch(/whsec_/);

      await expect(ops('set', id, '--rate', 'fast')).rejects.toThrow(/--rate="fast" is invalid/);
      // Node's parser reads "-5" as an option: a named error all the same, and the value itself is checked.
      await expect(ops('set', id, '--rate', '-5')).rejects.toMatchObject({ name: 'ConfigError', message: expect.stringMatching(/--rate/) });
      await expect(ops('set', id, '--rate=-5')).rejects.toMatchObject({ name: 'InvalidMerchantSetting', setting: 'rate' });
      await expect(ops('set', id, '--policy', '{oops')).rejects.toThrow(/--policy/);
      await expect(ops('add', `${id}_2`, '--name', 'x', '--url', 'ftp://merchant.example/')).rejects.toThrow(/scheme ftp: is not allowed/);
      await expect(ops('rotate-secret', id, '--overlap', 'a while')).rejects.toThrow(/--overlap/);
      await expect(ops('show', 'm_nobody')).rejects.toMatchObject({ code: 'MerchantNotFound' });
      await expect(ops('frobnicate', id)).rejects.toThrow(/one of add, show, set/);
    } finally {
      process.env = env;
    }
  });
});
