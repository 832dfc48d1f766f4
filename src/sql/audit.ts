/**
 * The audit of the admin and merchant APIs (api_audit, append-only): one row per authenticated call,
 * written with the action (src/api/admin-server.ts says how), what a caller sent kept bounded.
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
  outcome: 'started' | 'ok' | 'refused' | 'rejected' | 'failed';
  status: number;
  detail: string | undefined;
}

/** What the audit keeps of a caller's path and of an error: enough to read, never what a caller chose to fill it with. */
const MAX_PATH = 512;
const MAX_DETAIL = 2000;
const bounded = (text: string | undefined, max: number) =>
  text === undefined ? null : text.length > max ? `${text.slice(0, max - 1)}…` : text;

/** Appends a row. */
export async function insertAudit(db: Queryable, r: AuditRecord): Promise<void> {
  await db.query(`INSERT INTO api_audit ${AUDIT_VALUES}`, auditValues(r));
}

/**
 * Appends a `started` row before the call acts; its id, for `finishAudit` (reading it back is the operators' role's:
 * the merchant API's only appends).
 */
export async function insertAuditAhead(db: Queryable, r: AuditRecord): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO api_audit ${AUDIT_VALUES} RETURNING id::text`,
    auditValues({ ...r, outcome: 'started' }),
  );
  return rows[0]!.id;
}

const AUDIT_VALUES = `(request_id, subject, roles, verb, method, path, target, outcome, status, detail)
     VALUES ($1, $2, $3::text[], $4, $5, $6, $7, $8, $9, $10)`;

function auditValues(r: AuditRecord): unknown[] {
  return [
    r.requestId,
    r.subject ?? null,
    [...r.roles],
    r.verb,
    r.method,
    bounded(r.path, MAX_PATH),
    bounded(r.target, 200),
    r.outcome,
    r.status,
    bounded(r.detail, MAX_DETAIL),
  ];
}

/** The outcome of a call whose row was written `started`, before it acted. */
export async function finishAudit(
  db: Queryable,
  id: string,
  r: Pick<AuditRecord, 'outcome' | 'status' | 'detail'>,
): Promise<void> {
  await db.query(
    `UPDATE api_audit SET outcome = $2, status = $3, detail = $4 WHERE id = $1::bigint AND outcome = 'started'`,
    [id, r.outcome, r.status, bounded(r.detail, MAX_DETAIL)],
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
