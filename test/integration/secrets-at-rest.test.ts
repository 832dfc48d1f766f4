/**
 * Merchant signing secrets at rest in a real ledger: migrate's sealing step seals clear text and re-seals what is under
 * a retiring key (then validates the constraint, idempotently, with two processes starting at once); rotated-out
 * secrets are erased when their overlap ends; and a night delivered with sealed secrets verifies at the merchants with
 * the Standard Webhooks reference library.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { SEALED_SECRETS_CONSTRAINT } from '../../src/db/secrets-at-rest.js';
import { localKeyRing, type SecretsAtRest } from '../../src/delivery/secret-box.js';
import { generateSigningSecret } from '../../src/delivery/standard-webhooks.js';
import { addMerchant, pingMerchant, rotateSigningSecret } from '../../src/operations/merchants.js';
import { startSecretErasure } from '../../src/workers/secret-erasure.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { seedNight } from '../support/ledger.js';

const DEV_RULES = { allowInsecureHttp: true, allowPrivateAddresses: true, trustedNetworks: [] };
const kOld = { id: 'k-old', key: randomBytes(32) };
const kNew = { id: 'k-new', key: randomBytes(32) };

let harness: Harness;
beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await harness?.close();
});

/** Every column of every merchant row, as text: what a dump, a backup or a read-only login shows. */
async function dump(pool: pg.Pool): Promise<string> {
  return (await pool.query<{ row: string }>('SELECT m::text AS row FROM merchants m ORDER BY id')).rows
    .map((r) => r.row)
    .join('\n');
}

async function secretColumns(pool: pg.Pool, merchantId: string) {
  const { rows } = await pool.query<{ current: string | null; previous: string | null; until: Date | null }>(
    `SELECT signing_secret AS current, previous_signing_secret AS previous, previous_signing_secret_until AS until FROM merchants WHERE id = $1`,
    [merchantId],
  );
  return rows[0]!;
}

async function constraintValidated(pool: pg.Pool): Promise<boolean | undefined> {
  const { rows } = await pool.query<{ convalidated: boolean }>(
    `SELECT convalidated FROM pg_constraint WHERE conrelid = 'merchants'::regclass AND conname = $1`,
    [SEALED_SECRETS_CONSTRAINT],
  );
  return rows[0]?.convalidated;
}

describe('the sealing step of migrate', () => {
  it('seals clear text and re-seals a retiring key, once, with two processes starting together; then refuses clear text', async () => {
    // A ledger holding clear text, the constraint not yet validated: what the step must seal, then validate.
    const region = await harness.region('us', { secretKeys: [kNew, kOld] });
    const { pool } = region;
    const { rows: checks } = await pool.query<{ def: string }>(
      `SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = 'merchants'::regclass AND conname = $1`,
      [SEALED_SECRETS_CONSTRAINT],
    );
    await pool.query(`ALTER TABLE merchants DROP CONSTRAINT ${SEALED_SECRETS_CONSTRAINT}`);
    const clear = {
      a: generateSigningSecret(),
      aPrevious: generateSigningSecret(),
      b: generateSigningSecret(),
      bPrevious: generateSigningSecret(),
    };
    const underOld = generateSigningSecret();
    const ctx = (merchantId: string) => ({ region: 'us' as const, merchantId });
    const sealedUnderOld = await localKeyRing([kOld]).seal(underOld, ctx('m_c'));
    const sealedUnderGone = await localKeyRing([{ id: 'gone', key: randomBytes(32) }]).seal(
      generateSigningSecret(),
      ctx('m_d'),
    );
    await pool.query(
      `INSERT INTO merchants (id, name, endpoint_url, signing_secret, previous_signing_secret, previous_signing_secret_until) VALUES
         ('m_a', 'A', 'https://a.example/h', $1, $2, now() + interval '1 hour'),
         ('m_b', 'B', 'https://b.example/h', $3, $4, now() - interval '1 minute'),
         ('m_c', 'C', 'https://c.example/h', $5, NULL, NULL),
         ('m_d', 'D', 'https://d.example/h', $6, NULL, NULL),
         ('m_e', 'E', 'https://e.example/h', NULL, NULL, NULL)`,
      [clear.a, clear.aPrevious, clear.b, clear.bPrevious, sealedUnderOld, sealedUnderGone],
    );
    expect(await dump(pool)).toContain('whsec_');
    await pool.query(`ALTER TABLE merchants ADD CONSTRAINT ${SEALED_SECRETS_CONSTRAINT} ${checks[0]!.def} NOT VALID`);
    expect(await constraintValidated(pool)).toBe(false);

    // Two processes starting at once: no migration left to apply, the step runs under the same lock in both.
    const atRest: SecretsAtRest = { region: 'us', sealer: localKeyRing([kNew, kOld]) };
    const other = new pg.Pool({ connectionString: region.databaseUrl });
    try {
      const applied = await Promise.all([migrate(pool, atRest), migrate(other, atRest)]);
      expect(applied.flat()).toEqual([]);
    } finally {
      await other.end();
    }

    const open = (sealed: string | null, merchantId: string) => atRest.sealer.open(sealed!, ctx(merchantId));
    const [a, b, c, d, e] = await Promise.all(['m_a', 'm_b', 'm_c', 'm_d', 'm_e'].map((id) => secretColumns(pool, id)));
    expect(a!.current).toMatch(/^sealed:v1:k-new:/);
    expect(await open(a!.current, 'm_a')).toBe(clear.a);
    expect(await open(a!.previous, 'm_a')).toBe(clear.aPrevious);
    // m_b's previous secret was past its overlap: erased, not sealed.
    expect(await open(b!.current, 'm_b')).toBe(clear.b);
    expect(b).toMatchObject({ previous: null, until: null });
    // Under the retiring key: re-sealed under the current one, the same secret inside.
    expect(c!.current).toMatch(/^sealed:v1:k-new:/);
    expect(await open(c!.current, 'm_c')).toBe(underOld);
    // Under a key the ring no longer has: left as it is (its deliveries quarantine as missing_secret, named).
    expect(d!.current).toBe(sealedUnderGone);
    await expect(open(d!.current, 'm_d')).rejects.toMatchObject({
      name: 'SecretUnsealFailed',
      keyId: 'gone',
      problem: 'unknown_key',
    });
    expect(e!.current).toBeNull();

    const sealedDump = await dump(pool);
    expect(sealedDump).not.toContain('whsec_');
    for (const secret of [...Object.values(clear), underOld]) expect(sealedDump).not.toContain(secret.slice(6));
    expect(await constraintValidated(pool)).toBe(true);

    // Idempotent: another start changes nothing; k-old can now leave the ring.
    expect(await migrate(pool, atRest)).toEqual([]);
    expect(await dump(pool)).toBe(sealedDump);
    expect(await localKeyRing([kNew]).open(c!.current!, ctx('m_c'))).toBe(underOld);

    // From now on clear text is refused, in either column.
    await expect(
      pool.query(`UPDATE merchants SET signing_secret = $1 WHERE id = 'm_e'`, [generateSigningSecret()]),
    ).rejects.toThrow(new RegExp(SEALED_SECRETS_CONSTRAINT));
    await expect(
      pool.query(`UPDATE merchants SET previous_signing_secret = $1 WHERE id = 'm_e'`, [generateSigningSecret()]),
    ).rejects.toThrow(new RegExp(SEALED_SECRETS_CONSTRAINT));
  });

  it("a sealed value copied into another merchant's row does not open there, and the step leaves it for a human", async () => {
    const region = await harness.region('us');
    const atRest: SecretsAtRest = { region: 'us', sealer: localKeyRing(region.config.secretKeys) };
    for (const id of ['m_src', 'm_dst'])
      await addMerchant(region.pool, DEV_RULES, atRest, { id, name: id, endpointUrl: 'https://x.example/h' });
    await region.pool.query(
      `UPDATE merchants SET signing_secret = (SELECT signing_secret FROM merchants WHERE id = 'm_src') WHERE id = 'm_dst'`,
    );
    const copied = (await secretColumns(region.pool, 'm_dst')).current!;
    await expect(atRest.sealer.open(copied, { region: 'us', merchantId: 'm_dst' })).rejects.toMatchObject({
      name: 'SecretUnsealFailed',
      merchantId: 'm_dst',
      problem: 'not_authentic',
    });
    // A new current key: the step re-seals m_src, cannot open m_dst's copy, and leaves it as it was.
    const rotatedRing = { region: 'us' as const, sealer: localKeyRing([kNew, ...region.config.secretKeys]) };
    expect(await migrate(region.pool, rotatedRing)).toEqual([]);
    expect((await secretColumns(region.pool, 'm_src')).current).toMatch(/^sealed:v1:k-new:/);
    expect((await secretColumns(region.pool, 'm_dst')).current).toBe(copied);
  });
});

describe('erasure of rotated-out secrets', () => {
  it('every worker erases a previous secret once its overlap has ended; one still in its overlap, or without an end, stays', async () => {
    const region = await harness.region('us');
    const atRest: SecretsAtRest = { region: 'us', sealer: localKeyRing(region.config.secretKeys) };
    const ids = [`m_${harness.id}_ended`, `m_${harness.id}_overlap`, `m_${harness.id}_noend`];
    for (const id of ids) {
      await addMerchant(region.pool, DEV_RULES, atRest, {
        id,
        name: id,
        endpointUrl: harness.merchants.endpointFor(id),
      });
      await rotateSigningSecret(region.pool, atRest, id, 3_600_000);
    }
    const [ended, overlap, noEnd] = ids as [string, string, string];
    // Backdated rather than waited for: this overlap ended a second ago; the other has no end.
    await region.pool.query(
      `UPDATE merchants SET previous_signing_secret_until = now() - interval '1 second' WHERE id = $1`,
      [ended],
    );
    await region.pool.query(`UPDATE merchants SET previous_signing_secret_until = NULL WHERE id = $1`, [noEnd]);

    const erasure = startSecretErasure({ region: 'us', pool: region.pool, intervalMs: 100 });
    try {
      await expect.poll(async () => (await secretColumns(region.pool, ended)).previous, { timeout: 10_000 }).toBeNull();
    } finally {
      erasure.stop();
    }
    expect(await secretColumns(region.pool, ended)).toMatchObject({
      previous: null,
      until: null,
      current: expect.stringMatching(/^sealed:/),
    });
    expect((await secretColumns(region.pool, overlap)).previous).toMatch(/^sealed:/);
    expect((await secretColumns(region.pool, noEnd)).previous).toMatch(/^sealed:/);
    // It signs with the current secret alone now.
    expect(await pingMerchant(region.pool, DEV_RULES, atRest, ended)).toMatchObject({ signatures: 1 });
  });

  it('the migration step erases them too, once at start-up', async () => {
    const region = await harness.region('us');
    const atRest: SecretsAtRest = { region: 'us', sealer: localKeyRing(region.config.secretKeys) };
    const id = `m_${harness.id}_startup`;
    await addMerchant(region.pool, DEV_RULES, atRest, { id, name: id, endpointUrl: 'https://x.example/h' });
    await rotateSigningSecret(region.pool, atRest, id, 0);
    expect((await secretColumns(region.pool, id)).previous).toMatch(/^sealed:/);
    await migrate(region.pool, atRest);
    expect(await secretColumns(region.pool, id)).toMatchObject({ previous: null, until: null });
  });
});

describe('a night with sealed secrets', () => {
  let us: TestRegion;
  beforeAll(async () => {
    // The ring after a key's retirement: the night is seeded under k-old, the step re-seals it, the worker has k-new
    // only.
    us = await harness.region('us', { secretKeys: [kNew] });
  });

  it('every webhook is signed with the opened secret and verifies at the merchant with the reference library; nothing readable at rest', async () => {
    const night = await seedNight(
      us.pool,
      'us',
      `${harness.id}sealed`,
      { expired: 12, merchants: 4 },
      harness.merchants,
      [kOld],
    );
    await migrate(us.pool, { region: 'us', sealer: localKeyRing([kNew, kOld]) });
    await harness.startWorker(us);
    await us.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-sealed`,
      args: [{ region: 'us', releaseWaitMs: 60_000 }],
    });
    const statuses = async () =>
      (
        await us.pool.query<{ status: string }>('SELECT status FROM webhook_deliveries WHERE hold_id = ANY($1)', [
          night.expired.map((h) => h.id),
        ])
      ).rows.map((r) => r.status);
    await expect
      .poll(async () => (await statuses()).filter((s) => s !== 'delivered').length, { timeout: 60_000, interval: 200 })
      .toBe(0);
    expect(await statuses()).toHaveLength(12);
    const requests = night.merchantIds.flatMap((id) => harness.merchants.requests(id));
    expect(requests).toHaveLength(12);
    expect(requests.every((r) => r.verified)).toBe(true);
    const atRest = await dump(us.pool);
    expect(atRest).not.toContain('whsec_');
    for (const secret of night.secrets.values()) expect(atRest).not.toContain(secret.slice(6));
  });
});
