/**
 * What the ledger gauges read (src/observability/metrics.ts, on every worker, every METRICS_GAUGE_INTERVAL): cheap
 * indexed reads (the first row of a partial index, counts of small sets) across the tables, in one place with the rest
 * of the ledger's SQL.
 */
import type { Queryable } from '../db/pool.js';
import type { LedgerReadings, LedgerGaugeSource, WorstMerchantReadings } from '../observability/metrics.js';
import { SENDS_PAUSED_SQL } from './fragments.js';
import { lastCompletedSweepAgeSeconds } from './holds.js';

export function ledgerGaugeSource(db: Queryable): LedgerGaugeSource {
  return {
    readings: (quarantinePageAfterMs) => readings(db, quarantinePageAfterMs),
    worstMerchants: (n, min) => worst(db, n, min),
  };
}

async function readings(db: Queryable, quarantinePageAfterMs: number): Promise<LedgerReadings> {
  const [holds, pending, quarantine, other, requests, sweepAge, processor, sent, lastSweep] = await Promise.all([
    db.query<{ age: number | null }>(
      `SELECT extract(epoch FROM now() - min(expires_at))::float8 AS age FROM auth_holds WHERE state = 'active' AND expires_at <= now()`,
    ),
    db.query<{ age: number | null; n: number }>(
      `SELECT extract(epoch FROM now() - min(created_at))::float8 AS age, count(*)::integer AS n FROM webhook_deliveries WHERE status = 'pending'`,
    ),
    db.query<{ reason: string; n: number; oldest: number; past: number }>(
      `SELECT quarantine_reason AS reason, count(*)::integer AS n,
              extract(epoch FROM now() - min(quarantined_at))::float8 AS oldest,
              (count(*) FILTER (WHERE quarantined_at <= now() - make_interval(secs => $1::float8 / 1000)))::integer AS past
         FROM webhook_deliveries WHERE status = 'quarantined' GROUP BY 1`,
      [quarantinePageAfterMs],
    ),
    db.query<{ abandoned: number; disabled: number; sends_paused: boolean; outbox_unfixable: number }>(
      `SELECT (SELECT count(*) FROM webhook_deliveries WHERE status = 'abandoned')::integer AS abandoned,
              (SELECT count(*) FROM merchants WHERE status = 'disabled')::integer AS disabled,
              ${SENDS_PAUSED_SQL} AS sends_paused,
              coalesce((SELECT unfixable FROM outbox_reconciliations ORDER BY id DESC LIMIT 1), 0) AS outbox_unfixable`,
    ),
    db.query<{ status: string; n: number }>(`SELECT status, count(*)::integer AS n FROM replay_requests GROUP BY 1`),
    lastCompletedSweepAgeSeconds(db),
    db.query<{ age: number | null; reviews: number; in_flight: number | null }>(
      `SELECT (SELECT extract(epoch FROM now() - min(received_at))::float8 FROM processor_events WHERE applied_at IS NULL) AS age,
              (SELECT count(*) FROM ledger_reviews WHERE resolved_at IS NULL)::integer AS reviews,
              (SELECT extract(epoch FROM now() - min(leased_at))::float8 FROM merchant_requests_in_flight
                WHERE expires_at > now()) AS in_flight`,
    ),
    db.query<{ requests: number; webhooks: number }>(
      `SELECT count(*)::integer AS requests, count(DISTINCT webhook_id)::integer AS webhooks
         FROM delivery_attempts WHERE started_at > now() - interval '15 minutes' AND policy_run = 1`,
    ),
    db.query<{ found: number; started: number; alreadyStarted: number; rejected: number }>(
      `SELECT found, started, already_started AS "alreadyStarted", rejected
         FROM sweep_runs ORDER BY finished_at DESC LIMIT 1`,
    ),
  ]);
  const byStatus = new Map(requests.rows.map((r) => [r.status, r.n]));
  return {
    oldestUnreleasedAge: holds.rows[0]?.age ?? 0,
    oldestUndeliveredAge: pending.rows[0]?.age ?? 0,
    undelivered: pending.rows[0]?.n ?? 0,
    quarantined: quarantine.rows.map((r) => ({
      reason: r.reason,
      count: r.n,
      oldestAge: r.oldest ?? 0,
      pastPageAge: r.past,
    })),
    abandoned: other.rows[0]!.abandoned,
    disabledMerchants: other.rows[0]!.disabled,
    sendsPaused: other.rows[0]!.sends_paused,
    outboxUnfixable: other.rows[0]!.outbox_unfixable,
    replayRequests: { requested: byStatus.get('pending') ?? 0, approved: byStatus.get('approved') ?? 0 },
    lastCompletedSweepAge: sweepAge,
    oldestUnappliedEventAge: processor.rows[0]!.age ?? 0,
    openReviews: processor.rows[0]!.reviews,
    oldestInFlightAge: processor.rows[0]!.in_flight ?? 0,
    firstRunsSent15m: sent.rows[0]!,
    lastSweep: lastSweep.rows[0],
  };
}

async function worst(db: Queryable, n: number, minAttempts: number): Promise<WorstMerchantReadings> {
  const [shares, backlog] = await Promise.all([
    db.query<WorstMerchantReadings['shares'][number]>(
      `SELECT d.merchant_id AS "merchantId",
              (count(*) FILTER (WHERE a.status_code = 429))::float8 / count(*) AS share429,
              (count(*) FILTER (WHERE a.status_code >= 500 OR a.status_code IS NULL))::float8 / count(*) AS "errorShare"
         FROM delivery_attempts a JOIN webhook_deliveries d ON d.webhook_id = a.webhook_id
        WHERE a.started_at > now() - interval '15 minutes'
        GROUP BY d.merchant_id HAVING count(*) >= $1::integer`,
      [minAttempts],
    ),
    db.query<WorstMerchantReadings['backlogAges'][number]>(
      `SELECT merchant_id AS "merchantId", extract(epoch FROM now() - min(created_at))::float8 AS age
         FROM webhook_deliveries WHERE status = 'pending' GROUP BY 1 ORDER BY 2 DESC LIMIT $1::integer`,
      [n],
    ),
  ]);
  return { shares: shares.rows, backlogAges: backlog.rows };
}
