/**
 * Checks the invariants of docs/invariants.md (by number) against the regions' ledgers, the fake merchants' request
 * logs, and any text that must not carry a secret (histories, logs), and reports every violation with the
 * offending ids. Used by the tests and the chaos run.
 */
import type pg from 'pg';
import type { ReceivedWebhook } from '../dev/fake-merchants.js';
import type { EncryptionKey } from '../src/crypto/key-ring.js';
import type { Region } from '../src/contracts/regions.js';
import { localKeyRing, SecretUnsealFailed } from '../src/delivery/secret-box.js';

export interface Violation {
  invariant: number;
  message: string;
  ids: string[];
}

async function ids(pool: pg.Pool, sql: string): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>(sql);
  return rows.map((r) => r.id);
}

/**
 * Invariant 1: released at most once, one ledger entry per release, held balances match the holds still holding
 * money; and the processor's side of it: a captured or reversed hold was never released, and the other way round.
 */
export async function checkLedgerInvariants(pool: pg.Pool): Promise<Violation[]> {
  const checks: { message: string; sql: string }[] = [
    {
      message: 'released hold without exactly one matching release entry',
      sql: `SELECT h.id FROM auth_holds h
              LEFT JOIN ledger_entries e ON e.hold_id = h.id AND e.kind = 'hold_release'
             WHERE h.state = 'released'
             GROUP BY h.id, h.ledger_entry_id
            HAVING count(e.id) <> 1 OR bool_or(e.id <> h.ledger_entry_id)`,
    },
    {
      message: 'release entry for a hold that is not released',
      sql: `SELECT e.hold_id AS id FROM ledger_entries e JOIN auth_holds h ON h.id = e.hold_id
             WHERE e.kind = 'hold_release' AND h.state <> 'released'`,
    },
    {
      // The release moved exactly what the hold held, increments included (none applies after a release).
      message: 'release entry differs from the amount the hold held',
      sql: `SELECT h.id FROM auth_holds h JOIN ledger_entries e ON e.id = h.ledger_entry_id
             WHERE h.state = 'released' AND e.amount_minor <> h.amount_minor`,
    },
    {
      message: 'captured or reversed hold that was also released (or released after it was settled)',
      sql: `SELECT h.id FROM auth_holds h JOIN ledger_entries e ON e.hold_id = h.id
             GROUP BY h.id
            HAVING count(*) FILTER (WHERE e.kind IN ('hold_capture', 'hold_reversal')) > 0
               AND count(*) FILTER (WHERE e.kind = 'hold_release') > 0
                OR count(*) FILTER (WHERE e.kind IN ('hold_capture', 'hold_reversal', 'hold_release')) > 1`,
    },
    {
      message: 'settled hold whose state and ledger disagree',
      sql: `SELECT h.id FROM auth_holds h
             WHERE (h.state = 'captured') <> EXISTS (SELECT 1 FROM ledger_entries e WHERE e.hold_id = h.id AND e.kind = 'hold_capture')
                OR (h.state = 'reversed') <> EXISTS (SELECT 1 FROM ledger_entries e WHERE e.hold_id = h.id AND e.kind = 'hold_reversal')`,
    },
    {
      message: 'late capture that is not flagged for review, or not after a release or reversal',
      sql: `SELECT e.hold_id AS id FROM ledger_entries e JOIN auth_holds h ON h.id = e.hold_id
             WHERE e.kind = 'late_capture'
               AND (h.state NOT IN ('released', 'reversed')
                    OR NOT EXISTS (SELECT 1 FROM ledger_reviews r WHERE r.event_id = e.processor_event_id))`,
    },
    {
      // Defective rows (non-positive amount, foreign currency) never held money, so they are not summed.
      message: "account's held balance differs from the sum of the holds still holding money",
      sql: `SELECT a.id FROM accounts a
              LEFT JOIN auth_holds h ON h.account_id = a.id AND h.state NOT IN ('released', 'captured', 'reversed')
                                    AND h.amount_minor > 0 AND h.currency = a.currency
             GROUP BY a.id, a.held_minor
            HAVING a.held_minor <> coalesce(sum(h.amount_minor), 0)`,
    },
  ];
  const violations: Violation[] = [];
  for (const check of checks) {
    const found = await ids(pool, check.sql);
    if (found.length > 0) violations.push({ invariant: 1, message: check.message, ids: found });
  }
  return violations;
}

/** The most arrivals in any window of `windowMs` (half-open), sliding over every arrival. */
export function maxInAnyWindow(times: readonly number[], windowMs = 1000): number {
  const sorted = [...times].sort((a, b) => a - b);
  let max = 0;
  let start = 0;
  for (let end = 0; end < sorted.length; end++) {
    while (sorted[end]! - sorted[start]! >= windowMs) start++;
    max = Math.max(max, end - start + 1);
  }
  return max;
}

/**
 * How much later than its neighbours a request could have arrived without putting more than `limit` into one
 * window: the shortest span of `limit + 1` consecutive arrivals, minus the window. Negative is a violation;
 * Infinity when there are too few arrivals to matter.
 */
export function windowHeadroomMs(times: readonly number[], limit: number, windowMs = 1000): number {
  const sorted = [...times].sort((a, b) => a - b);
  const n = Math.floor(limit);
  let tightest = Infinity;
  for (let i = 0; i + n < sorted.length; i++) tightest = Math.min(tightest, sorted[i + n]! - sorted[i]!);
  return tightest - windowMs;
}

/** Each merchant's arrival times, in the order received. */
function arrivalsByMerchant(requests: readonly ReceivedWebhook[]): Map<string, number[]> {
  const byMerchant = new Map<string, number[]>();
  for (const request of requests) {
    const times = byMerchant.get(request.merchantId);
    if (times) times.push(request.receivedAt);
    else byMerchant.set(request.merchantId, [request.receivedAt]);
  }
  return byMerchant;
}

/** What invariant 4 allows a merchant in one second. */
const receiverLimit = (merchant: { rate_per_second: string; burst: number }) =>
  Number(merchant.rate_per_second) + merchant.burst;

export interface MerchantWindow {
  merchantId: string;
  limit: number;
  headroomMs: number;
}

/** The merchant whose receiver-side 1-second limit came closest to being broken, and by how much room. */
export async function tightestMerchantWindow(
  regions: readonly { pool: pg.Pool }[],
  requests: readonly ReceivedWebhook[],
): Promise<MerchantWindow | undefined> {
  const arrivals = arrivalsByMerchant(requests);
  let tightest: MerchantWindow | undefined;
  for (const { pool } of regions) {
    const { rows } = await pool.query<{ id: string; rate_per_second: string; burst: number }>(
      'SELECT id, rate_per_second, burst FROM merchants',
    );
    for (const m of rows) {
      const limit = receiverLimit(m);
      const headroomMs = windowHeadroomMs(arrivals.get(m.id) ?? [], limit);
      if (!tightest || headroomMs < tightest.headroomMs)
        tightest = { merchantId: m.id, limit, headroomMs: Math.round(headroomMs) };
    }
  }
  return tightest;
}

interface InvariantInput {
  /**
   * Each region's ledger, and the key ring its merchants' secrets are sealed with (its workers' MERCHANT_SECRET_KEYS):
   * the check opens them to know what must not appear in `texts`.
   */
  regions: readonly { region: Region; pool: pg.Pool; secretKeys: readonly EncryptionKey[] }[];
  /** Every request the merchants received. */
  requests: readonly ReceivedWebhook[];
  /** Texts that must never contain a signing secret: histories, worker logs. */
  texts: readonly { source: string; text: string }[];
  /** Secrets besides the merchants' (e.g. the processor's), which must not appear in `texts` either. */
  secrets?: readonly string[];
}

const first = <T>(items: readonly T[], n = 20) => items.slice(0, n);

/**
 * Invariant 8, the processor's events: every recorded event applied exactly once, in its hold's sequence (each
 * hold's applied events are exactly 1..event_seq, less the skipped, applied in that order), with at most one ledger
 * entry each; with `quiescent`, none is left unapplied.
 */
export async function checkProcessorEventInvariants(pool: pg.Pool, { quiescent = true } = {}): Promise<Violation[]> {
  const checks: { message: string; sql: string; atRest?: boolean }[] = [
    {
      message: 'recorded processor event never applied',
      sql: `SELECT event_id AS id FROM processor_events WHERE applied_at IS NULL`,
      atRest: true,
    },
    {
      message: "hold's applied sequence has a hole or a double (not exactly 1..event_seq less the skipped)",
      sql: `SELECT h.id FROM auth_holds h
             WHERE h.event_seq > 0
               AND (SELECT count(*) FROM processor_events e WHERE e.hold_id = h.id AND e.outcome IS NOT NULL AND e.outcome <> 'skipped_over')
                 + (SELECT count(*) FROM processor_sequence_skips s WHERE s.hold_id = h.id) <> h.event_seq
                OR EXISTS (SELECT 1 FROM processor_events e WHERE e.hold_id = h.id AND e.outcome <> 'skipped_over' AND e.sequence > h.event_seq)`,
    },
    {
      message: "processor events applied out of their hold's sequence",
      sql: `SELECT DISTINCT a.hold_id AS id FROM processor_events a JOIN processor_events b
                ON b.hold_id = a.hold_id AND b.sequence > a.sequence AND b.applied_at < a.applied_at
             WHERE a.outcome <> 'skipped_over' AND b.outcome <> 'skipped_over'`,
    },
    {
      message: 'processor event with a ledger entry that is not its own, or more than one',
      sql: `SELECT e.event_id AS id FROM processor_events e
              LEFT JOIN ledger_entries l ON l.processor_event_id = e.event_id
             GROUP BY e.event_id, e.ledger_entry_id
            HAVING count(l.id) > 1 OR (e.ledger_entry_id IS NULL) <> (count(l.id) = 0) OR bool_or(l.id <> e.ledger_entry_id)`,
    },
  ];
  const violations: Violation[] = [];
  for (const check of checks) {
    if (check.atRest && !quiescent) continue;
    const found = await ids(pool, check.sql);
    if (found.length > 0) violations.push({ invariant: 8, message: check.message, ids: first(found) });
  }
  return violations;
}

/** Each account's money (available + held), to compare across a run with `checkBalanced`. */
export async function accountTotals(pool: pg.Pool): Promise<Map<string, bigint>> {
  const { rows } = await pool.query<{ id: string; total: string }>(
    'SELECT id, (available_minor + held_minor)::text AS total FROM accounts',
  );
  return new Map(rows.map((r) => [r.id, BigInt(r.total)]));
}

/**
 * The ledger balances: releases, reversals and increments only move money between an account's held and available
 * balances, so each account's available + held is what it was at `opening`, less what was captured from it.
 */
export async function checkBalanced(pool: pg.Pool, opening: ReadonlyMap<string, bigint>): Promise<Violation[]> {
  const now = await accountTotals(pool);
  const { rows } = await pool.query<{ account_id: string; captured: string }>(
    `SELECT account_id, sum(amount_minor)::text AS captured FROM ledger_entries WHERE kind IN ('hold_capture', 'late_capture') GROUP BY account_id`,
  );
  const captured = new Map(rows.map((r) => [r.account_id, BigInt(r.captured)]));
  const off = [...opening]
    .filter(([id, total]) => (now.get(id) ?? 0n) + (captured.get(id) ?? 0n) !== total)
    .map(([id]) => id);
  return off.length > 0
    ? [{ invariant: 1, message: 'account money changed by more than its captures', ids: first(off) }]
    : [];
}

/** Every invariant of docs/invariants.md; an empty list means every one holds. */
export async function checkInvariants(input: InvariantInput): Promise<Violation[]> {
  const violations: Violation[] = [];
  const add = (invariant: number, message: string, ids: string[]) => {
    if (ids.length > 0) violations.push({ invariant, message, ids: first(ids) });
  };
  const deliveries = new Map<
    string,
    { region: Region; payload: string; status: string; committed: boolean; merchantId: string }
  >();
  const merchantRegion = new Map<string, Region>();
  const secrets: string[] = [...(input.secrets ?? [])];
  const limits = new Map<string, number>();
  const admissions = new Map<string, number[]>();
  const leakedTexts: { source: string; text: string }[] = [];

  for (const { region, pool, secretKeys } of input.regions) {
    const sealer = localKeyRing(secretKeys);
    for (const v of await checkLedgerInvariants(pool)) violations.push({ ...v, message: `${region}: ${v.message}` });
    for (const v of await checkProcessorEventInvariants(pool))
      violations.push({ ...v, message: `${region}: ${v.message}` });
    // 2. No loss: after quiescence no expired, active hold may remain (rejected rows leave the active set).
    add(
      2,
      `${region}: expired hold still active`,
      await ids(pool, `SELECT id FROM auth_holds WHERE state = 'active' AND expires_at <= now()`),
    );
    // 3. One webhook per released hold, fixed at release.
    add(
      3,
      `${region}: released hold without its webhook`,
      await ids(
        pool,
        `SELECT h.id FROM auth_holds h LEFT JOIN webhook_deliveries d ON d.hold_id = h.id WHERE h.state = 'released' AND d.webhook_id IS NULL`,
      ),
    );
    add(
      3,
      `${region}: delivered webhook that also has a discard or abandon decision`,
      await ids(
        pool,
        `SELECT d.webhook_id AS id FROM webhook_deliveries d JOIN delivery_decisions x USING (webhook_id)
        WHERE d.status = 'delivered' AND x.decision IN ('discard', 'abandon')`,
      ),
    );
    // A webhook's transaction committed: a release's, if its hold is released; an event's, if the event is applied.
    const { rows } = await pool.query<{
      webhook_id: string;
      payload: string;
      status: string;
      committed: boolean;
      merchant_id: string;
    }>(
      `SELECT d.webhook_id, d.payload, d.status, d.merchant_id,
              CASE WHEN d.event_type = 'hold.released' THEN h.state = 'released'
                   ELSE EXISTS (SELECT 1 FROM processor_events e WHERE e.webhook_id = d.webhook_id AND e.applied_at IS NOT NULL) END AS committed
         FROM webhook_deliveries d JOIN auth_holds h ON h.id = d.hold_id`,
    );
    for (const r of rows) {
      if (deliveries.has(r.webhook_id)) add(6, 'webhook id present in two regions', [r.webhook_id]);
      deliveries.set(r.webhook_id, {
        region,
        payload: r.payload,
        status: r.status,
        committed: r.committed,
        merchantId: r.merchant_id,
      });
    }
    const merchants = await pool.query<{
      id: string;
      rate_per_second: string;
      burst: number;
      signing_secret: string | null;
      previous_signing_secret: string | null;
    }>('SELECT id, rate_per_second, burst, signing_secret, previous_signing_secret FROM merchants');
    const unopenable: string[] = [];
    // 4. Each attempt's admission by its merchant's budget, on the ledger's clock (the attempt log's start).
    const admitted = await pool.query<{ merchant_id: string; at: number }>(
      `SELECT d.merchant_id, (extract(epoch FROM a.started_at) * 1000)::float8 AS at
         FROM delivery_attempts a JOIN webhook_deliveries d USING (webhook_id)`,
    );
    for (const { merchant_id: m, at } of admitted.rows) {
      const times = admissions.get(m);
      if (times) times.push(at);
      else admissions.set(m, [at]);
    }
    for (const m of merchants.rows) {
      merchantRegion.set(m.id, region);
      limits.set(m.id, receiverLimit(m));
      for (const sealed of [m.signing_secret, m.previous_signing_secret]) {
        if (!sealed) continue;
        try {
          secrets.push(await sealer.open(sealed, { region, merchantId: m.id }));
        } catch (err) {
          if (!(err instanceof SecretUnsealFailed)) throw err;
          unopenable.push(`${m.id} (${err.problem})`);
        }
      }
    }
    // 7. Secrets sealed at rest, each opening with its region's ring: else this check could not look for it.
    add(7, `${region}: merchant signing secret in clear text or not opening with the region's key ring`, unopenable);
    // 7. Secrets never in what we store from failures.
    const leaked = await pool.query<{ id: string; text: string }>(
      `SELECT webhook_id AS id, coalesce(last_error, '') AS text FROM webhook_deliveries
        UNION ALL SELECT webhook_id, coalesce(response_excerpt, '') FROM delivery_attempts`,
    );
    leakedTexts.push(...leaked.rows.map((r) => ({ source: `${region} ledger ${r.id}`, text: r.text })));
  }

  // 3 and 5: every request is a webhook whose release committed, with exactly the stored payload.
  const byWebhook = new Map<string, ReceivedWebhook[]>();
  for (const request of input.requests) {
    const list = byWebhook.get(request.webhookId ?? '') ?? [];
    list.push(request);
    byWebhook.set(request.webhookId ?? '', list);
  }
  const uncommitted: string[] = [];
  const changed: string[] = [];
  const wrongRegion: string[] = [];
  for (const [webhookId, requests] of byWebhook) {
    const delivery = deliveries.get(webhookId);
    if (!delivery || !delivery.committed) {
      uncommitted.push(webhookId || '(no webhook-id header)');
      continue;
    }
    if (requests.some((r) => r.body !== delivery.payload)) changed.push(webhookId);
    if (
      requests.some((r) => merchantRegion.get(r.merchantId) !== delivery.region || r.merchantId !== delivery.merchantId)
    )
      wrongRegion.push(webhookId);
  }
  add(5, 'webhook sent for a release that did not commit', uncommitted);
  add(3, 'webhook body differs from the payload fixed at release', changed);
  add(6, "webhook sent to a merchant outside its hold's region", wrongRegion);

  // 4. The merchant's rate as its budget admits it: any 1-second window of admissions at most rate + burst. What the
  // merchant then receives is admission plus the time to reach it, which a busy machine stretches unevenly: reported as
  // headroom (tightestMerchantWindow), not judged.
  add(
    4,
    'merchant admitted more than rate + burst in a 1-second window',
    [...admissions]
      .filter(([m, times]) => maxInAnyWindow(times) > (limits.get(m) ?? Infinity))
      .map(([m, times]) => `${m} (${maxInAnyWindow(times)} > ${limits.get(m)})`),
  );

  // 7. No secret (nor its base64 body) in histories, logs or stored failures.
  const needles = secrets.flatMap((s) => [s, s.replace(/^whsec_/, '')]);
  add(
    7,
    'signing secret found',
    [...input.texts, ...leakedTexts].filter((t) => needles.some((n) => t.text.includes(n))).map((t) => t.source),
  );
  return violations;
}
