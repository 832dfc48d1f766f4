/**
 * Seeding for the demo night, the tests and the benchmark: merchants, accounts and holds written as the
 * upstream authorisation system would write them (each account's held balance is the sum of its holds).
 * Deterministic for a given seed, so a failing run can be reproduced.
 */
import type pg from 'pg';
import { inTransaction } from '../src/db/pool.js';
import type { Region } from '../src/contracts/regions.js';
import type { SecretsAtRest } from '../src/delivery/secret-box.js';

export interface MerchantSeed {
  id: string;
  name?: string;
  endpointUrl: string;
  /** In clear (whsec_...): `insertMerchants` seals it, as `merchant add` does. */
  signingSecret?: string | null;
  ratePerSecond?: number;
  burst?: number;
}

export interface HoldSeed {
  id: string;
  accountId: string;
  merchantId: string;
  amountMinor: number;
  currency: string;
  /** Seconds relative to now: negative = already expired. */
  expiresInSeconds: number;
}

export interface AccountSeed {
  id: string;
  currency: string;
  availableMinor: number;
}

/** mulberry32: a tiny, well-known seeded PRNG; plenty for shaping test data. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Inserts the merchants, each secret sealed with `secrets`: the ring the region's workers open with (the dev ring for
 * `npm start` and a dev worker; whatever MERCHANT_SECRET_KEYS_<R> the workers of a test or a benchmark are given).
 */
export async function insertMerchants(
  pool: pg.Pool,
  secrets: SecretsAtRest,
  merchants: readonly MerchantSeed[],
): Promise<void> {
  if (merchants.length === 0) return;
  const sealed = await Promise.all(
    merchants.map((m) =>
      m.signingSecret ? secrets.sealer.seal(m.signingSecret, { region: secrets.region, merchantId: m.id }) : null,
    ),
  );
  await pool.query(
    `INSERT INTO merchants (id, name, endpoint_url, signing_secret, rate_per_second, burst)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::numeric[], $6::integer[])
     ON CONFLICT (id) DO NOTHING`,
    [
      merchants.map((m) => m.id),
      merchants.map((m) => m.name ?? m.id),
      merchants.map((m) => m.endpointUrl),
      sealed,
      merchants.map((m) => m.ratePerSecond ?? 5),
      merchants.map((m) => m.burst ?? 1),
    ],
  );
}

export async function insertAccounts(pool: pg.Pool, accounts: readonly AccountSeed[]): Promise<void> {
  if (accounts.length === 0) return;
  await pool.query(
    `INSERT INTO accounts (id, currency, available_minor, held_minor)
     SELECT id, currency, available, 0 FROM unnest($1::text[], $2::text[], $3::bigint[]) AS a(id, currency, available)
     ON CONFLICT (id) DO NOTHING`,
    [accounts.map((a) => a.id), accounts.map((a) => a.currency), accounts.map((a) => a.availableMinor)],
  );
}

/** Inserts holds and adds each valid one's amount to its account's held balance, in one transaction. */
export async function insertHolds(pool: pg.Pool, holds: readonly HoldSeed[]): Promise<void> {
  if (holds.length === 0) return;
  await inTransaction(pool, async (tx) => {
    await tx.query(
      `INSERT INTO auth_holds (id, account_id, merchant_id, amount_minor, currency, expires_at)
       SELECT id, account_id, merchant_id, amount, currency, now() + make_interval(secs => expires_in)
         FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::double precision[])
           AS h(id, account_id, merchant_id, amount, currency, expires_in)`,
      [
        holds.map((h) => h.id),
        holds.map((h) => h.accountId),
        holds.map((h) => h.merchantId),
        holds.map((h) => h.amountMinor),
        holds.map((h) => h.currency),
        holds.map((h) => h.expiresInSeconds),
      ],
    );
    // Upstream holds only a positive amount in the account's own currency; a defective row moved no money.
    await tx.query(
      `UPDATE accounts a SET held_minor = a.held_minor + s.total
         FROM (SELECT h.account_id, sum(h.amount)::bigint AS total
                 FROM unnest($1::text[], $2::bigint[], $3::text[]) AS h(account_id, amount, currency)
                 JOIN accounts acc ON acc.id = h.account_id AND acc.currency = h.currency
                WHERE h.amount > 0
                GROUP BY h.account_id) s
        WHERE a.id = s.account_id`,
      [holds.map((h) => h.accountId), holds.map((h) => h.amountMinor), holds.map((h) => h.currency)],
    );
  });
}

interface DemoNightOptions {
  region: Region;
  /** Distinguishes one night's holds from another's when the same ledger is seeded again. */
  nightId: string;
  holds: number;
  merchants: number;
  seed: number;
  endpointFor: (merchantId: string) => string;
  secretFor: (merchantId: string) => string;
  /** Seals the merchants' secrets: the region's ring, the one its workers open with. */
  sealer: SecretsAtRest['sealer'];
}

export interface DemoNight {
  merchants: MerchantSeed[];
  holds: HoldSeed[];
  /** Holds that are expired and releasable. */
  expiredValid: number;
  /** Rows seeded with a defect, to show that a bad row is reported and skipped. */
  defective: number;
  /** Holds expiring in the future, which a sweep must leave alone. */
  future: number;
}

/**
 * A demo night: holds over a dozen merchants, mostly expired in the last hours, a few expiring tomorrow,
 * and a couple of defective rows (a negative amount, an unknown merchant).
 */
export async function seedDemoNight(pool: pg.Pool, options: DemoNightOptions): Promise<DemoNight> {
  const random = seededRandom(options.seed);
  const currency = options.region === 'eu' ? 'EUR' : 'USD';
  const merchants: MerchantSeed[] = Array.from({ length: options.merchants }, (_, i) => {
    const id = `m_${options.region}_${String(i + 1).padStart(2, '0')}`;
    return {
      id,
      name: `Demo merchant ${i + 1} (${options.region.toUpperCase()})`,
      endpointUrl: options.endpointFor(id),
      signingSecret: options.secretFor(id),
    };
  });
  const accounts: AccountSeed[] = Array.from({ length: Math.max(1, Math.ceil(options.holds / 4)) }, (_, i) => ({
    id: `acct_${options.region}_${i + 1}`,
    currency,
    availableMinor: 100_000 + Math.floor(random() * 900_000),
  }));
  await insertMerchants(pool, { region: options.region, sealer: options.sealer }, merchants);
  await insertAccounts(pool, accounts);

  const holds: HoldSeed[] = [];
  let future = 0;
  for (let i = 0; i < options.holds; i++) {
    const isFuture = random() < 0.05;
    if (isFuture) future++;
    holds.push({
      id: `h_${options.nightId}_${options.region}_${i + 1}`,
      accountId: accounts[Math.floor(random() * accounts.length)]!.id,
      merchantId: merchants[Math.floor(random() * merchants.length)]!.id,
      amountMinor: 100 + Math.floor(random() * 50_000),
      currency,
      expiresInSeconds: isFuture ? 86_400 + random() * 3600 : -(60 + random() * 6 * 3600),
    });
  }
  const defects: HoldSeed[] = [
    {
      id: `h_${options.nightId}_${options.region}_bad_amount`,
      accountId: accounts[0]!.id,
      merchantId: merchants[0]!.id,
      amountMinor: -500,
      currency,
      expiresInSeconds: -600,
    },
    {
      id: `h_${options.nightId}_${options.region}_bad_merchant`,
      accountId: accounts[0]!.id,
      merchantId: 'm_unknown',
      amountMinor: 1200,
      currency,
      expiresInSeconds: -600,
    },
  ];
  await insertHolds(pool, [...holds, ...defects]);
  return { merchants, holds, expiredValid: holds.length - future, defective: defects.length, future };
}
