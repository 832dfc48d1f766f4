/**
 * Merchant signing secrets at rest, in the ledger: the sealing step of `migrate` and the erasure of rotated-out
 * secrets.
 *
 * `sealMerchantSecrets` runs at every start-up, after the SQL migrations and under their advisory lock (src/db/
 * migrate.ts), so two processes starting together take turns. It seals any clear text it finds, re-seals what is
 * sealed under a key that is no longer the region's current one, erases previous secrets past their overlap, then
 * validates the constraint that refuses clear text if it is not valid yet. That is how a key is retired: make a new
 * one current (first in MERCHANT_SECRET_KEYS_<R>), restart the workers so this runs, then drop the old one.
 * Idempotent: a value already under the current key is left alone; each write is a compare-and-swap on the value it
 * read, so a rotation (`merchant rotate-secret`) running meanwhile wins, and what it moved is re-sealed at the next
 * start.
 */
import { isSealed, SecretUnsealFailed, type SecretContext, type SecretsAtRest } from '../delivery/secret-box.js';
import type { Queryable } from './pool.js';

/** The merchants table's CHECK (src/db/migrations/001_baseline.sql): both secret columns NULL or sealed. */
export const SEALED_SECRETS_CONSTRAINT = 'merchants_signing_secrets_sealed';
/** Merchants read per round trip: a region has thousands at most, so a start-up reads a handful of pages. */
const PAGE_SIZE = 500;

interface SealingReport {
  /** Clear-text values sealed. */
  sealed: number;
  /** Values re-sealed under the current key. */
  resealed: number;
  /** Merchants with a value that does not open here (its key left the ring, or it is not theirs): left as they are. */
  unopenable: string[];
  /** Previous secrets erased after their overlap. */
  erased: number;
}

/**
 * Erases every previous secret whose rotation overlap has ended (it stopped signing then:
 * PREVIOUS_SECRET_IN_OVERLAP_SQL in src/sql/merchants.ts); a previous secret without an end (set by hand) stays until
 * replaced. Returns how many were erased. Every worker runs it periodically (src/workers/secret-erasure.ts).
 */
export async function erasePreviousSecretsPastOverlap(db: Queryable): Promise<number> {
  const { rowCount } = await db.query(
    `UPDATE merchants SET previous_signing_secret = NULL, previous_signing_secret_until = NULL, updated_at = now()
      WHERE previous_signing_secret_until <= now()`,
  );
  return rowCount ?? 0;
}

/**
 * `value` under the current key: undefined if it needs nothing (NULL, or already there), else the new value, or
 * 'unopenable'.
 */
async function reseal(
  { sealer }: SecretsAtRest,
  value: string | null,
  context: SecretContext,
): Promise<{ value: string; was: 'clear' | 'sealed' } | 'unopenable' | undefined> {
  if (value === null || !sealer.needsReseal(value)) return undefined;
  if (!isSealed(value)) return { value: await sealer.seal(value, context), was: 'clear' };
  try {
    return { value: await sealer.seal(await sealer.open(value, context), context), was: 'sealed' };
  } catch (err) {
    if (err instanceof SecretUnsealFailed) return 'unopenable';
    throw err;
  }
}

/** See the module comment. `db` is the migration's own connection, which holds the advisory lock. */
export async function sealMerchantSecrets(db: Queryable, atRest: SecretsAtRest): Promise<SealingReport> {
  const report: SealingReport = { sealed: 0, resealed: 0, unopenable: [], erased: 0 };
  for (let after = ''; ;) {
    const { rows } = await db.query<{
      id: string;
      signing_secret: string | null;
      previous_signing_secret: string | null;
    }>(
      `SELECT id, signing_secret, previous_signing_secret FROM merchants
        WHERE id > $1::text AND (signing_secret IS NOT NULL OR previous_signing_secret IS NOT NULL)
        ORDER BY id LIMIT $2::integer`,
      [after, PAGE_SIZE],
    );
    for (const row of rows) {
      const context = { region: atRest.region, merchantId: row.id };
      const next = { current: row.signing_secret, previous: row.previous_signing_secret };
      let changed = false;
      for (const column of ['current', 'previous'] as const) {
        const outcome = await reseal(atRest, next[column], context);
        if (outcome === 'unopenable') {
          if (!report.unopenable.includes(row.id)) report.unopenable.push(row.id);
        } else if (outcome) {
          next[column] = outcome.value;
          report[outcome.was === 'clear' ? 'sealed' : 'resealed']++;
          changed = true;
        }
      }
      if (!changed) continue;
      await db.query(
        `UPDATE merchants
            SET signing_secret = CASE WHEN signing_secret IS NOT DISTINCT FROM $2::text THEN $3::text ELSE signing_secret END,
                previous_signing_secret = CASE WHEN previous_signing_secret IS NOT DISTINCT FROM $4::text THEN $5::text
                                               ELSE previous_signing_secret END
          WHERE id = $1::text`,
        [row.id, row.signing_secret, next.current, row.previous_signing_secret, next.previous],
      );
    }
    if (rows.length < PAGE_SIZE) break;
    after = rows.at(-1)!.id;
  }
  // After sealing: the constraint checks every row an UPDATE writes, so erasing beside a current secret still in clear
  // text would fail.
  report.erased = await erasePreviousSecretsPastOverlap(db);
  const { rows } = await db.query<{ convalidated: boolean }>(
    `SELECT convalidated FROM pg_constraint WHERE conrelid = 'merchants'::regclass AND conname = $1::text`,
    [SEALED_SECRETS_CONSTRAINT],
  );
  // Every row is sealed now, and the constraint refuses new clear text: validating scans the table once.
  if (rows[0] && !rows[0].convalidated)
    await db.query(`ALTER TABLE merchants VALIDATE CONSTRAINT ${SEALED_SECRETS_CONSTRAINT}`);
  return report;
}

/** The ids of the keys the region's merchant secrets are sealed under (current and previous secrets). */
export async function sealingKeysInUse(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ key_id: string }>(
    `SELECT DISTINCT split_part(s, ':', 3) AS key_id
       FROM merchants, unnest(ARRAY[signing_secret, previous_signing_secret]) AS s
      WHERE s IS NOT NULL ORDER BY 1`,
  );
  return rows.map((r) => r.key_id);
}
