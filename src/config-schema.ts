/**
 * Every variable the product reads, as a schema: how its text becomes a value (or the words for what was expected),
 * its default, and what docs/configuration.md says of it. The loaders (src/config.ts, dev/dev-config.ts) read each
 * variable through its schema and report every bad one at once; the table in docs/configuration.md is written from
 * these entries (`npm run docs:config`) and a test keeps it so.
 */
import net from 'node:net';
import { z } from 'zod';
import { REGIONS, type Region } from './contracts/regions.js';
import type { EncryptionKey } from './crypto/key-ring.js';
import { keyOfSecret } from './delivery/standard-webhooks.js';
import { DEFAULT_MAX_WORKFLOW_ID_LENGTH, longestHoldIdAffix } from './contracts/ids.js';
import { SWEEP_ROOM_WAIT_MAX_MS } from './contracts/domain.js';

/** What the docs say of a variable: its default as a reader sees it, and what it means (markdown). */
interface VariableDoc {
  readonly default: string;
  /** The setting's zod description. */
  readonly meaning: string;
  /** Its value is never shown, in an error or anywhere else. */
  readonly secret?: true;
  /**
   * Its value may instead be a file's content, the file named by `<NAME>_FILE` (never both): how a secret reaches a
   * container without entering its environment (compose's `secrets:`). Every secret may; so may a database URL.
   */
  readonly file?: true;
}

/** A variable's schema: its text (undefined when unset) in, its value out; `.describe()` says what it means. */
export type Setting<T = unknown> = z.ZodType<T, string | undefined>;

/** A setting's docs (its zod metadata): the table generator and the loaders' redaction read them. */
export function docOf(setting: Setting): VariableDoc | undefined {
  const meta = z.globalRegistry.get(setting);
  return meta?.description ? ({ ...meta, meaning: meta.description } as unknown as VariableDoc) : undefined;
}

/** Metadata of a secret: never shown, and may come from a file. */
const SECRET = { secret: true, file: true } as const;
/** Metadata of a variable that may come from a file. */
const FILE = { file: true } as const;

/** The expected-value words of a failed check, as the ConfigError carries them. */
function fail(ctx: z.RefinementCtx, expected: string): never {
  ctx.addIssue({ code: 'custom', message: expected });
  return z.NEVER;
}

/**
 * A variable whose text `check` turns into a value, or refuses with `fail`. Unset reads as `fallback`; so does empty,
 * unless `emptyIsAValue` (a name or a duration given as "" is a mistake, not a default). The docs show `fallback` as
 * its default unless its metadata says otherwise.
 */
function setting<T, F extends string | undefined>(fallback: F, check: Check<T>, emptyIsAValue = false) {
  return z
    .string()
    .optional()
    .transform((given, ctx) => {
      const raw = given === undefined || (given === '' && !emptyIsAValue) ? fallback : given;
      return raw === undefined ? undefined : check(raw, ctx);
    })
    .meta({ default: fallback === undefined ? 'none' : `\`${fallback}\`` }) as Setting<OrUnset<F, T>>;
}

type Check<T> = (raw: string, ctx: z.RefinementCtx) => T;
/** A setting's value: `T`, or undefined too when it has no fallback. */
type OrUnset<F, T> = F extends undefined ? T | undefined : T;

const DURATION_UNITS_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION_EXPECTED = 'a duration such as 500ms, 30s, 15m, 1h or 3d';

/** `500ms`, `30s`, `15m`, `1h`, `3d` (one number, one unit) in milliseconds; undefined for anything else. */
export function durationMs(raw: string): number | undefined {
  const match = /^(\d+)(ms|s|m|h|d)$/.exec(raw.trim());
  return match ? Number(match[1]) * DURATION_UNITS_MS[match[2]!]! : undefined;
}

function duration(fallback: string, minMs = 1, maxMs = Infinity): Setting<number> {
  return setting(
    fallback,
    (raw, ctx) => {
      const ms = durationMs(raw);
      if (ms === undefined) return fail(ctx, DURATION_EXPECTED);
      if (ms < minMs) return fail(ctx, `a duration of at least ${minMs} ms`);
      if (ms > maxMs) return fail(ctx, `a duration of at most ${maxMs} ms`);
      return ms;
    },
    true,
  );
}

function int<F extends number | undefined>(fallback: F, min: number, max: number) {
  return setting(fallback?.toString() as OrUnset<F, string>, (raw, ctx) => {
    const value = Number(raw);
    if (!/^\d+$/.test(raw.trim()) || value < min || value > max) return fail(ctx, `an integer from ${min} to ${max}`);
    return value;
  });
}

function oneOf<const T extends string, F extends T | undefined>(values: readonly T[], fallback: F, expected: string) {
  return setting(fallback, (raw, ctx) =>
    (values as readonly string[]).includes(raw) ? (raw as T) : fail(ctx, expected),
  );
}

const bool = (fallback: 'true' | 'false') =>
  setting(fallback, (raw, ctx) => (raw === 'true' || raw === 'false' ? raw === 'true' : fail(ctx, 'true or false')));

/** Any text; unset or empty: `fallback`. */
const text = <F extends string | undefined = undefined>(fallback?: F) => setting(fallback as F, (raw) => raw);

/** Temporal namespaces, task queues and schedule ids: a safe, greppable alphabet. */
const name = (fallback: string) =>
  setting(
    fallback,
    (raw, ctx) =>
      /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/.test(raw)
        ? raw
        : fail(ctx, 'letters, digits, ".", "_" or "-" (at most 200 characters)'),
    true,
  );

function url(protocols: readonly string[]): Setting<string | undefined> {
  return setting(undefined, (raw, ctx) => {
    let parsed: URL;
    try {
      parsed = new URL(raw);
    } catch {
      return fail(ctx, `a URL such as ${protocols[0]}//user:pass@host:5432/db`);
    }
    return protocols.includes(parsed.protocol) ? raw : fail(ctx, `a URL with scheme ${protocols.join(' or ')}`);
  });
}

/** Host:port, as the Temporal client expects it. */
const address = () =>
  setting(undefined, (raw, ctx) =>
    /^[A-Za-z0-9.\-[\]:]+:\d{1,5}$/.test(raw) ? raw : fail(ctx, 'host:port, e.g. temporal:7233'),
  );

/** `host:port` to listen on; unset: none (the loaders choose a listener's default by the mode). */
const listenAddress = () =>
  setting(undefined, (raw, ctx) => {
    const match = /^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\]):(\d{1,5})$/.exec(raw);
    if (!match || Number(match[2]) > 65_535) return fail(ctx, 'host:port to listen on, e.g. 0.0.0.0:8090');
    return Object.freeze({ host: match[1]!.replace(/^\[|\]$/g, ''), port: Number(match[2]) });
  });

/** Browser origins (`scheme://host[:port]`, comma-separated): at least one, each exactly an origin. */
const origins = (fallback: string) =>
  setting(
    fallback,
    (raw, ctx) => {
      const list = raw
        .split(',')
        .map((o) => o.trim())
        .filter(Boolean);
      const exact = (origin: string) => {
        try {
          const parsed = new URL(origin);
          return parsed.origin === origin && ['http:', 'https:'].includes(parsed.protocol);
        } catch {
          return false;
        }
      };
      if (list.length === 0 || !list.every(exact)) {
        return fail(
          ctx,
          'one or more comma-separated origins such as http://localhost:8080 (scheme://host[:port], no path)',
        );
      }
      return list;
    },
    true,
  );

/** Comma-separated CIDRs (`10.20.0.0/16,127.0.0.1/32`); none when unset. */
const networks = () =>
  setting('', (raw, ctx) => {
    const cidrs = raw.trim() === '' ? [] : raw.split(',').map((entry) => entry.trim());
    const valid = (cidr: string) => {
      const [network, prefix, extra] = cidr.split('/');
      const family = net.isIP(network ?? '');
      return (
        extra === undefined &&
        family !== 0 &&
        /^\d{1,3}$/.test(prefix ?? '') &&
        Number(prefix) <= (family === 4 ? 32 : 128)
      );
    };
    return cidrs.every(valid)
      ? cidrs
      : fail(ctx, 'comma-separated networks in CIDR notation, e.g. 10.20.0.0/16,127.0.0.1/32');
  });

/** Comma-separated TCP ports (`443,8443`), each 1–65535; unset: the loader's fallback for the mode. */
const ports = () =>
  setting(undefined, (raw, ctx) => {
    const list = raw.split(',').map((entry) => entry.trim());
    return list.every((port) => /^\d{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65_535)
      ? list.map(Number)
      : fail(ctx, 'comma-separated ports from 1 to 65535, e.g. 443,8443');
  });

/** A key ring (src/crypto/key-ring.ts): `id:base64key[,id:base64key...]`, current key first. */
const keyRing = () =>
  setting(undefined, (raw, ctx) => {
    const keys: EncryptionKey[] = [];
    for (const entry of raw.split(',')) {
      const [id, encoded] = entry.trim().split(':');
      if (!id || !encoded || !/^[A-Za-z0-9_.-]+$/.test(id))
        return fail(ctx, 'comma-separated id:base64key pairs, current key first');
      const key = Buffer.from(encoded, 'base64');
      if (key.length !== 32 || key.toString('base64').replace(/=+$/, '') !== encoded.replace(/=+$/, ''))
        return fail(ctx, `key "${id}" to be 32 bytes of base64 (e.g. openssl rand -base64 32)`);
      keys.push({ id, key });
    }
    return new Set(keys.map((k) => k.id)).size === keys.length ? keys : fail(ctx, 'distinct key ids');
  });

/** A ratio of requests to webhooks, at least 1 (one request per webhook is the least there can be). */
const ratio = (fallback: string) =>
  setting(fallback, (raw, ctx) => {
    const value = Number(raw);
    return Number.isFinite(value) && value >= 1 ? value : fail(ctx, 'a ratio of requests to webhooks, >= 1 (e.g. 1.5)');
  });

/** A share of something, 0 < share <= 1 (0 too when `what` may be none of it): `0.5`, or `50%`. */
const share = (fallback = '1', what = 'a share of the rate', noneOk = false) =>
  setting(fallback, (raw, ctx) => {
    const percent = raw.trim().endsWith('%');
    const value = Number(percent ? raw.trim().slice(0, -1) : raw) / (percent ? 100 : 1);
    return Number.isFinite(value) && (noneOk ? value >= 0 : value > 0) && value <= 1
      ? value
      : fail(ctx, `${what}, ${noneOk ? '>=' : '>'} 0 and <= 1 (e.g. 0.5 or 50%)`);
  });

/** Temporal caps pending children per workflow run at 2,000; a page is one run's worth of children. */
const MAX_PAGE_SIZE = 2000;
/** The server refuses catch-up windows under 10 s. */
const MIN_CATCHUP_WINDOW_MS = 10_000;
/** The design's whole night (50,000 holds) landing in one region, at the default 500 a page: 100 pages. */
const SWEEP_SIZED_FOR_PAGES = 100;
/** The 50,000-hold benchmark paged the US's 60 pages in ~40 min on the 2-core dev server (~40 s a page): 1.5× that. */
const SWEEP_PAGE_BUDGET_MS = 60_000;
/**
 * The last run's wait for releases: DEFAULT_RELEASE_WAIT_MS in src/workflows/sweep-expired-holds.ts (a unit test keeps
 * them equal).
 */
export const SWEEP_RELEASE_WAIT_MS = 10 * 60_000;
/** Workflow-task retries, a worker restart mid-sweep, finishSweep's own minute of slack, a short ledger failover. */
const SWEEP_SLACK_MS = 10 * 60_000;
/**
 * SWEEP_TIMEOUT's default: 100 pages × 60 s + 10 min + 10 min = 2 h. A sweep cut off by it loses nothing: the
 * next scheduled sweep pages from the start again, released holds are no longer active, and a hold whose child
 * is already running collides on its id (hold + expiry), so it is counted, not started twice.
 */
export const DEFAULT_SWEEP_TIMEOUT_MS =
  SWEEP_SIZED_FOR_PAGES * SWEEP_PAGE_BUDGET_MS + SWEEP_RELEASE_WAIT_MS + SWEEP_SLACK_MS;
/**
 * Shorter, a sweep whose children are still releasing would always be ended in its final wait (plus that
 * activity's minute of slack), never record a completed run, and keep the no-completed-sweep alert firing.
 */
const MIN_SWEEP_TIMEOUT_MS = SWEEP_RELEASE_WAIT_MS + 60_000;

/**
 * Requests open at once against one merchant: 4 serves 5 req/s at up to 800 ms a response and keeps a merchant that
 * hangs to four open connections, not the ~70 its rate would start within an attempt's timeout.
 */
export const DEFAULT_MAX_IN_FLIGHT_PER_MERCHANT = 4;

/** The Worker Deployment every region's workers belong to, unless WORKER_DEPLOYMENT_NAME says otherwise. */
export const DEFAULT_DEPLOYMENT_NAME = 'hold-sweeper';

/** What the merchant_id label of the product's delivery metrics carries: see `ObservabilityConfig.merchantLabel`. */
export const MERCHANT_LABELS = ['all', 'per-merchant'] as const;

/** When a starting worker makes its own build the deployment's current version (see docs/deploys.md). */
export const SET_CURRENT_MODES = ['if-none', 'always', 'never'] as const;

const LOG_LEVELS = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'] as const;

/** `dev` or `production`: what production requires, and the defaults that differ by mode (see each section). */
const HOLD_SWEEPER_MODE = oneOf(['dev', 'production'], 'dev', '"dev" or "production"')
  .meta({
    default:
      'none for `npm run worker`, `receiver`, `codec-server`, `ops`: it must be set (`npm start`, the tests and the benchmarks say `dev` themselves)',
  })
  .describe(
    '`dev`: plain-http and private-address merchant endpoints allowed (the fake merchants); one person may approve a replay or skip a gap; unset addresses are started by `npm start` or joined by `npm run worker` / `ops`. `production`: nothing started or joined; https and public addresses only; four eyes on replays and skips ([security.md](security.md#four-eyes-means-two-people)); the required variables above',
  );

/**
 * The product's variables by section, in the order docs/configuration.md lists them. A section's transform is what the
 * code reads of it: src/config.ts's `Config` is their output.
 */
export const MODE_AND_REGIONS = z.object({
  HOLD_SWEEPER_MODE,
  HOLD_SWEEPER_REGIONS: setting(
    REGIONS.join(','),
    (raw, ctx) => {
      const names = raw
        .split(',')
        .map((s) => s.trim().toLowerCase())
        .filter(Boolean);
      return names.length > 0 && names.every((n) => (REGIONS as readonly string[]).includes(n))
        ? ([...new Set(names)] as Region[])
        : fail(ctx, `a comma-separated, non-empty list of ${REGIONS.join(', ')}`);
    },
    true,
  )
    .meta({ default: '`us,eu`' })
    .describe('regions this process serves'),
});

export const SWEEP = z
  .object({
    SWEEP_INTERVAL: duration('15m', 1000).describe("how often the region's schedule starts a sweep"),
    SWEEP_CATCHUP_WINDOW: duration('1h', MIN_CATCHUP_WINDOW_MS).describe(
      'how late a sweep missed while the server was down is still started (at least `10s`)',
    ),
    SWEEP_PAGE_SIZE: int(500, 1, MAX_PAGE_SIZE).describe(
      "holds per page, each page one workflow run (≤ 2,000: Temporal's pending-children cap)",
    ),
    SWEEP_BATCH_SIZE: int(50, 1, MAX_PAGE_SIZE).describe(
      "holds per batch workflow within a page: a page's children are started by its batches, each with its own execution lock, instead of all by the page's run (bench/README.md measures why)",
    ),
    SWEEP_MAX_UNRELEASED: int(undefined, 1, 1_000_000)
      .meta({ default: 'twice `SWEEP_PAGE_SIZE`' })
      .describe(
        `backpressure: a sweep lists its next page, and starts its holds, only once the holds it started and the ledger has not released leave room for that page under this bound (waiting at most ${SWEEP_ROOM_WAIT_MAX_MS / 60_000} min a page); the default keeps one page releasing while the next starts. The workers' pace sets the sweep's, instead of a night's first workflow tasks all queueing at once`,
      ),
    SWEEP_TIMEOUT: duration(`${DEFAULT_SWEEP_TIMEOUT_MS}ms`, MIN_SWEEP_TIMEOUT_MS)
      .meta({ default: '`2h`' })
      .describe(
        "workflow execution timeout of each sweep the schedule (or \"sweep now\") starts, over all its continue-as-new runs, so a stuck sweep cannot block the overlap-SKIP schedule forever. The default is 100 pages (the design's 50,000-hold night in one region at 500 a page) × 60 s a page (1.5× the benchmark's) + the 10 min final release wait + 10 min slack; at least `11m` (the final wait and its minute of slack). A sweep it ends loses nothing: its children run on, and the next scheduled sweep starts what is left (ids are hold + expiry, so nothing twice). Raise it if a region's nights grow past ~50,000 holds or you shrink `SWEEP_PAGE_SIZE` far below 500",
      ),
  })
  .transform((v) => ({
    intervalMs: v.SWEEP_INTERVAL,
    catchupWindowMs: v.SWEEP_CATCHUP_WINDOW,
    pageSize: v.SWEEP_PAGE_SIZE,
    batchSize: v.SWEEP_BATCH_SIZE,
    maxUnreleased: v.SWEEP_MAX_UNRELEASED ?? 2 * v.SWEEP_PAGE_SIZE,
    timeoutMs: v.SWEEP_TIMEOUT,
  }));

export const OUTBOX = z
  .object({
    OUTBOX_RECONCILE_INTERVAL: duration('5m', 1000).describe(
      "the outbox reconciler's schedule (`<SCHEDULE_ID>-outbox`, one per region): every interval, each pending webhook untouched for `OUTBOX_GRACE` whose delivery workflow is not running (terminated, timed out) is delivered again by a new run of that workflow, same webhook id, and each quarantined webhook whose workflow ended waits for its decision again in a new run, with the ledger's reason and date ([runbook](runbook.md#webhookdeliverybehind)); at least `1s`",
    ),
    OUTBOX_GRACE: duration('10m', 1000).describe(
      'how long a pending webhook stays untouched before the reconciler looks at it; at least `1s`',
    ),
  })
  .transform((v) => ({ intervalMs: v.OUTBOX_RECONCILE_INTERVAL, graceMs: v.OUTBOX_GRACE }));

export const RETENTION = z
  .object({
    RETENTION_INTERVAL: duration('1h', 60_000).describe(
      "the retention job's schedule (`<SCHEDULE_ID>-retention`, one per region): every interval, the ledger's rows past the retentions the database fixes leave, in batches ([data-retention.md](data-retention.md)); at least `1m`",
    ),
    RETENTION_RUN_BUDGET: duration('5m', 1000, 20 * 60_000).describe(
      'how long one retention run may delete for; a backlog is worked through by the next runs (`1s` to `20m`)',
    ),
  })
  .transform((v) => ({ intervalMs: v.RETENTION_INTERVAL, budgetMs: v.RETENTION_RUN_BUDGET }));

const TEMPORAL_LIMITS = z
  .object({
    TEMPORAL_MAX_ID_LENGTH: int(DEFAULT_MAX_WORKFLOW_ID_LENGTH, longestHoldIdAffix() + 32, 100_000)
      .meta({ default: `\`${DEFAULT_MAX_WORKFLOW_ID_LENGTH}\`` })
      .describe(
        "the server's `limit.maxIDLength` (255 in deploy/temporal/dynamicconfig.yaml; Temporal's own default is 1000): a hold whose workflow ids would be longer is rejected by the sweep, never started",
      ),
  })
  .transform((v) => ({ maxWorkflowIdLength: v.TEMPORAL_MAX_ID_LENGTH }));

// Four eyes on replays and skips: production always, dev never (one person runs the demo).
const DECISIONS = z
  .object({
    HOLD_SWEEPER_MODE,
    QUARANTINE_DECISION_TIMEOUT: duration('14d', 60_000).describe(
      'how long a quarantined webhook waits for a human before it is abandoned; at least `1m`',
    ),
  })
  .transform((v) => ({
    fourEyes: v.HOLD_SWEEPER_MODE === 'production',
    quarantineTimeoutMs: v.QUARANTINE_DECISION_TIMEOUT,
  }));

const OBSERVABILITY = z
  .object({
    METRICS_ADDRESS: address().describe(
      "Prometheus endpoint (`host:port`) of each worker: the SDK's and the product's metrics",
    ),
    HEALTH_ADDRESS: listenAddress().describe(
      "each worker's `GET /livez` (the process runs) and `GET /readyz` (200 only while every region's ledger and Temporal answer, within 2 s, and its merchant-secret key ring holds every key the ledger's secrets are sealed under; else 503, naming each failing check and its error)",
    ),
    METRICS_GAUGE_INTERVAL: duration('15s', 100).describe(
      'how often each worker re-reads the ledger gauges (ages, depths)',
    ),
    METRICS_MERCHANT_LABEL: oneOf(
      MERCHANT_LABELS,
      'all',
      '"all" (one series for every merchant) or "per-merchant" (a series per merchant: a few thousand merchants at most)',
    )
      .meta({ default: '`all`' })
      .describe(
        '`merchant_id` on the delivery metrics (`hold_sweeper_webhook_attempts_total`, `_throttle_waits_total`, `_retry_after_honoured_total`, and the histograms `_webhook_attempt_duration_seconds` and `_limiter_wait_seconds`). `all`: every merchant is counted under `merchant_id="all"`, so the series stay a handful whatever the number of merchants (a series per merchant would be millions at 100,000 merchants); which merchant is behind a number is in the ledger ([runbook.md](runbook.md#merchantratelimited)). `per-merchant`: a series per merchant, for deployments with a few thousand merchants at most. The label exists in both modes, so queries and alert rules that group by it keep working',
      ),
    METRICS_WORST_MERCHANTS: int(10, 1, 100).describe(
      'per-merchant signals without per-merchant series: the N merchants with the highest 429 share and error share over the last 15 minutes, and the oldest backlog, exported by `merchant_id` (`hold_sweeper_worst_merchant_*`), whatever `METRICS_MERCHANT_LABEL` says (1–100)',
    ),
    QUARANTINE_PAGE_AFTER: duration('1h', 60_000).describe(
      'a quarantined webhook older than this pages (`hold_sweeper_quarantines_past_page_age`, alert QuarantinePastPageAge); at least `1m`',
    ),
    DUPLICATE_SENDS_ALERT_RATIO: ratio('1.5').describe(
      'requests per distinct webhook sent over the last 15 minutes, first policy runs only (replays and resends are declared and not counted), above which DuplicateSends fires (`hold_sweeper_requests_per_webhook`); at least 1',
    ),
    TRACE_SAMPLE_RATIO: share('0.01', 'a share of the holds traced', true).describe(
      "the share of holds whose story is one trace, when traces are exported (`OTEL_EXPORTER_OTLP_ENDPOINT`): the sweep's listing of the hold, its workflow, its release and each attempt with the merchant budget's wait, every ledger statement and the HTTP request; a processor callback's trace is sampled at the same share. `0` traces none, `1` every one",
    ),
    LOG_LEVEL: setting(
      'INFO',
      (raw, ctx) => {
        const level = raw.toUpperCase();
        return (LOG_LEVELS as readonly string[]).includes(level)
          ? (level as (typeof LOG_LEVELS)[number])
          : fail(ctx, `one of ${LOG_LEVELS.join(', ')}`);
      },
      true,
    ).describe(
      'the log level of every process (JSON lines on stdout, a fatal one on stderr: [runbook.md](runbook.md))',
    ),
  })
  .transform((v) => ({
    metricsAddress: v.METRICS_ADDRESS,
    healthAddress: v.HEALTH_ADDRESS,
    logLevel: v.LOG_LEVEL,
    gaugeIntervalMs: v.METRICS_GAUGE_INTERVAL,
    quarantinePageAfterMs: v.QUARANTINE_PAGE_AFTER,
    duplicateSendsAlertRatio: v.DUPLICATE_SENDS_ALERT_RATIO,
    merchantLabel: v.METRICS_MERCHANT_LABEL,
    worstMerchants: v.METRICS_WORST_MERCHANTS,
    traceSampleRatio: v.TRACE_SAMPLE_RATIO,
  }));

// The bundle path is read by src/bin/worker.ts itself; checked here with the rest.
const WORKER = z
  .object({
    WORKFLOW_BUNDLE_PATH: text()
      .meta({ default: 'bundled at start-up' })
      .describe('a prebuilt workflow bundle (`npm run build:bundle -- FILE`; the `Dockerfile` bakes one in)'),
    WORKER_MAX_CACHED_WORKFLOWS: int(undefined, 0, 1_000_000)
      .meta({ default: "the SDK's (from the heap limit)" })
      .describe(
        'workflows each regional worker keeps in its sticky cache (0 = none); each costs memory, an evicted one is replayed from its history at its next task',
      ),
  })
  .transform((v) => ({ maxCachedWorkflows: v.WORKER_MAX_CACHED_WORKFLOWS }));

const DEPLOYMENT = z
  .object({
    HOLD_SWEEPER_MODE,
    WORKER_DEPLOYMENT_NAME: setting(DEFAULT_DEPLOYMENT_NAME, (raw, ctx) =>
      // Temporal joins the two as "<deployment>.<build id>": the deployment name cannot hold a dot.
      /^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$/.test(raw)
        ? raw
        : fail(ctx, 'letters, digits, "_" or "-" (at most 100 characters, no ".")'),
    )
      .meta({ default: `\`${DEFAULT_DEPLOYMENT_NAME}\`` })
      .describe('the Worker Deployment the workers belong to, one per namespace ([deploys.md](deploys.md))'),
    WORKER_BUILD_ID: setting(undefined, (raw, ctx) =>
      /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/.test(raw)
        ? raw
        : fail(ctx, 'letters, digits, ".", "_" or "-" (at most 100 characters), e.g. the git revision'),
    )
      .meta({ default: '`wf-` + a hash of the workflow bundle' })
      .describe("this build's id in the deployment: the image's git revision (`--build-arg BUILD_ID`)"),
    WORKER_SET_CURRENT: oneOf(SET_CURRENT_MODES, undefined, SET_CURRENT_MODES.join(', '))
      .meta({ default: '`never` (production), `always` (dev)' })
      .describe(
        'when a starting worker makes its build current: `never` (the deploy step promotes: `npm run promote` with the namespace admin credential), `always`, or `if-none` (only on a first deploy)',
      ),
  })
  .transform((v) => ({
    deploymentName: v.WORKER_DEPLOYMENT_NAME,
    buildId: v.WORKER_BUILD_ID,
    setCurrent: v.WORKER_SET_CURRENT ?? (v.HOLD_SWEEPER_MODE === 'dev' ? 'always' : 'never'),
  }));

/** Production's webhooks: https and public addresses only, and port 443 unless the operator says otherwise. */
export const WEBHOOKS = z
  .object({
    HOLD_SWEEPER_MODE,
    WEBHOOK_TRUSTED_NETWORKS: networks()
      .meta({ default: 'none' })
      .describe(
        'private networks (CIDRs) merchant endpoints may be on in production all the same (a private link); https still required',
      ),
    WEBHOOK_ALLOWED_PORTS: ports()
      .meta({ default: '`443` (production), any port (dev)' })
      .describe(
        'the ports merchant endpoints may use, comma-separated (`443,8443`); a URL without a port uses 443. Another port is refused as `InvalidEndpointUrl` (the delivery quarantines `bad_url`; `merchant add`/`set` write nothing) ([security.md](security.md#merchant-endpoints-global-unicast-only))',
      ),
    WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT: int(DEFAULT_MAX_IN_FLIGHT_PER_MERCHANT, 1, 1_000)
      .meta({ default: `\`${DEFAULT_MAX_IN_FLIGHT_PER_MERCHANT}\`` })
      .describe(
        'at most this many requests open at once to one destination (every merchant row on one endpoint origin), across every worker (1–1000); the rate limit bounds how often they start, this how many a merchant that hangs holds open ([webhooks.md](webhooks.md#bounds-on-an-attempt))',
      ),
    DESTINATION_RATE_SHARE: share()
      .meta({ default: '`1`' })
      .describe(
        "the share of each budget's published rate (a merchant's own, or a declared destination's) this region's workers use, `0.5` or `50%` (0 < share ≤ 1). Regions keep separate ledgers and pace alone, so when merchants of both regions point at one endpoint, give each region a share and keep the shares' sum at most 1 (`0.5` each); 1 is right for endpoints one region alone sends to ([webhooks.md](webhooks.md#budgets-per-merchant-or-per-declared-destination))",
      ),
  })
  .transform((v) => ({
    allowInsecureHttp: v.HOLD_SWEEPER_MODE === 'dev',
    allowPrivateAddresses: v.HOLD_SWEEPER_MODE === 'dev',
    trustedNetworks: v.WEBHOOK_TRUSTED_NETWORKS,
    allowedPorts: v.WEBHOOK_ALLOWED_PORTS ?? (v.HOLD_SWEEPER_MODE === 'production' ? [443] : undefined),
    maxInFlightPerMerchant: v.WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT,
    destinationRateShare: v.DESTINATION_RATE_SHARE,
  }));

/** The processor-event receiver's (src/bin/receiver.ts). */
export const PROCESSOR = z
  .object({
    PROCESSOR_GAP_WAIT: duration('15m', 1000).describe(
      'how long a hold\'s event workflow waits for a missing sequence before it stops for a human (`DeliveryStatus = "event_gap"`)',
    ),
    PROCESSOR_REFUSED_RETENTION: duration('30d', 3_600_000).describe(
      'how long a correctly signed but refused callback stays in `processor_requests_refused` (at least `1h`); the receiver deletes older rows hourly. Unsigned refusals are never written, only counted (`hold_sweeper_processor_requests_refused_total`)',
    ),
  })
  .transform((v) => ({
    gapWaitMs: v.PROCESSOR_GAP_WAIT,
    refusedRetentionMs: v.PROCESSOR_REFUSED_RETENTION,
  }));

/** The codec endpoint's (src/bin/codec-server.ts); what production requires of it is in src/config.ts. */
export const CODEC = z.object({
  HOLD_SWEEPER_MODE,
  CODEC_SERVER_ADDRESS: address().describe('where `npm run codec-server` serves ([api.md](api.md))'),
  CODEC_AUTH_TOKEN: text()
    .meta({ ...SECRET })
    .describe("dev only: a static bearer token instead of users' tokens (refused in production)"),
  CODEC_CORS_ORIGIN: origins('http://127.0.0.1:8233,http://localhost:8233').describe(
    "Web UI origins the codec endpoint admits (each exactly `scheme://host[:port]`); only a listed origin gets a CORS grant; `npm start`'s own endpoint admits its `TEMPORAL_UI_PORT` unless this is set",
  ),
  CODEC_OIDC_ISSUER: url(['https:', 'http:'])
    .meta({ default: 'none; required in production' })
    .describe(
      "whose users' tokens the codec endpoint verifies (`/decode`: any role in the namespace's region; `/encode`: an operator's or an approver's there); https in production",
    ),
  CODEC_OIDC_AUDIENCE: text()
    .meta({ default: '`hold-sweeper-codec`' })
    .describe('the `aud` its tokens carry: its own, so no admin API takes them'),
  CODEC_OIDC_ROLES_CLAIM: text('roles').describe("the claim with the caller's roles"),
  CODEC_OIDC_TOKEN_MAX_AGE: duration('1d', 1_000).describe(
    'the longest a token lives: from its `iat` to its `exp`, and from its `iat` to its use; one without `iat` is refused',
  ),
});

/** loadConfig's sections, by the `Config` field each becomes (the codec endpoint's and the regions' have rules there). */
export const SECTIONS = {
  sweep: SWEEP,
  outbox: OUTBOX,
  retention: RETENTION,
  temporalLimits: TEMPORAL_LIMITS,
  decisions: DECISIONS,
  observability: OBSERVABILITY,
  worker: WORKER,
  deployment: DEPLOYMENT,
  webhooks: WEBHOOKS,
};

/** Every section's variables by name, in the docs' order. */
export const VARIABLES: Record<string, Setting> = Object.assign(
  {},
  MODE_AND_REGIONS.shape,
  ...Object.values(SECTIONS).map((section) => section.in.shape),
  PROCESSOR.in.shape,
  CODEC.shape,
);

/** One per region: `<NAME>_<REGION>` (e.g. DATABASE_URL_EU). Defaults name the region (`r`: `us`, `eu`). */
export const regionVariables = (r: string) =>
  ({
    DATABASE_URL: url(['postgres:', 'postgresql:'])
      .meta({ default: 'unset: see the table above', ...FILE })
      .describe(
        "the region's ledger (`postgres://` or `postgresql://`); production requires `sslmode=verify-full` in it (`sslrootcert=<file>` for a private CA): the connection is TLS, the server's certificate checked against its name ([security.md](security.md#the-ledger-over-tls))",
      ),
    TEMPORAL_NAMESPACE: name(`hold-sweeper-${r}`)
      .meta({ default: `\`hold-sweeper-${r}\`` })
      .describe("the region's Temporal namespace"),
    TASK_QUEUE: name(`hold-sweeper-${r}`)
      .meta({ default: `\`hold-sweeper-${r}\`` })
      .describe("the region's task queue"),
    SCHEDULE_ID: name(`hold-sweep-${r}`)
      .meta({ default: `\`hold-sweep-${r}\`` })
      .describe("the region's sweep schedule"),
    PAYLOAD_KEYS: keyRing()
      .meta({ default: 'unset = payloads in clear (dev only)', ...SECRET })
      .describe('`id:base64` of 32 bytes, current first ([encryption.md](encryption.md))'),
    MERCHANT_SECRET_KEYS: keyRing()
      .meta({
        default:
          'dev: the built-in dev ring (id `dev`, protects nothing); production: none, required (the dev ring is refused)',
        ...SECRET,
      })
      .describe(
        "the key ring merchants' signing secrets are sealed with in the ledger: `id:base64` of 32 bytes, current first; the first seals, every key opens, and a worker re-seals with the current one at start-up. A region's workers, `npm run migrate` and ops CLI need the same ring; the receiver reads it in dev only (it migrates the development database), the codec server never ([webhooks.md](webhooks.md#signing-secrets-at-rest))",
      ),
    PORTAL_URL: url(['https:', 'http:'])
      .meta({ default: '`https://localhost:8444/portal`' })
      .describe(
        "the merchant portal as this region's merchants reach it (the merchant API's `/portal`): where the links `merchant portal-link` mints point ([webhooks.md](webhooks.md#the-portal))",
      ),
    PROCESSOR_SIGNING_SECRET: setting(undefined, (raw, ctx) => {
      const key = keyOfSecret(raw);
      return Buffer.isBuffer(key)
        ? key
        : fail(ctx, 'whsec_<base64> of at least 16 bytes: the secret the processor signs its callbacks with');
    })
      .meta({ default: 'none: required by the receiver', ...SECRET })
      .describe(
        'the secret the card processor signs its callbacks with (`whsec_<base64>`, at least 16 bytes); only the receiver reads it, it never enters Temporal or a log',
      ),
  }) satisfies Record<string, Setting>;

/** The region an HTTP API serves (one process per region). */
const servedRegion = (what: string) =>
  text().meta({ default: 'the only configured region' }).describe(`the region ${what} serves (one process per region)`);

/** An HTTP listener's TLS: its own certificate, or a TLS-terminating proxy in front of it, said. */
const tlsVariables = (what: string) =>
  ({
    TLS_CERT_FILE: text().describe(`${what}'s TLS certificate (PEM), with \`_TLS_KEY_FILE\`: both or neither`),
    TLS_KEY_FILE: text().describe(`${what}'s TLS key (PEM)`),
    BEHIND_TLS_PROXY: bool('false').describe(
      `\`true\`: plain HTTP on a listener only a TLS-terminating proxy reaches; production refuses ${what} with neither this nor a certificate`,
    ),
  }) satisfies Record<string, Setting>;

/** Where an HTTP listener serves its callers and its metrics; the defaults depend on the mode, so the loader gives them. */
const listenerVariables = (what: string, port: number, metricsPort: number) =>
  ({
    ADDRESS: listenAddress()
      .meta({ default: `dev \`127.0.0.1:${port}\`, production \`0.0.0.0:${port}\`` })
      .describe(`where ${what} listens`),
    METRICS_ADDRESS: listenAddress()
      .meta({ default: `production \`0.0.0.0:${metricsPort}\`, dev none` })
      .describe(`${what}'s \`GET /metrics\`, never on its callers' port`),
    ...tlsVariables(what),
  }) satisfies Record<string, Setting>;

/** The HTTP listeners' variables, `<PREFIX>_<NAME>`, by prefix. */
export const LISTENERS = {
  PROCESSOR_RECEIVER: listenerVariables('the processor-event receiver (`npm run receiver`)', 8090, 9465),
  API: {
    REGION: servedRegion('the admin API'),
    ...listenerVariables('the admin API', 8443, 9466),
    OIDC_ISSUER: url(['https:', 'http:'])
      .meta({ default: 'required' })
      .describe(
        'the issuer whose access tokens the admin API accepts (its discovery document names the keys); https in production',
      ),
    OIDC_AUDIENCE: text()
      .meta({ default: '`hold-sweeper-admin-<region>`' })
      .describe("the `aud` a token must carry: the region's API's own, so no other region's token passes"),
    OIDC_ROLES_CLAIM: text('roles').describe("the claim with the caller's roles"),
    CLOCK_TOLERANCE: duration('30s', 0).describe("clock difference tolerated on a token's expiry"),
    TOKEN_MAX_AGE: duration('1d', 1_000).describe(
      'the longest a token lives: from its `iat` to its `exp`, and from its `iat` to its use; one without `iat` is refused',
    ),
  },
  MERCHANT_API: { REGION: servedRegion('the merchant API'), ...listenerVariables('the merchant API', 8444, 9467) },
  CODEC: {
    METRICS_ADDRESS: listenAddress()
      .meta({ default: 'production `0.0.0.0:9468`, dev none' })
      .describe("the codec endpoint's `GET /metrics`, never on the port the browsers reach"),
    ...tlsVariables('the codec endpoint'),
  },
} as const satisfies Record<string, Record<string, Setting>>;

/** 127.0.0.0/8, ::1 and localhost: where a token over plain HTTP never leaves the machine. */
function isLoopback(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** The admin API's URL: https, or http to loopback only (the bearer token would cross the network in clear). */
const apiUrl = () =>
  setting(undefined, (raw, ctx) => {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      return fail(ctx, 'the admin API’s URL, e.g. https://ops-api.us.example.com');
    }
    return url.protocol === 'https:' || (url.protocol === 'http:' && isLoopback(url.hostname))
      ? url
      : fail(ctx, 'an https:// URL (http:// only to loopback: the bearer token would cross the network in clear)');
  });

/**
 * The ops CLI's as a client of the admin API (src/operations/admin-client.ts), on an operator's machine: each also as
 * `<NAME>_<REGION>` (`HOLD_SWEEPER_API_TOKEN_FILE_<REGION>`), a region's own first.
 */
export const ADMIN_CLIENT_VARIABLES = {
  HOLD_SWEEPER_API_URL: apiUrl().describe(
    "the region's admin API (`https://`, or `http://` to loopback only). Set, `npm run ops` calls it and needs nothing else (no database URL, no payload or merchant-secret key); unset, it runs the verbs itself against the ledger and Temporal. `HOLD_SWEEPER_API_URL` alone serves one region, named by `--region`; a private CA for the API's certificate: `NODE_EXTRA_CA_CERTS`",
  ),
  HOLD_SWEEPER_API_TOKEN: text()
    .meta({ secret: true })
    .describe("an OIDC access token of the API's issuer, for the region's audience: who acts is its subject"),
  HOLD_SWEEPER_API_TOKEN_FILE: text().describe('a file holding the token instead'),
} satisfies Record<string, Setting>;

/** The local stack's own (dev/dev-config.ts): production never reads these. */
export const DEV_VARIABLES = {
  TEMPORAL_CLI_PATH: text()
    .meta({ default: 'search' })
    .describe('a `temporal` binary for the dev server ([local-stack.md](local-stack.md#how-temporal-is-obtained))'),
  TEMPORAL_TEST_SERVER_PATH: text().meta({ default: 'search' }).describe('the time-skipping test server the tests use'),
  HOLD_SWEEPER_CACHE_DIR: text()
    .meta({ default: '`$XDG_CACHE_HOME/hold-sweeper`, else `~/.cache/hold-sweeper`' })
    .describe(
      "downloads, and `dev-stack.json`, the running `npm start`'s addresses (also read by `npm run worker` / `ops` in dev mode)",
    ),
  HOLD_SWEEPER_DATA_DIR: text()
    .meta({ default: 'a fresh temp dir, removed at exit' })
    .describe("the dev server's SQLite file and the embedded PostgreSQL"),
  TEMPORAL_DEV_PORT: int(7233, 1, 65535).describe("the dev server's gRPC port"),
  TEMPORAL_UI_PORT: int(8233, 1, 65535).describe("the dev server's Web UI port"),
  DEMO_HOLDS: int(300, 0, 1_000_000).describe("holds per region in `npm start`'s demo night"),
} satisfies Record<string, Setting>;
