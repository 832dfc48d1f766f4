/**
 * Merchant endpoints managed from the ops CLI (docs/webhooks.md): onboarded, changed, paused, rotated and pinged
 * against a real ledger and a real HTTP receiver that verifies every request with the Standard Webhooks reference
 * verifier.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidEndpointUrl } from '../../src/delivery/endpoint.js';
import { InvalidDeliveryPolicyError } from '../../src/delivery/policy.js';
import { InvalidMerchantSetting } from '../../src/errors.js';
import { runOps } from '../../src/operations/cli.js';
import {
  addMerchant,
  pauseMerchant,
  pingMerchant,
  resumeMerchant,
  rotateSigningSecret,
  setDestination,
  setMerchant,
  showDestination,
  showMerchant,
} from '../../src/operations/merchants.js';
import { disableMerchant } from '../../src/sql/merchants.js';
import { createMerchantBudget } from '../../src/sql/merchant-budget.js';
import { localKeyRing, type SecretsAtRest } from '../../src/delivery/secret-box.js';
import { keyRingVariable } from '../../dev/worker-processes.js';
import { catalogMismatches } from '../support/event-types.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { seedNight } from '../support/ledger.js';

const DEV_RULES = { allowInsecureHttp: true, allowPrivateAddresses: true, trustedNetworks: [] };
const PRODUCTION_RULES = {
  allowInsecureHttp: false,
  allowPrivateAddresses: false,
  trustedNetworks: [],
  allowedPorts: [443],
};

let harness: Harness;
let us: TestRegion;
let secrets: SecretsAtRest;
beforeAll(async () => {
  harness = await openHarness();
  us = await harness.region('us');
  secrets = { region: 'us', sealer: localKeyRing(us.config.secretKeys) };
});
afterAll(async () => {
  await harness?.close();
});

const merchantCount = async () =>
  Number((await us.pool.query<{ n: string }>('SELECT count(*) AS n FROM merchants')).rows[0]!.n);

/**
 * Asserts that a dump of the merchants table (every column of every row, as text) shows none of `handedOut` (the
 * whsec_ secrets handed to merchants): neither whole, nor their base64 key material, nor any whsec_ at all.
 */
async function expectNoSecretInDump(handedOut: readonly string[]): Promise<void> {
  const dump = (await us.pool.query<{ row: string }>('SELECT m::text AS row FROM merchants m')).rows
    .map((r) => r.row)
    .join('\n');
  expect(dump).toContain('sealed:v1:');
  expect(dump).not.toContain('whsec_');
  for (const secret of handedOut) {
    const material = secret.replace(/^whsec_/, '');
    expect(dump).not.toContain(material);
    // Nor the key bytes in another spelling (hex, unpadded base64).
    expect(dump).not.toContain(Buffer.from(material, 'base64').toString('hex'));
    expect(dump).not.toContain(material.replace(/=+$/, '').slice(0, 16));
  }
}

describe('merchant add', () => {
  it('onboards a merchant a delivery can send to, and hands out its secret once', async () => {
    const id = `m_${harness.id}_add`;
    const { merchant, signingSecret } = await addMerchant(us.pool, DEV_RULES, secrets, {
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
    // Its sends are paced by its own budget (every worker shares it), at its own rate, nothing queued or pushed back
    // before its first send.
    expect(merchant.budget).toMatchObject({
      destination: null,
      sharedWith: 0,
      ratePerSecond: 2.5,
      nextSlotAt: null,
      pausedUntil: null,
    });
    await expect(
      addMerchant(us.pool, DEV_RULES, secrets, { id, name: 'again', endpointUrl: 'http://127.0.0.1:1/x' }),
    ).rejects.toMatchObject({
      code: 'MerchantExists',
    });
  });

  it('refuses bad input with a named error and writes nothing', async () => {
    const before = await merchantCount();
    const add = (overrides: Record<string, unknown>, rules = DEV_RULES) =>
      addMerchant(us.pool, rules, secrets, {
        id: `m_${harness.id}_bad`,
        name: 'Bad',
        endpointUrl: 'https://merchant.example/hooks',
        ...overrides,
      });
    await expect(add({ endpointUrl: 'not a url' })).rejects.toBeInstanceOf(InvalidEndpointUrl);
    await expect(add({ endpointUrl: 'http://merchant.example/hooks' }, PRODUCTION_RULES)).rejects.toThrow(
      /scheme http: is not allowed/,
    );
    await expect(add({ endpointUrl: 'https://10.0.0.7/hooks' }, PRODUCTION_RULES)).rejects.toThrow(
      /private, loopback or reserved/,
    );
    await expect(add({ endpointUrl: 'https://[2002:a9fe:a9fe::1]/hooks' }, PRODUCTION_RULES)).rejects.toThrow(
      /not global unicast/,
    );
    await expect(add({ endpointUrl: 'https://merchant.example:22/hooks' }, PRODUCTION_RULES)).rejects.toThrow(
      /port 22 is not allowed/,
    );
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
    await addMerchant(us.pool, DEV_RULES, secrets, { id, name: 'Set Me', endpointUrl: 'https://merchant.example/a' });
    expect(await setMerchant(us.pool, DEV_RULES, id, { ratePerSecond: 50 })).toMatchObject({
      ratePerSecond: 50,
      burst: 1,
      name: 'Set Me',
    });
    await expect(
      setMerchant(us.pool, PRODUCTION_RULES, id, { endpointUrl: 'https://127.0.0.1/x' }),
    ).rejects.toBeInstanceOf(InvalidEndpointUrl);
    await expect(setMerchant(us.pool, DEV_RULES, id, {})).rejects.toMatchObject({ setting: 'changes' });
    await expect(setMerchant(us.pool, DEV_RULES, 'm_nobody', { burst: 2 })).rejects.toMatchObject({
      code: 'MerchantNotFound',
    });
    expect((await showMerchant(us.pool, id)).endpointUrl).toBe('https://merchant.example/a');
    // The ceiling of what the merchant may declare itself: set by operators, checked like the rate.
    expect(await setMerchant(us.pool, DEV_RULES, id, { rateCeiling: 20, burstCeiling: 4 })).toMatchObject({
      rateCeiling: 20,
      burstCeiling: 4,
      ratePerSecond: 50,
    });
    await expect(setMerchant(us.pool, DEV_RULES, id, { rateCeiling: 0 })).rejects.toMatchObject({
      name: 'InvalidMerchantSetting',
      setting: 'rate ceiling',
    });
    await expect(setMerchant(us.pool, DEV_RULES, id, { burstCeiling: 1.5 })).rejects.toMatchObject({
      setting: 'burst ceiling',
    });

    const paused = await pauseMerchant(us.pool, id, 'merchant asked: maintenance until 06:00');
    expect(paused).toMatchObject({
      changed: true,
      merchant: { status: 'paused', statusReason: 'merchant asked: maintenance until 06:00' },
    });
    expect((await pauseMerchant(us.pool, id, 'again')).changed).toBe(false);
    await expect(pauseMerchant(us.pool, id, ' ')).rejects.toMatchObject({ setting: 'reason' });
    expect(await resumeMerchant(us.pool, id)).toMatchObject({
      changed: true,
      merchant: { status: 'active', statusReason: null },
    });
    // A merchant disabled by a 410 Gone is re-enabled the same way.
    await disableMerchant(us.pool, id, '410 Gone on webhook wh_x');
    expect((await resumeMerchant(us.pool, id)).merchant.status).toBe('active');
  });
});

describe('merchant ping and rotate-secret', () => {
  it('pings with a signed event the reference verifier accepts, within the budget, and says what the policy would do', async () => {
    const id = `m_${harness.id}_ping`;
    const { signingSecret } = await addMerchant(us.pool, DEV_RULES, secrets, {
      id,
      name: 'Ping',
      endpointUrl: harness.merchants.endpointFor(id),
    });
    harness.merchants.script(id, {
      secrets: [signingSecret],
      responses: [{ status: 204 }, { status: 503, body: 'down for a moment' }],
    });
    const ok = await pingMerchant(us.pool, DEV_RULES, secrets, id);
    expect(ok).toMatchObject({ statusCode: 204, policyAction: 'delivered', signatures: 1 });
    const [received] = harness.merchants.requests(id);
    expect(received).toMatchObject({ verified: true, webhookId: ok.webhookId });
    expect(JSON.parse(received!.body)).toMatchObject({
      type: 'merchant.ping',
      data: { merchant_id: id, region: 'us' },
    });
    expect(catalogMismatches([received!.body])).toEqual([]);
    // Nothing secret in what the operator sees.
    expect(JSON.stringify(ok)).not.toContain(signingSecret.slice(6));

    const down = await pingMerchant(us.pool, DEV_RULES, secrets, id);
    expect(down).toMatchObject({
      statusCode: 503,
      policyAction: 'retry',
      policyRule: '5xx',
      responseExcerpt: 'down for a moment',
    });
    // The budget was used: the gate of the merchant's budget moved.
    const gate = await us.pool.query<{ moved: boolean }>(
      `SELECT b.gate_tat > '-infinity' AS moved FROM send_budgets b WHERE b.key = 'merchant:' || $1`,
      [id],
    );
    expect(gate.rows[0]!.moved).toBe(true);
  });

  it('after a rotation both secrets sign until the overlap ends, then only the new one', async () => {
    const id = `m_${harness.id}_rot`;
    const { signingSecret: oldSecret } = await addMerchant(us.pool, DEV_RULES, secrets, {
      id,
      name: 'Rotating',
      endpointUrl: harness.merchants.endpointFor(id),
    });
    const sealedColumns = async () =>
      (
        await us.pool.query<{ current: string; previous: string | null }>(
          'SELECT signing_secret AS current, previous_signing_secret AS previous FROM merchants WHERE id = $1',
          [id],
        )
      ).rows[0]!;
    const sealedOld = (await sealedColumns()).current;
    const rotatedAfter = Date.now();
    const rotated = await rotateSigningSecret(us.pool, secrets, id, 3_600_000);
    // The current sealed value moved to previous as it was; the new one is sealed for this merchant too.
    expect(await sealedColumns()).toEqual({ current: expect.stringMatching(/^sealed:v1:test:/), previous: sealedOld });
    expect(await secrets.sealer.open((await sealedColumns()).current, { region: 'us', merchantId: id })).toBe(
      rotated.signingSecret,
    );
    expect(rotated.signingSecret).not.toBe(oldSecret);
    expect(rotated.merchant).toMatchObject({
      hasSigningSecret: true,
      hasPreviousSecret: true,
      previousSecretSignsUntil: rotated.previousSignsUntil,
    });
    // The overlap runs its hour from the rotation, by the ledger's clock (past the moment before it).
    expect(Date.parse(rotated.previousSignsUntil)).toBeGreaterThanOrEqual(rotatedAfter + 3_600_000);

    // A receiver that still has only the old secret, and one that has only the new: both verify.
    harness.merchants.script(id, { secrets: [oldSecret] });
    expect(await pingMerchant(us.pool, DEV_RULES, secrets, id)).toMatchObject({
      signatures: 2,
      policyAction: 'delivered',
    });
    harness.merchants.script(id, { secrets: [rotated.signingSecret] });
    expect(await pingMerchant(us.pool, DEV_RULES, secrets, id)).toMatchObject({ signatures: 2 });
    expect(harness.merchants.requests(id).map((r) => r.verified)).toEqual([true, true]);

    // With no overlap, the old secret signs no more: a receiver holding only it rejects the ping.
    const again = await rotateSigningSecret(us.pool, secrets, id, 0);
    harness.merchants.script(id, { secrets: [rotated.signingSecret] });
    expect(await pingMerchant(us.pool, DEV_RULES, secrets, id)).toMatchObject({ signatures: 1 });
    harness.merchants.script(id, { secrets: [again.signingSecret] });
    await pingMerchant(us.pool, DEV_RULES, secrets, id);
    expect(
      harness.merchants
        .requests(id)
        .slice(2)
        .map((r) => r.verified),
    ).toEqual([false, true]);
    await expect(rotateSigningSecret(us.pool, secrets, id, -1)).rejects.toMatchObject({ setting: 'overlap' });
    await expectNoSecretInDump([oldSecret, rotated.signingSecret, again.signingSecret]);
  });

  it('a secret sealed for another merchant does not open here: the ping fails with a named error, nothing is sent', async () => {
    const [a, b] = [`m_${harness.id}_copy_a`, `m_${harness.id}_copy_b`];
    for (const id of [a, b])
      await addMerchant(us.pool, DEV_RULES, secrets, { id, name: id, endpointUrl: harness.merchants.endpointFor(id) });
    await us.pool.query(
      'UPDATE merchants SET signing_secret = (SELECT signing_secret FROM merchants WHERE id = $1) WHERE id = $2',
      [a, b],
    );
    const err = (await pingMerchant(us.pool, DEV_RULES, secrets, b).catch((e: unknown) => e)) as Error;
    expect(err).toMatchObject({ name: 'MissingSigningSecret', merchantId: b, problem: 'unopenable' });
    expect(err.cause).toMatchObject({
      name: 'SecretUnsealFailed',
      merchantId: b,
      keyId: 'test',
      problem: 'not_authentic',
    });
    expect(err.message).toMatch(/does not open under key "test".*missing_secret/);
    expect(harness.merchants.requests(b)).toHaveLength(0);
  });
});

describe('merchant secrets at rest', () => {
  it('no secret is readable in a dump of the table after merchant add, rotate-secret and seeding', async () => {
    const id = `m_${harness.id}_dump`;
    const added = await addMerchant(us.pool, DEV_RULES, secrets, {
      id,
      name: 'Dump',
      endpointUrl: 'https://merchant.example/dump',
    });
    const rotated = await rotateSigningSecret(us.pool, secrets, id, 3_600_000);
    const night = await seedNight(
      us.pool,
      'us',
      `${harness.id}dump`,
      { expired: 1, merchants: 3 },
      harness.merchants,
      us.config.secretKeys,
    );
    const handedOut = [added.signingSecret, rotated.signingSecret, ...night.secrets.values()];
    await expectNoSecretInDump(handedOut);
    // Each stored value opens, with this region's ring and for its own merchant only, to what the merchant holds.
    const open = (sealed: string, merchantId: string) => secrets.sealer.open(sealed, { region: 'us', merchantId });
    const row = async (merchantId: string) =>
      (await us.pool.query('SELECT signing_secret, previous_signing_secret FROM merchants WHERE id = $1', [merchantId]))
        .rows[0];
    expect(await open((await row(id)).signing_secret, id)).toBe(rotated.signingSecret);
    expect(await open((await row(id)).previous_signing_secret, id)).toBe(added.signingSecret);
    for (const [merchantId, secret] of night.secrets)
      expect(await open((await row(merchantId)).signing_secret, merchantId)).toBe(secret);
    await expect(open((await row(id)).signing_secret, night.merchantIds[0]!)).rejects.toMatchObject({
      name: 'SecretUnsealFailed',
    });
    await expect(
      localKeyRing(us.config.secretKeys).open((await row(id)).signing_secret, { region: 'eu', merchantId: id }),
    ).rejects.toMatchObject({
      problem: 'not_authentic',
    });
  });

  it('the table refuses a secret in clear text, whoever writes it', async () => {
    const id = `m_${harness.id}_clear`;
    await addMerchant(us.pool, DEV_RULES, secrets, {
      id,
      name: 'Clear',
      endpointUrl: 'https://merchant.example/clear',
    });
    for (const column of ['signing_secret', 'previous_signing_secret']) {
      await expect(
        us.pool.query(`UPDATE merchants SET ${column} = $2 WHERE id = $1`, [id, 'whsec_' + 'A'.repeat(32)]),
      ).rejects.toThrow(/merchants_signing_secrets_sealed/);
    }
  });
});

describe('merchant show: the budget', () => {
  it('says which budget paces the merchant (a declared destination: with whom it shares it), a push-back still running, and its backlog', async () => {
    const [a, b, c] = [`m_${harness.id}_bud_a`, `m_${harness.id}_bud_b`, `m_${harness.id}_bud_c`];
    const url = harness.merchants.endpointFor(a, { sharedOrigin: true });
    const platform = `p_${harness.id}`;
    // A merchant on the same host names no destination: its budget stays its own.
    await addMerchant(us.pool, DEV_RULES, secrets, {
      id: c,
      name: c,
      endpointUrl: url.replace(a, c),
      ratePerSecond: 3,
    });
    await expect(
      addMerchant(us.pool, DEV_RULES, secrets, { id: a, name: a, endpointUrl: url, destinationId: platform }),
    ).rejects.toThrow(InvalidMerchantSetting);
    expect(await setDestination(us.pool, { id: platform, ratePerSecond: 4, maxInFlight: 8 })).toEqual({
      id: platform,
      ratePerSecond: 4,
      maxInFlight: 8,
      note: null,
      merchants: [],
    });
    await addMerchant(us.pool, DEV_RULES, secrets, {
      id: a,
      name: a,
      endpointUrl: url,
      ratePerSecond: 10,
      destinationId: platform,
    });
    await addMerchant(us.pool, DEV_RULES, secrets, {
      id: b,
      name: b,
      endpointUrl: url.replace(a, b),
      destinationId: platform,
    });
    const before = (await showMerchant(us.pool, a)).budget;
    expect(before).toMatchObject({
      destination: platform,
      sharedWith: 1,
      ratePerSecond: 4,
      pausedUntil: null,
      backlog: 0,
      drainSeconds: 0,
    });
    expect((await showMerchant(us.pool, c)).budget).toMatchObject({
      destination: null,
      sharedWith: 0,
      ratePerSecond: 3,
    });
    const pushedAfter = Date.now();
    await createMerchantBudget(us.pool).pushBack(b, 60_000, 'HTTP 429 on wh_test');
    const after = (await showMerchant(us.pool, a)).budget;
    expect(after.pauseReason).toBe('HTTP 429 on wh_test');
    // A minute from the push-back, by the ledger's clock (past the moment before it).
    expect(Date.parse(after.pausedUntil!)).toBeGreaterThanOrEqual(pushedAfter + 60_000);
    // Not the other merchant on the host: its budget is its own.
    expect((await showMerchant(us.pool, c)).budget.pausedUntil).toBeNull();
    // Leaving the destination: its own budget again.
    await setMerchant(us.pool, DEV_RULES, b, { destinationId: null });
    expect((await showMerchant(us.pool, b)).budget).toMatchObject({ destination: null, ratePerSecond: 5 });
    expect((await showDestination(us.pool, platform)).merchants).toEqual([a]);
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
      MERCHANT_SECRET_KEYS_US: keyRingVariable(us.config.secretKeys),
    });
    try {
      const id = `m_${harness.id}_cli`;
      const lines: string[] = [];
      const ops = (...args: string[]) => runOps(['merchant', ...args], (l) => lines.push(l));
      expect(
        await ops(
          'add',
          id,
          '--name',
          'Cli Shop',
          '--url',
          harness.merchants.endpointFor(id),
          '--rate',
          '5',
          '--burst',
          '1',
          '--json',
        ),
      ).toBe(0);
      const added = JSON.parse(lines.pop()!) as { signingSecret: string; merchant: { id: string } };
      expect(added.merchant.id).toBe(id);
      harness.merchants.script(id, { secrets: [added.signingSecret] });

      expect(await ops('ping', id)).toBe(0);
      expect(lines.pop()).toMatch(
        /^ping ping_\S+ to http:\/\/127\.\d+\.\d+\.\d+:\d+\/webhooks\/\S+: HTTP 200 in \d+ ms \(signed with 1 key\(s\)/m,
      );
      expect(await ops('rotate-secret', id, '--overlap', '2h')).toBe(0);
      const rotatedLine = lines.pop()!;
      expect(rotatedLine).toMatch(
        /signing secret \(shown once.*\): whsec_\S+\nevery webhook is signed with both secrets until \d{4}-/,
      );
      await expectNoSecretInDump([added.signingSecret, /(whsec_\S+)/.exec(rotatedLine)![1]!]);
      expect(await ops('ping', id, '--json')).toBe(0);
      expect(JSON.parse(lines.pop()!)).toMatchObject({ signatures: 2, statusCode: 200 });
      expect(harness.merchants.requests(id).every((r) => r.verified)).toBe(true);

      expect(await ops('pause', id, '--reason', 'chargeback review')).toBe(0);
      expect(lines.pop()).toMatch(/^merchant \S+ \(Cli Shop\): paused since \S+: chargeback review/);
      expect(await ops('show', id)).toBe(0);
      expect(lines.pop()).not.toMatch(/whsec_/);

      await expect(ops('set', id, '--rate', 'fast')).rejects.toThrow(/--rate="fast" is invalid/);
      // "-5" after --rate reads as an option and is refused: a named error all the same; with = it is a value, checked.
      await expect(ops('set', id, '--rate', '-5')).rejects.toMatchObject({
        name: 'ConfigError',
        message: expect.stringMatching(/--rate/),
      });
      await expect(ops('set', id, '--rate=-5')).rejects.toMatchObject({
        name: 'InvalidMerchantSetting',
        setting: 'rate',
      });
      await expect(ops('set', id, '--policy', '{oops')).rejects.toThrow(/--policy/);
      await expect(ops('add', `${id}_2`, '--name', 'x', '--url', 'ftp://merchant.example/')).rejects.toThrow(
        /scheme ftp: is not allowed/,
      );
      await expect(ops('rotate-secret', id, '--overlap', 'a while')).rejects.toThrow(/--overlap/);
      await expect(ops('show', 'm_nobody')).rejects.toMatchObject({ code: 'MerchantNotFound' });
      await expect(ops('frobnicate', id)).rejects.toThrow(/one of add, show, set/);
    } finally {
      process.env = env;
    }
  });
});
