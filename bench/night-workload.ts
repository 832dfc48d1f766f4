/**
 * The benchmark's night workload (bench/README.md), generated from a seed: 50,000 holds (US 60 % / EU 40 %) over ~400
 * merchants with a skewed (Zipf) share of the holds; rates mostly 5 req/s, some 1 and some 50; and, unless
 * fault-free, ~2 % of merchants answering 429 with Retry-After, ~1 % answering 503 for a while then recovering,
 * ~0.5 % answering 400, a few 410, a few slow past the attempt timeout and one that hangs.
 *
 * Rates follow volume the way they do in life: the biggest merchants publish 50 req/s, the 1 req/s ones are
 * small. (A 1 req/s merchant with the top share would set a makespan of hours whatever the design.)
 *
 * Two variations, chosen by rank alone (no draw from the seed, so the rest of the night is the same night): slow
 * merchants (`merchantLatencyMs`, `slowMerchants`) and merchants on one shared origin (`sharedOrigin`,
 * `sharedOriginMerchants`).
 */
import type { MerchantScript } from '../dev/fake-merchants.js';
import { seededRandom } from '../dev/seed.js';
import type { Region } from '../src/contracts/regions.js';

type MerchantFault = 'none' | 'rate_limited' | 'outage' | 'rejects' | 'gone' | 'slow' | 'hangs';

interface NightMerchant {
  id: string;
  region: Region;
  ratePerSecond: number;
  burst: number;
  fault: MerchantFault;
  holds: number;
  /** A slow merchant: every request answered 200 after this many ms (`slowMerchants`). */
  latencyMs?: number;
  /** Its endpoint is on the one origin it shares with the other such merchants (`sharedOriginMerchants`). */
  sharedOrigin?: boolean;
}

interface NightHold {
  id: string;
  region: Region;
  merchantId: string;
  accountId: string;
  amountMinor: number;
  expiresInSeconds: number;
}

export interface NightWorkload {
  seed: number;
  faults: boolean;
  merchants: NightMerchant[];
  holds: NightHold[];
  /** max over merchants that end up delivering of holds ÷ published rate: no design drains faster. */
  merchantBound: { seconds: number; merchantId: string; holds: number; ratePerSecond: number };
}

interface NightOptions {
  holds: number;
  merchants: number;
  seed: number;
  faults: boolean;
  /** One slow merchant per value, answering every request 200 after that many ms. */
  merchantLatencyMs?: readonly number[];
  /** How many merchants have their endpoints on one shared origin. */
  sharedOrigin?: number;
}

const REGION_SHARE: Readonly<Record<Region, number>> = { us: 0.6, eu: 0.4 };
const ZIPF_EXPONENT = 0.8;
/** Share of merchants (by volume, from the top) that publish 50 req/s. */
const FAST_SHARE = 0.03;
/** Share of all merchants, drawn from the smaller half, that publish 1 req/s. */
const SLOW_SHARE = 0.1;
/** Fault kinds and how many merchants per 1,000 (at least one each when faults are on). */
const FAULTS: readonly [MerchantFault, number][] = [
  ['rate_limited', 20],
  ['outage', 10],
  ['rejects', 5],
  ['gone', 5],
  ['slow', 5],
  ['hangs', 2.5],
];

/**
 * How a merchant with `fault` answers. Healthy ones take 5–25 ms, like a nearby endpoint; a slow one (`latencyMs`)
 * answers 200 after that long, its draw made all the same so every other merchant's script is the night's without it.
 */
export function merchantScript(
  fault: MerchantFault,
  secret: string,
  random: () => number,
  latencyMs?: number,
): MerchantScript {
  const secrets = [secret];
  const ok = { status: 200, delayMs: 5 + Math.floor(random() * 20) };
  if (latencyMs !== undefined) return { secrets, responses: [{ status: 200, delayMs: latencyMs }] };
  switch (fault) {
    case 'none':
      return { secrets, responses: [ok] };
    case 'rate_limited': // the second request and every fifth after it: slow down, with Retry-After
      return { secrets, cycle: true, responses: [ok, { status: 429, retryAfter: '2' }, ok, ok, ok] };
    case 'outage': // the first twenty requests meet an outage, then it is over
      return { secrets, responses: [...Array.from({ length: 20 }, () => ({ status: 503 })), ok] };
    case 'rejects':
      return { secrets, responses: [{ status: 400, body: '{"error":"unknown event type"}' }] };
    case 'gone':
      return { secrets, responses: [{ status: 410, body: 'endpoint removed' }] };
    case 'slow': // three answers past the 15 s attempt timeout, then slow but in time
      return {
        secrets,
        responses: [
          ...Array.from({ length: 3 }, () => ({ status: 200, delayMs: 20_000 })),
          { status: 200, delayMs: 300 },
        ],
      };
    case 'hangs':
      return { secrets, responses: [{ hang: true }] };
  }
}

/** Merchants by volume over both regions, the biggest first; ties by id, so a choice by rank is the seed's alone. */
export function byVolume(merchants: readonly NightMerchant[]): NightMerchant[] {
  return [...merchants].sort((a, b) => b.holds - a.holds || a.id.localeCompare(b.id));
}

/**
 * How many of the biggest merchants the slow ones are chosen below: in practice each region's biggest (~5 % of the
 * holds each), left as they are so that a slow merchant is a big one among several, not the one the night is about.
 */
const SLOW_BELOW_TOP = 2;

/**
 * The slow merchants, one per latency in order: by volume just below the top two, skipping any with a fault (a slow
 * one answers nothing but 200 after its latency), so each has a share of the holds that shows in the night (~2–4 %:
 * at the default 400 merchants they are 50 req/s ones, ranks 3 and 4 by volume for two latencies).
 */
function slowMerchants(merchants: readonly NightMerchant[], count: number): NightMerchant[] {
  const chosen = byVolume(merchants)
    .slice(SLOW_BELOW_TOP)
    .filter((m) => m.fault === 'none')
    .slice(0, count);
  if (chosen.length < count) throw new Error(`only ${chosen.length} merchants can be slow, ${count} asked`);
  return chosen;
}

/**
 * The merchants on one shared origin: the top `n` by volume, a slow one among them when it ranks there (a platform
 * receiving for its merchants, one of which answers slowly: what budgets per merchant are for). Faults are kept: a
 * platform's merchants answer as they would on their own origins.
 */
function sharedOriginMerchants(merchants: readonly NightMerchant[], n: number): NightMerchant[] {
  const chosen = byVolume(merchants).slice(0, n);
  if (chosen.length < n) throw new Error(`only ${chosen.length} merchants can share an origin, ${n} asked`);
  return chosen;
}

export function nightWorkload({
  holds,
  merchants,
  seed,
  faults,
  merchantLatencyMs = [],
  sharedOrigin = 0,
}: NightOptions): NightWorkload {
  const random = seededRandom(seed);
  const allMerchants: NightMerchant[] = [];
  const allHolds: NightHold[] = [];
  for (const region of ['us', 'eu'] as const) {
    const regionHolds = Math.round(holds * REGION_SHARE[region]);
    const count = Math.max(1, Math.round(merchants * REGION_SHARE[region]));
    const weights = Array.from({ length: count }, (_, rank) => 1 / (rank + 1) ** ZIPF_EXPONENT);
    const total = weights.reduce((a, b) => a + b, 0);
    const regionMerchants: NightMerchant[] = weights.map((_, rank) => ({
      id: `m_${region}_${String(rank + 1).padStart(3, '0')}`,
      region,
      ratePerSecond: rank < Math.ceil(count * FAST_SHARE) ? 50 : 5,
      burst: 1,
      fault: 'none',
      holds: 0,
    }));
    // 1 req/s: drawn from the smaller half.
    const smaller = regionMerchants.slice(Math.floor(count / 2));
    for (let i = 0; i < Math.round(count * SLOW_SHARE) && smaller.length > 0; i++) {
      smaller.splice(Math.floor(random() * smaller.length), 1)[0]!.ratePerSecond = 1;
    }
    if (faults) {
      const candidates = regionMerchants.filter((m) => m.ratePerSecond !== 50);
      for (const [fault, perThousand] of FAULTS) {
        const n = Math.max(1, Math.round((count * perThousand) / 1000));
        for (let i = 0; i < n && candidates.length > 0; i++)
          candidates.splice(Math.floor(random() * candidates.length), 1)[0]!.fault = fault;
      }
    }
    const cumulative: number[] = [];
    weights.reduce((sum, w, i) => (cumulative[i] = sum + w / total), 0);
    const accounts = Math.max(1, Math.ceil(regionHolds / 5));
    for (let i = 0; i < regionHolds; i++) {
      const u = random();
      let rank = cumulative.findIndex((c) => u < c);
      if (rank < 0) rank = count - 1;
      const merchant = regionMerchants[rank]!;
      merchant.holds++;
      allHolds.push({
        id: `h_${region}_${String(i + 1).padStart(6, '0')}`,
        region,
        merchantId: merchant.id,
        accountId: `a_${region}_${Math.floor(random() * accounts) + 1}`,
        amountMinor: 100 + Math.floor(random() * 50_000),
        expiresInSeconds: -(60 + random() * 6 * 3600),
      });
    }
    allMerchants.push(...regionMerchants);
  }
  slowMerchants(allMerchants, merchantLatencyMs.length).forEach((m, i) => (m.latencyMs = merchantLatencyMs[i]));
  for (const m of sharedOriginMerchants(allMerchants, sharedOrigin)) m.sharedOrigin = true;
  const delivering = allMerchants.filter((m) => !['rejects', 'gone', 'hangs'].includes(m.fault) && m.holds > 0);
  const bound = delivering.reduce(
    (worst, m) => (m.holds / m.ratePerSecond > worst.holds / worst.ratePerSecond ? m : worst),
    delivering[0]!,
  );
  return {
    seed,
    faults,
    merchants: allMerchants,
    holds: allHolds,
    merchantBound: {
      seconds: bound.holds / bound.ratePerSecond,
      merchantId: bound.id,
      holds: bound.holds,
      ratePerSecond: bound.ratePerSecond,
    },
  };
}
