/**
 * SQL of the holds ledger: auth_holds, accounts, ledger_entries and sweep_runs, and their only writer (the release's,
 * and an applied processor event's). Small query functions, positional cast parameters, no value ever interpolated;
 * the callers (src/activities/ledger.ts, src/activities/processor-events.ts, src/operations/operations.ts, the worker's
 * ledger gauges) own the transactions, and the rulebook (src/ledger/hold-rules.ts) decides what to write.
 *
 * A hold moves active -> released (the release: `lockHoldForRelease`, then `releaseLockedHold`, in one transaction)
 * or active -> rejected (`markRejected`); both are final here.
 */
import type pg from 'pg';
import type { HoldCursor, RejectedHold, ReleasedHold, SweepTotals } from '../contracts/domain.js';
import type { InvalidHoldCode } from '../contracts/failures.js';
import type { Queryable } from '../db/pool.js';
import { isoUtc } from '../db/sql.js';
import { InsufficientHeldBalance, ReleasedWithoutWebhook } from '../errors.js';
import { HOLD_RELEASED_EVENT, releasedWebhookEnqueued } from './deliveries.js';
import type { EventApplication, HoldAtRelease } from '../ledger/hold-rules.js';

/**
 * Why a hold row cannot be released, or NULL when it can. One SQL expression used by both the sweep's page
 * query and the release itself, so the two can never disagree. Needs `h` (auth_holds), `a` (accounts) and
 * `m` (merchants) in scope, the latter two LEFT JOINed.
 */
export const HOLD_DEFECT_SQL = `
  CASE WHEN h.amount_minor <= 0 THEN 'NonPositiveAmount'
       WHEN a.id IS NULL THEN 'UnknownAccount'
       WHEN m.id IS NULL THEN 'UnknownMerchant'
       WHEN a.currency <> h.currency THEN 'CurrencyMismatch'
  END`;

/**
 * 'UnusableHoldId' when the hold's id cannot be part of its workflow ids: longer than `maxBytesParam` UTF-8 bytes
 * (contracts/ids.ts `maxHoldIdBytes`), or holding a control character. Needs `h` (auth_holds) in scope.
 */
const UNUSABLE_ID_SQL = (maxBytesParam: string) =>
  `CASE WHEN octet_length(h.id) > ${maxBytesParam}::integer OR h.id ~ '[[:cntrl:]]' THEN 'UnusableHoldId' END`;

interface ExpiredHoldRow {
  id: string;
  expiresAt: string;
  merchantId: string;
  defect: InvalidHoldCode | null;
  /** At or before the cutoff of a sweep that has finished (`sweep_runs`), and still active: see `expiredHoldsPage`. */
  leftActiveByEarlierSweep: boolean;
}

/**
 * The cutoff a caller gives, bounded by the database clock: a sweep's cutoff may be earlier than the ledger's now (a
 * workflow clock a little behind, a sweep that started an hour ago), never later. Whatever a workflow input, signal or
 * a bug says, a hold is expired only when the ledger's own clock has passed its expiry. Nothing a caller says moves
 * money. Every query that decides or records "expired" goes through it. Within one sweep the bound only grows (now()
 * advances), so a hold a page listed as expired is still expired when its child releases it.
 */
const BOUNDED_CUTOFF = (param: string) => `least(${param}::timestamptz, now())`;

/**
 * Up to `limit` expired active holds at or before `cutoff` (bounded by the ledger's clock), in (expires_at, id) order
 * after `after`, each with its defect, and whether an earlier sweep already answered for it: its expiry is at or
 * before a finished sweep's cutoff (that sweep started its child and waited for the release), yet it is still active,
 * so that child ended without releasing it or is still at it. A hold new to this sweep is not: concurrent sweeps
 * collide on its child's id. A recorded cutoff counts only up to when its sweep finished (rows from before the bound
 * was enforced may say otherwise).
 */
export async function expiredHoldsPage(
  db: Queryable,
  cutoff: string,
  after: HoldCursor,
  limit: number,
  maxHoldIdBytes: number,
): Promise<ExpiredHoldRow[]> {
  const { rows } = await db.query<ExpiredHoldRow>(
    `SELECT h.id, ${isoUtc('h.expires_at')} AS "expiresAt", h.merchant_id AS "merchantId",
            coalesce(${HOLD_DEFECT_SQL}, ${UNUSABLE_ID_SQL('$5')}) AS defect,
            coalesce(h.expires_at <= (SELECT max(least(s.cutoff, s.finished_at)) FROM sweep_runs s), false)
              AS "leftActiveByEarlierSweep"
       FROM auth_holds h
       LEFT JOIN accounts a ON a.id = h.account_id
       LEFT JOIN merchants m ON m.id = h.merchant_id
      WHERE h.state = 'active'
        AND h.expires_at <= ${BOUNDED_CUTOFF('$1')}
        AND (h.expires_at, h.id) > ($2::timestamptz, $3::text)
      ORDER BY h.expires_at, h.id
      LIMIT $4::integer`,
    [cutoff, after.expiresAt, after.id, limit, maxHoldIdBytes],
  );
  return rows;
}

/** Marks still-active holds `rejected` with their defect code, so they leave the active set for good. */
export async function markRejected(db: Queryable, rejected: readonly RejectedHold[]): Promise<void> {
  if (rejected.length === 0) return;
  await db.query(
    `UPDATE auth_holds h
        SET state = 'rejected', reject_code = r.code, rejected_at = now()
       FROM unnest($1::text[], $2::text[]) AS r(id, code)
      WHERE h.id = r.id AND h.state = 'active'`,
    [rejected.map((r) => r.holdId), rejected.map((r) => r.code)],
  );
}

/** The hold as the release locked it: what the rulebook decides by (`HoldAtRelease`), and what the release writes. */
interface HoldForRelease extends HoldAtRelease {
  accountId: string;
  merchantId: string;
  amountMinor: string;
  currency: string;
}

/** The sweep's decision that a hold has expired: the cutoff it decided by, and the hold's expiry as it saw it. */
interface SweptAs {
  cutoff: string;
  expiresAt?: string;
}

/**
 * The hold, locked (FOR UPDATE) until the end of the release's transaction; undefined if the row is gone.
 *
 * `expired` is decided by the ledger's clock. With `sweptAs`, by the sweep's cutoff bounded by it (a sweep that
 * listed the hold as expired finds it still expired here: the bound only grows), and the hold's expiry must still be
 * the one the sweep saw (a re-authorised hold is a new business action for a later sweep). Without it (a workflow
 * started by hand), by the database clock alone. A cutoff in the future moves nothing.
 */
export async function lockHoldForRelease(
  tx: pg.PoolClient,
  holdId: string,
  sweptAs?: SweptAs,
): Promise<HoldForRelease | undefined> {
  const { rows } = await tx.query<HoldForRelease>(
    `SELECT h.state, h.reject_code AS "rejectCode", ${HOLD_DEFECT_SQL} AS defect,
            CASE WHEN $2::timestamptz IS NULL THEN h.expires_at <= now()
                 ELSE h.expires_at <= ${BOUNDED_CUTOFF('$2')} AND h.expires_at = coalesce($3::timestamptz, h.expires_at)
            END AS expired,
            ${isoUtc('h.expires_at')} AS "expiresAt", h.account_id AS "accountId", h.merchant_id AS "merchantId",
            h.amount_minor AS "amountMinor", h.currency
       FROM auth_holds h
       LEFT JOIN accounts a ON a.id = h.account_id
       LEFT JOIN merchants m ON m.id = h.merchant_id
      WHERE h.id = $1::text
        FOR UPDATE OF h`,
    [holdId, sweptAs?.cutoff ?? null, sweptAs?.expiresAt ?? null],
  );
  return rows[0];
}

/**
 * The release of a hold locked by `lockHoldForRelease`, in one statement: the amount moves from the account's held
 * balance to its available balance, the one ledger entry is written (its idempotency key, unique, makes a second
 * one impossible), the hold is marked released, and its webhook is enqueued (the outbox row, `releasedWebhookEnqueued`
 * in ./deliveries.ts, composed in here). Each step takes the row the one before it returned, so either all four
 * happen or none does. One round trip instead of five on the path every hold takes.
 *
 * Throws InsufficientHeldBalance, having written nothing, when the held balance does not cover the hold (the
 * account's `held_minor >= 0` would refuse it, and will by any retry): the transaction stays usable, so the caller
 * can mark the hold rejected in it.
 */
export async function releaseLockedHold(
  tx: pg.PoolClient,
  holdId: string,
  hold: HoldForRelease,
): Promise<ReleasedEntry> {
  const { rows } = await tx.query<ReleasedEntry>(
    `WITH moved AS (
       UPDATE accounts
          SET held_minor = held_minor - $3::bigint, available_minor = available_minor + $3::bigint, updated_at = now()
        WHERE id = $2::text AND held_minor >= $3::bigint
        RETURNING id
     ), entry AS (
       INSERT INTO ledger_entries (idempotency_key, kind, account_id, hold_id, amount_minor, currency)
       SELECT 'hold-release:' || $1::text, 'hold_release', moved.id, $1::text, $3::bigint, $4::char(3) FROM moved
       RETURNING id
     ), released AS (
       UPDATE auth_holds h SET state = 'released', released_at = now(), ledger_entry_id = entry.id
         FROM entry
        WHERE h.id = $1::text
        RETURNING h.id, h.expires_at, h.merchant_id, h.amount_minor, h.currency, h.released_at, h.ledger_entry_id
     ), webhook AS (
       ${releasedWebhookEnqueued()}
     )
     SELECT ${RELEASED_ENTRY_COLUMNS}, w.webhook_id AS "webhookId", m.delivery_policy AS "deliveryPolicy"
       FROM released h
       JOIN webhook w ON true
       LEFT JOIN merchants m ON m.id = h.merchant_id`,
    [holdId, hold.accountId, hold.amountMinor, hold.currency],
  );
  const row = rows[0];
  if (!row) throw new InsufficientHeldBalance(holdId, hold.accountId, hold.amountMinor);
  return row;
}

/** What ReleasedHold says of a released hold `h`, but its webhook. */
const RELEASED_ENTRY_COLUMNS = `h.id AS "holdId", h.ledger_entry_id AS "ledgerEntryId", h.amount_minor AS "amountMinor",
            h.currency, h.merchant_id AS "merchantId", ${isoUtc('h.released_at')} AS "releasedAt"`;

/**
 * A released hold's entry and webhook (ReleasedHold), with its merchant's raw `delivery_policy` overrides, unvalidated.
 */
type ReleasedEntry = ReleasedHold & { deliveryPolicy: unknown };

/**
 * What a released hold's release wrote: its ledger entry and its webhook (the outbox row). Throws
 * ReleasedWithoutWebhook when the webhook row is missing: there is nothing to deliver, and retrying changes nothing.
 */
export async function releasedEntry(db: Queryable, holdId: string): Promise<ReleasedEntry> {
  const { rows } = await db.query<Omit<ReleasedEntry, 'webhookId'> & { webhookId: string | null }>(
    // The merchant's overrides are optional here: a merchant row gone since the release still has its webhook.
    `SELECT ${RELEASED_ENTRY_COLUMNS}, d.webhook_id AS "webhookId", m.delivery_policy AS "deliveryPolicy"
       FROM auth_holds h
       LEFT JOIN webhook_deliveries d ON d.hold_id = h.id AND d.event_type = '${HOLD_RELEASED_EVENT}'
       LEFT JOIN merchants m ON m.id = h.merchant_id
      WHERE h.id = $1::text`,
    [holdId],
  );
  const row = rows[0];
  if (!row?.webhookId) throw new ReleasedWithoutWebhook(holdId);
  return { ...row, webhookId: row.webhookId };
}

/**
 * Expired active holds at or before `cutoff` (bounded by the ledger's clock): what a sweep has not released (yet).
 * With `upTo`, only those at or before it in the sweep's (expires_at, id) order: the ones its pages have listed.
 */
export async function countUnreleased(db: Queryable, cutoff: string, upTo?: HoldCursor): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::integer AS n FROM auth_holds
      WHERE state = 'active' AND expires_at <= ${BOUNDED_CUTOFF('$1')}
        AND ($2::timestamptz IS NULL OR (expires_at, id) <= ($2::timestamptz, $3::text))`,
    [cutoff, upTo?.expiresAt ?? null, upTo?.id ?? null],
  );
  return rows[0]!.n;
}

/**
 * Records a sweep's totals; a re-run of the same sweep updates what was left unreleased and when it finished. The
 * cutoff recorded is bounded by the ledger's clock (the table refuses one after `finished_at`): a later sweep's
 * `left_active` reads it.
 */
export async function recordSweepRun(
  db: Queryable,
  sweepId: string,
  cutoff: string,
  totals: SweepTotals,
  unreleasedAtEnd: number,
): Promise<void> {
  await db.query(
    `INSERT INTO sweep_runs (sweep_id, cutoff, pages, found, started, already_started, rejected, unreleased_at_end)
     VALUES ($1::text, ${BOUNDED_CUTOFF('$2')}, $3::integer, $4::integer, $5::integer, $6::integer, $7::integer, $8::integer)
     ON CONFLICT (sweep_id) DO UPDATE SET unreleased_at_end = EXCLUDED.unreleased_at_end`,
    [
      sweepId,
      cutoff,
      totals.pages,
      totals.found,
      totals.started,
      totals.alreadyStarted,
      totals.rejected,
      unreleasedAtEnd,
    ],
  );
}

/**
 * Seconds since the region's last completed sweep (its `sweep_runs` row, written by finishSweep) finished; on a
 * ledger no sweep has completed on yet, since the ledger was created (its first migration), so a schedule that
 * never worked still shows. For the no-completed-sweep gauge: one row per sweep, ~100 a day, so the aggregate
 * stays cheap without an index.
 */
export async function lastCompletedSweepAgeSeconds(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ age: number }>(
    `SELECT extract(epoch FROM now() - coalesce((SELECT max(finished_at) FROM sweep_runs), (SELECT min(applied_at) FROM schema_migrations), now()))::float8 AS age`,
  );
  return rows[0]!.age;
}

/** The hold's state, or undefined when no such hold exists. */
export async function holdState(db: Queryable, holdId: string): Promise<string | undefined> {
  const hold = await db.query<{ state: string }>('SELECT state FROM auth_holds WHERE id = $1::text', [holdId]);
  return hold.rows[0]?.state;
}

/** A hold as the operator's status report shows it, and its exact expiry (which names its workflow). */
export async function holdForReport(
  db: Queryable,
  holdId: string,
): Promise<{ hold: Record<string, unknown> & { state: string }; expiresAt: string } | undefined> {
  const { rows } = await db.query(
    `SELECT id, account_id, merchant_id, amount_minor, currency, state, reject_code, expires_at, released_at,
            ${isoUtc('expires_at')} AS expires_at_exact
       FROM auth_holds WHERE id = $1::text`,
    [holdId],
  );
  const row = rows[0];
  if (!row) return undefined;
  const { expires_at_exact: expiresAt, ...hold } = row;
  return { hold, expiresAt };
}

/** The ledger entry a hold's release wrote, or null. */
export async function ledgerEntryOfHold(db: Queryable, holdId: string): Promise<Record<string, unknown> | null> {
  const { rows } = await db.query(
    `SELECT id, amount_minor, currency, created_at FROM ledger_entries WHERE hold_id = $1::text AND kind = 'hold_release'`,
    [holdId],
  );
  return rows[0] ?? null;
}

/**
 * The event's ledger entry (keyed by the event id) and the account's balances it moves, in one statement; the entry's
 * id, or null when the account's held balance does not cover it (nothing written).
 */
export async function writeEventEntry(
  tx: pg.PoolClient,
  eventId: string,
  hold: { holdId: string; accountId: string; currency: string },
  entry: NonNullable<EventApplication['entry']>,
): Promise<string | null> {
  const { rows } = await tx.query<{ id: string }>(
    `WITH moved AS (
       UPDATE accounts
          SET held_minor = held_minor + $3::bigint, available_minor = available_minor + $4::bigint, updated_at = now()
        WHERE id = $2::text AND held_minor + $3::bigint >= 0
        RETURNING id
     )
     INSERT INTO ledger_entries (idempotency_key, kind, account_id, hold_id, amount_minor, currency, processor_event_id)
     SELECT 'processor-event:' || $1::text, $5::text, moved.id, $6::text, $7::bigint, $8::char(3), $1::text FROM moved
     RETURNING id`,
    [
      eventId,
      hold.accountId,
      entry.heldDelta.toString(),
      entry.availableDelta.toString(),
      entry.kind,
      hold.holdId,
      entry.amountMinor.toString(),
      hold.currency,
    ],
  );
  return rows[0]?.id ?? null;
}

/** The hold as an applied event leaves it: its final state if it gets one, its amount, its sequence. */
export async function updateHoldForEvent(
  tx: pg.PoolClient,
  holdId: string,
  sequence: number,
  decision: Pick<EventApplication, 'state' | 'amountDelta' | 'advances'>,
): Promise<void> {
  await tx.query(
    `UPDATE auth_holds
        SET state = coalesce($2::text, state),
            settled_at = CASE WHEN $2::text IS NULL THEN settled_at ELSE now() END,
            amount_minor = amount_minor + $3::bigint,
            event_seq = CASE WHEN $4::boolean THEN $5::integer ELSE event_seq END
      WHERE id = $1::text`,
    [holdId, decision.state ?? null, (decision.amountDelta ?? 0n).toString(), decision.advances, sequence],
  );
}

/**
 * A human closes a gap in a hold's processor events: its sequence moves past `sequence` if that is the one missing.
 * False when it is not (applied meanwhile, or another gap).
 */
export async function skipHoldSequence(tx: pg.PoolClient, holdId: string, sequence: number): Promise<boolean> {
  const { rowCount } = await tx.query(
    'UPDATE auth_holds SET event_seq = $2::integer WHERE id = $1::text AND event_seq = $2::integer - 1',
    [holdId, sequence],
  );
  return rowCount === 1;
}
