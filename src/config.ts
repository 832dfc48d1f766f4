/**
 * Configuration: read from the environment once, validated, frozen.
 *
 * Each variable is read through its schema (src/config-schema.ts); what combines variables (what production requires,
 * both halves of a certificate) is checked here. Every problem found fails start-up together, in one `ConfigError`
 * naming each variable, never later in the middle of a sweep.
 */
import fs from 'node:fs';
import type { z } from 'zod';
import { ConfigError } from './errors.js';
import { isRegion, REGIONS, type Region } from './contracts/regions.js';
import { adminAudience, CODEC_AUDIENCE } from './contracts/identity.js';
import { DEV_SECRET_KEY_ID, DEV_SECRET_KEYS } from './delivery/secret-box.js';
import {
  loadTemporalConnectionSettings,
  PLAINTEXT,
  requireTls,
  TEMPORAL_CONNECTION_VARIABLES,
  type TemporalConnectionSettings,
} from './temporal-connection.js';
import type { EncryptionKey } from './crypto/key-ring.js';
import {
  DEFAULT_DEPLOYMENT_NAME,
  DEFAULT_MAX_IN_FLIGHT_PER_MERCHANT,
  DEFAULT_SWEEP_TIMEOUT_MS,
  docOf,
  durationMs,
  LISTENERS,
  regionVariables,
  SWEEP_RELEASE_WAIT_MS,
  VARIABLES,
  type ListenAddress,
  type MERCHANT_LABELS,
  type SET_CURRENT_MODES,
  type Setting,
} from './config-schema.js';

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
interface TemporalLimitsConfig {
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
export type MerchantLabel = (typeof MERCHANT_LABELS)[number];

interface ObservabilityConfig {
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

interface WorkerTuningConfig {
  /**
   * Workflows each regional worker keeps in its sticky cache (0 = none); undefined = the SDK's default, sized
   * from the heap limit (~2,300 on a 4 GiB heap). Each cached workflow costs memory; an evicted one is replayed
   * from its history when its next task comes.
   */
  readonly maxCachedWorkflows: number | undefined;
}

/** When a starting worker makes its own build the deployment's current version (see docs/deploys.md). */
export type SetCurrentMode = (typeof SET_CURRENT_MODES)[number];

/**
 * Worker Deployment Versioning: every worker declares the deployment it belongs to and its build. New workflows go
 * to the deployment's current version; a sweep stays on the build that started it (PINNED), a hold workflow moves
 * to the current version at its next task (AUTO_UPGRADE). See docs/deploys.md for the rollout.
 */
interface DeploymentConfig {
  /** WORKER_DEPLOYMENT_NAME: one deployment per namespace; every region's workers use the same name. */
  readonly deploymentName: string;
  /** WORKER_BUILD_ID (the image's git revision); undefined = derived from the workflow bundle's content. */
  readonly buildId: string | undefined;
  /**
   * WORKER_SET_CURRENT: `never` (production's default) leaves it to the deploy step (`npm run promote`, with the
   * namespace's admin credential: a worker's may not); `always` (dev's default) makes each starting build current;
   * `if-none` only when the deployment has no current version yet (a cluster that lets workers promote).
   */
  readonly setCurrent: SetCurrentMode;
}

interface CodecServerConfig {
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
    readonly maxTokenAgeSeconds: number;
  };
  /** CODEC_TLS_CERT_FILE and CODEC_TLS_KEY_FILE: the UI sends a user's token only to an https endpoint. */
  readonly tls?: { readonly certFile: string; readonly keyFile: string };
  /** CODEC_BEHIND_TLS_PROXY=true: plain HTTP, reached only through a TLS-terminating proxy. */
  readonly behindTlsProxy: boolean;
  /** CODEC_METRICS_ADDRESS: its `GET /metrics`, never on the port the browsers reach. */
  readonly metrics?: ListenAddress;
}

/** What operator decisions need before a worker carries them out. */
interface DecisionsConfig {
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

/** What a set of settings reads as: each variable's value. */
type Values<S extends Record<string, Setting>> = { readonly [K in keyof S]: z.output<S[K]> };

/**
 * One load of the configuration: every variable read through its schema, every problem kept, all of them reported
 * together at the end (`done`). A bad variable reads as its default meanwhile, so the checks that combine variables
 * still run and report theirs.
 */
class Reading {
  private readonly problems: ConfigError[] = [];
  constructor(readonly env: Env) {}

  /** `settings`' variables, each read from the environment as `nameOf(key)` (a region's or a listener's form). */
  read<S extends Record<string, Setting>>(settings: S, nameOf: (key: string) => string = (key) => key): Values<S> {
    const values: Record<string, unknown> = {};
    for (const [key, schema] of Object.entries(settings)) {
      const variable = nameOf(key);
      const raw = this.valueOf(variable, schema);
      const result = schema.safeParse(raw);
      if (result.success) {
        values[key] = result.data;
        continue;
      }
      // A secret's value is never echoed; a URL's password never either.
      const shown = docOf(schema)?.secret ? '(redacted)' : redactUrl(raw ?? '');
      this.refuse(variable, shown, result.error.issues[0]!.message);
      values[key] = schema.safeParse(undefined).data;
    }
    return values as Values<S>;
  }

  /**
   * `variable`'s text: the environment's, or for a variable that may come from a file (VariableDoc.file), the content
   * of the file `<variable>_FILE` names, trimmed. Both set is a mistake, refused; so is a file that cannot be read.
   */
  private valueOf(variable: string, schema: Setting): string | undefined {
    const given = this.env[variable];
    const file = docOf(schema)?.file ? this.env[`${variable}_FILE`] : undefined;
    if (file === undefined || file === '') return given;
    if (given !== undefined && given !== '') {
      this.refuse(variable, '(redacted)', `${variable} or ${variable}_FILE, not both`);
      return undefined;
    }
    try {
      return fs.readFileSync(file, 'utf8').trim();
    } catch (err) {
      this.refuse(`${variable}_FILE`, file, `a readable file (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
      return undefined;
    }
  }

  /** A problem with `variable`, unless it has one already (a bad value read as its default is not also missing). */
  refuse(variable: string, value: string | undefined, expected: string): void {
    if (this.problems.some((p) => p.variable === variable)) return;
    this.problems.push(new ConfigError(variable, value, expected));
  }

  /** A check that throws its ConfigError (the Temporal connection's): kept with the rest; `undefined` if it threw. */
  attempt<T>(check: () => T): T | undefined {
    try {
      return check();
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      for (const problem of err.problems) this.refuse(problem.variable, problem.value, problem.expected);
      return undefined;
    }
  }

  /** Throws every problem found, at once. */
  done(): void {
    if (this.problems.length > 0) throw ConfigError.all(this.problems);
  }
}

/** Reads `settings` alone (a loader of a few variables, such as the local stack's), every problem at once. */
export function readSettings<S extends Record<string, Setting>>(env: Env, settings: S): Values<S> {
  const reading = new Reading(env);
  const values = reading.read(settings);
  reading.done();
  return values;
}

/** The variables `settings` are read from, each followed by its `_FILE` form where it has one. */
const withFiles = (settings: Record<string, Setting>, nameOf: (key: string) => string): string[] =>
  Object.entries(settings).flatMap(([key, schema]) =>
    docOf(schema)?.file ? [nameOf(key), `${nameOf(key)}_FILE`] : [nameOf(key)],
  );

/**
 * Every variable the production loader reads; `.env.example` lists exactly these and the local stack's own
 * (dev/dev-config.ts), checked by a test.
 */
export const CONFIG_VARIABLES: readonly string[] = [
  ...withFiles(VARIABLES, (name) => name),
  // The connection to Temporal (src/temporal-connection.ts); each also as TEMPORAL_<NAME>_<REGION>.
  ...TEMPORAL_CONNECTION_VARIABLES,
  ...REGIONS.flatMap((region) => [
    `TEMPORAL_ADDRESS_${region.toUpperCase()}`,
    ...withFiles(regionVariables(region), (name) => `${name}_${region.toUpperCase()}`),
  ]),
  ...Object.entries(LISTENERS).flatMap(([prefix, names]) => withFiles(names, (name) => `${prefix}_${name}`)),
];

export { DEFAULT_DEPLOYMENT_NAME, DEFAULT_MAX_IN_FLIGHT_PER_MERCHANT, DEFAULT_SWEEP_TIMEOUT_MS, SWEEP_RELEASE_WAIT_MS };

/** Parses `500ms`, `30s`, `15m`, `1h`, `3d` (one number, one unit) into milliseconds; a ConfigError names `variable`. */
export function parseDuration(variable: string, raw: string): number {
  const ms = durationMs(raw);
  if (ms === undefined) throw new ConfigError(variable, raw, 'a duration such as 500ms, 30s, 15m, 1h or 3d');
  return ms;
}

/** A query parameter whose value is a secret: `password`, `sslpassword`, `sslkey`, `api_token`, `client_secret`... */
const SECRET_PARAM = /pass|pwd|secret|token|key|credential/i;

/**
 * Database URLs carry passwords, in their user information or in a query parameter (`?password=`, libpq's
 * `sslpassword`): never echo one back in an error. Whatever lies between `//` and the last `@` is the user information
 * as far as a reader can tell, so everything in it after the first `:` goes, even when the password holds a raw `/`,
 * `@` or `:` (a URL parser would split it elsewhere, and then print part of it as a host or a path). Then, anywhere in
 * what is left, the value of every parameter named like a secret goes, up to the next `&` (a `#` or `@` in it
 * included). When in doubt it hides too much, never too little.
 */
export function redactUrl(raw: string): string {
  const match = /^([^/]*\/\/)([^]*)@([^@]*)$/.exec(raw);
  const [, scheme, userinfo, rest] = (match ?? []) as unknown as [string, string, string, string];
  const colon = match ? userinfo.indexOf(':') : -1;
  return maskedParams(colon === -1 ? raw : `${scheme}${userinfo.slice(0, colon)}:***@${rest}`);
}

/** Every parameter named like a secret with its value masked; another's value is searched too (a stray `?` in it). */
function maskedParams(text: string): string {
  return text.replace(/([?&])([^=&?]*)=([^&]*)/g, (_, sep: string, name: string, value: string) =>
    SECRET_PARAM.test(decodedName(name)) ? `${sep}${name}=***` : `${sep}${name}=${maskedParams(value)}`,
  );
}

function decodedName(name: string): string {
  try {
    return decodeURIComponent(name.replaceAll('+', ' '));
  } catch {
    return name;
  }
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

interface LoadConfigOptions {
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
   * or PAYLOAD_KEYS_<R>; `temporal-only` (`npm run promote`): TEMPORAL_ADDRESS, its TLS and PAYLOAD_KEYS_<R> (the
   * schedules' arguments are payloads), no ledger; `not-used` (the codec endpoint, which checks its payload keys
   * itself): neither.
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
 * One region's ledger, Temporal connection, names and keys (`<VARIABLE>_<REGION>`), and what production requires of
 * them. MERCHANT_SECRET_KEYS_<R> unset is the dev ring in dev; production refuses the dev ring's id and key: they are
 * in the source, so a secret sealed with them is in clear to anyone.
 */
function readRegionConfig(
  reading: Reading,
  mode: Mode,
  region: Region,
  servesOneRegion: boolean,
  { merchantSecrets, connections }: Required<LoadConfigOptions>,
): RegionConfig {
  const up = region.toUpperCase();
  const temporal =
    reading.attempt(() => loadTemporalConnectionSettings(reading.env, region, { servesOneRegion })) ?? PLAINTEXT;
  const { PROCESSOR_SIGNING_SECRET: _, TEMPORAL_NAMESPACE, ...settings } = regionVariables(region);
  const values = reading.read(settings, (name) => `${name}_${up}`);
  // The namespace is the connection's: TEMPORAL_NAMESPACE_<R>, else a profile's (one region only), else the default.
  const namespace = new Reading({ [`TEMPORAL_NAMESPACE_${up}`]: temporal.namespace });
  const held = merchantSecrets === 'required' || (merchantSecrets === 'dev-only' && mode === 'dev');
  const secretKeys = !held ? [] : (values.MERCHANT_SECRET_KEYS ?? (mode === 'dev' ? [...DEV_SECRET_KEYS] : undefined));
  const dev = DEV_SECRET_KEYS[0]!.key;
  if (mode === 'production' && secretKeys?.some((k) => k.id === DEV_SECRET_KEY_ID || k.key.equals(dev))) {
    reading.refuse(
      `MERCHANT_SECRET_KEYS_${up}`,
      '(redacted)',
      `keys of your own: the built-in dev key ("${DEV_SECRET_KEY_ID}") protects nothing`,
    );
  }
  const regionConfig: RegionConfig = {
    region,
    databaseUrl: values.DATABASE_URL,
    temporalAddress: temporal.address,
    temporal,
    namespace: namespace.read({ TEMPORAL_NAMESPACE }, () => `TEMPORAL_NAMESPACE_${up}`).TEMPORAL_NAMESPACE,
    taskQueue: values.TASK_QUEUE,
    scheduleId: values.SCHEDULE_ID,
    payloadKeys: values.PAYLOAD_KEYS,
    secretKeys: secretKeys ?? [],
  };
  reading.attempt(() => namespace.done());
  if (mode === 'production') requireProductionRegion(reading, regionConfig, secretKeys, connections);
  return Object.freeze(regionConfig);
}

/**
 * Production never falls back to embedded services: a missing address is a deployment mistake. It requires of a
 * region what this process uses of it: the ledger, Temporal over TLS, encrypted payloads, sealed merchant secrets.
 */
function requireProductionRegion(
  reading: Reading,
  regionConfig: RegionConfig,
  secretKeys: readonly EncryptionKey[] | undefined,
  connections: Required<LoadConfigOptions>['connections'],
): void {
  const { region, temporal } = regionConfig;
  const up = region.toUpperCase();
  const usesTemporal = connections === 'used' || connections === 'temporal-only';
  if (!regionConfig.databaseUrl && (connections === 'used' || connections === 'ledger-only')) {
    reading.refuse(`DATABASE_URL_${up}`, undefined, 'a postgres:// URL (required in production mode)');
  } else if (
    regionConfig.databaseUrl &&
    new URL(regionConfig.databaseUrl).searchParams.get('sslmode') !== 'verify-full'
  ) {
    // Its password and every merchant's data cross that connection: TLS, and the server proven by its certificate.
    reading.refuse(
      `DATABASE_URL_${up}`,
      redactUrl(regionConfig.databaseUrl),
      'a URL with sslmode=verify-full (and sslrootcert=<CA file> for a private CA): production reaches its ledger over TLS only',
    );
  }
  if (!regionConfig.temporalAddress && usesTemporal) {
    reading.refuse(`TEMPORAL_ADDRESS_${up}`, undefined, 'host:port (or TEMPORAL_ADDRESS) in production mode');
  }
  if (!regionConfig.payloadKeys && usesTemporal) {
    reading.refuse(
      `PAYLOAD_KEYS_${up}`,
      undefined,
      'id:base64key (32 bytes): production payloads are always encrypted',
    );
  }
  if (!secretKeys) {
    reading.refuse(
      `MERCHANT_SECRET_KEYS_${up}`,
      undefined,
      'id:base64key (32 bytes): production seals merchant signing secrets at rest with it',
    );
  }
  if (usesTemporal && temporal) reading.attempt(() => requireTls(temporal, reading.env, region));
}

/**
 * The codec endpoint the Web UI decodes through (CODEC_*); production requires OIDC and TLS of it and refuses a static
 * token.
 */
function readCodecServer(reading: Reading, v: Values<typeof VARIABLES>, mode: Mode): CodecServerConfig {
  if (mode === 'production' && v.CODEC_OIDC_ISSUER?.startsWith('http:')) {
    reading.refuse('CODEC_OIDC_ISSUER', v.CODEC_OIDC_ISSUER, 'a URL with scheme https:');
  }
  const { METRICS_ADDRESS } = LISTENERS.CODEC;
  const metrics =
    reading.read({ METRICS_ADDRESS }, (name) => `CODEC_${name}`).METRICS_ADDRESS ??
    (mode === 'production' && v.CODEC_SERVER_ADDRESS ? { host: '0.0.0.0', port: 9468 } : undefined);
  const codecServer: CodecServerConfig = {
    address: v.CODEC_SERVER_ADDRESS,
    authToken: v.CODEC_AUTH_TOKEN,
    corsOrigins: v.CODEC_CORS_ORIGIN,
    ...(v.CODEC_OIDC_ISSUER
      ? {
          oidc: Object.freeze({
            issuer: v.CODEC_OIDC_ISSUER,
            audience: v.CODEC_OIDC_AUDIENCE ?? CODEC_AUDIENCE,
            rolesClaim: v.CODEC_OIDC_ROLES_CLAIM,
            clockToleranceSeconds: 30,
            maxTokenAgeSeconds: v.CODEC_OIDC_TOKEN_MAX_AGE / 1000,
          }),
        }
      : {}),
    ...readListenerTls(reading, 'CODEC', mode, false),
    ...(metrics ? { metrics } : {}),
  };
  if (mode === 'production' && codecServer.address) {
    if (codecServer.authToken) {
      reading.refuse(
        'CODEC_AUTH_TOKEN',
        '(redacted)',
        'nothing in production: the codec endpoint verifies each user’s OIDC token (CODEC_OIDC_ISSUER); a static token is for dev only',
      );
    }
    if (!codecServer.oidc) {
      reading.refuse(
        'CODEC_OIDC_ISSUER',
        undefined,
        'the https URL of the OIDC issuer whose users’ tokens the Web UI passes to the codec endpoint',
      );
    }
    if (!codecServer.tls && !codecServer.behindTlsProxy) {
      reading.refuse(
        'CODEC_TLS_CERT_FILE',
        undefined,
        'a certificate for the codec endpoint (and CODEC_TLS_KEY_FILE), or CODEC_BEHIND_TLS_PROXY=true: the Web UI sends a user’s token only to https',
      );
    }
  }
  return codecServer;
}

/**
 * The whole configuration: the mode and the regions, then each region's ledger and Temporal, and every other
 * variable through its schema (src/config-schema.ts). Every problem found is reported at once, in one ConfigError.
 */
export function loadConfig(
  env: Env = process.env,
  { merchantSecrets = 'required', connections = 'used' }: LoadConfigOptions = {},
): Config {
  const reading = new Reading(env);
  const v = reading.read(VARIABLES);
  const mode = v.HOLD_SWEEPER_MODE;
  const regions = v.HOLD_SWEEPER_REGIONS.map((region) =>
    readRegionConfig(reading, mode, region, v.HOLD_SWEEPER_REGIONS.length === 1, { merchantSecrets, connections }),
  );
  const codecServer = readCodecServer(reading, v, mode);
  reading.done();
  return Object.freeze({
    mode,
    decisions: Object.freeze({ fourEyes: mode === 'production', quarantineTimeoutMs: v.QUARANTINE_DECISION_TIMEOUT }),
    codecServer: Object.freeze(codecServer),
    observability: Object.freeze({
      metricsAddress: v.METRICS_ADDRESS,
      healthAddress: v.HEALTH_ADDRESS,
      logLevel: v.LOG_LEVEL,
      gaugeIntervalMs: v.METRICS_GAUGE_INTERVAL,
      quarantinePageAfterMs: v.QUARANTINE_PAGE_AFTER,
      duplicateSendsAlertRatio: v.DUPLICATE_SENDS_ALERT_RATIO,
      merchantLabel: v.METRICS_MERCHANT_LABEL,
      worstMerchants: v.METRICS_WORST_MERCHANTS,
    }),
    worker: Object.freeze({ maxCachedWorkflows: v.WORKER_MAX_CACHED_WORKFLOWS }),
    deployment: Object.freeze({
      deploymentName: v.WORKER_DEPLOYMENT_NAME,
      buildId: v.WORKER_BUILD_ID,
      setCurrent: v.WORKER_SET_CURRENT ?? (mode === 'dev' ? 'always' : 'never'),
    }),
    regions: Object.freeze(regions),
    webhooks: Object.freeze({
      allowInsecureHttp: mode === 'dev',
      allowPrivateAddresses: mode === 'dev',
      trustedNetworks: v.WEBHOOK_TRUSTED_NETWORKS,
      // A merchant's webhook receiver is an https server on 443; any other port is the operator's explicit choice.
      allowedPorts: v.WEBHOOK_ALLOWED_PORTS ?? (mode === 'production' ? [443] : undefined),
      maxInFlightPerMerchant: v.WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT,
      destinationRateShare: v.DESTINATION_RATE_SHARE,
    }),
    sweep: Object.freeze({
      intervalMs: v.SWEEP_INTERVAL,
      catchupWindowMs: v.SWEEP_CATCHUP_WINDOW,
      pageSize: v.SWEEP_PAGE_SIZE,
      batchSize: v.SWEEP_BATCH_SIZE,
      timeoutMs: v.SWEEP_TIMEOUT,
    }),
    outbox: Object.freeze({ intervalMs: v.OUTBOX_RECONCILE_INTERVAL, graceMs: v.OUTBOX_GRACE }),
    retention: Object.freeze({ intervalMs: v.RETENTION_INTERVAL, budgetMs: v.RETENTION_RUN_BUDGET }),
    temporalLimits: Object.freeze({ maxWorkflowIdLength: v.TEMPORAL_MAX_ID_LENGTH }),
  });
}

/**
 * The processor-event receiver of one region (src/bin/receiver.ts): where it listens and whose signatures it accepts.
 */
interface ProcessorConfig extends ListenAddress {
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
  const reading = new Reading(env);
  const up = region.toUpperCase();
  const { PROCESSOR_SIGNING_SECRET } = regionVariables(region);
  const { PROCESSOR_SIGNING_SECRET: signingKey } = reading.read({ PROCESSOR_SIGNING_SECRET }, (n) => `${n}_${up}`);
  if (!signingKey && !env[`PROCESSOR_SIGNING_SECRET_${up}`] && !env[`PROCESSOR_SIGNING_SECRET_${up}_FILE`]) {
    reading.refuse(
      `PROCESSOR_SIGNING_SECRET_${up}`,
      undefined,
      'whsec_<base64> of at least 16 bytes: the secret the processor signs its callbacks with',
    );
  }
  const { PROCESSOR_GAP_WAIT, PROCESSOR_REFUSED_RETENTION } = VARIABLES;
  const waits = reading.read({ PROCESSOR_GAP_WAIT, PROCESSOR_REFUSED_RETENTION });
  const listener = readListenAddresses(reading, 'PROCESSOR_RECEIVER', mode, 8090, 9465);
  reading.done();
  return Object.freeze({
    ...listener,
    signingKey: signingKey!,
    gapWaitMs: waits.PROCESSOR_GAP_WAIT,
    refusedRetentionMs: waits.PROCESSOR_REFUSED_RETENTION,
  });
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
 * `<prefix>_ADDRESS` (dev: 127.0.0.1, production: 0.0.0.0, on `port`), `<prefix>_METRICS_ADDRESS` (production:
 * 0.0.0.0:`metricsPort` unless said, dev only when said), and TLS.
 */
function readListenAddresses(
  reading: Reading,
  prefix: 'API' | 'MERCHANT_API' | 'PROCESSOR_RECEIVER',
  mode: Mode,
  port: number,
  metricsPort: number,
): Omit<ListenerConfig, 'region'> {
  const { ADDRESS, METRICS_ADDRESS } = LISTENERS[prefix];
  const production = mode === 'production';
  const given = reading.read({ ADDRESS, METRICS_ADDRESS }, (name) => `${prefix}_${name}`);
  const address = given.ADDRESS ?? { host: production ? '0.0.0.0' : '127.0.0.1', port };
  const metrics = given.METRICS_ADDRESS ?? (production ? { host: '0.0.0.0', port: metricsPort } : undefined);
  return Object.freeze({
    ...address,
    ...readListenerTls(reading, prefix, mode, true),
    ...(metrics ? { metrics } : {}),
  });
}

/**
 * `<prefix>_REGION` (or the only configured region), its addresses and TLS. Production refuses a listener without TLS
 * (its own, or `<prefix>_BEHIND_TLS_PROXY=true` said explicitly): credentials cross it.
 */
function readListener(
  reading: Reading,
  config: Config,
  prefix: 'API' | 'MERCHANT_API',
  port: number,
  metricsPort: number,
): ListenerConfig {
  const regions = config.regions.map((r) => r.region);
  const { REGION } = LISTENERS[prefix];
  const regionRaw =
    reading.read({ REGION }, (name) => `${prefix}_${name}`).REGION ?? (regions.length === 1 ? regions[0] : undefined);
  if (!regionRaw || !isRegion(regionRaw) || !regions.includes(regionRaw)) {
    reading.refuse(
      `${prefix}_REGION`,
      regionRaw,
      `the region it serves, one of the configured regions: ${regions.join(', ')}`,
    );
  }
  return Object.freeze({
    region: regionRaw as Region,
    ...readListenAddresses(reading, prefix, config.mode, port, metricsPort),
  });
}

/**
 * <prefix>_TLS_CERT_FILE and _KEY_FILE (both or neither), or <prefix>_BEHIND_TLS_PROXY=true; production refuses a
 * listener with neither, when `required`: what crosses it (a token, a key, a signed callback) is never sent in clear.
 */
function readListenerTls(
  reading: Reading,
  prefix: keyof typeof LISTENERS,
  mode: Mode,
  required: boolean,
): { tls?: { certFile: string; keyFile: string }; behindTlsProxy: boolean } {
  const { TLS_CERT_FILE, TLS_KEY_FILE, BEHIND_TLS_PROXY } = LISTENERS[prefix];
  const given = reading.read({ TLS_CERT_FILE, TLS_KEY_FILE, BEHIND_TLS_PROXY }, (name) => `${prefix}_${name}`);
  const [certFile, keyFile] = [given.TLS_CERT_FILE, given.TLS_KEY_FILE];
  if ((certFile === undefined) !== (keyFile === undefined)) {
    reading.refuse(
      certFile ? `${prefix}_TLS_KEY_FILE` : `${prefix}_TLS_CERT_FILE`,
      undefined,
      `both ${prefix}_TLS_CERT_FILE and ${prefix}_TLS_KEY_FILE, or neither`,
    );
  }
  if (required && mode === 'production' && !certFile && !given.BEHIND_TLS_PROXY) {
    reading.refuse(
      `${prefix}_TLS_CERT_FILE`,
      undefined,
      `a certificate for the listener (and ${prefix}_TLS_KEY_FILE), or ${prefix}_BEHIND_TLS_PROXY=true: production sends no credential in clear`,
    );
  }
  return {
    ...(certFile && keyFile ? { tls: Object.freeze({ certFile, keyFile }) } : {}),
    behindTlsProxy: given.BEHIND_TLS_PROXY,
  };
}

/** The admin API of one region (src/bin/api.ts): where it listens, whose tokens it accepts, and how TLS reaches it. */
interface ApiConfig extends ListenerConfig {
  /** API_OIDC_ISSUER: the issuer whose access tokens it accepts (its discovery document names the keys). */
  readonly issuer: string;
  /** API_OIDC_AUDIENCE: the `aud` a token must carry (hold-sweeper-admin-<region>: no other region's token passes). */
  readonly audience: string;
  /** API_OIDC_ROLES_CLAIM: the claim with the caller's roles (roles). */
  readonly rolesClaim: string;
  readonly clockToleranceSeconds: number;
  /** API_TOKEN_MAX_AGE: the longest a token lives (iat to exp, and iat to now). */
  readonly maxTokenAgeSeconds: number;
}

/**
 * The admin API's settings for one of the configured regions (API_REGION, or the only one). Production refuses to
 * start it without TLS (its own, or API_BEHIND_TLS_PROXY=true said explicitly) and without an https issuer: bearer
 * tokens cross this listener, and nothing but a verified token says who is calling.
 */
export function loadApiConfig(env: Env, config: Config): ApiConfig {
  const reading = new Reading(env);
  const listener = readListener(reading, config, 'API', 8443, 9466);
  const { OIDC_ISSUER, OIDC_AUDIENCE, OIDC_ROLES_CLAIM, CLOCK_TOLERANCE, TOKEN_MAX_AGE } = LISTENERS.API;
  const v = reading.read(
    { OIDC_ISSUER, OIDC_AUDIENCE, OIDC_ROLES_CLAIM, CLOCK_TOLERANCE, TOKEN_MAX_AGE },
    (name) => `API_${name}`,
  );
  if (!v.OIDC_ISSUER && !env.API_OIDC_ISSUER) {
    reading.refuse('API_OIDC_ISSUER', undefined, 'the URL of the OIDC issuer whose access tokens the API accepts');
  } else if (config.mode === 'production' && v.OIDC_ISSUER?.startsWith('http:')) {
    reading.refuse('API_OIDC_ISSUER', v.OIDC_ISSUER, 'a URL with scheme https:');
  }
  reading.done();
  return Object.freeze({
    ...listener,
    issuer: v.OIDC_ISSUER!,
    audience: v.OIDC_AUDIENCE ?? adminAudience(listener.region),
    rolesClaim: v.OIDC_ROLES_CLAIM,
    clockToleranceSeconds: v.CLOCK_TOLERANCE / 1000,
    maxTokenAgeSeconds: v.TOKEN_MAX_AGE / 1000,
  });
}

/**
 * The merchant API of one region (src/bin/merchant-api.ts): MERCHANT_API_REGION, _ADDRESS (8444) and TLS, as the admin
 * API's.
 */
export function loadMerchantApiConfig(env: Env, config: Config): ListenerConfig {
  const reading = new Reading(env);
  const listener = readListener(reading, config, 'MERCHANT_API', 8444, 9467);
  reading.done();
  return listener;
}
