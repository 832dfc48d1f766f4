/**
 * Product metrics, exported on the same Prometheus endpoint as the SDK's own (the runtime's meter). Label sets
 * are disjoint from the SDK's and from each other's: region on ledger gauges, merchant on delivery counters.
 *
 * Page on age, not depth (docs/runbook.md): the ages of the oldest expired-but-unreleased hold and of the oldest
 * undelivered webhook are read from Postgres by cheap indexed queries (first row of a partial index), on an
 * interval, by every worker of the region (they report the same value; alert rules take the max).
 */
import type { MetricMeter, MetricTags } from '@temporalio/common';
import type { MerchantLabel } from '../config.js';
import type { AttemptResult } from '../delivery/policy.js';
import { QUARANTINE_REASONS } from '../contracts/failures.js';
import { every, log } from './logger.js';
import type { Region } from '../contracts/regions.js';

/** 2xx, 3xx, 4xx, 429, 5xx, timeout, connection: the classes an operator reads attempts by. */
export function statusClass(result: AttemptResult): string {
  if (result.kind === 'error')
    return result.errorClass === 'AttemptTimeout'
      ? 'timeout'
      : result.errorClass === 'Cancelled'
        ? 'cancelled'
        : 'connection_error';
  if (result.status === 429) return '429';
  return `${Math.floor(result.status / 100)}xx`;
}

/**
 * The Prometheus exporter's naming (src/bin/worker.ts): counters get `_total` appended by the exporter (so a counter's
 * name here never ends in it), durations are seconds, and a histogram's unit is left empty because the exporter
 * appends a histogram's unit verbatim (`_s`): its name says `_seconds` itself.
 */
export const PROMETHEUS_EXPORT = { countersTotalSuffix: true, unitSuffix: true, useSecondsForDurations: true } as const;

/** Bucket bounds (seconds) of the product's latency histograms, from a fast attempt to a release a sweep late. */
export const LATENCY_BUCKETS: Readonly<Record<string, number[]>> = {
  hold_sweeper_webhook_attempt_duration_seconds: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  hold_sweeper_release_lag_seconds: [1, 5, 15, 60, 300, 900, 1800, 2700, 3600, 7200, 21600],
  hold_sweeper_limiter_wait_seconds: [0.01, 0.1, 0.5, 1, 2, 5, 15, 60, 300, 900, 3600],
  hold_sweeper_processor_event_apply_lag_seconds: [0.1, 0.5, 1, 5, 15, 60, 300, 900, 1800, 3600],
  hold_sweeper_release_to_delivered_seconds: [1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 21600, 86400],
};

/**
 * Counters and histograms recorded where the events happen (activities, workflows); see the runbook for their alerts.
 */
export function deliveryMetrics(meter: MetricMeter) {
  return {
    attempts: meter.createCounter('hold_sweeper_webhook_attempts', '1', 'HTTP attempts by merchant and status class'),
    attemptSeconds: meter.createHistogram(
      'hold_sweeper_webhook_attempt_duration_seconds',
      'float',
      '',
      'one HTTP attempt, connect to last byte, by status class',
    ),
    throttleWaits: meter.createCounter(
      'hold_sweeper_throttle_waits',
      '1',
      'times a delivery waited for a budget, by the bucket that was empty and the limit that emptied it',
    ),
    limiterWaitSeconds: meter.createHistogram(
      'hold_sweeper_limiter_wait_seconds',
      'float',
      '',
      'each wait for a budget, by lane, bucket and limit',
    ),
    retryAfterHonoured: meter.createCounter(
      'hold_sweeper_retry_after_honoured',
      '1',
      'retries delayed by a merchant Retry-After',
    ),
    releaseToDelivered: meter.createHistogram(
      'hold_sweeper_release_to_delivered_seconds',
      'float',
      '',
      "a release's webhook, from the release (its row is written in the release's transaction) to the merchant's 2xx; first policy runs only",
    ),
    outcomeUnknown: meter.createCounter(
      'hold_sweeper_webhook_outcome_unknown',
      '1',
      'attempts whose request left and got no answer in time (AttemptTimeout): the merchant may have it; sent again under the same webhook id',
    ),
    duplicateSuppressions: meter.createCounter(
      'hold_sweeper_duplicate_suppressions',
      '1',
      'already-released holds and already-started hold workflows',
    ),
  };
}

/** What merchant_id reads on every delivery metric unless per-merchant labels are turned on. */
const ALL_MERCHANTS = 'all';

/** What a merchant's own budget reads as on the throttle metrics' bucket label unless per-merchant labels are on. */
const OWN_BUDGET = 'merchant';

/**
 * The meter the activities record on, with merchant_id as the deployment chose (METRICS_MERCHANT_LABEL). A series
 * per merchant multiplies each delivery counter by the number of merchants: 100,000 merchants would be millions of
 * series (Prometheus memory, scrape time). So by default every merchant counts under merchant_id="all"; the label
 * stays, so queries and alert rules grouping by it read the same in both modes. Which merchant is behind a number
 * is in the ledger (`delivery_attempts`, docs/runbook.md), not in the metrics. The throttle metrics' `bucket` keeps
 * a declared destination's name (a handful, each shared by many merchants) and reads `merchant` for merchants' own.
 */
export function withMerchantLabel(meter: MetricMeter, label: MerchantLabel): MetricMeter {
  if (label === 'per-merchant') return meter;
  return {
    createCounter: (...args) => boundMerchant(meter.createCounter(...args), 'add'),
    createHistogram: (...args) => boundMerchant(meter.createHistogram(...args), 'record'),
    createGauge: (...args) => boundMerchant(meter.createGauge(...args), 'set'),
    withTags: (tags) => withMerchantLabel(meter.withTags(allMerchants(tags)), label),
  };
}

function allMerchants<T extends MetricTags | undefined>(tags: T): T {
  if (!tags || !('merchant_id' in tags)) return tags;
  const bucket = tags['bucket'];
  return {
    ...tags,
    merchant_id: ALL_MERCHANTS,
    ...(typeof bucket === 'string' && bucket.startsWith(`${OWN_BUDGET}:`) ? { bucket: OWN_BUDGET } : {}),
  };
}

/**
 * `metric`, its recording method (`add`, `record` or `set`) and `withTags` rewriting merchant_id; the rest delegated.
 */
function boundMerchant<M extends { withTags(tags: MetricTags): M }>(metric: M, method: 'add' | 'record' | 'set'): M {
  const record = (metric as unknown as Record<typeof method, (value: number, tags?: MetricTags) => void>)[method].bind(
    metric,
  );
  return Object.assign(Object.create(metric) as M, {
    [method]: (value: number, tags?: MetricTags) => record(value, allMerchants(tags)),
    withTags: (tags: MetricTags) => boundMerchant(metric.withTags(allMerchants(tags)), method),
  });
}

interface LedgerGauges {
  stop(): void;
  /** One refresh now (tests, and the first scrape after start-up). */
  refresh(): Promise<void>;
}

/** What the ledger gauges read, each refresh (src/sql/gauges.ts: the queries live with the ledger's other SQL). */
export interface LedgerGaugeSource {
  readings(quarantinePageAfterMs: number): Promise<LedgerReadings>;
  /** Merchants with at least `minAttempts` attempts in the last 15 minutes, and the `n` oldest backlogs. */
  worstMerchants(n: number, minAttempts: number): Promise<WorstMerchantReadings>;
}

/** Ages in seconds (0: none), counts as counted. */
export interface LedgerReadings {
  oldestUnreleasedAge: number;
  oldestUndeliveredAge: number;
  undelivered: number;
  /** By quarantine reason, the reasons with any. */
  quarantined: { reason: string; count: number; oldestAge: number; pastPageAge: number }[];
  abandoned: number;
  disabledMerchants: number;
  sendsPaused: boolean;
  outboxUnfixable: number;
  replayRequests: { requested: number; approved: number };
  lastCompletedSweepAge: number;
  /** The last completed sweep's batch (sweep_runs); undefined before the first. */
  lastSweep: { found: number; started: number; alreadyStarted: number; rejected: number } | undefined;
  oldestUnappliedEventAge: number;
  openReviews: number;
  oldestInFlightAge: number;
  /** Requests sent in the last 15 minutes, first policy runs, and the distinct webhooks they carried. */
  firstRunsSent15m: { requests: number; webhooks: number };
}

export interface WorstMerchantReadings {
  /** Over the last 15 minutes: the share of attempts answered 429, and failed by a 5xx, a timeout or a connection. */
  shares: { merchantId: string; share429: number; errorShare: number }[];
  backlogAges: { merchantId: string; age: number }[];
}

/**
 * Attempts in the window below which a merchant's shares say nothing (one failure of two is not a failing merchant).
 */
const WORST_MERCHANT_MIN_ATTEMPTS = 10;

/**
 * Per-merchant signals without per-merchant series: from the ledger, the `n` merchants with the highest 429 share and
 * error share (5xx, timeouts, connection errors) over the last 15 minutes (at least WORST_MERCHANT_MIN_ATTEMPTS
 * attempts), and the oldest backlog, each labelled with its merchant_id. A merchant that leaves a signal's worst n
 * reads 0 there (a gauge's series cannot be withdrawn): the series are the merchants that were among the worst since
 * the worker started, never one per merchant of the region.
 */
function worstMerchantGauges(meter: MetricMeter, region: Region, n: number) {
  const signals = {
    share429: meter.createGauge(
      'hold_sweeper_worst_merchant_429_share',
      'float',
      '1',
      `share of attempts answered 429 over 15 min, the ${n} worst merchants`,
    ),
    errorShare: meter.createGauge(
      'hold_sweeper_worst_merchant_error_share',
      'float',
      '1',
      `share of attempts failed by a 5xx, a timeout or a connection error over 15 min, the ${n} worst merchants`,
    ),
    backlogAge: meter.createGauge(
      'hold_sweeper_worst_merchant_backlog_age_seconds',
      'float',
      's',
      `age of the oldest pending webhook, the ${n} worst merchants`,
    ),
  };
  const shown = { share429: new Set<string>(), errorShare: new Set<string>(), backlogAge: new Set<string>() };
  const publish = (signal: keyof typeof signals, rows: { merchantId: string; value: number }[]) => {
    const now = new Set(rows.map((r) => r.merchantId));
    for (const gone of shown[signal]) if (!now.has(gone)) signals[signal].set(0, { region, merchant_id: gone });
    for (const r of rows) signals[signal].set(r.value, { region, merchant_id: r.merchantId });
    shown[signal] = new Set([...shown[signal], ...now]);
  };
  return {
    async refresh(source: LedgerGaugeSource) {
      const { shares, backlogAges } = await source.worstMerchants(n, WORST_MERCHANT_MIN_ATTEMPTS);
      const top = (key: 'share429' | 'errorShare') =>
        shares
          .filter((r) => r[key] > 0)
          .sort((a, b) => b[key] - a[key] || a.merchantId.localeCompare(b.merchantId))
          .slice(0, n)
          .map((r) => ({ merchantId: r.merchantId, value: r[key] }));
      publish('share429', top('share429'));
      publish('errorShare', top('errorShare'));
      publish(
        'backlogAge',
        backlogAges.map((r) => ({ merchantId: r.merchantId, value: r.age })),
      );
    },
  };
}

/** Polls the region's ledger and sets the age and depth gauges. */
export function startLedgerGauges(options: {
  region: Region;
  source: LedgerGaugeSource;
  meter: MetricMeter;
  intervalMs: number;
  /** SWEEP_INTERVAL, exported beside the last sweep's age so the alert rule compares the two. */
  sweepIntervalMs: number;
  /** QUARANTINE_PAGE_AFTER: a quarantine older than this pages (exported beside the count, so the rule reads it). */
  quarantinePageAfterMs: number;
  /** DUPLICATE_SENDS_ALERT_RATIO, exported beside the ratio for the rule; 1.5 unless said. */
  duplicateSendsAlertRatio?: number;
  /** METRICS_WORST_MERCHANTS: how many merchants each worst-merchant signal names; 10 unless said. */
  worstMerchants?: number;
}): LedgerGauges {
  const {
    region,
    source,
    meter,
    sweepIntervalMs,
    quarantinePageAfterMs,
    duplicateSendsAlertRatio = 1.5,
    worstMerchants = 10,
  } = options;
  const gauge = (name: string, unit: string, description: string) =>
    meter.createGauge(name, 'float', unit, description);
  const oldestUnreleased = gauge(
    'hold_sweeper_oldest_unreleased_hold_age_seconds',
    's',
    'age past expiry of the oldest expired, still active hold',
  );
  const oldestUndelivered = gauge(
    'hold_sweeper_oldest_undelivered_webhook_age_seconds',
    's',
    'age of the oldest pending webhook',
  );
  const undelivered = gauge(
    'hold_sweeper_undelivered_webhooks',
    '1',
    'pending webhooks (depth; page on the age instead)',
  );
  const quarantined = gauge('hold_sweeper_quarantine_depth', '1', 'quarantined webhooks by reason');
  const abandoned = gauge('hold_sweeper_abandoned_quarantines', '1', 'quarantines nobody decided in time');
  const oldestQuarantine = gauge(
    'hold_sweeper_oldest_quarantine_age_seconds',
    's',
    'age of the oldest quarantined webhook: a merchant not told for that long (0: none)',
  );
  const quarantinesPastPageAge = gauge(
    'hold_sweeper_quarantines_past_page_age',
    '1',
    'quarantined webhooks older than QUARANTINE_PAGE_AFTER: each one pages',
  );
  const quarantinePageAfter = gauge(
    'hold_sweeper_quarantine_page_after_seconds',
    's',
    'the age at which a quarantine pages (QUARANTINE_PAGE_AFTER)',
  );
  const disabled = gauge('hold_sweeper_disabled_merchants', '1', 'merchants disabled (e.g. by a 410)');
  const outboxUnfixable = gauge(
    'hold_sweeper_outbox_unfixable_webhooks',
    '1',
    'pending webhooks the last outbox reconcile found with no running workflow and could not start again (a human looks)',
  );
  const sendsPaused = gauge(
    'hold_sweeper_sends_paused',
    '1',
    '1 while an operator has paused every send of the region (ops sends pause), else 0',
  );
  const replays = gauge(
    'hold_sweeper_replay_requests',
    '1',
    'replay requests by status (requested = pending, approved)',
  );
  const lastCompletedSweep = gauge(
    'hold_sweeper_last_completed_sweep_age_seconds',
    's',
    'time since the last sweep that completed and recorded itself',
  );
  const lastSweepHolds = gauge(
    'hold_sweeper_last_sweep_holds',
    '1',
    'the last completed sweep: holds it found expired, started a workflow for, found already started, and refused (a row it could not take), by outcome',
  );
  const sweepInterval = gauge(
    'hold_sweeper_sweep_interval_seconds',
    's',
    'the schedule’s sweep interval (SWEEP_INTERVAL)',
  );
  const oldestUnapplied = gauge(
    'hold_sweeper_oldest_unapplied_processor_event_age_seconds',
    's',
    'age of the oldest processor event recorded and not yet applied (a gap, or the hand-over behind)',
  );
  const oldestInFlight = gauge(
    'hold_sweeper_oldest_in_flight_attempt_age_seconds',
    's',
    'age of the oldest webhook request in flight (its lease on the merchant budget; 0: none): one hanging on a merchant',
  );
  const openReviews = gauge(
    'hold_sweeper_open_ledger_reviews',
    '1',
    'ledger reviews nobody has resolved (late captures, events that could not apply)',
  );
  // What the delivery literature calls worth alerting on: how many requests each webhook took, over a window. First
  // policy runs only: a replay or a resend is declared (a human asked for it), a retry or a second sender is not.
  const windowRequests = gauge(
    'hold_sweeper_webhook_requests_15m',
    '1',
    'webhook requests sent in the last 15 minutes (first policy runs)',
  );
  const windowWebhooks = gauge('hold_sweeper_webhooks_sent_15m', '1', 'distinct webhooks those requests carried');
  const requestsPerWebhook = gauge(
    'hold_sweeper_requests_per_webhook',
    '1',
    'requests per distinct webhook over the last 15 minutes, first policy runs (1: each sent once; 0: none sent)',
  );
  const requestsPerWebhookAlert = gauge(
    'hold_sweeper_requests_per_webhook_alert_above',
    '1',
    'the ratio above which DuplicateSends fires (DUPLICATE_SENDS_ALERT_RATIO)',
  );
  // A gauge keeps its last value when a refresh fails: these say how old every value above is, so an alert can tell
  // "nothing is late" from "nothing was read" (LedgerGaugesStale, and the age rules count the staleness as age).
  const refreshedAt = gauge(
    'hold_sweeper_ledger_gauges_refreshed_timestamp_seconds',
    's',
    'when the ledger gauges were last read from the ledger successfully (Unix time)',
  );
  const refreshInterval = gauge(
    'hold_sweeper_ledger_gauges_interval_seconds',
    's',
    'how often the ledger gauges are read (METRICS_GAUGE_INTERVAL)',
  );
  const worst = worstMerchantGauges(meter, region, worstMerchants);
  const tags = { region };
  refreshInterval.set(options.intervalMs / 1000, tags);

  async function refresh() {
    await worst.refresh(source);
    const read = await source.readings(quarantinePageAfterMs);
    oldestUnreleased.set(read.oldestUnreleasedAge, tags);
    oldestUndelivered.set(read.oldestUndeliveredAge, tags);
    undelivered.set(read.undelivered, tags);
    const byReason = new Map(read.quarantined.map((r) => [r.reason, r.count]));
    // Every reason every time: a reason that went back to zero must read 0, not its last non-zero value.
    for (const reason of QUARANTINE_REASONS) quarantined.set(byReason.get(reason) ?? 0, { ...tags, reason });
    oldestQuarantine.set(Math.max(0, ...read.quarantined.map((r) => r.oldestAge)), tags);
    quarantinesPastPageAge.set(
      read.quarantined.reduce((n, r) => n + r.pastPageAge, 0),
      tags,
    );
    quarantinePageAfter.set(quarantinePageAfterMs / 1000, tags);
    abandoned.set(read.abandoned, tags);
    disabled.set(read.disabledMerchants, tags);
    sendsPaused.set(read.sendsPaused ? 1 : 0, tags);
    outboxUnfixable.set(read.outboxUnfixable, tags);
    replays.set(read.replayRequests.requested, { ...tags, status: 'requested' });
    replays.set(read.replayRequests.approved, { ...tags, status: 'approved' });
    lastCompletedSweep.set(read.lastCompletedSweepAge, tags);
    sweepInterval.set(sweepIntervalMs / 1000, tags);
    if (read.lastSweep) {
      const { found, started, alreadyStarted, rejected } = read.lastSweep;
      for (const [outcome, n] of Object.entries({ found, started, already_started: alreadyStarted, refused: rejected }))
        lastSweepHolds.set(n, { ...tags, outcome });
    }
    oldestUnapplied.set(read.oldestUnappliedEventAge, tags);
    openReviews.set(read.openReviews, tags);
    oldestInFlight.set(read.oldestInFlightAge, tags);
    const { requests: sentRequests, webhooks: sentWebhooks } = read.firstRunsSent15m;
    windowRequests.set(sentRequests, tags);
    windowWebhooks.set(sentWebhooks, tags);
    requestsPerWebhook.set(sentWebhooks === 0 ? 0 : sentRequests / sentWebhooks, tags);
    requestsPerWebhookAlert.set(duplicateSendsAlertRatio, tags);
    refreshedAt.set(Date.now() / 1000, tags);
  }

  const stop = every(options.intervalMs, refresh, (err) =>
    log.warn({ region, error: err }, 'ledger gauges not refreshed'),
  );
  return { refresh, stop };
}
