/**
 * Ledger activities: the only code that reads or writes a region's holds, accounts and ledger entries.
 *
 * Exactly-once release rests on the database, not on Temporal: the hold row is locked, its state checked
 * and flipped in the same transaction that writes the one ledger entry (unique idempotency key) and moves
 * the amount from held to available. A second call, from a retry or a duplicate workflow, finds the row
 * released and reports "already released" without writing anything.
 */
import { heartbeat, log, sleep } from '@temporalio/activity';
import { noopMetricMeter, type MetricMeter } from '@temporalio/common';
import type pg from 'pg';
import type {
  ExpiredHoldsPage,
  HoldCursor,
  HoldRef,
  RejectedHold,
  ReleaseOutcome,
  SweepResult,
  SweepTotals,
} from '../contracts/domain.js';
import { inTransaction } from '../db/pool.js';
import { isoUtc } from '../db/sql.js';
import { resolveDeliveryPolicy } from '../delivery/policy.js';
import { DEFAULT_DELIVERY_POLICY } from '../contracts/delivery.js';
import type { InvalidHoldCode } from '../contracts/failures.js';
import { deliveryMetrics } from '../observability/metrics.js';
import type { Region } from '../contracts/regions.js';

/**
 * Why a hold row cannot be released, or NULL when it can. One SQL expression used by both the sweep's page
 * query and the release itself, so the two can never disagree. Needs `h` (auth_holds), `a` (accounts) and
 * `m` (merchants) in scope, the latter two LEFT JOINed.
 */
const HOLD_DEFECT_SQL = `
  CASE WHEN h.amount_minor <= 0 THEN 'NonPositiveAmount'
       WHEN a.id IS NULL THEN 'UnknownAccount'
       WHEN m.id IS NULL THEN 'UnknownMerchant'
       WHEN a.currency <> h.currency THEN 'CurrencyMismatch'
  END`;


/** The event type of the webhook each release sends. */
export const HOLD_RELEASED_EVENT = 'hold.released';

/** Before every row in (expires_at, id) order. */
const START_CURSOR: HoldCursor = { expiresAt: '-infinity', id: '' };

/** How often `finishSweep` re-counts unreleased holds while children are still releasing. */
const RELEASE_POLL_MS = 500;

export interface LedgerDeps {
  region: Region;
  pool: pg.Pool;
  /** Where product metrics go (the runtime's Prometheus meter in workers); a no-op by default. */
  meter?: MetricMeter;
}

export interface ListExpiredHoldsInput {
  cutoff: string;
  after?: HoldCursor;
  limit: number;
}

export interface FinishSweepInput {
  sweepId: string;
  cutoff: string;
  totals: SweepTotals;
  /** How long to wait for the children of this sweep to release before reporting what is left. */
  releaseWaitMs: number;
}

async function markRejected(db: pg.Pool | pg.PoolClient, rejected: readonly RejectedHold[]): Promise<void> {
  if (rejected.length === 0) return;
  await db.query(
    `UPDATE auth_holds h
        SET state = 'rejected', reject_code = r.code, rejected_at = now()
       FROM unnest($1::text[], $2::text[]) AS r(id, code)
      WHERE h.id = r.id AND h.state = 'active'`,
    [rejected.map((r) => r.holdId), rejected.map((r) => r.code)],
  );
}

export function createLedgerActivities({ region, pool, meter = noopMetricMeter }: LedgerDeps) {
  const { duplicateSuppressions } = deliveryMetrics(meter);
  return {
    /**
     * One page of expired active holds at or before `cutoff`, in (expires_at, id) order after `after`.
     * Rows that can never be released are marked `rejected` here and reported, so they leave the active set
     * and no later page or sweep trips over them again.
     */
    async listExpiredHolds({ cutoff, after = START_CURSOR, limit }: ListExpiredHoldsInput): Promise<ExpiredHoldsPage> {
      const { rows } = await pool.query<{ id: string; expires_at: string; merchant_id: string; defect: InvalidHoldCode | null }>(
        `SELECT h.id, ${isoUtc('h.expires_at')} AS expires_at, h.merchant_id, ${HOLD_DEFECT_SQL} AS defect
           FROM auth_holds h
           LEFT JOIN accounts a ON a.id = h.account_id
           LEFT JOIN merchants m ON m.id = h.merchant_id
          WHERE h.state = 'active'
            AND h.expires_at <= $1::timestamptz
            AND (h.expires_at, h.id) > ($2::timestamptz, $3::text)
          ORDER BY h.expires_at, h.id
          LIMIT $4::integer`,
        [cutoff, after.expiresAt, after.id, limit],
      );
      const holds: HoldRef[] = [];
      const rejected: RejectedHold[] = [];
      for (const row of rows) {
        if (row.defect) rejected.push({ holdId: row.id, code: row.defect });
        else holds.push({ holdId: row.id, expiresAt: row.expires_at, merchantId: row.merchant_id });
      }
      await markRejected(pool, rejected);
      const last = rows[rows.length - 1];
      return rows.length === limit && last ? { holds, rejected, next: { expiresAt: last.expires_at, id: last.id } } : { holds, rejected };
    },

    /** Releases one hold exactly once; see the module comment. */
    async releaseHold({ holdId }: { holdId: string }): Promise<ReleaseOutcome> {
      return inTransaction(pool, async (tx) => {
        const { rows } = await tx.query<{
          state: 'active' | 'released' | 'rejected';
          reject_code: InvalidHoldCode | null;
          defect: InvalidHoldCode | null;
          expired: boolean;
          expires_at: string;
          account_id: string;
          merchant_id: string;
          amount_minor: string;
          currency: string;
        }>(
          `SELECT h.state, h.reject_code, ${HOLD_DEFECT_SQL} AS defect, h.expires_at <= now() AS expired,
                  ${isoUtc('h.expires_at')} AS expires_at, h.account_id, h.merchant_id, h.amount_minor, h.currency
             FROM auth_holds h
             LEFT JOIN accounts a ON a.id = h.account_id
             LEFT JOIN merchants m ON m.id = h.merchant_id
            WHERE h.id = $1::text
              FOR UPDATE OF h`,
          [holdId],
        );
        const hold = rows[0];
        if (!hold) return { status: 'not_found', holdId };
        if (hold.state === 'released') {
          duplicateSuppressions.add(1, { kind: 'already_released' });
          log.info('hold already released: nothing written', { region, holdId });
          return { status: 'already_released', ...(await releasedEntry(tx, holdId)) };
        }
        if (hold.state === 'rejected') return { status: 'rejected', holdId, code: hold.reject_code! };
        if (hold.defect) {
          await markRejected(tx, [{ holdId, code: hold.defect }]);
          return { status: 'rejected', holdId, code: hold.defect };
        }
        if (!hold.expired) return { status: 'not_expired', holdId, expiresAt: hold.expires_at };

        const entry = await tx.query<{ id: string }>(
          `INSERT INTO ledger_entries (idempotency_key, kind, account_id, hold_id, amount_minor, currency)
           VALUES ($1::text, 'hold_release', $2::text, $3::text, $4::bigint, $5::char(3))
           RETURNING id`,
          [`hold-release:${holdId}`, hold.account_id, holdId, hold.amount_minor, hold.currency],
        );
        await tx.query(
          `UPDATE accounts
              SET held_minor = held_minor - $2::bigint, available_minor = available_minor + $2::bigint, updated_at = now()
            WHERE id = $1::text`,
          [hold.account_id, hold.amount_minor],
        );
        await tx.query(
          `UPDATE auth_holds SET state = 'released', released_at = now(), ledger_entry_id = $2::bigint WHERE id = $1::text`,
          [holdId, entry.rows[0]!.id],
        );
        // The webhook is fixed in the same transaction (an outbox): it exists if and only if the release committed.
        await tx.query(
          `INSERT INTO webhook_deliveries (webhook_id, hold_id, merchant_id, event_type, payload)
           SELECT 'wh_' || h.id || '_' || to_char(h.expires_at AT TIME ZONE 'UTC', 'YYYYMMDDHH24MISSUS'), h.id, h.merchant_id,
                  '${HOLD_RELEASED_EVENT}',
                  json_build_object(
                    'type', '${HOLD_RELEASED_EVENT}',
                    'timestamp', ${isoUtc('h.released_at')},
                    'data', json_build_object(
                      'hold_id', h.id, 'amount_minor', h.amount_minor, 'currency', h.currency, 'merchant_id', h.merchant_id,
                      'released_at', ${isoUtc('h.released_at')}, 'ledger_entry_id', h.ledger_entry_id::text))::text
             FROM auth_holds h WHERE h.id = $1::text`,
          [holdId],
        );
        const released = await releasedEntry(tx, holdId);
        log.info('hold released', { region, holdId, ledgerEntryId: released.ledgerEntryId, webhookId: released.webhookId });
        return { status: 'released', ...released };
      });
    },

    /**
     * Waits (bounded) until no expired active hold at or before the cutoff is left, then records the sweep.
     * What is still unreleased at the end is reported, not failed: the next sweep picks it up.
     */
    async finishSweep({ sweepId, cutoff, totals, releaseWaitMs }: FinishSweepInput): Promise<SweepResult> {
      const deadline = Date.now() + releaseWaitMs;
      let unreleased: number;
      for (;;) {
        const { rows } = await pool.query<{ n: number }>(
          `SELECT count(*)::integer AS n FROM auth_holds WHERE state = 'active' AND expires_at <= $1::timestamptz`,
          [cutoff],
        );
        unreleased = rows[0]!.n;
        if (unreleased === 0 || Date.now() >= deadline) break;
        heartbeat({ unreleased });
        await sleep(RELEASE_POLL_MS);
      }
      await pool.query(
        `INSERT INTO sweep_runs (sweep_id, cutoff, pages, found, started, already_started, rejected, unreleased_at_end)
         VALUES ($1::text, $2::timestamptz, $3::integer, $4::integer, $5::integer, $6::integer, $7::integer, $8::integer)
         ON CONFLICT (sweep_id) DO UPDATE SET unreleased_at_end = EXCLUDED.unreleased_at_end, finished_at = now()`,
        [sweepId, cutoff, totals.pages, totals.found, totals.started, totals.alreadyStarted, totals.rejected, unreleased],
      );
      return { region, sweepId, cutoff, ...totals, unreleasedAtEnd: unreleased };
    },
  };
}

async function releasedEntry(tx: pg.PoolClient, holdId: string) {
  const { rows } = await tx.query<{
    ledger_entry_id: string;
    amount_minor: string;
    currency: string;
    merchant_id: string;
    released_at: string;
    webhook_id: string;
    delivery_policy: unknown;
  }>(
    `SELECT h.ledger_entry_id, h.amount_minor, h.currency, h.merchant_id, ${isoUtc('h.released_at')} AS released_at,
            d.webhook_id, m.delivery_policy
       FROM auth_holds h
       JOIN webhook_deliveries d ON d.hold_id = h.id
       JOIN merchants m ON m.id = h.merchant_id
      WHERE h.id = $1::text`,
    [holdId],
  );
  const row = rows[0]!;
  return {
    holdId,
    ledgerEntryId: row.ledger_entry_id,
    amountMinor: row.amount_minor,
    currency: row.currency,
    merchantId: row.merchant_id,
    releasedAt: row.released_at,
    webhookId: row.webhook_id,
    retryHorizonMs: retryHorizonFor(row.merchant_id, row.delivery_policy),
  };
}

/**
 * The delivery's retry horizon, which the workflow turns into the activity's schedule-to-close timeout. An
 * unusable override falls back to the default here; the delivery itself then quarantines with the named error.
 */
function retryHorizonFor(merchantId: string, overrides: unknown): number {
  try {
    return resolveDeliveryPolicy(merchantId, overrides).retryHorizonMs;
  } catch {
    return DEFAULT_DELIVERY_POLICY.retryHorizonMs;
  }
}

export type LedgerActivities = ReturnType<typeof createLedgerActivities>;
