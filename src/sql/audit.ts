/**
 * The admin API's audit (migration 018, append-only): one row per call it answered.
 */
import type { Queryable } from '../db/pool.js';

export interface AuditRecord {
  requestId: string;
  subject: string | undefined;
  roles: readonly string[];
  verb: string;
  method: string;
  path: string;
  target: string | undefined;
  outcome: 'ok' | 'refused' | 'rejected' | 'failed';
  status: number;
  detail: string | undefined;
}

export async function insertAudit(db: Queryable, r: AuditRecord): Promise<void> {
  await db.query(
    `INSERT INTO api_audit (request_id, subject, roles, verb, method, path, target, outcome, status, detail)
     VALUES ($1, $2, $3::text[], $4, $5, $6, $7, $8, $9, $10)`,
    [
      r.requestId,
      r.subject ?? null,
      [...r.roles],
      r.verb,
      r.method,
      r.path,
      r.target ?? null,
      r.outcome,
      r.status,
      r.detail ?? null,
    ],
  );
}

/** Newest first. */
export async function auditEntries(
  db: Queryable,
  { since, subject, limit }: { since?: string; subject?: string; limit: number },
): Promise<Record<string, unknown>[]> {
  const { rows } = await db.query(
    `SELECT id::text AS id, at, subject, array_to_string(roles, ' ') AS roles, verb, target, outcome, status, request_id, detail
       FROM api_audit
      WHERE ($1::timestamptz IS NULL OR at >= $1::timestamptz) AND ($2::text IS NULL OR subject = $2::text)
      ORDER BY at DESC, id DESC LIMIT $3::integer`,
    [since ?? null, subject ?? null, limit],
  );
  return rows;
}
