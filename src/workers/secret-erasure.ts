/**
 * Every worker erases the previous signing secrets whose rotation overlap has ended, on an interval beside its ledger
 * gauges (the migration step erases them once at start-up as well). The processor-event receiver does not: it never
 * reads a merchant secret, and the workers are enough.
 */
import type pg from 'pg';
import type { Region } from '../contracts/regions.js';
import { erasePreviousSecretsPastOverlap } from '../db/secrets-at-rest.js';
import { every, log } from '../observability/logger.js';

/**
 * A rotated-out secret stops signing at its overlap's end whatever this says (PREVIOUS_SECRET_IN_OVERLAP_SQL); this
 * only bounds how long its sealed bytes stay in the table after. A minute: one UPDATE over the merchants, cheap.
 */
const SECRET_ERASURE_INTERVAL_MS = 60_000;

export function startSecretErasure({
  region,
  pool,
  intervalMs = SECRET_ERASURE_INTERVAL_MS,
}: {
  region: Region;
  pool: pg.Pool;
  intervalMs?: number;
}): { stop(): void } {
  // The next round tries again; a secret past its overlap no longer signs meanwhile.
  const stop = every(
    intervalMs,
    () => erasePreviousSecretsPastOverlap(pool),
    (err) => log.warn({ region, error: err }, 'previous signing secrets not erased'),
  );
  return { stop };
}
