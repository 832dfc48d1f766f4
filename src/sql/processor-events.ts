/**
 * SQL of the processor's events: processor_events (each accepted event, recorded before the receiver answers),
 * processor_requests_refused (each refused request), processor_sequence_skips, ledger_reviews, and the statements
 * that apply one event to its hold: `lockEventToApply` takes the hold's row lock (the lock the release takes first),
 * the rulebook decides (`decideEvent` in src/ledger/hold-rules.ts), and `applyRecordedEvent` in
 * src/activities/processor-events.ts carries the decision out with the writers below, in the same transaction.
 */
import type pg from 'pg';
import type {
  EventWebhook,
  ProcessorEventOutcome,
  ProcessorEventRef,
  ProcessorEventType,
} from '../contracts/processor.js';
import type { Queryable } from '../db/pool.js';
import { isoUtc } from '../db/sql.js';
import type { LockedHold, RecordedEvent } from '../ledger/hold-rules.js';
import { HOLD_DEFECT_SQL } from './holds.js';
import { enqueueWebhook, SEQUENCE } from './deliveries.js';

/** An event as the receiver accepted it: verified and well-formed. */
export interface AcceptedEvent {
  eventId: string;
  holdId: string;
  sequence: number;
  eventType: ProcessorEventType;
  amountMinor: string | null;
  currency: string | null;
  occurredAt: string;
  body: string;
  bodySha256: string;
}

export type RecordOutcome =
  | { status: 'recorded' }
  /** The same event id with the same body: a retry by the processor. Nothing changes. */
  | { status: 'duplicate'; dispatched: boolean }
  /** The same event id with a different body, or another event id already holds this (hold, sequence). */
  | { status: 'conflict'; why: string };

/** Records an accepted event once, forever (the primary key is the processor's event id). */
export async function recordEvent(db: Queryable, e: AcceptedEvent): Promise<RecordOutcome> {
  const inserted = await db.query(
    `INSERT INTO processor_events (event_id, hold_id, sequence, event_type, amount_minor, currency, occurred_at, body, body_sha256)
     VALUES ($1::text, $2::text, $3::integer, $4::text, $5::bigint, $6::char(3), $7::timestamptz, $8::text, $9::text)
     ON CONFLICT DO NOTHING`,
    [e.eventId, e.holdId, e.sequence, e.eventType, e.amountMinor, e.currency, e.occurredAt, e.body, e.bodySha256],
  );
  if (inserted.rowCount === 1) return { status: 'recorded' };
  const { rows } = await db.query<{ body_sha256: string; dispatched: boolean }>(
    'SELECT body_sha256, dispatched_at IS NOT NULL AS dispatched FROM processor_events WHERE event_id = $1::text',
    [e.eventId],
  );
  const same = rows[0];
  if (!same)
    return { status: 'conflict', why: `hold ${e.holdId} already has another event with sequence ${e.sequence}` };
  if (same.body_sha256 !== e.bodySha256)
    return { status: 'conflict', why: `event ${e.eventId} was recorded with a different body` };
  return { status: 'duplicate', dispatched: same.dispatched };
}

interface RefusedRequest {
  statusCode: number;
  errorCode: string;
  message: string;
  eventId: string | null;
  bodyExcerpt: string | null;
}

export async function recordRefused(db: Queryable, r: RefusedRequest): Promise<void> {
  await db.query(
    `INSERT INTO processor_requests_refused (status_code, error_code, message, event_id, body_excerpt)
     VALUES ($1::integer, $2::text, $3::text, $4::text, $5::text)`,
    [r.statusCode, r.errorCode, r.message, r.eventId, r.bodyExcerpt],
  );
}

/** Deletes up to `limit` refused-request rows received more than `olderThanMs` ago; returns how many. */
export async function deleteRefusedBefore(db: Queryable, olderThanMs: number, limit: number): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM processor_requests_refused WHERE id IN (
       SELECT id FROM processor_requests_refused
        WHERE received_at < now() - make_interval(secs => $1::double precision / 1000) ORDER BY id LIMIT $2::integer)`,
    [olderThanMs, limit],
  );
  return rowCount ?? 0;
}

/** The event has been handed to its hold's workflow. */
export async function markDispatched(db: Queryable, eventIds: readonly string[]): Promise<void> {
  await db.query(
    'UPDATE processor_events SET dispatched_at = now() WHERE event_id = ANY($1::text[]) AND dispatched_at IS NULL',
    [eventIds],
  );
}

/** Recorded events not handed over yet, received at least `olderThanMs` ago: the relay's work, oldest first. */
export async function undispatchedEvents(
  db: Queryable,
  olderThanMs: number,
  limit: number,
): Promise<(ProcessorEventRef & { holdId: string })[]> {
  const { rows } = await db.query<ProcessorEventRef & { holdId: string }>(
    `SELECT event_id AS "eventId", hold_id AS "holdId", sequence FROM processor_events
      WHERE dispatched_at IS NULL AND received_at <= now() - make_interval(secs => $1::double precision / 1000)
      ORDER BY received_at LIMIT $2::integer`,
    [olderThanMs, limit],
  );
  return rows;
}

/** A recorded event and its hold, locked (FOR UPDATE, as the release locks it) for applying the event. */
interface EventToApply {
  holdId: string;
  event: RecordedEvent & {
    /** Set once applied: an event is applied once. */
    outcome: ProcessorEventOutcome | null;
    webhookId: string | null;
    /** A human skipped this event's sequence on this hold. */
    skipped: boolean;
  };
  /** Undefined when the ledger has no such hold. */
  hold?: LockedHold & { accountId: string; merchantId: string };
}

/**
 * The event and its hold, the hold's row locked until the end of the caller's transaction; undefined if no such event.
 */
export async function lockEventToApply(tx: pg.PoolClient, eventId: string): Promise<EventToApply | undefined> {
  const found = await tx.query<{ hold_id: string }>('SELECT hold_id FROM processor_events WHERE event_id = $1::text', [
    eventId,
  ]);
  const holdId = found.rows[0]?.hold_id;
  if (holdId === undefined) return undefined;

  const locked = await tx.query<Omit<NonNullable<EventToApply['hold']>, 'amountMinor'> & { amountMinor: string }>(
    `SELECT h.state, h.event_seq AS "eventSeq", h.amount_minor AS "amountMinor", h.currency, ${HOLD_DEFECT_SQL} AS defect,
            h.account_id AS "accountId", h.merchant_id AS "merchantId"
       FROM auth_holds h
       LEFT JOIN accounts a ON a.id = h.account_id
       LEFT JOIN merchants m ON m.id = h.merchant_id
      WHERE h.id = $1::text
        FOR UPDATE OF h`,
    [holdId],
  );
  const holdRow = locked.rows[0];
  const { rows: eventRows } = await tx.query<{
    sequence: number;
    event_type: ProcessorEventType;
    amount_minor: string | null;
    currency: string | null;
    outcome: ProcessorEventOutcome | null;
    webhook_id: string | null;
    skipped: boolean;
  }>(
    `SELECT e.sequence, e.event_type, e.amount_minor, e.currency, e.outcome, e.webhook_id,
            EXISTS (SELECT 1 FROM processor_sequence_skips s WHERE s.hold_id = e.hold_id AND s.sequence = e.sequence) AS skipped
       FROM processor_events e WHERE e.event_id = $1::text`,
    [eventId],
  );
  const e = eventRows[0]!;
  return {
    holdId,
    event: {
      eventType: e.event_type,
      sequence: e.sequence,
      amountMinor: e.amount_minor === null ? null : BigInt(e.amount_minor),
      currency: e.currency,
      outcome: e.outcome,
      webhookId: e.webhook_id,
      skipped: e.skipped,
    },
    ...(holdRow && { hold: { ...holdRow, amountMinor: BigInt(holdRow.amountMinor) } }),
  };
}

/**
 * The webhook an applied event sends (`enqueueWebhook`, the outbox writer every webhook goes through): its id names
 * the hold and the processor's sequence. Returns its id.
 */
export async function enqueueEventWebhook(
  tx: pg.PoolClient,
  eventId: string,
  webhookType: string,
  ledgerEntryId: string | null,
  outcome: ProcessorEventOutcome,
): Promise<string> {
  const { rows } = await tx.query<{ webhook_id: string }>(
    `WITH e AS (
       SELECT e.event_id, e.hold_id, e.sequence, e.amount_minor, e.occurred_at, h.merchant_id, h.currency,
              h.amount_minor AS hold_amount_minor, h.state
         FROM processor_events e JOIN auth_holds h ON h.id = e.hold_id
        WHERE e.event_id = $1::text
     )
     ${enqueueWebhook({
       from: 'e',
       holdId: 'e.hold_id',
       merchantId: 'e.merchant_id',
       webhookId: `'wh_' || e.hold_id || '_ev' || e.sequence`,
       eventType: '$2::text',
       timestamp: isoUtc('now()'),
       data: [
         ['hold_id', 'e.hold_id'],
         ['merchant_id', 'e.merchant_id'],
         SEQUENCE,
         ['processor_event_id', 'e.event_id'],
         ['processor_sequence', 'e.sequence'],
         ['amount_minor', 'e.amount_minor'],
         ['hold_amount_minor', 'e.hold_amount_minor'],
         ['currency', 'e.currency'],
         ['hold_state', 'e.state'],
         ['outcome', '$4::text'],
         ['occurred_at', isoUtc('e.occurred_at')],
         ['ledger_entry_id', '$3::bigint::text'],
       ],
     })}`,
    [eventId, webhookType, ledgerEntryId, outcome],
  );
  return rows[0]!.webhook_id;
}

/** Flags the event for a human (ledger_reviews), once. */
export async function openReview(tx: pg.PoolClient, eventId: string, holdId: string, reason: string): Promise<void> {
  await tx.query(
    'INSERT INTO ledger_reviews (event_id, hold_id, reason) VALUES ($1::text, $2::text, $3::text) ON CONFLICT DO NOTHING',
    [eventId, holdId, reason],
  );
}

/** The event's outcome, which marks it applied, with what applying it wrote. */
export async function recordEventOutcome(
  tx: pg.PoolClient,
  eventId: string,
  outcome: { outcome: ProcessorEventOutcome; detail?: string },
  ledgerEntryId: string | null,
  webhookId: string | null,
): Promise<void> {
  await tx.query(
    `UPDATE processor_events
        SET outcome = $2::text, outcome_detail = $3::text, ledger_entry_id = $4::bigint, webhook_id = $5::text
      WHERE event_id = $1::text`,
    [eventId, outcome.outcome, outcome.detail ?? null, ledgerEntryId, webhookId],
  );
}

/** The webhook an applied event wrote, with its merchant's policy overrides (for the retry horizon). */
export async function webhookOf(
  tx: pg.PoolClient,
  webhookId: string | null,
): Promise<{ webhook?: EventWebhook & { deliveryPolicy: unknown } }> {
  if (webhookId === null) return {};
  const { rows } = await tx.query<{ event_type: string; merchant_id: string; delivery_policy: unknown }>(
    `SELECT d.event_type, d.merchant_id, m.delivery_policy FROM webhook_deliveries d LEFT JOIN merchants m ON m.id = d.merchant_id WHERE d.webhook_id = $1::text`,
    [webhookId],
  );
  const row = rows[0]!;
  return {
    webhook: { webhookId, eventType: row.event_type, merchantId: row.merchant_id, deliveryPolicy: row.delivery_policy },
  };
}

/**
 * A human's skip of a hold's missing sequence, recorded with who and why (the hold moved past it: `skipHoldSequence`).
 */
export async function recordSkip(
  tx: pg.PoolClient,
  holdId: string,
  sequence: number,
  by: string,
  reason: string,
): Promise<void> {
  await tx.query(
    'INSERT INTO processor_sequence_skips (hold_id, sequence, skipped_by, reason) VALUES ($1::text, $2::integer, $3::text, $4::text)',
    [holdId, sequence, by, reason],
  );
}

/** A hold's processor events in sequence, each with what applying it did and the state of the webhook it wrote. */
export async function eventsOfHold(db: Queryable, holdId: string): Promise<Record<string, unknown>[]> {
  const { rows } = await db.query(
    `SELECT e.sequence, e.event_id, e.event_type, e.amount_minor, e.currency, e.received_at, e.dispatched_at, e.applied_at,
            e.outcome, e.outcome_detail, e.ledger_entry_id, e.webhook_id, d.status AS webhook_status
       FROM processor_events e LEFT JOIN webhook_deliveries d ON d.webhook_id = e.webhook_id
      WHERE e.hold_id = $1::text ORDER BY e.sequence`,
    [holdId],
  );
  return rows;
}

/** A hold's skipped sequences, oldest first. */
export async function skipsOfHold(db: Queryable, holdId: string): Promise<Record<string, unknown>[]> {
  const { rows } = await db.query(
    'SELECT sequence, skipped_by, reason, skipped_at FROM processor_sequence_skips WHERE hold_id = $1::text ORDER BY sequence',
    [holdId],
  );
  return rows;
}

/** Ledger reviews (open ones only unless `all`), oldest first; with the event and its ledger entry. */
export async function reviews(
  db: Queryable,
  { all = false, holdId }: { all?: boolean; holdId?: string } = {},
): Promise<Record<string, unknown>[]> {
  const { rows } = await db.query(
    `SELECT r.event_id, r.hold_id, r.reason, r.opened_at, r.resolved_by, r.resolved_at, e.event_type, e.outcome, l.kind AS entry_kind,
            l.amount_minor AS entry_amount_minor
       FROM ledger_reviews r JOIN processor_events e ON e.event_id = r.event_id
       LEFT JOIN ledger_entries l ON l.id = e.ledger_entry_id
      WHERE ($1::boolean OR r.resolved_at IS NULL) AND ($2::text IS NULL OR r.hold_id = $2::text)
      ORDER BY r.opened_at, r.event_id`,
    [all, holdId ?? null],
  );
  return rows;
}

/** Closes an open review; false when there is none open for this event. */
export async function resolveReview(db: Queryable, eventId: string, by: string): Promise<boolean> {
  const { rowCount } = await db.query(
    'UPDATE ledger_reviews SET resolved_by = $2::text WHERE event_id = $1::text AND resolved_at IS NULL',
    [eventId, by],
  );
  return rowCount === 1;
}

/** Requests the receiver refused, newest first. */
export async function refusedRequests(
  db: Queryable,
  since: string | undefined,
  limit = 100,
): Promise<Record<string, unknown>[]> {
  const { rows } = await db.query(
    `SELECT id, received_at, status_code, error_code, message, event_id FROM processor_requests_refused
      WHERE $1::timestamptz IS NULL OR received_at >= $1::timestamptz ORDER BY id DESC LIMIT $2::integer`,
    [since ?? null, limit],
  );
  return rows;
}

/** The merchant of a hold, or undefined when the ledger has no such hold. */
export async function merchantOfHold(db: Queryable, holdId: string): Promise<string | undefined> {
  const { rows } = await db.query<{ merchant_id: string }>('SELECT merchant_id FROM auth_holds WHERE id = $1::text', [
    holdId,
  ]);
  return rows[0]?.merchant_id;
}

/** How long an applied event took from recorded (received) to applied, in seconds; undefined if it is not applied. */
export async function applyLagSeconds(db: Queryable, eventId: string): Promise<number | undefined> {
  const { rows } = await db.query<{ lag: number | null }>(
    'SELECT extract(epoch FROM applied_at - received_at)::float8 AS lag FROM processor_events WHERE event_id = $1::text',
    [eventId],
  );
  return rows[0]?.lag ?? undefined;
}
