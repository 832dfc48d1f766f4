/**
 * How every process of the product reaches Temporal: configured the way the `temporal` CLI and `@temporalio/envconfig`
 * are (`loadClientConnectConfig`): address, namespace, TLS (server CA, server name), mTLS (client certificate and key),
 * an API key, from a `temporal.toml` profile (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE) or the TEMPORAL_* variables.
 * One profile holds one namespace, and one process may serve two regions: TEMPORAL_<NAME>_<REGION> (e.g.
 * TEMPORAL_API_KEY_EU, TEMPORAL_PROFILE_US) wins over TEMPORAL_<NAME> for that region.
 *
 * Stricter than envconfig where envconfig is silent: it reads only `1`/`true` as true, so `TEMPORAL_TLS=TRUE` would
 * quietly turn TLS off; here any value but `true`, `false`, `1`, `0` is a ConfigError. Production refuses a plaintext
 * connection unless TLS is disabled explicitly (`TEMPORAL_TLS=false`, e.g. behind a TLS-terminating proxy on the same
 * host). An API key can come from a file (TEMPORAL_API_KEY_FILE) and is re-read while the process runs: rotated without
 * a restart (`setApiKey` on every open connection).
 */
import fs from 'node:fs';
import { Connection, type TLSConfig } from '@temporalio/client';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import { NativeConnection } from '@temporalio/worker';
import type { Region } from './contracts/regions.js';
import { ConfigError } from './errors.js';

type Env = Readonly<Record<string, string | undefined>>;

/** The TEMPORAL_* variables a region may set for itself with a `_<REGION>` suffix. */
const PER_REGION_VARIABLES = [
  'TEMPORAL_ADDRESS',
  'TEMPORAL_NAMESPACE',
  'TEMPORAL_PROFILE',
  'TEMPORAL_CONFIG_FILE',
  'TEMPORAL_API_KEY',
  'TEMPORAL_API_KEY_FILE',
  'TEMPORAL_TLS',
  'TEMPORAL_TLS_CLIENT_CERT_PATH',
  'TEMPORAL_TLS_CLIENT_CERT_DATA',
  'TEMPORAL_TLS_CLIENT_KEY_PATH',
  'TEMPORAL_TLS_CLIENT_KEY_DATA',
  'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
  'TEMPORAL_TLS_SERVER_CA_CERT_DATA',
  'TEMPORAL_TLS_SERVER_NAME',
  'TEMPORAL_TLS_DISABLE_HOST_VERIFICATION',
] as const;

/** Every variable this module reads, the per-region forms included (`.env.example` lists them). */
export const TEMPORAL_CONNECTION_VARIABLES = [...PER_REGION_VARIABLES, 'TEMPORAL_API_KEY_REFRESH'] as const;

/** What a region's connections are opened with; the API key never leaves this object in a message or a log. */
export interface TemporalConnectionSettings {
  /** host:port, from TEMPORAL_ADDRESS(_<R>) or the profile; undefined: a dev stack's (or none). */
  readonly address: string | undefined;
  /** From TEMPORAL_NAMESPACE_<R>, else the profile's or TEMPORAL_NAMESPACE (one region only), else undefined. */
  readonly namespace: string | undefined;
  /**
   * TLS to the frontend: `undefined`/`false` plaintext, `true` system roots, or a server CA / client pair / server
   * name.
   */
  readonly tls: TLSConfig | boolean | undefined;
  readonly apiKey: string | undefined;
  /** A file holding the API key, re-read every `apiKeyRefreshMs` (TEMPORAL_API_KEY_FILE). */
  readonly apiKeyFile: string | undefined;
  readonly apiKeyRefreshMs: number;
  /** gRPC metadata from the profile or TEMPORAL_GRPC_META_*. */
  readonly metadata: Readonly<Record<string, string>> | undefined;
  /** TLS turned off on purpose (TEMPORAL_TLS=false): production accepts a plaintext connection only then. */
  readonly tlsDisabledExplicitly: boolean;
}

const BOOLEAN = /^(true|false|1|0)$/;

/** A region configured with nothing but an address: plaintext, no key (the local stack, the tests). */
export const PLAINTEXT: TemporalConnectionSettings = Object.freeze({
  address: undefined,
  namespace: undefined,
  tls: undefined,
  apiKey: undefined,
  apiKeyFile: undefined,
  apiKeyRefreshMs: 60_000,
  metadata: undefined,
  tlsDisabledExplicitly: false,
});

/** The region's view of the environment: TEMPORAL_X_<R> in place of TEMPORAL_X (and the rest as they are). */
function regionEnvironment(env: Env, region: Region): Record<string, string> {
  const up = region.toUpperCase();
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (
      value !== undefined &&
      name.startsWith('TEMPORAL_') &&
      !PER_REGION_VARIABLES.some((v) => name === `${v}_US` || name === `${v}_EU`)
    )
      out[name] = value;
  }
  for (const variable of PER_REGION_VARIABLES) {
    const own = env[`${variable}_${up}`];
    if (own !== undefined && own !== '') out[variable] = own;
  }
  for (const [name, value] of Object.entries(out)) if (value === '') delete out[name];
  for (const passthrough of ['HOME', 'XDG_CONFIG_HOME']) if (env[passthrough]) out[passthrough] = env[passthrough]!;
  return out;
}

/** The name to report for a variable a region read: its own form when it set one. */
const variableOf = (env: Env, region: Region, variable: string) =>
  env[`${variable}_${region.toUpperCase()}`] ? `${variable}_${region.toUpperCase()}` : variable;

/**
 * Reads a region's Temporal connection settings (see the module comment). `servesOneRegion`: a global
 * TEMPORAL_NAMESPACE (or a profile's namespace) applies only to a process serving one region. Whether production
 * accepts them is `requireTls`'s.
 */
export function loadTemporalConnectionSettings(
  env: Env,
  region: Region,
  options: { servesOneRegion: boolean },
): TemporalConnectionSettings {
  const view = regionEnvironment(env, region);
  for (const variable of ['TEMPORAL_TLS', 'TEMPORAL_TLS_DISABLE_HOST_VERIFICATION']) {
    const value = view[variable];
    if (value !== undefined && !BOOLEAN.test(value)) {
      throw new ConfigError(
        variableOf(env, region, variable),
        value,
        'true, false, 1 or 0 (envconfig would read anything else as false)',
      );
    }
  }
  if (view.TEMPORAL_TLS_DISABLE_HOST_VERIFICATION === 'true' || view.TEMPORAL_TLS_DISABLE_HOST_VERIFICATION === '1') {
    // TS SDK 1.24's envconfig parses it and then drops it: refused rather than silently not honoured.
    throw new ConfigError(
      variableOf(env, region, 'TEMPORAL_TLS_DISABLE_HOST_VERIFICATION'),
      view.TEMPORAL_TLS_DISABLE_HOST_VERIFICATION,
      'false: the TypeScript SDK cannot disable host verification; set TEMPORAL_TLS_SERVER_NAME to the name the certificate holds',
    );
  }
  const apiKeyFile = view.TEMPORAL_API_KEY_FILE;
  let loaded;
  try {
    loaded = loadClientConnectConfig({ overrideEnvVars: view });
  } catch (err) {
    const variable = view.TEMPORAL_PROFILE
      ? variableOf(env, region, 'TEMPORAL_PROFILE')
      : variableOf(env, region, 'TEMPORAL_CONFIG_FILE');
    throw new ConfigError(
      variable,
      view.TEMPORAL_PROFILE ?? view.TEMPORAL_CONFIG_FILE,
      `a readable temporal.toml profile (${(err as Error).message})`,
    );
  }
  const { connectionOptions } = loaded;
  const address = connectionOptions.address;
  if (address !== undefined && !/^[A-Za-z0-9.\-[\]:]+:\d{1,5}$/.test(address)) {
    throw new ConfigError(variableOf(env, region, 'TEMPORAL_ADDRESS'), address, 'host:port, e.g. temporal:7233');
  }
  const apiKey = typeof connectionOptions.apiKey === 'string' ? connectionOptions.apiKey : undefined;
  if (apiKey !== undefined && apiKeyFile !== undefined) {
    throw new ConfigError(
      variableOf(env, region, 'TEMPORAL_API_KEY_FILE'),
      apiKeyFile,
      'unset while TEMPORAL_API_KEY is set: one source for the key',
    );
  }
  const tlsDisabledExplicitly = view.TEMPORAL_TLS === 'false' || view.TEMPORAL_TLS === '0';
  // The SDK turns TLS on for an API key when TLS is left unset; so does this.
  const tls = tlsDisabledExplicitly
    ? false
    : (connectionOptions.tls ?? (apiKey !== undefined || apiKeyFile !== undefined ? true : undefined));
  const refresh = env.TEMPORAL_API_KEY_REFRESH ?? '60';
  if (!/^\d+$/.test(refresh) || Number(refresh) < 1)
    throw new ConfigError(
      'TEMPORAL_API_KEY_REFRESH',
      refresh,
      'seconds between re-reads of TEMPORAL_API_KEY_FILE, at least 1',
    );
  const namespace =
    env[`TEMPORAL_NAMESPACE_${region.toUpperCase()}`] ||
    (options.servesOneRegion ? loaded.namespace : undefined) ||
    undefined;
  return Object.freeze({
    address,
    namespace,
    tls,
    apiKey,
    apiKeyFile,
    apiKeyRefreshMs: Number(refresh) * 1000,
    metadata:
      connectionOptions.metadata && Object.keys(connectionOptions.metadata).length > 0
        ? (connectionOptions.metadata as Record<string, string>)
        : undefined,
    tlsDisabledExplicitly,
  });
}

/** Production refuses a plaintext connection to Temporal unless TLS was disabled explicitly. */
export function requireTls(settings: TemporalConnectionSettings, env: Env, region: Region): void {
  if (settings.tls || settings.tlsDisabledExplicitly) return;
  throw new ConfigError(
    variableOf(env, region, 'TEMPORAL_TLS'),
    undefined,
    'TLS to Temporal in production: TEMPORAL_TLS=true, a server CA (TEMPORAL_TLS_SERVER_CA_CERT_PATH), a client certificate, an API key, ' +
      'or a temporal.toml profile with TLS; TEMPORAL_TLS=false only said explicitly',
  );
}

/**
 * The API key in `file`, trimmed; a named error when it cannot be read or is empty (the file's content never shown).
 */
function readApiKeyFile(file: string): string {
  let key: string;
  try {
    key = fs.readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new ConfigError(
      'TEMPORAL_API_KEY_FILE',
      file,
      `a readable file holding the API key (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  }
  if (!key) throw new ConfigError('TEMPORAL_API_KEY_FILE', file, 'a file holding the API key (it is empty)');
  return key;
}

/** Connection options for `address` (the settings', or a dev stack's when they have none). */
export function connectionOptionsOf(settings: TemporalConnectionSettings, address: string) {
  const apiKey = settings.apiKey ?? (settings.apiKeyFile ? readApiKeyFile(settings.apiKeyFile) : undefined);
  return {
    address,
    ...(settings.tls === undefined ? {} : { tls: settings.tls }),
    ...(apiKey === undefined ? {} : { apiKey }),
    ...(settings.metadata ? { metadata: { ...settings.metadata } } : {}),
  };
}

/** Something whose API key can be replaced while it is open (a Connection, a NativeConnection). */
interface Rekeyable {
  setApiKey(apiKey: string): void | Promise<void>;
}

/**
 * Re-reads TEMPORAL_API_KEY_FILE every `apiKeyRefreshMs` and gives a changed key to every connection: a token that
 * expires is replaced by writing its successor into the file, no restart. A file that cannot be read keeps the last key
 * (and says so on `onError`). Returns the function that stops it.
 */
export function keepApiKeyFresh(
  settings: TemporalConnectionSettings,
  connections: readonly Rekeyable[],
  onError: (err: Error) => void,
): () => void {
  const file = settings.apiKeyFile;
  if (!file) return () => undefined;
  let current = readApiKeyFile(file);
  const timer = setInterval(() => {
    let next: string;
    try {
      next = readApiKeyFile(file);
    } catch (err) {
      onError(err as Error);
      return;
    }
    if (next === current) return;
    current = next;
    for (const connection of connections) {
      Promise.resolve(connection.setApiKey(next)).catch((err: unknown) => onError(err as Error));
    }
  }, settings.apiKeyRefreshMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** A client connection to the region's Temporal, with its settings (TLS, mTLS, API key, metadata). */
export function connectClient(
  settings: TemporalConnectionSettings,
  address: string,
  options: { connectTimeout?: number } = {},
): Promise<Connection> {
  return Connection.connect({ ...connectionOptionsOf(settings, address), ...options });
}

/** The same, opened on first use (the receiver answers while Temporal is down). */
export function lazyClientConnection(settings: TemporalConnectionSettings, address: string): Connection {
  return Connection.lazy(connectionOptionsOf(settings, address));
}

/** A worker's connection to the region's Temporal, with the same settings. */
export function connectWorker(settings: TemporalConnectionSettings, address: string): Promise<NativeConnection> {
  return NativeConnection.connect(connectionOptionsOf(settings, address));
}
