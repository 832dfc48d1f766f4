/**
 * Each merchant's sending budget, shared by every worker process (GCRA in Postgres, see `send_budgets` and
 * `admit_attempt` in src/db/migrations/001_baseline.sql: a queue that orders waiting deliveries and a gate that admits
 * the actual sends), with three lanes inside it. A merchant's budget is its own, at its published rate, unless it names
 * a declared shared destination (`destinations`), whose budget and rate its merchants share; a merchant is named here,
 * and its budget found by the statement.
 *
 * A lane is how far ahead it may reserve: first attempts may queue up to an hour of the merchant's slots, so a
 * big backlog reserves once and sleeps to its slot instead of polling; retries and approved replays may only
 * take a slot a second or two away, so they get the budget only when no longer queue of first attempts holds it.
 * That is the priority: first attempts before retries before replays.
 */
import type pg from 'pg';
import type { Lane } from '../contracts/delivery.js';
import { attemptCountedOnAdmission } from './deliveries.js';
import { SENDS_PAUSED_SQL } from './fragments.js';

export const LANE_HORIZON_MS: Readonly<Record<Lane, number>> = Object.freeze({
  // An hour covers the largest merchant backlog of a night at 5 req/s (18,000 sends) with one reservation each.
  first: 3_600_000,
  retry: 2_000,
  replay: 1_000,
});

/**
 * 10 % under the published rate, and sends paced one emission interval apart, never in a burst
 * (`admit_attempt`): together they absorb the jitter between our admission and the
 * merchant's receive (event loops and a shared CPU under load, the network). Rate + burst + 1 sends then span
 * (rate + burst) × 1.1 / rate seconds, so a send may reach the merchant that much minus one second later than
 * its neighbours and every receiver-side second still holds at most rate + burst: 320 ms at 5 req/s burst 1,
 * 122 ms at 50 req/s burst 1. The chaos run measured up to 134 ms on a loaded 2-core machine.
 */
export const RATE_SAFETY_MARGIN = 0.1;

/** Without Retry-After, a 429 still pushes the merchant back, by the retry's own delay but at most this. */
export const MAX_PUSHBACK_WITHOUT_RETRY_AFTER_MS = 30_000;

/**
 * send: admitted, go now; wait: come back at `atMs` holding a queue place (`reserved`); denied: nothing reserved, this
 * lane's place in the queue would be at `atMs`; busy: the merchant has as many requests in flight as the cap allows (or
 * this webhook has one open still), nothing reserved: ask again soon; paused: the region's sends are paused by an
 * operator (send_pauses), nothing reserved: wait, held, until resumed.
 */
type SlotDecision = {
  atMs: number;
  /** The database clock when the decision was made: all waiting is measured against it. */
  nowMs: number;
} & (
  | {
      outcome: 'send';
      /** For a call that named its webhook: the number this attempt was given, counted in the same statement. */
      attemptNumber?: number;
    }
  | { outcome: 'wait' | 'denied' | 'busy'; limitedBy: LimitedBy }
  | { outcome: 'paused' }
);

/**
 * Which budget held a delivery back ('merchant:<id>' or 'destination:<id>'), and which of its limits: its rate, a
 * merchant's push-back (a 429's Retry-After, until `paused_until`), or its requests in flight.
 */
export interface LimitedBy {
  bucket: string;
  limit: 'rate' | 'pushback' | 'in_flight';
}

/** An attempt's lease on one of its merchant's requests in flight (merchant_requests_in_flight). */
interface InFlightLease {
  /** At most this many of one merchant's requests open at once, across every worker (a shared destination's own cap too). */
  cap: number;
  /** How long the lease holds if never given back (a worker killed mid-request): the longest the attempt can run. */
  leaseMs: number;
}

/**
 * The safety margin that also leaves a region only `rateShare` of each budget's rate: regions keep separate ledgers,
 * so a merchant both regions send to is paced by each region alone (DESTINATION_RATE_SHARE).
 */
function marginFor(rateShare: number): number {
  return (1 + RATE_SAFETY_MARGIN) / rateShare - 1;
}

/** The key of the budget a merchant's sends are paced in (its own, or its shared destination's). */
const BUDGET_OF = `(SELECT key FROM budget_of($1::text))`;

export function createMerchantBudget(pool: pg.Pool, { rateShare = 1 }: { rateShare?: number } = {}) {
  const margin = marginFor(rateShare);
  return {
    /**
     * Takes this caller's turn in the merchant's budget: a place in the queue (unless it already holds one:
     * `reserved`) and, once that place is due, admission at the gate. Given a `webhookId`, an admission also
     * counts the attempt on that delivery in the same statement, so that nothing but the HTTP request itself
     * stands between the gate and the wire. One round trip: the count is webhook_deliveries' statement
     * (`attemptCountedOnAdmission` in ./deliveries.ts, where every write of that table lives), composed in here.
     *
     * Given a `lease` too, the turn is taken only while the merchant has room for one more request in flight, and an
     * admission takes the lease in the same call (`admit_attempt` in src/db/migrations/001_baseline.sql: the budget row
     * locked once, written once per send); `releaseLease` (or the attempt's record) gives it back.
     */
    async acquire(
      merchantId: string,
      lane: Lane,
      reserved = false,
      webhookId?: string,
      lease?: InFlightLease,
    ): Promise<SlotDecision> {
      const { rows } = await pool.query<{
        outcome: SlotDecision['outcome'];
        at_ms: number;
        now_ms: number;
        attempt_number: number | null;
        bucket: string | null;
        paused_until_ms: number | null;
      }>(
        `WITH paused AS MATERIALIZED (
           SELECT ${SENDS_PAUSED_SQL} AS paused
         ), slot AS MATERIALIZED (
           SELECT s.* FROM paused, LATERAL admit_attempt($1::text, $2::double precision, $3::double precision, $4::boolean,
                                                         $5::text, $6::integer, $7::double precision) s
            WHERE NOT paused.paused
         ), counted AS (
           ${attemptCountedOnAdmission('$5')}
         )
         SELECT coalesce(slot.outcome, 'paused') AS outcome, extract(epoch FROM coalesce(slot.at, clock_timestamp())) * 1000 AS at_ms,
                extract(epoch FROM coalesce(slot.db_now, clock_timestamp())) * 1000 AS now_ms,
                (SELECT attempt_count FROM counted) AS attempt_number, held.bucket, held.paused_until_ms
           FROM paused LEFT JOIN slot ON true
           -- Read only when held back: an admission pays nothing for it.
           LEFT JOIN LATERAL (
             SELECT b.key AS bucket, extract(epoch FROM s.paused_until) * 1000 AS paused_until_ms
               FROM budget_of($1::text) b LEFT JOIN send_budgets s ON s.key = b.key
              WHERE slot.outcome IN ('wait', 'denied', 'busy')
           ) held ON true`,
        [
          merchantId,
          LANE_HORIZON_MS[lane],
          margin,
          reserved,
          webhookId ?? null,
          webhookId !== undefined && lease ? lease.cap : null,
          webhookId !== undefined && lease ? lease.leaseMs : null,
        ],
      );
      const row = rows[0]!;
      const clocks = { atMs: Number(row.at_ms), nowMs: Number(row.now_ms) };
      if (row.outcome === 'send')
        return {
          outcome: 'send',
          ...clocks,
          ...(row.attempt_number === null ? {} : { attemptNumber: row.attempt_number }),
        };
      if (row.outcome === 'paused') return { outcome: 'paused', ...clocks };
      const limit =
        row.outcome === 'busy' ? 'in_flight' : Number(row.paused_until_ms) >= clocks.atMs ? 'pushback' : 'rate';
      return { outcome: row.outcome, ...clocks, limitedBy: { bucket: row.bucket!, limit } };
    },

    /** Gives back the lease attempt `attemptNumber` took (a no-op when it holds none: expired, or another's now). */
    async releaseLease(webhookId: string, attemptNumber: number): Promise<void> {
      await pool.query(
        `DELETE FROM merchant_requests_in_flight WHERE webhook_id = $1::text AND attempt_number = $2::integer`,
        [webhookId, attemptNumber],
      );
    },

    /** The push-back a 429 set on the merchant's budget, if it is still running. */
    async pause(merchantId: string): Promise<{ pausedUntilMs: number; nowMs: number }> {
      const { rows } = await pool.query<{ paused_until_ms: number; now_ms: number }>(
        `SELECT extract(epoch FROM greatest(coalesce(max(b.paused_until), 'epoch'), 'epoch')) * 1000 AS paused_until_ms,
                extract(epoch FROM clock_timestamp()) * 1000 AS now_ms
           FROM send_budgets b WHERE b.key = ${BUDGET_OF}`,
        [merchantId],
      );
      const row = rows[0]!;
      return { pausedUntilMs: Number(row.paused_until_ms), nowMs: Number(row.now_ms) };
    },

    /**
     * Pushes the merchant's budget back (every merchant of its shared destination, if it names one): no worker gets a
     * slot, or uses one it holds, before now + delay. "Now" is read holding the budget's row, as an admission reads
     * its own: every admission is then either before the push-back, with an earlier time, or after it and at or past
     * its end.
     */
    async pushBack(merchantId: string, delayMs: number, reason: string): Promise<void> {
      await pool.query(
        `INSERT INTO send_budgets AS b (key, paused_until, pause_reason)
         SELECT ${BUDGET_OF}, clock_timestamp() + make_interval(secs => $2::double precision / 1000), $3::text
         ON CONFLICT (key) DO UPDATE
            SET paused_until = greatest(b.paused_until,
                                        clock_timestamp() + make_interval(secs => $2::double precision / 1000)),
                pause_reason = excluded.pause_reason`,
        [merchantId, delayMs, reason],
      );
    },
  };
}
