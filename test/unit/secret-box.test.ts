/**
 * Merchant signing secrets sealed at rest (src/delivery/secret-box.ts): the stored format, the binding to a region
 * and a merchant, the key ring's rotation, the named errors (which never carry the value), and how the signing path
 * turns a value that does not open into MissingSigningSecret.
 */
import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { DEV_SECRET_KEYS, isSealed, localKeyRing, SecretUnsealFailed } from '../../src/delivery/secret-box.js';
import {
  generateSigningSecret,
  MissingSigningSecret,
  openSigningKeys,
  signedHeaders,
} from '../../src/delivery/standard-webhooks.js';

const k1 = { id: 'k1', key: randomBytes(32) };
const k2 = { id: 'k2', key: randomBytes(32) };
const ctx = { region: 'us' as const, merchantId: 'm_1' };

/** The error `promise` rejects with. */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (err: unknown) => err as Error,
  );
}

describe('localKeyRing', () => {
  it('seals to sealed:v1:<key id>:<base64url>, a fresh IV each time, and opens back to the secret', async () => {
    const ring = localKeyRing([k1]);
    const secret = generateSigningSecret();
    const [a, b] = [await ring.seal(secret, ctx), await ring.seal(secret, ctx)];
    expect(a).toMatch(/^sealed:v1:k1:[A-Za-z0-9_-]+$/);
    expect(a).not.toBe(b);
    expect(isSealed(a)).toBe(true);
    for (const part of [secret, secret.slice(6), Buffer.from(secret.slice(6), 'base64').toString('hex')])
      expect(a).not.toContain(part);
    expect(await ring.open(a, ctx)).toBe(secret);
    expect(await ring.open(b, ctx)).toBe(secret);
  });

  it("binds each value to its region and merchant: a copy in another merchant's row or another region does not open", async () => {
    const ring = localKeyRing([k1]);
    const sealed = await ring.seal(generateSigningSecret(), ctx);
    for (const elsewhere of [
      { region: 'us' as const, merchantId: 'm_2' },
      { region: 'eu' as const, merchantId: 'm_1' },
    ]) {
      const err = await rejection(ring.open(sealed, elsewhere));
      expect(err).toBeInstanceOf(SecretUnsealFailed);
      expect(err).toMatchObject({ merchantId: elsewhere.merchantId, keyId: 'k1', problem: 'not_authentic' });
      expect(err.message).not.toContain(sealed.split(':')[3]!.slice(0, 12));
    }
  });

  it('rotates: the first key seals, every key opens, and values under an older key need re-sealing', async () => {
    const old = await localKeyRing([k1]).seal('whsec_old', ctx);
    const rotated = localKeyRing([k2, k1]);
    expect(await rotated.open(old, ctx)).toBe('whsec_old');
    expect(rotated.needsReseal(old)).toBe(true);
    const fresh = await rotated.seal('whsec_new', ctx);
    expect(fresh).toMatch(/^sealed:v1:k2:/);
    expect(rotated.needsReseal(fresh)).toBe(false);
    // Clear text always needs sealing.
    expect(rotated.needsReseal('whsec_clear')).toBe(true);
    // k1 dropped from the ring: what is still under it no longer opens, with a name that says what to do.
    const err = await rejection(localKeyRing([k2]).open(old, ctx));
    expect(err).toMatchObject({ name: 'SecretUnsealFailed', keyId: 'k1', problem: 'unknown_key' });
    expect(err.message).toMatch(/not in this region's MERCHANT_SECRET_KEYS/);
  });

  it('never opens clear text (it does not pass through), nor a malformed or altered value; errors never carry the value', async () => {
    const ring = localKeyRing([k1]);
    const clear = generateSigningSecret();
    const notSealed = await rejection(ring.open(clear, ctx));
    expect(notSealed).toMatchObject({ name: 'SecretUnsealFailed', problem: 'not_sealed', keyId: undefined });
    expect(notSealed.message).not.toContain(clear.slice(6, 20));
    for (const malformed of [
      'sealed:v1:k1:',
      'sealed:v1:k1:!!!',
      'sealed:v2:k1:AAAA',
      `sealed:v1:k1:${Buffer.alloc(20).toString('base64url')}`,
    ]) {
      expect(await rejection(ring.open(malformed, ctx))).toMatchObject({ problem: 'malformed' });
    }
    const sealed = await ring.seal(clear, ctx);
    const body = Buffer.from(sealed.split(':')[3]!, 'base64url');
    body[body.length - 20]! ^= 1;
    const altered = `sealed:v1:k1:${body.toString('base64url')}`;
    const err = await rejection(ring.open(altered, ctx));
    expect(err).toMatchObject({ problem: 'not_authentic' });
    expect(err.message).not.toContain(body.toString('base64url').slice(0, 12));
  });

  it('has a fixed dev ring (id dev), the same in every process and every release', () => {
    // Pinned: a changed dev key would leave every local ledger's sealed secrets unopenable.
    const pinned = createHash('sha256').update('hold-sweeper dev merchant-secret key: protects nothing').digest();
    expect(DEV_SECRET_KEYS).toEqual([{ id: 'dev', key: pinned }]);
  });
});

describe('openSigningKeys (the signing path)', () => {
  const atRest = { region: 'us' as const, sealer: localKeyRing([k1]) };

  it('opens the current and previous secrets right before signing; the reference verifier accepts either', async () => {
    const [current, previous] = [generateSigningSecret(), generateSigningSecret()];
    const keys = await openSigningKeys(
      atRest,
      'm_1',
      await atRest.sealer.seal(current, ctx),
      await atRest.sealer.seal(previous, ctx),
    );
    const body = '{"type":"hold.released"}';
    const headers = signedHeaders(keys, 'wh_1', Math.floor(Date.now() / 1000), body);
    for (const secret of [current, previous])
      expect(() => new Webhook(secret).verify(body, { ...headers })).not.toThrow();
  });

  it('a secret that does not open is MissingSigningSecret (unopenable), its cause named, like a missing one', async () => {
    const elsewhere = await atRest.sealer.seal(generateSigningSecret(), { region: 'us', merchantId: 'm_other' });
    const err = await rejection(openSigningKeys(atRest, 'm_1', elsewhere, null));
    expect(err).toBeInstanceOf(MissingSigningSecret);
    expect(err).toMatchObject({
      merchantId: 'm_1',
      problem: 'unopenable',
      cause: { name: 'SecretUnsealFailed', keyId: 'k1' },
    });
    expect(err.message).toMatch(/does not open under key "k1".*handled as a missing one: missing_secret/);
    expect(await rejection(openSigningKeys(atRest, 'm_1', null, null))).toMatchObject({
      name: 'MissingSigningSecret',
      problem: 'missing',
    });
    // Clear text in the column is refused too, never signed with.
    expect(await rejection(openSigningKeys(atRest, 'm_1', generateSigningSecret(), null))).toMatchObject({
      problem: 'unopenable',
      cause: { problem: 'not_sealed' },
    });
  });
});
