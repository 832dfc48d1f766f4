/**
 * SQL of send_pauses: the region's pause of every send. Operators open and close one
 * (`npm run ops -- sends pause|resume`, src/operations/send-pauses.ts); every admission to a merchant's budget reads whether
 * one is open (`SENDS_PAUSED_SQL` in ./fragments.ts, composed into the admission's statement); the ledger gauges
 * export it.
 */
import type { Queryable } from '../db/pool.js';
import { isoUtc } from '../db/sql.js';

export interface SendPause {
  id: number;
  pausedAt: string;
  pausedBy: string;
  reason: string;
  resumedAt: string | null;
  resumedBy: string | null;
  resumeReason: string | null;
}

/** A pause as the statements return it: its id (a bigint) as text. */
type Row = Omit<SendPause, 'id'> & { id: string };

const COLUMNS = `id, ${isoUtc('paused_at')} AS "pausedAt", paused_by AS "pausedBy", reason, ${isoUtc('resumed_at')} AS "resumedAt",
                 resumed_by AS "resumedBy", resume_reason AS "resumeReason"`;

const pauseOf = (r: Row): SendPause => ({ ...r, id: Number(r.id) });

/** Opens a pause; undefined when one is open already (at most one: the unique index decides, not a read before). */
export async function openSendPause(db: Queryable, by: string, reason: string): Promise<SendPause | undefined> {
  const { rows } = await db.query<Row>(
    `INSERT INTO send_pauses (paused_by, reason) VALUES ($1::text, $2::text) ON CONFLICT DO NOTHING RETURNING ${COLUMNS}`,
    [by, reason],
  );
  return rows[0] && pauseOf(rows[0]);
}

/** Closes the open pause; undefined when none is open. */
export async function closeSendPause(db: Queryable, by: string, reason: string): Promise<SendPause | undefined> {
  const { rows } = await db.query<Row>(
    `UPDATE send_pauses SET resumed_at = now(), resumed_by = $1::text, resume_reason = $2::text
      WHERE resumed_at IS NULL RETURNING ${COLUMNS}`,
    [by, reason],
  );
  return rows[0] && pauseOf(rows[0]);
}

/** The open pause, if any, and the last few before it, newest first. */
export async function recentSendPauses(db: Queryable, limit = 5): Promise<SendPause[]> {
  const { rows } = await db.query<Row>(`SELECT ${COLUMNS} FROM send_pauses ORDER BY id DESC LIMIT $1::integer`, [
    limit,
  ]);
  return rows.map(pauseOf);
}
