/** SQL of the merchants table that the delivery policy writes. */
import type { Queryable } from '../db/pool.js';

/**
 * Stops all sending to a merchant (its backlog waits, held, intact) until someone re-enables it; a no-op for one
 * already disabled, which keeps the first reason.
 */
export async function disableMerchant(db: Queryable, merchantId: string, reason: string): Promise<void> {
  await db.query(
    `UPDATE merchants SET status = 'disabled', disabled_reason = $2::text, disabled_at = now(), updated_at = now()
      WHERE id = $1::text AND status <> 'disabled'`,
    [merchantId, reason],
  );
}
