/**
 * What leaves the ledger, and when (docs/data-retention.md). The retentions are fixed in the database
 * (`retention_of`, src/db/migrations/003_retention.sql), where no service can shorten them; rows leave only through
 * `prune_expired`, one bounded batch per call, and the audit through `prune_api_audit`, past its own 400 days.
 */
import type { Queryable } from '../db/pool.js';

/**
 * What the job prunes, in order: what names a row leaves before it (an attempt alone before its webhook with its
 * attempts; a review before the event it names).
 */
export const RETENTION_KINDS = [
  'delivery_attempts',
  'webhook_deliveries',
  'ledger_reviews',
  'processor_events',
  'sweep_runs',
  'outbox_reconciliations',
  'endpoint_checks',
] as const;
type RetentionKind = (typeof RETENTION_KINDS)[number];

/** Deletes up to `batchSize` of `kind`'s oldest rows past their retention; returns how many went. */
export async function pruneExpired(db: Queryable, kind: RetentionKind, batchSize: number): Promise<number> {
  const { rows } = await db.query<{ pruned: number }>('SELECT prune_expired($1::text, $2::integer) AS pruned', [
    kind,
    batchSize,
  ]);
  return rows[0]!.pruned;
}

/** Each kind's retention in days, as the database holds it. */
export async function retentionDays(db: Queryable): Promise<Record<RetentionKind, number>> {
  const { rows } = await db.query<{ kind: RetentionKind; days: number }>(
    `SELECT kind, extract(day FROM retention_of(kind))::integer AS days FROM unnest($1::text[]) AS kind`,
    [RETENTION_KINDS],
  );
  return Object.fromEntries(rows.map((r) => [r.kind, r.days])) as Record<RetentionKind, number>;
}

/** The audit's rows past its retention (400 days, `api_audit_min_retention`), deleted and the deletion recorded. */
export async function pruneAudit(db: Queryable, prunedBy: string): Promise<number> {
  const { rows } = await db.query<{ pruned: string }>(
    `SELECT prune_api_audit(now() - api_audit_min_retention(), $1::text) AS pruned`,
    [prunedBy],
  );
  return Number(rows[0]!.pruned);
}
