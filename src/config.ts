/**
 * Configuration: read from the environment once, validated, frozen.
 *
 * Every variable is listed in `.env.example` with its default. An invalid value fails at start-up with a
 * `ConfigError` naming the variable, never later in the middle of a sweep.
 */
import net from 'node:net';
import { ConfigError } from './errors.js';
import { isRegion, REGIONS, type Region } from './contracts/regions.js';
import { adminAudience, CODEC_AUDIENCE } from './contracts/identity.js';
import { keyOfSecret } from './delivery/standard-webhooks.js';
import { DEV_SECRET_KEY_ID, DEV_SECRET_KEYS } from './delivery/secret-box.js';
import {
  loadTemporalConnectionSettings,
  requireTls,
  TEMPORAL_CONNECTION_VARIABLES,
  type TemporalConnectionSettings,
} from './temporal-connection.js';
import { DEFAULT_MAX_WORKFLOW_ID_LENGTH, longestHoldIdAffix } from './contracts/ids.js';
import type { EncryptionKey } from './contracts/keys.js';

export type Mode = 'dev' | 'production';

export interface RegionConfig {
  readonly region: Region;
  /** Postgres URL of this region's ledger; undefined in dev means "use the embedded Postgres". */
  readonly databaseUrl: string | undefined;
  /** Temporal frontend address; undefined in dev means "start the local dev server". */
  readonly temporalAddress: string | undefined;
  /**
   * How to reach it: TLS, mTLS, an API key, gRPC metadata (src/temporal-connection.ts, envconfig's conventions).
   * Absent: plaintext, no key (the local stack and the tests).
   */
  readonly temporal?: TemporalConnectionSettings;
  readonly namespace: string;
  readonly taskQueue: string;
  readonly scheduleId: string;
  /** Payload encryption keys, current first; undefined = payloads are not encrypted (dev only). */
  readonly payloadKeys: readonly EncryptionKey[] | undefined;
  /**
   * MERCHANT_SECRET_KEYS_<REGION>: the key ring merchants' signing secrets are sealed with at rest, current first
   * (src/delivery/secret-box.ts). Dev without the variable: the built-in dev ring, which protects nothing. Empty in a
   * process loaded with `merchantSecrets: 'not-held'` (the codec endpoint), which never reads a merchant secret.
   */
  readonly secretKeys: readonly EncryptionKey[];
}

/** The outbox reconciler (src/workflows/reconcile-outbox.ts), on its own schedule per region. */
export interface OutboxConfig {
  /** OUTBOX_RECONCILE_INTERVAL: how often it runs. */
  readonly intervalMs: number;
  /** OUTBOX_GRACE: a pending webhook untouched for this long, whose workflow is not running, is delivered again. */
  readonly graceMs: number;
}

/** The retention job (src/workflows/prune-ledger.ts, docs/data-retention.md), on its own schedule per region. */
export interface RetentionConfig {
  /** RETENTION_INTERVAL: how often it runs. */
  readonly intervalMs: number;
  /** RETENTION_RUN_BUDGET: how long one run may delete for; a backlog is worked through by the next runs. */
  readonly budgetMs: number;
}

export interface SweepConfig {
  /** How often the schedule starts a sweep, in ms. */
  readonly intervalMs: number;
  /** How late a missed sweep may still be started after a server outage, in ms. */
  readonly catchupWindowMs: number;
  /** Holds per page; each page is one workflow run, so this bounds pending children per run. */
  readonly pageSize: number;
  /** Holds per batch workflow within a page (each batch starts its holds' children); the sweep's default if absent. */
  readonly batchSize?: number;
  /**
   * The workflow execution timeout of each sweep the schedule starts, in ms: it spans the whole continue-as-new
   * chain, so a stuck sweep ends and the next scheduled one runs instead of being skipped (overlap SKIP) forever.
   */
  readonly timeoutMs: number;
}

/** What the Temporal server allows, where the product must stay inside it. */
export interface TemporalLimitsConfig {
  /**
   * TEMPORAL_MAX_ID_LENGTH: the server's `limit.maxIDLength` (255 in deploy/temporal/dynamicconfig.yaml; Temporal's own
   * default is 1000). A hold whose workflow ids would be longer is rejected by the sweep, never started.
   */
  readonly maxWorkflowIdLength: number;
}

export interface WebhookConfig {
  /** Plain http endpoints: dev only (the fake merchants); production requires https. */
  readonly allowInsecureHttp: boolean;
  /** Loopback and private addresses: dev only; in production they are refused as an SSRF guard. */
  readonly allowPrivateAddresses: boolean;
  /** WEBHOOK_TRUSTED_NETWORKS: private networks (CIDRs) merchants may be on all the same (a private link). */
  readonly trustedNetworks: readonly string[];
  /**
   * WEBHOOK_ALLOWED_PORTS: the ports merchant endpoints may use; production's default is 443 alone, dev's any port
   * (undefined).
   */
  readonly allowedPorts?: readonly number[];
  /**
   * WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT: at most this many of one merchant's requests open at once, across every worker
   * (the rate limit bounds how often they start; this, how many a merchant that hangs holds open).
   */
  readonly maxInFlightPerMerchant?: number;
  /**
   * DESTINATION_RATE_SHARE: the share of each destination's published rate this region's workers use (0 < share <= 1).
   * Regions keep separate ledgers, so each paces a destination alone: with merchants of both regions on one endpoint,
   * set shares that add up to 1 at most (0.5 in each); 1, the default, is right for a destination only one region sends
   * to.
   */
  readonly destinationRateShare?: number;
}

/** What the merchant_id label of the product's delivery metrics carries: see `ObservabilityConfig.merchantLabel`. */
export const MERCHANT_LABELS = ['all', 'per-merchant'] as const;
export type MerchantLabel = (typeof MERCHANT_LABELS)[number];

export interface ObservabilityConfig {
  /** host:port of the worker's Prometheus endpoint (SDK + product metrics); none when undefined. */
  readonly metricsAddress: string | undefined;
  /**
   * HEALTH_ADDRESS: where the worker answers `GET /livez` and `GET /readyz` (src/observability/health.ts); none when
   * undefined (like METRICS_ADDRESS: a host running several workers gives each its own).
   */
  readonly healthAddress: ListenAddress | undefined;
  readonly logLevel: 'TRACE' | 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
  /** How often each worker re-reads the ledger gauges (ages, depths). */
  readonly gaugeIntervalMs: number;
  /** QUARANTINE_PAGE_AFTER: a quarantined webhook older than this pages (a merchant not told for that long). */
  readonly quarantinePageAfterMs: number;
  /**
   * DUPLICATE_SENDS_ALERT_RATIO: requests per distinct webhook sent over the last 15 minutes (first policy runs:
   * replays and resends are declared, not counted) above which DuplicateSends fires. 1.5 by default.
   */
  readonly duplicateSendsAlertRatio: number;
  /**
   * merchant_id on the delivery metrics (attempts, throttle waits, Retry-After): `all` (the default) counts every
   * merchant under merchant_id="all", so the series stay a handful whatever the number of merchants; `per-merchant`
   * gives each merchant its own, for deployments with a few thousand merchants at most.
   */
  readonly merchantLabel: MerchantLabel;
  /**
   * METRICS_WORST_MERCHANTS: per-merchant signals without per-merchant series: the workers export, from the ledger, the
   * N merchants with the highest 429 share, error share and backlog age (each signal its own N), whatever
   * METRICS_MERCHANT_LABEL says. 10 by default.
   */
  readonly worstMerchants: number;
}

export interface WorkerTuningConfig {
  /**
   * Workflows each regional worker keeps in its sticky cache (0 = none); undefined = the SDK's default, sized
   * from the heap limit (~2,300 on a 4 GiB heap). Each cached workflow costs memory; an evicted one is replayed
   * from its history when its next task comes.
   */
  readonly maxCachedWorkflows: number | undefined;
}

/** When a starting worker makes its own build the deployment's current version (see docs/deploys.md). */
export const SET_CURRENT_MODES = ['if-none', 'always', 'never'] as const;
export type SetCurrentMode = (typeof SET_CURRENT_MODES)[number];

/**
 * Worker Deployment Versioning: every worker declares the deployment it belongs to and its build. New workflows go
 * to the deployment's current version; a sweep stays on the build that started it (PINNED), a hold workflow moves
 * to the current version at its next task (AUTO_UPGRADE). See docs/deploys.md for the rollout.
 */
export interface DeploymentConfig {
  /** WORKER_DEPLOYMENT_NAME: one deployment per namespace; every region's workers use the same name. */
  readonly deploymentName: string;
  /** WORKER_BUILD_ID (the image's git revision); undefined = derived from the workflow bundle's content. */
  readonly buildId: string | undefined;
  /**
   * WORKER_SET_CURRENT: `if-none` (production's default) makes this build current only when the deployment has no
   * current version yet (a first deploy), so later builds wait for `temporal worker deployment set-current-version`;
   * `always` (dev's default) makes each starting build current; `never` leaves it to the operator.
   */
  readonly setCurrent: SetCurrentMode;
}

export interface CodecServerConfig {
  /** host:port of the codec endpoint the Web UI decodes through; none when undefined. */
  readonly address: string | undefined;
  /** A static bearer token the endpoint requires: dev only (production refuses it and verifies each user instead). */
  readonly authToken: string | undefined;
  /** The Web UI's origins, allowed by CORS. */
  readonly corsOrigins: readonly string[];
  /**
   * CODEC_OIDC_ISSUER (and _AUDIENCE, _ROLES_CLAIM): each request carries the signed-in user's OIDC access token (the
   * Web UI passes it), verified like the admin API's; required in production.
   */
  readonly oidc?: {
    readonly issuer: string;
    readonly audience: string;
    readonly rolesClaim: string;
    readonly clockToleranceSeconds: number;
  };
  /** CODEC_TLS_CERT_FILE and CODEC_TLS_KEY_FILE: the UI sends a user's token only to an https endpoint. */
  readonly tls?: { readonly certFile: string; readonly keyFile: string };
  /** CODEC_BEHIND_TLS_PROXY=true: plain HTTP, reached only through a TLS-terminating proxy. */
  readonly behindTlsProxy: boolean;
}

/** What operator decisions need before a worker carries them out. */
export interface DecisionsConfig {
  /**
   * Four eyes: a replay approval needs a replay request approved by a second person, a processor-sequence skip a skip
   * request the same way, both checked against the ledger by the worker. Production: always. Dev: off (one person
   * runs the demo).
   */
  readonly fourEyes: boolean;
  /**
   * QUARANTINE_DECISION_TIMEOUT: how long a quarantined delivery (a release's, an event's, a resend's) waits for a
   * human before the workflow abandons it, in ms. The worker tells each quarantine as it is recorded.
   */
  readonly quarantineTimeoutMs: number;
}

export interface Config {
  readonly mode: Mode;
  readonly decisions: DecisionsConfig;
  readonly codecServer: CodecServerConfig;
  readonly observability: ObservabilityConfig;
  readonly worker: WorkerTuningConfig;
  readonly deployment: DeploymentConfig;
  readonly regions: readonly RegionConfig[];
  readonly webhooks: WebhookConfig;
  readonly sweep: SweepConfig;
  readonly outbox: OutboxConfig;
  readonly retention: RetentionConfig;
  readonly temporalLimits: TemporalLimitsConfig;
}

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Every variable the production loader reads; `.env.example` lists exactly these and the local stack's own
 * (dev/dev-config.ts), checked by a test.
 */
export const CONFIG_VARIABLES = [
  'HOLD_SWEEPER_MODE',
  'HOLD_SWEEPER_REGIONS',
  // The connection to Temporal (src/temporal-connection.ts); each also as TEMPORAL_<NAME>_<REGION>.
  ...TEMPORAL_CONNECTION_VARIABLES,
  'TEMPORAL_ADDRESS_US',
  'TEMPORAL_ADDRESS_EU',
  'TEMPORAL_NAMESPACE_US',
  'TEMPORAL_NAMESPACE_EU',
  'TASK_QUEUE_US',
  'TASK_QUEUE_EU',
  'SCHEDULE_ID_US',
  'SCHEDULE_ID_EU',
  'DATABASE_URL_US',
  'DATABASE_URL_EU',
  'SWEEP_INTERVAL',
  'SWEEP_CATCHUP_WINDOW',
  'SWEEP_PAGE_SIZE',
  'SWEEP_BATCH_SIZE',
  'SWEEP_TIMEOUT',
  'OUTBOX_RECONCILE_INTERVAL',
  'OUTBOX_GRACE',
  'RETENTION_INTERVAL',
  'RETENTION_RUN_BUDGET',
  'TEMPORAL_MAX_ID_LENGTH',
  'QUARANTINE_DECISION_TIMEOUT',
  'METRICS_ADDRESS',
  'HEALTH_ADDRESS',
  'METRICS_GAUGE_INTERVAL',
  'METRICS_MERCHANT_LABEL',
  'METRICS_WORST_MERCHANTS',
  'QUARANTINE_PAGE_AFTER',
  'DUPLICATE_SENDS_ALERT_RATIO',
  'LOG_LEVEL',
  'WORKFLOW_BUNDLE_PATH',
  'PAYLOAD_KEYS_US',
  'PAYLOAD_KEYS_EU',
  'MERCHANT_SECRET_KEYS_US',
  'MERCHANT_SECRET_KEYS_EU',
  'CODEC_SERVER_ADDRESS',
  'CODEC_AUTH_TOKEN',
  'CODEC_CORS_ORIGIN',
  'CODEC_OIDC_ISSUER',
  'CODEC_OIDC_AUDIENCE',
  'CODEC_OIDC_ROLES_CLAIM',
  'CODEC_TLS_CERT_FILE',
  'CODEC_TLS_KEY_FILE',
  'CODEC_BEHIND_TLS_PROXY',
  'WORKER_MAX_CACHED_WORKFLOWS',
  'WORKER_DEPLOYMENT_NAME',
  'WORKER_BUILD_ID',
  'WORKER_SET_CURRENT',
  'WEBHOOK_TRUSTED_NETWORKS',
  'WEBHOOK_ALLOWED_PORTS',
  'WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT',
  'DESTINATION_RATE_SHARE',
  'PROCESSOR_RECEIVER_ADDRESS',
  'PROCESSOR_RECEIVER_METRICS_ADDRESS',
  'PROCESSOR_RECEIVER_TLS_CERT_FILE',
  'PROCESSOR_RECEIVER_TLS_KEY_FILE',
  'PROCESSOR_RECEIVER_BEHIND_TLS_PROXY',
  'PROCESSOR_SIGNING_SECRET_US',
  'PROCESSOR_SIGNING_SECRET_EU',
  'PROCESSOR_GAP_WAIT',
  'PROCESSOR_REFUSED_RETENTION',
  'API_ADDRESS',
  'API_REGION',
  'API_OIDC_ISSUER',
  'API_OIDC_AUDIENCE',
  'API_OIDC_ROLES_CLAIM',
  'API_CLOCK_TOLERANCE',
  'API_TLS_CERT_FILE',
  'API_TLS_KEY_FILE',
  'API_BEHIND_TLS_PROXY',
  'API_METRICS_ADDRESS',
  'MERCHANT_API_ADDRESS',
  'MERCHANT_API_REGION',
  'MERCHANT_API_TLS_CERT_FILE',
  'MERCHANT_API_TLS_KEY_FILE',
  'MERCHANT_API_BEHIND_TLS_PROXY',
  'MERCHANT_API_METRICS_ADDRESS',
] as const;

/**
 * Requests open at once against one merchant: 4 serves 5 req/s at up to 800 ms a response and keeps a merchant that
 * hangs to four open connections, not the ~70 its rate would start within an attempt's timeout.
 */
export const DEFAULT_MAX_IN_FLIGHT_PER_MERCHANT = 4;

/** The Worker Deployment every region's workers belong to, unless WORKER_DEPLOYMENT_NAME says otherwise. */
export const DEFAULT_DEPLOYMENT_NAME = 'hold-sweeper';

/** The Temporal Web UI's own default origin (the dev server's UI, or `temporal-ui` on its default port). */
const DEFAULT_CODEC_CORS_ORIGIN = 'http://127.0.0.1:8233,http://localhost:8233';

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

const DURATION_UNITS_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses `500ms`, `30s`, `15m`, `1h`, `3d` (one number, one unit) into milliseconds. */
export function parseDuration(variable: string, raw: string): number {
  const match = /^(\d+)(ms|s|m|h|d)$/.exec(raw.trim());
  if (!match) throw new ConfigError(variable, raw, 'a duration such as 500ms, 30s, 15m, 1h or 3d');
  return Number(match[1]) * DURATION_UNITS_MS[match[2]!]!;
}

function readDuration(env: Env, variable: string, fallback: string, minMs = 1, maxMs = Infinity): number {
  const raw = env[variable] ?? fallback;
  const ms = parseDuration(variable, raw);
  if (ms < minMs) throw new ConfigError(variable, raw, `a duration of at least ${minMs} ms`);
  if (ms > maxMs) throw new ConfigError(variable, raw, `a duration of at most ${maxMs} ms`);
  return ms;
}

export function readInt(env: Env, variable: string, fallback: number, min: number, max: number): number {
  const raw = env[variable];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(variable, raw, `an integer from ${min} to ${max}`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(variable, raw, `an integer from ${min} to ${max}`);
  return value;
}

/** A ratio of requests to webhooks, at least 1 (one request per webhook is the least there can be). */
function readRatio(env: Env, variable: string, fallback: number): number {
  const raw = env[variable];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 1)
    throw new ConfigError(variable, raw, 'a ratio of requests to webhooks, >= 1 (e.g. 1.5)');
  return value;
}

/** A share of something, 0 < share <= 1: `0.5`, or `50%`. Unset: 1. */
function readShare(env: Env, variable: string): number {
  const raw = env[variable];
  if (raw === undefined || raw === '') return 1;
  const percent = raw.trim().endsWith('%');
  const value = Number(percent ? raw.trim().slice(0, -1) : raw) / (percent ? 100 : 1);
  if (!Number.isFinite(value) || value <= 0 || value > 1)
    throw new ConfigError(variable, raw, 'a share of the rate, > 0 and <= 1 (e.g. 0.5 or 50%)');
  return value;
}

function readUrl(env: Env, variable: string, protocols: readonly string[]): string | undefined {
  const raw = env[variable];
  if (raw === undefined || raw === '') return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(variable, redactUrl(raw), `a URL such as ${protocols[0]}//user:pass@host:5432/db`);
  }
  if (!protocols.includes(url.protocol)) {
    throw new ConfigError(variable, redactUrl(raw), `a URL with scheme ${protocols.join(' or ')}`);
  }
  return raw;
}

/** Browser origins (`scheme://host[:port]`, comma-separated): at least one, each exactly an origin. */
function readOrigins(env: Env, variable: string, fallback: string): string[] {
  const raw = env[variable] ?? fallback;
  const expected = 'one or more comma-separated origins such as http://localhost:8080 (scheme://host[:port], no path)';
  const origins = raw
    .split(',')
    .map((o) => o.trim())
    .filter(Boolean);
  if (origins.length === 0) throw new ConfigError(variable, raw, expected);
  for (const origin of origins) {
    let parsed: URL;
    try {
      parsed = new URL(origin);
    } catch {
      throw new ConfigError(variable, raw, expected);
    }
    if (parsed.origin !== origin || !['http:', 'https:'].includes(parsed.protocol))
      throw new ConfigError(variable, raw, expected);
  }
  return origins;
}

/** Comma-separated CIDRs (`10.20.0.0/16,127.0.0.1/32`); none when unset. */
function readNetworks(env: Env, variable: string): string[] {
  const raw = env[variable];
  if (raw === undefined || raw.trim() === '') return [];
  return raw.split(',').map((entry) => {
    const cidr = entry.trim();
    const [network, prefix, extra] = cidr.split('/');
    const family = net.isIP(network ?? '');
    const bits = Number(prefix);
    if (extra !== undefined || family === 0 || !/^\d{1,3}$/.test(prefix ?? '') || bits > (family === 4 ? 32 : 128)) {
      throw new ConfigError(variable, raw, 'comma-separated networks in CIDR notation, e.g. 10.20.0.0/16,127.0.0.1/32');
    }
    return cidr;
  });
}

/** Comma-separated TCP ports (`443,8443`), each 1–65535; `fallback` when unset. */
function readPorts(env: Env, variable: string, fallback: readonly number[] | undefined): readonly number[] | undefined {
  const raw = env[variable];
  if (raw === undefined || raw.trim() === '') return fallback;
  return raw.split(',').map((entry) => {
    const port = entry.trim();
    if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65_535) {
      throw new ConfigError(variable, raw, 'comma-separated ports from 1 to 65535, e.g. 443,8443');
    }
    return Number(port);
  });
}

/** The codec endpoint's OIDC verification and TLS (CODEC_OIDC_*, CODEC_TLS_*, CODEC_BEHIND_TLS_PROXY). */
function readCodecIdentity(env: Env, mode: Mode): Pick<CodecServerConfig, 'oidc' | 'tls' | 'behindTlsProxy'> {
  const issuer = readUrl(env, 'CODEC_OIDC_ISSUER', mode === 'production' ? ['https:'] : ['https:', 'http:']);
  const [certFile, keyFile] = [env.CODEC_TLS_CERT_FILE || undefined, env.CODEC_TLS_KEY_FILE || undefined];
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new ConfigError(
      certFile ? 'CODEC_TLS_KEY_FILE' : 'CODEC_TLS_CERT_FILE',
      undefined,
      'both CODEC_TLS_CERT_FILE and CODEC_TLS_KEY_FILE, or neither',
    );
  }
  const proxyRaw = env.CODEC_BEHIND_TLS_PROXY || 'false';
  if (proxyRaw !== 'true' && proxyRaw !== 'false')
    throw new ConfigError('CODEC_BEHIND_TLS_PROXY', proxyRaw, 'true or false');
  return {
    ...(issuer
      ? {
          oidc: Object.freeze({
            issuer,
            audience: env.CODEC_OIDC_AUDIENCE || CODEC_AUDIENCE,
            rolesClaim: env.CODEC_OIDC_ROLES_CLAIM || 'roles',
            clockToleranceSeconds: 30,
          }),
        }
      : {}),
    ...(certFile && keyFile ? { tls: Object.freeze({ certFile, keyFile }) } : {}),
    behindTlsProxy: proxyRaw === 'true',
  };
}

/** Host:port, as the Temporal client expects it. */
function readAddress(env: Env, variable: string): string | undefined {
  const raw = env[variable];
  if (raw === undefined || raw === '') return undefined;
  if (!/^[A-Za-z0-9.\-[\]:]+:\d{1,5}$/.test(raw)) throw new ConfigError(variable, raw, 'host:port, e.g. temporal:7233');
  return raw;
}

/** Temporal namespaces, task queues and schedule ids: keep them to a safe, greppable alphabet. */
function readName(env: Env, variable: string, fallback: string): string {
  const raw = env[variable] ?? fallback;
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/.test(raw)) {
    throw new ConfigError(variable, raw, 'letters, digits, ".", "_" or "-" (at most 200 characters)');
  }
  return raw;
}

/** Parses `id:base64key[,id:base64key...]` (current key first); throws naming the variable when malformed. */
export function parseEncryptionKeys(raw: string, onError: (expected: string) => never): EncryptionKey[] {
  const keys = raw.split(',').map((entry) => {
    const [id, encoded] = entry.trim().split(':');
    if (!id || !encoded || !/^[A-Za-z0-9_.-]+$/.test(id))
      onError('comma-separated id:base64key pairs, current key first');
    const key = Buffer.from(encoded!, 'base64');
    if (key.length !== 32 || key.toString('base64').replace(/=+$/, '') !== encoded!.replace(/=+$/, '')) {
      onError(`key "${id}" to be 32 bytes of base64 (e.g. openssl rand -base64 32)`);
    }
    return { id: id!, key };
  });
  if (new Set(keys.map((k) => k.id)).size !== keys.length) onError('distinct key ids');
  return keys;
}

/**
 * Database URLs carry passwords: never echo one back in an error. Whatever lies between `//` and the last `@` is the
 * user information as far as a reader can tell, so everything in it after the first `:` goes, even when the password
 * holds a raw `/`, `@` or `:` (a URL parser would split it elsewhere, and then print part of it as a host or a path).
 * When in doubt it hides too much, never too little.
 */
export function redactUrl(raw: string): string {
  const match = /^([^/]*\/\/)([^]*)@([^@]*)$/.exec(raw);
  if (!match) return raw;
  const [, scheme, userinfo, rest] = match as unknown as [string, string, string, string];
  const colon = userinfo.indexOf(':');
  return `${scheme}${colon === -1 ? userinfo : `${userinfo.slice(0, colon)}:***`}@${rest}`;
}

function readRegions(env: Env): Region[] {
  const raw = env.HOLD_SWEEPER_REGIONS ?? REGIONS.join(',');
  const names = raw
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  const expected = `a comma-separated, non-empty list of ${REGIONS.join(', ')}`;
  if (names.length === 0) throw new ConfigError('HOLD_SWEEPER_REGIONS', raw, expected);
  for (const name of names) {
    if (!(REGIONS as readonly string[]).includes(name)) throw new ConfigError('HOLD_SWEEPER_REGIONS', raw, expected);
  }
  return [...new Set(names)] as Region[];
}

function readMode(env: Env): Mode {
  const raw = env.HOLD_SWEEPER_MODE ?? 'dev';
  if (raw !== 'dev' && raw !== 'production') throw new ConfigError('HOLD_SWEEPER_MODE', raw, '"dev" or "production"');
  return raw;
}

/**
 * For entry points that must never run in dev mode by accident (the worker): HOLD_SWEEPER_MODE has to be set.
 * `npm start`, the tests and the benchmark are the local stack and say `dev` themselves.
 */
export function requireExplicitMode(env: Env = process.env): void {
  if (env.HOLD_SWEEPER_MODE === undefined || env.HOLD_SWEEPER_MODE === '') {
    throw new ConfigError(
      'HOLD_SWEEPER_MODE',
      undefined,
      '"production", or "dev" said explicitly (no SSRF guard, plain http, no encryption); the worker never defaults to dev',
    );
  }
}

export interface LoadConfigOptions {
  /**
   * `not-held`: this process never reads a merchant secret (the codec endpoint, which decodes payloads for browsers:
   * the last place to keep the key to the merchants' secrets), so MERCHANT_SECRET_KEYS_<R> is neither read nor
   * required and `secretKeys` is empty. `dev-only`: not held in production either (the receiver: its role may not read
   * a secret), but the dev ring in dev mode, where it migrates a development database itself. `required` (the default)
   * everywhere else.
   */
  merchantSecrets?: 'required' | 'not-held' | 'dev-only';
  /**
   * What this process connects to, so that production requires of it only the credentials it uses: `used` (the
   * default), the ledger and Temporal; `ledger-only` (`npm run migrate`): DATABASE_URL_<R>, not TEMPORAL_ADDRESS, TLS
   * or PAYLOAD_KEYS_<R>; `temporal-only` (`npm run promote`): TEMPORAL_ADDRESS and its TLS, no ledger and no payload
   * (it sends none); `not-used` (the codec endpoint, which checks its payload keys itself): neither.
   */
  connections?: 'used' | 'ledger-only' | 'temporal-only' | 'not-used';
}

/**
 * What each entry point loads: what it holds and what it connects to (src/bin/*.ts; the compose test loads the same).
 */
export const ENTRY_POINTS = {
  worker: {},
  ops: {},
  api: {},
  // Faces the internet: no Temporal access, no payload key, no merchant secret (the dev ring in dev, to migrate).
  'merchant-api': { merchantSecrets: 'dev-only', connections: 'ledger-only' },
  receiver: { merchantSecrets: 'dev-only' },
  codec: { merchantSecrets: 'not-held', connections: 'not-used' },
  migrate: { connections: 'ledger-only' },
  promote: { merchantSecrets: 'not-held', connections: 'temporal-only' },
} as const satisfies Record<string, LoadConfigOptions>;

/**
 * MERCHANT_SECRET_KEYS_<R>, parsed like PAYLOAD_KEYS_<R>; unset: the dev ring in dev, undefined in production (which
 * requires it). Production refuses the dev ring's id and key: they are in the source, so a secret sealed with them is
 * in clear to anyone.
 */
function readSecretKeys(env: Env, mode: Mode, up: string): EncryptionKey[] | undefined {
  const variable = `MERCHANT_SECRET_KEYS_${up}`;
  const raw = env[variable];
  if (!raw) return mode === 'dev' ? [...DEV_SECRET_KEYS] : undefined;
  // The value is a secret: errors name the variable, never its content.
  const keys = parseEncryptionKeys(raw, (expected) => {
    throw new ConfigError(variable, '(redacted)', expected);
  });
  const dev = DEV_SECRET_KEYS[0]!.key;
  if (mode === 'production' && keys.some((k) => k.id === DEV_SECRET_KEY_ID || k.key.equals(dev))) {
    throw new ConfigError(
      variable,
      '(redacted)',
      `keys of your own: the built-in dev key ("${DEV_SECRET_KEY_ID}") protects nothing`,
    );
  }
  return keys;
}

/**
 * One region's ledger, Temporal connection, names and keys (`<VARIABLE>_<REGION>`), and what production requires of
 * them.
 */
function readRegionConfig(
  env: Env,
  mode: Mode,
  region: Region,
  servesOneRegion: boolean,
  { merchantSecrets, connections }: Required<LoadConfigOptions>,
): RegionConfig {
  const up = region.toUpperCase();
  const temporal = loadTemporalConnectionSettings(env, region, { servesOneRegion });
  const held = merchantSecrets === 'required' || (merchantSecrets === 'dev-only' && mode === 'dev');
  const secretKeys = held ? readSecretKeys(env, mode, up) : [];
  const regionConfig: RegionConfig = {
    region,
    databaseUrl: readUrl(env, `DATABASE_URL_${up}`, ['postgres:', 'postgresql:']),
    temporalAddress: temporal.address,
    temporal,
    namespace: readName(
      { [`TEMPORAL_NAMESPACE_${up}`]: temporal.namespace },
      `TEMPORAL_NAMESPACE_${up}`,
      `hold-sweeper-${region}`,
    ),
    taskQueue: readName(env, `TASK_QUEUE_${up}`, `hold-sweeper-${region}`),
    scheduleId: readName(env, `SCHEDULE_ID_${up}`, `hold-sweep-${region}`),
    payloadKeys: env[`PAYLOAD_KEYS_${up}`]
      ? parseEncryptionKeys(env[`PAYLOAD_KEYS_${up}`]!, (expected) => {
          // The value is a secret: the error names the variable, never its content.
          throw new ConfigError(`PAYLOAD_KEYS_${up}`, '(redacted)', expected);
        })
      : undefined,
    secretKeys: secretKeys ?? [],
  };
  if (mode === 'production') requireProductionRegion(env, regionConfig, temporal, secretKeys, connections);
  return Object.freeze(regionConfig);
}

/**
 * Production never falls back to embedded services: a missing address is a deployment mistake. It requires of a
 * region what this process uses of it: the ledger, Temporal over TLS, encrypted payloads, sealed merchant secrets.
 */
function requireProductionRegion(
  env: Env,
  regionConfig: RegionConfig,
  temporal: TemporalConnectionSettings,
  secretKeys: readonly EncryptionKey[] | undefined,
  connections: Required<LoadConfigOptions>['connections'],
): void {
  const { region } = regionConfig;
  const up = region.toUpperCase();
  const usesTemporal = connections === 'used' || connections === 'temporal-only';
  if (!regionConfig.databaseUrl && (connections === 'used' || connections === 'ledger-only')) {
    throw new ConfigError(`DATABASE_URL_${up}`, undefined, 'a postgres:// URL (required in production mode)');
  }
  if (!regionConfig.temporalAddress && usesTemporal) {
    throw new ConfigError(`TEMPORAL_ADDRESS_${up}`, undefined, 'host:port (or TEMPORAL_ADDRESS) in production mode');
  }
  if (!regionConfig.payloadKeys && connections === 'used') {
    throw new ConfigError(
      `PAYLOAD_KEYS_${up}`,
      undefined,
      'id:base64key (32 bytes): production payloads are always encrypted',
    );
  }
  if (!secretKeys) {
    throw new ConfigError(
      `MERCHANT_SECRET_KEYS_${up}`,
      undefined,
      'id:base64key (32 bytes): production seals merchant signing secrets at rest with it',
    );
  }
  if (usesTemporal) requireTls(temporal, env, region);
}

/** The sweep's schedule, paging and timeouts (SWEEP_*). */
function readSweep(env: Env): SweepConfig {
  return {
    intervalMs: readDuration(env, 'SWEEP_INTERVAL', '15m', 1000),
    catchupWindowMs: readDuration(env, 'SWEEP_CATCHUP_WINDOW', '1h', MIN_CATCHUP_WINDOW_MS),
    pageSize: readInt(env, 'SWEEP_PAGE_SIZE', 500, 1, MAX_PAGE_SIZE),
    batchSize: readInt(env, 'SWEEP_BATCH_SIZE', 50, 1, MAX_PAGE_SIZE),
    timeoutMs: readDuration(env, 'SWEEP_TIMEOUT', `${DEFAULT_SWEEP_TIMEOUT_MS}ms`, MIN_SWEEP_TIMEOUT_MS),
  };
}

/** The outbox reconciler's schedule (OUTBOX_*). */
function readOutbox(env: Env): OutboxConfig {
  return {
    intervalMs: readDuration(env, 'OUTBOX_RECONCILE_INTERVAL', '5m', 1000),
    graceMs: readDuration(env, 'OUTBOX_GRACE', '10m', 1000),
  };
}

/** The retention job's schedule (RETENTION_*). */
function readRetention(env: Env): RetentionConfig {
  return {
    intervalMs: readDuration(env, 'RETENTION_INTERVAL', '1h', 60_000),
    // Inside the activity's 30-minute start-to-close (src/workflows/activity-profiles.ts), so a run always reports.
    budgetMs: readDuration(env, 'RETENTION_RUN_BUDGET', '5m', 1000, 20 * 60_000),
  };
}

/** What the Temporal server allows (TEMPORAL_MAX_ID_LENGTH). */
function readTemporalLimits(env: Env): TemporalLimitsConfig {
  return {
    // Room for a hold id of at least a few dozen bytes beside the longest affix (contracts/ids.ts).
    maxWorkflowIdLength: readInt(
      env,
      'TEMPORAL_MAX_ID_LENGTH',
      DEFAULT_MAX_WORKFLOW_ID_LENGTH,
      longestHoldIdAffix() + 32,
      100_000,
    ),
  };
}

/** Where webhooks may go and how hard each destination is pressed (WEBHOOK_*, DESTINATION_RATE_SHARE). */
function readWebhooks(env: Env, mode: Mode): WebhookConfig {
  return {
    allowInsecureHttp: mode === 'dev',
    allowPrivateAddresses: mode === 'dev',
    trustedNetworks: readNetworks(env, 'WEBHOOK_TRUSTED_NETWORKS'),
    // A merchant's webhook receiver is an https server on 443; any other port is the operator's explicit choice.
    allowedPorts: readPorts(env, 'WEBHOOK_ALLOWED_PORTS', mode === 'production' ? [443] : undefined),
    maxInFlightPerMerchant: readInt(
      env,
      'WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT',
      DEFAULT_MAX_IN_FLIGHT_PER_MERCHANT,
      1,
      1_000,
    ),
    destinationRateShare: readShare(env, 'DESTINATION_RATE_SHARE'),
  };
}

/** Logs, metrics and alert thresholds (LOG_LEVEL, METRICS_*, QUARANTINE_PAGE_AFTER, DUPLICATE_SENDS_ALERT_RATIO). */
function readObservability(env: Env): ObservabilityConfig {
  const logLevel = (env.LOG_LEVEL ?? 'INFO').toUpperCase();
  if (!['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'].includes(logLevel)) {
    throw new ConfigError('LOG_LEVEL', env.LOG_LEVEL, 'one of TRACE, DEBUG, INFO, WARN, ERROR');
  }
  const observability: ObservabilityConfig = {
    metricsAddress: readAddress(env, 'METRICS_ADDRESS'),
    healthAddress: readListenAddress(env, 'HEALTH_ADDRESS'),
    logLevel: logLevel as ObservabilityConfig['logLevel'],
    gaugeIntervalMs: readDuration(env, 'METRICS_GAUGE_INTERVAL', '15s', 100),
    quarantinePageAfterMs: readDuration(env, 'QUARANTINE_PAGE_AFTER', '1h', 60_000),
    duplicateSendsAlertRatio: readRatio(env, 'DUPLICATE_SENDS_ALERT_RATIO', 1.5),
    merchantLabel: (env.METRICS_MERCHANT_LABEL || 'all') as MerchantLabel,
    worstMerchants: readInt(env, 'METRICS_WORST_MERCHANTS', 10, 1, 100),
  };
  if (!(MERCHANT_LABELS as readonly string[]).includes(observability.merchantLabel)) {
    throw new ConfigError(
      'METRICS_MERCHANT_LABEL',
      env.METRICS_MERCHANT_LABEL,
      '"all" (one series for every merchant) or "per-merchant" (a series per merchant: a few thousand merchants at most)',
    );
  }
  return observability;
}

/** The regional workers' own tuning (WORKER_MAX_CACHED_WORKFLOWS). */
function readWorkerTuning(env: Env): WorkerTuningConfig {
  return {
    maxCachedWorkflows: env.WORKER_MAX_CACHED_WORKFLOWS
      ? readInt(env, 'WORKER_MAX_CACHED_WORKFLOWS', 0, 0, 1_000_000)
      : undefined,
  };
}

/** Worker Deployment Versioning (WORKER_DEPLOYMENT_NAME, WORKER_BUILD_ID, WORKER_SET_CURRENT). */
function readDeployment(env: Env, mode: Mode): DeploymentConfig {
  const deployment: DeploymentConfig = {
    deploymentName: env.WORKER_DEPLOYMENT_NAME || DEFAULT_DEPLOYMENT_NAME,
    buildId: env.WORKER_BUILD_ID || undefined,
    setCurrent: (env.WORKER_SET_CURRENT || (mode === 'dev' ? 'always' : 'if-none')) as SetCurrentMode,
  };
  // Temporal joins the two as "<deployment>.<build id>": the deployment name cannot hold a dot.
  if (!/^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$/.test(deployment.deploymentName)) {
    throw new ConfigError(
      'WORKER_DEPLOYMENT_NAME',
      env.WORKER_DEPLOYMENT_NAME,
      'letters, digits, "_" or "-" (at most 100 characters, no ".")',
    );
  }
  if (deployment.buildId !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/.test(deployment.buildId)) {
    throw new ConfigError(
      'WORKER_BUILD_ID',
      env.WORKER_BUILD_ID,
      'letters, digits, ".", "_" or "-" (at most 100 characters), e.g. the git revision',
    );
  }
  if (!(SET_CURRENT_MODES as readonly string[]).includes(deployment.setCurrent)) {
    throw new ConfigError('WORKER_SET_CURRENT', env.WORKER_SET_CURRENT, SET_CURRENT_MODES.join(', '));
  }
  return deployment;
}

/**
 * The codec endpoint the Web UI decodes through (CODEC_*); production requires OIDC and TLS of it and refuses a static
 * token.
 */
function readCodecServer(env: Env, mode: Mode): CodecServerConfig {
  const codecServer: CodecServerConfig = {
    address: readAddress(env, 'CODEC_SERVER_ADDRESS'),
    authToken: env.CODEC_AUTH_TOKEN || undefined,
    corsOrigins: readOrigins(env, 'CODEC_CORS_ORIGIN', DEFAULT_CODEC_CORS_ORIGIN),
    ...readCodecIdentity(env, mode),
  };
  if (mode === 'production' && codecServer.address) {
    if (codecServer.authToken) {
      throw new ConfigError(
        'CODEC_AUTH_TOKEN',
        '(redacted)',
        'nothing in production: the codec endpoint verifies each user’s OIDC token (CODEC_OIDC_ISSUER); a static token is for dev only',
      );
    }
    if (!codecServer.oidc) {
      throw new ConfigError(
        'CODEC_OIDC_ISSUER',
        undefined,
        'the https URL of the OIDC issuer whose users’ tokens the Web UI passes to the codec endpoint',
      );
    }
    if (!codecServer.tls && !codecServer.behindTlsProxy) {
      throw new ConfigError(
        'CODEC_TLS_CERT_FILE',
        undefined,
        'a certificate for the codec endpoint (and CODEC_TLS_KEY_FILE), or CODEC_BEHIND_TLS_PROXY=true: the Web UI sends a user’s token only to https',
      );
    }
  }
  return codecServer;
}

/**
 * The whole configuration, each concept read in turn (the order decides which of several errors is reported): the
 * mode and the regions, then each region's ledger and Temporal, the sweep, the outbox, Temporal's limits, webhooks,
 * observability, worker tuning, the deployment, the codec endpoint.
 */
export function loadConfig(
  env: Env = process.env,
  { merchantSecrets = 'required', connections = 'used' }: LoadConfigOptions = {},
): Config {
  const mode = readMode(env);
  const names = readRegions(env);
  const regions = names.map((region) =>
    readRegionConfig(env, mode, region, names.length === 1, { merchantSecrets, connections }),
  );
  const sweep = readSweep(env);
  const outbox = readOutbox(env);
  const temporalLimits = readTemporalLimits(env);
  const webhooks = readWebhooks(env, mode);
  const observability = readObservability(env);
  const worker = readWorkerTuning(env);
  const deployment = readDeployment(env, mode);
  const codecServer = readCodecServer(env, mode);
  return Object.freeze({
    mode,
    decisions: Object.freeze({
      fourEyes: mode === 'production',
      quarantineTimeoutMs: readDuration(env, 'QUARANTINE_DECISION_TIMEOUT', '14d', 60_000),
    }),
    codecServer: Object.freeze(codecServer),
    observability: Object.freeze(observability),
    worker: Object.freeze(worker),
    deployment: Object.freeze(deployment),
    regions: Object.freeze(regions),
    webhooks: Object.freeze(webhooks),
    sweep: Object.freeze(sweep),
    outbox: Object.freeze(outbox),
    retention: Object.freeze(readRetention(env)),
    temporalLimits: Object.freeze(temporalLimits),
  });
}

/**
 * The processor-event receiver of one region (src/bin/receiver.ts): where it listens and whose signatures it accepts.
 */
export interface ProcessorConfig extends ListenAddress {
  /** PROCESSOR_RECEIVER_TLS_CERT_FILE and _KEY_FILE: its own TLS; or behind a TLS proxy, said (production: one). */
  readonly tls?: { readonly certFile: string; readonly keyFile: string };
  readonly behindTlsProxy: boolean;
  /** PROCESSOR_RECEIVER_METRICS_ADDRESS: its `GET /metrics`, never on the port the processor calls. */
  readonly metrics?: ListenAddress;
  /** The decoded key the processor signs with (PROCESSOR_SIGNING_SECRET_<REGION>); never logged. */
  readonly signingKey: Buffer;
  /** How long a hold's event workflow waits for a missing sequence before it stops for a human. */
  readonly gapWaitMs: number;
  /** PROCESSOR_REFUSED_RETENTION: how long a signed but refused request's row is kept (30 days). */
  readonly refusedRetentionMs: number;
}

export function loadProcessorConfig(env: Env, region: Region, mode: Mode): ProcessorConfig {
  const up = region.toUpperCase();
  const variable = `PROCESSOR_SIGNING_SECRET_${up}`;
  const expected = 'whsec_<base64> of at least 16 bytes: the secret the processor signs its callbacks with';
  const signingKey = keyOfSecret(env[variable]);
  // The value is a secret: errors name the variable, never its content.
  if (signingKey === 'missing') throw new ConfigError(variable, undefined, expected);
  if (signingKey === 'undecodable') throw new ConfigError(variable, '(redacted)', expected);

  const address = readListenAddress(
    env,
    'PROCESSOR_RECEIVER_ADDRESS',
    mode === 'dev' ? '127.0.0.1:8090' : '0.0.0.0:8090',
  );
  const metrics = readMetricsAddress(env, 'PROCESSOR_RECEIVER_METRICS_ADDRESS', mode, 9465);
  return Object.freeze({
    ...address,
    ...readListenerTls(env, 'PROCESSOR_RECEIVER', mode),
    ...(metrics ? { metrics } : {}),
    signingKey,
    gapWaitMs: readDuration(env, 'PROCESSOR_GAP_WAIT', '15m', 1000),
    refusedRetentionMs: readDuration(env, 'PROCESSOR_REFUSED_RETENTION', '30d', 3_600_000),
  });
}

/** A host and a port to listen on. */
export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/** An HTTP API of one region: where it listens and how TLS reaches it (the admin API's and the merchant API's). */
export interface ListenerConfig extends ListenAddress {
  readonly region: Region;
  /**
   * <PREFIX>_METRICS_ADDRESS: where its `GET /metrics` is served, apart from its callers' port (production: 0.0.0.0
   * and its own port unless said; dev: only when said).
   */
  readonly metrics?: ListenAddress;
  /** <PREFIX>_TLS_CERT_FILE and <PREFIX>_TLS_KEY_FILE: the listener's certificate and key (PEM files). */
  readonly tls?: { readonly certFile: string; readonly keyFile: string };
  /** <PREFIX>_BEHIND_TLS_PROXY=true: plain HTTP on a listener only a TLS-terminating proxy reaches. */
  readonly behindTlsProxy: boolean;
}

/**
 * `<prefix>_REGION` (or the only configured region), `<prefix>_ADDRESS` (dev: 127.0.0.1, production: 0.0.0.0, on
 * `port`), and TLS. Production refuses a listener without TLS (its own, or `<prefix>_BEHIND_TLS_PROXY=true` said
 * explicitly): credentials cross it.
 */
/** `host:port` of `variable`, or `fallback` when it is unset; named errors otherwise. */
function readListenAddress(env: Env, variable: string, fallback: string): ListenAddress;
function readListenAddress(env: Env, variable: string, fallback?: string): ListenAddress | undefined;
function readListenAddress(env: Env, variable: string, fallback?: string): ListenAddress | undefined {
  const raw = env[variable] || fallback;
  if (raw === undefined) return undefined;
  const match = /^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\]):(\d{1,5})$/.exec(raw);
  const port = match ? Number(match[2]) : NaN;
  if (!match || port > 65_535) throw new ConfigError(variable, raw, 'host:port to listen on, e.g. 0.0.0.0:8090');
  return Object.freeze({ host: match[1]!.replace(/^\[|\]$/g, ''), port });
}

/** Where a caller-facing process serves its metrics (<variable>): production 0.0.0.0:`port` unless said, dev if said. */
const readMetricsAddress = (env: Env, variable: string, mode: Mode, port: number) =>
  readListenAddress(env, variable, mode === 'production' ? `0.0.0.0:${port}` : undefined);

function readListener(env: Env, config: Config, prefix: string, port: number, metricsPort: number): ListenerConfig {
  const regions = config.regions.map((r) => r.region);
  const regionRaw = env[`${prefix}_REGION`] || (regions.length === 1 ? regions[0] : undefined);
  if (!regionRaw || !isRegion(regionRaw) || !regions.includes(regionRaw)) {
    throw new ConfigError(
      `${prefix}_REGION`,
      regionRaw,
      `the region it serves, one of the configured regions: ${regions.join(', ')}`,
    );
  }
  const production = config.mode === 'production';
  const address = readListenAddress(env, `${prefix}_ADDRESS`, `${production ? '0.0.0.0' : '127.0.0.1'}:${port}`);
  const metrics = readMetricsAddress(env, `${prefix}_METRICS_ADDRESS`, config.mode, metricsPort);
  return Object.freeze({
    region: regionRaw,
    ...address,
    ...readListenerTls(env, prefix, config.mode),
    ...(metrics ? { metrics } : {}),
  });
}

/**
 * <prefix>_TLS_CERT_FILE and _KEY_FILE (both or neither), or <prefix>_BEHIND_TLS_PROXY=true; production refuses a
 * listener with neither: what crosses it (a token, a key, a signed callback) is never sent in clear.
 */
function readListenerTls(
  env: Env,
  prefix: string,
  mode: Mode,
): { tls?: { certFile: string; keyFile: string }; behindTlsProxy: boolean } {
  const [certFile, keyFile] = [env[`${prefix}_TLS_CERT_FILE`] || undefined, env[`${prefix}_TLS_KEY_FILE`] || undefined];
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new ConfigError(
      certFile ? `${prefix}_TLS_KEY_FILE` : `${prefix}_TLS_CERT_FILE`,
      undefined,
      `both ${prefix}_TLS_CERT_FILE and ${prefix}_TLS_KEY_FILE, or neither`,
    );
  }
  const proxyRaw = env[`${prefix}_BEHIND_TLS_PROXY`] || 'false';
  if (proxyRaw !== 'true' && proxyRaw !== 'false')
    throw new ConfigError(`${prefix}_BEHIND_TLS_PROXY`, proxyRaw, 'true or false');
  const behindTlsProxy = proxyRaw === 'true';
  if (mode === 'production' && !certFile && !behindTlsProxy) {
    throw new ConfigError(
      `${prefix}_TLS_CERT_FILE`,
      undefined,
      `a certificate for the listener (and ${prefix}_TLS_KEY_FILE), or ${prefix}_BEHIND_TLS_PROXY=true: production sends no credential in clear`,
    );
  }
  return { ...(certFile && keyFile ? { tls: Object.freeze({ certFile, keyFile }) } : {}), behindTlsProxy };
}

/** The admin API of one region (src/bin/api.ts): where it listens, whose tokens it accepts, and how TLS reaches it. */
export interface ApiConfig extends ListenerConfig {
  /** API_OIDC_ISSUER: the issuer whose access tokens it accepts (its discovery document names the keys). */
  readonly issuer: string;
  /** API_OIDC_AUDIENCE: the `aud` a token must carry (hold-sweeper-admin-<region>: no other region's token passes). */
  readonly audience: string;
  /** API_OIDC_ROLES_CLAIM: the claim with the caller's roles (roles). */
  readonly rolesClaim: string;
  readonly clockToleranceSeconds: number;
}

/**
 * The admin API's settings for one of the configured regions (API_REGION, or the only one). Production refuses to
 * start it without TLS (its own, or API_BEHIND_TLS_PROXY=true said explicitly) and without an https issuer: bearer
 * tokens cross this listener, and nothing but a verified token says who is calling.
 */
export function loadApiConfig(env: Env, config: Config): ApiConfig {
  const listener = readListener(env, config, 'API', 8443, 9466);
  const issuer = readUrl(env, 'API_OIDC_ISSUER', config.mode === 'production' ? ['https:'] : ['https:', 'http:']);
  if (!issuer)
    throw new ConfigError(
      'API_OIDC_ISSUER',
      undefined,
      'the URL of the OIDC issuer whose access tokens the API accepts',
    );
  return Object.freeze({
    ...listener,
    issuer,
    audience: env.API_OIDC_AUDIENCE || adminAudience(listener.region),
    rolesClaim: env.API_OIDC_ROLES_CLAIM || 'roles',
    clockToleranceSeconds: readDuration(env, 'API_CLOCK_TOLERANCE', '30s', 0) / 1000,
  });
}

/**
 * The merchant API of one region (src/bin/merchant-api.ts): MERCHANT_API_REGION, _ADDRESS (8444) and TLS, as the admin
 * API's.
 */
export function loadMerchantApiConfig(env: Env, config: Config): ListenerConfig {
  return readListener(env, config, 'MERCHANT_API', 8444, 9467);
}
