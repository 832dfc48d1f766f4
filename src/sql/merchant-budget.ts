/**
 * The sending budget of each destination, shared by every worker process (GCRA in Postgres, see
 * migrations/003_merchant_rate_limits.sql: a queue that orders waiting deliveries and a gate that admits the
 * actual sends), with three lanes inside it. A destination is an endpoint's origin (scheme, host, port): every merchant
 * row pointing there shares one budget at the strictest rate any of them publishes
 * (migrations/016_pace_per_destination.sql);
 * a merchant is named here, and its destination found by the statement.
 *
 * A lane is how far ahead it may reserve: first attempts may queue up to an hour of the merchant's slots, so a
 * big backlog reserves once and sleeps to its slot instead of polling; retries and approved replays may only
 * take a slot a second or two away, so they get the budget only when no longer queue of first attempts holds it.
 * That is the priority: first attempts before retries before replays.
 */
import type pg from 'pg';
import type { Lane } from '../contracts/delivery.js';
import { attemptCountedOnAdmission } from './deliveries.js';
import { SENDS_PAUSED_SQL } from './send-pauses.js';

export const LANE_HORIZON_MS: Readonly<Record<Lane, number>> = Object.freeze({
  // An hour covers the largest merchant backlog of a night at 5 req/s (18,000 sends) with one reservation each.
  first: 3_600_000,
  retry: 2_000,
  replay: 1_000,
});

/**
 * 10 % under the published rate, and sends paced one emission interval apart, never in a burst
 * (migrations/005_pace_sends_evenly.sql): together they absorb the jitter between our admission and the
 * merchant's receive (event loops and a shared CPU under load, the network). Rate + burst + 1 sends then span
 * (rate + burst) × 1.1 / rate seconds, so a send may reach the merchant that much minus one second later than
 * its neighbours and every receiver-side second still holds at most rate + burst: 320 ms at 5 req/s burst 1,
 * 122 ms at 50 req/s burst 1. The chaos run measured up to 134 ms on a loaded 2-core machine.
 */
export const RATE_SAFETY_MARGIN = 0.1;

/** Without Retry-After, a 429 still pushes the merchant back, by the retry's own delay but at most this. */
export const MAX_PUSHBACK_WITHOUT_RETRY_AFTER_MS = 30_000;

export interface SlotDecision {
  /**
   * send: admitted, go now; wait: come back at `atMs` holding a queue place (`reserved`); denied: nothing
   * reserved, this lane's place in the queue would be at `atMs`; busy: the merchant has as many requests in flight as
   * the cap allows (or this webhook has one open still), nothing reserved: ask again soon; paused: the region's sends
   * are paused by an operator (send_pauses, migration 013), nothing reserved: wait, held, until resumed.
   */
  outcome: 'send' | 'wait' | 'denied' | 'busy' | 'paused';
  atMs: number;
  /** The database clock when the decision was made: all waiting is measured against it. */
  nowMs: number;
  /** On `send` for a call that named its webhook: the number this attempt was given, counted in the same statement. */
  attemptNumber?: number;
}

/** An attempt's lease on one of its merchant's requests in flight (migrations/011_requests_in_flight.sql). */
export interface InFlightLease {
  /** At most this many of one merchant's requests open at once, across every worker. */
  cap: number;
  /** How long the lease holds if never given back (a worker killed mid-request): the longest the attempt can run. */
  leaseMs: number;
}

/**
 * The safety margin that also leaves a region only `rateShare` of each destination's rate: regions keep separate
 * ledgers, so a destination both regions send to is paced by each region alone (DESTINATION_RATE_SHARE).
 */
export function marginFor(rateShare: number): number {
  return (1 + RATE_SAFETY_MARGIN) / rateShare - 1;
}

/** The budget one destination's row sits in, by a merchant pointing there. */
const DESTINATION_OF = `(SELECT m.endpoint_origin FROM merchants m WHERE m.id = $1::text)`;

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
     * admission takes the lease in the same call (`admit_attempt`, migrations/012_one_admission.sql: the budget row
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
                (SELECT attempt_count FROM counted) AS attempt_number
           FROM paused LEFT JOIN slot ON true`,
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
      return {
        outcome: row.outcome,
        atMs: Number(row.at_ms),
        nowMs: Number(row.now_ms),
        ...(row.attempt_number === null ? {} : { attemptNumber: row.attempt_number }),
      };
    },

    /** Gives back a webhook's lease on a request in flight (a no-op when it holds none). */
    async releaseLease(webhookId: string): Promise<void> {
      await pool.query(`DELETE FROM merchant_requests_in_flight WHERE webhook_id = $1::text`, [webhookId]);
    },

    /** The destination-wide pause a 429 set, if it is still running (the merchant's destination). */
    async pause(merchantId: string): Promise<{ pausedUntilMs: number; nowMs: number }> {
      const { rows } = await pool.query<{ paused_until_ms: number; now_ms: number }>(
        `SELECT extract(epoch FROM greatest(coalesce(max(b.paused_until), 'epoch'), 'epoch')) * 1000 AS paused_until_ms,
                extract(epoch FROM clock_timestamp()) * 1000 AS now_ms
           FROM destination_budgets b WHERE b.origin = ${DESTINATION_OF}`,
        [merchantId],
      );
      const row = rows[0]!;
      return { pausedUntilMs: Number(row.paused_until_ms), nowMs: Number(row.now_ms) };
    },

    /**
     * Pushes the merchant's whole destination back (every merchant row pointing there): no worker gets a slot, or uses
     * one it holds, before now + delay.
     */
    async pushBack(merchantId: string, delayMs: number, reason: string): Promise<void> {
      await pool.query(
        `INSERT INTO destination_budgets AS b (origin, paused_until, pause_reason)
         SELECT ${DESTINATION_OF}, clock_timestamp() + make_interval(secs => $2::double precision / 1000), $3::text
         ON CONFLICT (origin) DO UPDATE
            SET paused_until = greatest(b.paused_until, excluded.paused_until), pause_reason = excluded.pause_reason`,
        [merchantId, delayMs, reason],
      );
    },
  };
}

export type MerchantBudget = ReturnType<typeof createMerchantBudget>;
