/**
 * Configuration: read from the environment once, validated, frozen.
 *
 * Each variable is read through its schema (src/config-schema.ts), by section: a section's `transform` is what the
 * code reads of it, and its output is the type (nothing here repeats a variable). The sections here add the rules
 * that combine variables (what production requires, both halves of a certificate). Every problem found fails start-up
 * together, in one `ConfigError` naming each variable, never later in the middle of a sweep.
 */
import fs from 'node:fs';
import { z } from 'zod';
import { ConfigError } from './errors.js';
import { isRegion, REGIONS, type Region } from './contracts/regions.js';
import { adminAudience, CODEC_AUDIENCE } from './contracts/identity.js';
import { DEV_SECRET_KEY_ID, DEV_SECRET_KEYS } from './delivery/secret-box.js';
import type { EncryptionKey } from './crypto/key-ring.js';
import {
  loadTemporalConnectionSettings,
  PLAINTEXT,
  requireTls,
  TEMPORAL_CONNECTION_VARIABLES,
  type TemporalConnectionSettings,
} from './temporal-connection.js';
import {
  DEFAULT_DEPLOYMENT_NAME,
  DEFAULT_MAX_IN_FLIGHT_PER_MERCHANT,
  DEFAULT_SWEEP_TIMEOUT_MS,
  docOf,
  durationMs,
  CODEC,
  LISTENERS,
  MODE_AND_REGIONS,
  OUTBOX,
  PROCESSOR,
  regionVariables,
  RETENTION,
  SECTIONS,
  SWEEP,
  SWEEP_RELEASE_WAIT_MS,
  VARIABLES,
  WEBHOOKS,
  type MERCHANT_LABELS,
  type SET_CURRENT_MODES,
  type Setting,
} from './config-schema.js';

export type Mode = z.output<typeof MODE_AND_REGIONS>['HOLD_SWEEPER_MODE'];
/** What the merchant_id label of the product's delivery metrics carries (METRICS_MERCHANT_LABEL). */
export type MerchantLabel = (typeof MERCHANT_LABELS)[number];
/** When a starting worker makes its own build the deployment's current version (WORKER_SET_CURRENT). */
export type SetCurrentMode = (typeof SET_CURRENT_MODES)[number];

type Env = Readonly<Record<string, string | undefined>>;

/** A rule that combines variables refuses `variable`, shown as `shown` (never a secret's value). */
function refuse(ctx: z.RefinementCtx, variable: string, expected: string, shown?: string): void {
  ctx.addIssue({ code: 'custom', message: expected, params: { variable, shown } });
}

/** A listener's certificate and key: both or neither. */
function tlsOf(ctx: z.RefinementCtx, prefix: string, certFile?: string, keyFile?: string) {
  if ((certFile === undefined) !== (keyFile === undefined)) {
    const missing = certFile ? `${prefix}_TLS_KEY_FILE` : `${prefix}_TLS_CERT_FILE`;
    refuse(ctx, missing, `both ${prefix}_TLS_CERT_FILE and ${prefix}_TLS_KEY_FILE, or neither`);
  }
  return certFile && keyFile ? { tls: Object.freeze({ certFile, keyFile }) } : {};
}

const { METRICS_ADDRESS: CODEC_METRICS, TLS_CERT_FILE: CODEC_CERT, TLS_KEY_FILE: CODEC_KEY } = LISTENERS.CODEC;
/**
 * The codec endpoint the Web UI decodes through; production requires OIDC and TLS of it and refuses a static token
 * (the UI sends a user's token only to https).
 */
const CODEC_SERVER = CODEC.extend({
  CODEC_METRICS_ADDRESS: CODEC_METRICS,
  CODEC_TLS_CERT_FILE: CODEC_CERT,
  CODEC_TLS_KEY_FILE: CODEC_KEY,
  CODEC_BEHIND_TLS_PROXY: LISTENERS.CODEC.BEHIND_TLS_PROXY,
}).transform((v, ctx) => {
  const production = v.HOLD_SWEEPER_MODE === 'production';
  const issuer = v.CODEC_OIDC_ISSUER;
  if (production && issuer?.startsWith('http:')) refuse(ctx, 'CODEC_OIDC_ISSUER', 'a URL with scheme https:', issuer);
  const tls = tlsOf(ctx, 'CODEC', v.CODEC_TLS_CERT_FILE, v.CODEC_TLS_KEY_FILE);
  if (production && v.CODEC_SERVER_ADDRESS) {
    if (v.CODEC_AUTH_TOKEN) {
      refuse(
        ctx,
        'CODEC_AUTH_TOKEN',
        'nothing in production: the codec endpoint verifies each user’s OIDC token (CODEC_OIDC_ISSUER); a static token is for dev only',
        '(redacted)',
      );
    }
    if (!issuer) {
      refuse(
        ctx,
        'CODEC_OIDC_ISSUER',
        'the https URL of the OIDC issuer whose users’ tokens the Web UI passes to the codec endpoint',
      );
    }
    if (!tls.tls && !v.CODEC_BEHIND_TLS_PROXY) {
      refuse(
        ctx,
        'CODEC_TLS_CERT_FILE',
        'a certificate for the codec endpoint (and CODEC_TLS_KEY_FILE), or CODEC_BEHIND_TLS_PROXY=true: the Web UI sends a user’s token only to https',
      );
    }
  }
  const metrics =
    v.CODEC_METRICS_ADDRESS ?? (production && v.CODEC_SERVER_ADDRESS ? { host: '0.0.0.0', port: 9468 } : undefined);
  return Object.freeze({
    address: v.CODEC_SERVER_ADDRESS,
    authToken: v.CODEC_AUTH_TOKEN,
    corsOrigins: v.CODEC_CORS_ORIGIN,
    ...(issuer
      ? {
          oidc: Object.freeze({
            issuer,
            audience: v.CODEC_OIDC_AUDIENCE ?? CODEC_AUDIENCE,
            rolesClaim: v.CODEC_OIDC_ROLES_CLAIM,
            clockToleranceSeconds: 30,
            maxTokenAgeSeconds: v.CODEC_OIDC_TOKEN_MAX_AGE / 1000,
          }),
        }
      : {}),
    ...tls,
    behindTlsProxy: v.CODEC_BEHIND_TLS_PROXY,
    ...(metrics ? { metrics } : {}),
  });
});

/**
 * One region's ledger, names and keys (`<VARIABLE>_<REGION>`), beside its Temporal connection (read by
 * src/temporal-connection.ts), and what production requires of them. MERCHANT_SECRET_KEYS_<R> unset is the dev ring
 * in dev; production refuses the dev ring's id and key: they are in the source, so a secret sealed with them is in
 * clear to anyone. Production never falls back to embedded services either: it requires of a region what this process
 * uses of it, the ledger, Temporal, encrypted payloads, sealed merchant secrets.
 */
function regionSection(
  region: Region,
  mode: Mode,
  temporal: TemporalConnectionSettings,
  namespace: string,
  { merchantSecrets, connections }: Required<LoadConfigOptions>,
) {
  const up = region.toUpperCase();
  const { DATABASE_URL, TASK_QUEUE, SCHEDULE_ID, PAYLOAD_KEYS, MERCHANT_SECRET_KEYS, PORTAL_URL } =
    regionVariables(region);
  const settings = { DATABASE_URL, TASK_QUEUE, SCHEDULE_ID, PAYLOAD_KEYS, MERCHANT_SECRET_KEYS, PORTAL_URL };
  return z.object(settings).transform((v, ctx) => {
    const held = merchantSecrets === 'required' || (merchantSecrets === 'dev-only' && mode === 'dev');
    const secretKeys = !held ? [] : (v.MERCHANT_SECRET_KEYS ?? (mode === 'dev' ? [...DEV_SECRET_KEYS] : undefined));
    if (mode === 'production') {
      const dev = DEV_SECRET_KEYS[0]!.key;
      if (secretKeys?.some((k) => k.id === DEV_SECRET_KEY_ID || k.key.equals(dev))) {
        const expected = `keys of your own: the built-in dev key ("${DEV_SECRET_KEY_ID}") protects nothing`;
        refuse(ctx, `MERCHANT_SECRET_KEYS_${up}`, expected, '(redacted)');
      }
      const usesTemporal = connections === 'used' || connections === 'temporal-only';
      if (!v.DATABASE_URL && (connections === 'used' || connections === 'ledger-only')) {
        refuse(ctx, `DATABASE_URL_${up}`, 'a postgres:// URL (required in production mode)');
      } else if (v.DATABASE_URL && new URL(v.DATABASE_URL).searchParams.get('sslmode') !== 'verify-full') {
        // Its password and every merchant's data cross that connection: TLS, and the server proven by its certificate.
        refuse(
          ctx,
          `DATABASE_URL_${up}`,
          'a URL with sslmode=verify-full (and sslrootcert=<CA file> for a private CA): production reaches its ledger over TLS only',
          redactUrl(v.DATABASE_URL),
        );
      }
      if (!temporal.address && usesTemporal) {
        refuse(ctx, `TEMPORAL_ADDRESS_${up}`, 'host:port (or TEMPORAL_ADDRESS) in production mode');
      }
      if (!v.PAYLOAD_KEYS && usesTemporal) {
        const expected = 'id:base64key (32 bytes): production payloads are always encrypted';
        refuse(ctx, `PAYLOAD_KEYS_${up}`, expected);
      }
      if (!secretKeys) {
        const expected = 'id:base64key (32 bytes): production seals merchant signing secrets at rest with it';
        refuse(ctx, `MERCHANT_SECRET_KEYS_${up}`, expected);
      }
    }
    return Object.freeze({
      region,
      /** Undefined in dev: the embedded Postgres. */
      databaseUrl: v.DATABASE_URL,
      /** Undefined in dev: the local dev server, started or joined. */
      temporalAddress: temporal.address,
      temporal,
      namespace,
      taskQueue: v.TASK_QUEUE,
      scheduleId: v.SCHEDULE_ID,
      /** Undefined: payloads in clear (dev only). */
      payloadKeys: v.PAYLOAD_KEYS,
      /** Empty in a process that holds no merchant secret (`merchantSecrets: 'not-held'`). */
      secretKeys: (secretKeys ?? []) as readonly EncryptionKey[],
      portalUrl: v.PORTAL_URL ?? DEFAULT_PORTAL_URL,
    });
  });
}

/** Where merchants open the portal when PORTAL_URL_<R> is not set: the merchant API's default listener. */
export const DEFAULT_PORTAL_URL = 'https://localhost:8444/portal';

/** `T` with `K` optional: what the tests and the local stack build themselves may leave them out (the defaults). */
type Optional<T, K extends keyof T> = Omit<T, K> & Partial<Pick<T, K>>;

export type SweepConfig = Optional<z.output<typeof SWEEP>, 'batchSize' | 'maxUnreleased'>;
export type OutboxConfig = z.output<typeof OUTBOX>;
export type RetentionConfig = z.output<typeof RETENTION>;
export type WebhookConfig = Optional<
  z.output<typeof WEBHOOKS>,
  'allowedPorts' | 'maxInFlightPerMerchant' | 'destinationRateShare'
>;
/** Without `temporal`: plaintext, no key (the local stack and the tests). */
export type RegionConfig = Optional<z.output<ReturnType<typeof regionSection>>, 'temporal' | 'portalUrl'>;
export type Config = ReturnType<typeof loadConfig>;

/**
 * One load of the configuration: every section read through its schema, every problem kept, all of them reported
 * together at the end (`done`). A bad variable reads as its default meanwhile, so the rules that combine variables
 * still run and report theirs.
 */
class Reading {
  private readonly problems: ConfigError[] = [];
  constructor(readonly env: Env) {}

  /**
   * `section`'s variables, each read from the environment as `nameOf(key)` (a region's or a listener's form), and what
   * its transform makes of them; undefined when one of its rules refused them (`done` then throws).
   */
  read<S extends z.ZodType>(section: S, nameOf: (key: string) => string = (key) => key): z.output<S> {
    const object = (section instanceof z.ZodPipe ? section.in : section) as unknown as z.ZodObject;
    const shape = object.shape as Record<string, Setting>;
    const raw: Record<string, string | undefined> = {};
    for (const [key, schema] of Object.entries(shape)) raw[key] = this.valueOf(nameOf(key), schema);
    for (;;) {
      const result = section.safeParse(raw);
      if (result.success) return result.data;
      let badValues = false;
      for (const issue of result.error.issues) {
        const rule = (issue as { params?: { variable: string; shown?: string } }).params;
        if (rule) {
          this.refuse(rule.variable, rule.shown, issue.message);
          continue;
        }
        // A variable's own schema refused it: never echo a secret's value, nor a URL's password.
        const key = String(issue.path[0]);
        const shown = docOf(shape[key]!)?.secret ? '(redacted)' : redactUrl(raw[key] ?? '');
        this.refuse(nameOf(key), shown, issue.message);
        raw[key] = undefined;
        badValues = true;
      }
      if (!badValues) return undefined as z.output<S>;
    }
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
export function readSettings<S extends Record<string, Setting>>(env: Env, settings: S) {
  const reading = new Reading(env);
  const values = reading.read(z.object(settings));
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
 * One region: its Temporal connection (src/temporal-connection.ts), its section, and Temporal's own rule for
 * production (TLS unless said otherwise).
 */
function readRegion(
  reading: Reading,
  mode: Mode,
  region: Region,
  servesOneRegion: boolean,
  options: Required<LoadConfigOptions>,
) {
  const up = region.toUpperCase();
  const temporal =
    reading.attempt(() => loadTemporalConnectionSettings(reading.env, region, { servesOneRegion })) ?? PLAINTEXT;
  // The namespace is the connection's: TEMPORAL_NAMESPACE_<R>, else a profile's (one region only), else the default.
  const { TEMPORAL_NAMESPACE } = regionVariables(region);
  const names = new Reading({ [`TEMPORAL_NAMESPACE_${up}`]: temporal.namespace });
  const namespace = names.read(z.object({ TEMPORAL_NAMESPACE }), () => `TEMPORAL_NAMESPACE_${up}`).TEMPORAL_NAMESPACE;
  reading.attempt(() => names.done());
  const config = reading.read(regionSection(region, mode, temporal, namespace, options), (name) => `${name}_${up}`);
  const usesTemporal = options.connections === 'used' || options.connections === 'temporal-only';
  if (mode === 'production' && usesTemporal) reading.attempt(() => requireTls(temporal, reading.env, region));
  return config;
}

/**
 * The whole configuration: the mode and the regions, then every section (src/config-schema.ts's variables), each
 * region's ledger and Temporal, and the codec endpoint. Every problem found is reported at once, in one ConfigError.
 */
export function loadConfig(
  env: Env = process.env,
  { merchantSecrets = 'required', connections = 'used' }: LoadConfigOptions = {},
) {
  const reading = new Reading(env);
  const { HOLD_SWEEPER_MODE: mode, HOLD_SWEEPER_REGIONS: served } = reading.read(MODE_AND_REGIONS);
  const values = Object.fromEntries(
    Object.entries(SECTIONS).map(([name, section]) => [name, reading.read(section)]),
  ) as { [K in keyof typeof SECTIONS]: z.output<(typeof SECTIONS)[K]> };
  reading.read(PROCESSOR);
  const options = { merchantSecrets, connections };
  const regions = served.map((region) => readRegion(reading, mode, region, served.length === 1, options));
  const codecServer = reading.read(CODEC_SERVER);
  reading.done();
  return Object.freeze({
    mode,
    ...(Object.fromEntries(
      Object.entries(values).map(([name, value]) => [name, Object.freeze(value)]),
    ) as typeof values),
    codecServer,
    regions: Object.freeze(regions),
  });
}

const LISTENER_PORTS = { API: [8443, 9466], MERCHANT_API: [8444, 9467], PROCESSOR_RECEIVER: [8090, 9465] } as const;

/**
 * An HTTP listener of one region: `<prefix>_ADDRESS` (dev: 127.0.0.1, production: 0.0.0.0), `<prefix>_METRICS_ADDRESS`
 * (production: 0.0.0.0 and its own port unless said; dev: only when said), and TLS: its own certificate and key (both
 * or neither), or `<prefix>_BEHIND_TLS_PROXY=true`. Production refuses a listener with neither: what crosses it (a
 * token, a key, a signed callback) is never sent in clear.
 */
function listenerSection(prefix: keyof typeof LISTENER_PORTS, mode: Mode) {
  const { ADDRESS, METRICS_ADDRESS, TLS_CERT_FILE, TLS_KEY_FILE, BEHIND_TLS_PROXY } = LISTENERS[prefix];
  const [port, metricsPort] = LISTENER_PORTS[prefix];
  const production = mode === 'production';
  return z.object({ ADDRESS, METRICS_ADDRESS, TLS_CERT_FILE, TLS_KEY_FILE, BEHIND_TLS_PROXY }).transform((v, ctx) => {
    const tls = tlsOf(ctx, prefix, v.TLS_CERT_FILE, v.TLS_KEY_FILE);
    if (production && !v.TLS_CERT_FILE && !v.BEHIND_TLS_PROXY) {
      refuse(
        ctx,
        `${prefix}_TLS_CERT_FILE`,
        `a certificate for the listener (and ${prefix}_TLS_KEY_FILE), or ${prefix}_BEHIND_TLS_PROXY=true: production sends no credential in clear`,
      );
    }
    const metrics = v.METRICS_ADDRESS ?? (production ? { host: '0.0.0.0', port: metricsPort } : undefined);
    return Object.freeze({
      ...(v.ADDRESS ?? { host: production ? '0.0.0.0' : '127.0.0.1', port }),
      ...tls,
      behindTlsProxy: v.BEHIND_TLS_PROXY,
      ...(metrics ? { metrics } : {}),
    });
  });
}

/** `<prefix>_REGION`: one of the configured regions; unset, the only one. */
function regionOf(config: Config, prefix: 'API' | 'MERCHANT_API') {
  const regions = config.regions.map((r) => r.region);
  return z.object({ REGION: LISTENERS[prefix].REGION }).transform((v, ctx) => {
    const region = v.REGION ?? (regions.length === 1 ? regions[0] : undefined);
    if (!region || !isRegion(region) || !regions.includes(region)) {
      const expected = `the region it serves, one of the configured regions: ${regions.join(', ')}`;
      refuse(ctx, `${prefix}_REGION`, expected, region);
    }
    return region as Region;
  });
}

/** An HTTP API of one region: where it listens and how TLS reaches it (the admin API's and the merchant API's). */
export type ListenerConfig = { readonly region: Region } & z.output<ReturnType<typeof listenerSection>>;

function readListener(reading: Reading, config: Config, prefix: 'API' | 'MERCHANT_API'): ListenerConfig {
  const region = reading.read(regionOf(config, prefix), (name) => `${prefix}_${name}`);
  return Object.freeze({
    region,
    ...reading.read(listenerSection(prefix, config.mode), (name) => `${prefix}_${name}`),
  });
}

/**
 * The processor-event receiver of one region (src/bin/receiver.ts): where it listens, whose signatures it accepts
 * (PROCESSOR_SIGNING_SECRET_<REGION>, never logged), how long it waits for a gap and keeps a refused request.
 */
export function loadProcessorConfig(env: Env, region: Region, mode: Mode) {
  const reading = new Reading(env);
  const up = region.toUpperCase();
  const { PROCESSOR_SIGNING_SECRET } = regionVariables(region);
  const signingKey = reading.read(
    z.object({ PROCESSOR_SIGNING_SECRET }).transform((v, ctx) => {
      if (v.PROCESSOR_SIGNING_SECRET) return v.PROCESSOR_SIGNING_SECRET;
      const expected = 'whsec_<base64> of at least 16 bytes: the secret the processor signs its callbacks with';
      refuse(ctx, `PROCESSOR_SIGNING_SECRET_${up}`, expected);
    }),
    (name) => `${name}_${up}`,
  );
  const waits = reading.read(PROCESSOR);
  const listener = reading.read(listenerSection('PROCESSOR_RECEIVER', mode), (name) => `PROCESSOR_RECEIVER_${name}`);
  reading.done();
  return Object.freeze({ ...listener, signingKey: signingKey!, ...waits });
}

/** The admin API's tokens: whose (an https issuer in production: nothing but a verified token says who calls), for which audience. */
function apiSection(mode: Mode) {
  const { OIDC_ISSUER, OIDC_AUDIENCE, OIDC_ROLES_CLAIM, CLOCK_TOLERANCE, TOKEN_MAX_AGE } = LISTENERS.API;
  return z
    .object({ OIDC_ISSUER, OIDC_AUDIENCE, OIDC_ROLES_CLAIM, CLOCK_TOLERANCE, TOKEN_MAX_AGE })
    .transform((v, ctx) => {
      if (!v.OIDC_ISSUER) {
        refuse(ctx, 'API_OIDC_ISSUER', 'the URL of the OIDC issuer whose access tokens the API accepts');
      } else if (mode === 'production' && v.OIDC_ISSUER.startsWith('http:')) {
        refuse(ctx, 'API_OIDC_ISSUER', 'a URL with scheme https:', v.OIDC_ISSUER);
      }
      return {
        issuer: v.OIDC_ISSUER!,
        audience: v.OIDC_AUDIENCE,
        rolesClaim: v.OIDC_ROLES_CLAIM,
        clockToleranceSeconds: v.CLOCK_TOLERANCE / 1000,
        maxTokenAgeSeconds: v.TOKEN_MAX_AGE / 1000,
      };
    });
}

/**
 * The admin API's settings for one of the configured regions (API_REGION, or the only one): its listener, and whose
 * tokens it accepts (API_OIDC_AUDIENCE unset: the region's own audience, so no other region's token passes).
 */
export function loadApiConfig(env: Env, config: Config) {
  const reading = new Reading(env);
  const listener = readListener(reading, config, 'API');
  const oidc = reading.read(apiSection(config.mode), (name) => `API_${name}`);
  reading.done();
  return Object.freeze({ ...listener, ...oidc, audience: oidc.audience ?? adminAudience(listener.region) });
}

/** The merchant API of one region (src/bin/merchant-api.ts): MERCHANT_API_REGION, its addresses and TLS. */
export function loadMerchantApiConfig(env: Env, config: Config): ListenerConfig {
  const reading = new Reading(env);
  const listener = readListener(reading, config, 'MERCHANT_API');
  reading.done();
  return listener;
}
