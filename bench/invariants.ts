/**
 * Checks the seven invariants of shared/DESIGN.md against the regions' ledgers, the fake merchants' request
 * logs, and any text that must not carry a secret (histories, logs), and reports every violation with the
 * offending ids. Used by the tests and the chaos run.
 */
import type pg from 'pg';
import type { ReceivedWebhook } from '../dev/fake-merchants.js';
import type { Region } from '../src/contracts/regions.js';

export interface Violation {
  invariant: number;
  message: string;
  ids: string[];
}

async function ids(pool: pg.Pool, sql: string): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>(sql);
  return rows.map((r) => r.id);
}

/** Invariant 1: released at most once, one ledger entry per release, held balances match active holds. */
export async function checkLedgerInvariants(pool: pg.Pool): Promise<Violation[]> {
  const checks: { message: string; sql: string }[] = [
    {
      message: 'released hold without exactly one matching ledger entry',
      sql: `SELECT h.id FROM auth_holds h
              LEFT JOIN ledger_entries e ON e.hold_id = h.id
             WHERE h.state = 'released'
             GROUP BY h.id, h.amount_minor, h.ledger_entry_id
            HAVING count(e.id) <> 1 OR bool_or(e.amount_minor <> h.amount_minor) OR bool_or(e.id <> h.ledger_entry_id)`,
    },
    {
      message: 'ledger entry for a hold that is not released',
      sql: `SELECT e.hold_id AS id FROM ledger_entries e JOIN auth_holds h ON h.id = e.hold_id WHERE h.state <> 'released'`,
    },
    {
      // Defective rows (non-positive amount, foreign currency) never held money, so they are not summed.
      message: "account's held balance differs from the sum of its unreleased holds",
      sql: `SELECT a.id FROM accounts a
              LEFT JOIN auth_holds h ON h.account_id = a.id AND h.state <> 'released'
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
const receiverLimit = (merchant: { rate_per_second: string; burst: number }) => Number(merchant.rate_per_second) + merchant.burst;

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
    const { rows } = await pool.query<{ id: string; rate_per_second: string; burst: number }>('SELECT id, rate_per_second, burst FROM merchants');
    for (const m of rows) {
      const limit = receiverLimit(m);
      const headroomMs = windowHeadroomMs(arrivals.get(m.id) ?? [], limit);
      if (!tightest || headroomMs < tightest.headroomMs) tightest = { merchantId: m.id, limit, headroomMs: Math.round(headroomMs) };
    }
  }
  return tightest;
}

export interface InvariantInput {
  regions: readonly { region: Region; pool: pg.Pool }[];
  /** Every request the merchants received. */
  requests: readonly ReceivedWebhook[];
  /** Texts that must never contain a signing secret: histories, worker logs. */
  texts: readonly { source: string; text: string }[];
}

const first = <T>(items: readonly T[], n = 20) => items.slice(0, n);

/** All seven invariants; an empty list means every one holds. */
export async function checkInvariants(input: InvariantInput): Promise<Violation[]> {
  const violations: Violation[] = [];
  const add = (invariant: number, message: string, ids: string[]) => {
    if (ids.length > 0) violations.push({ invariant, message, ids: first(ids) });
  };
  const deliveries = new Map<string, { region: Region; payload: string; status: string; holdState: string; merchantId: string }>();
  const merchantRegion = new Map<string, Region>();
  const secrets: string[] = [];
  const limits = new Map<string, number>();
  const leakedTexts: { source: string; text: string }[] = [];

  for (const { region, pool } of input.regions) {
    for (const v of await checkLedgerInvariants(pool)) violations.push({ ...v, message: `${region}: ${v.message}` });
    // 2. No loss: after quiescence no expired, active hold may remain (rejected rows leave the active set).
    add(2, `${region}: expired hold still active`, await ids(pool, `SELECT id FROM auth_holds WHERE state = 'active' AND expires_at <= now()`));
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
    const { rows } = await pool.query<{ webhook_id: string; payload: string; status: string; state: string; merchant_id: string }>(
      'SELECT d.webhook_id, d.payload, d.status, h.state, d.merchant_id FROM webhook_deliveries d JOIN auth_holds h ON h.id = d.hold_id',
    );
    for (const r of rows) {
      if (deliveries.has(r.webhook_id)) add(6, 'webhook id present in two regions', [r.webhook_id]);
      deliveries.set(r.webhook_id, { region, payload: r.payload, status: r.status, holdState: r.state, merchantId: r.merchant_id });
    }
    const merchants = await pool.query<{
      id: string;
      rate_per_second: string;
      burst: number;
      signing_secret: string | null;
      previous_signing_secret: string | null;
    }>('SELECT id, rate_per_second, burst, signing_secret, previous_signing_secret FROM merchants');
    for (const m of merchants.rows) {
      merchantRegion.set(m.id, region);
      limits.set(m.id, receiverLimit(m));
      for (const secret of [m.signing_secret, m.previous_signing_secret]) if (secret) secrets.push(secret);
    }
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
    if (!delivery || delivery.holdState !== 'released') {
      uncommitted.push(webhookId || '(no webhook-id header)');
      continue;
    }
    if (requests.some((r) => r.body !== delivery.payload)) changed.push(webhookId);
    if (requests.some((r) => merchantRegion.get(r.merchantId) !== delivery.region || r.merchantId !== delivery.merchantId))
      wrongRegion.push(webhookId);
  }
  add(5, 'webhook sent for a release that did not commit', uncommitted);
  add(3, 'webhook body differs from the payload fixed at release', changed);
  add(6, "webhook sent to a merchant outside its hold's region", wrongRegion);

  // 4. Receiver-side rate: any 1-second window at most rate + burst.
  add(
    4,
    'merchant received more than rate + burst in a 1-second window',
    [...arrivalsByMerchant(input.requests)]
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
