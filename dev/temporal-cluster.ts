/**
 * The Temporal that production runs, without Docker: the server at docker-compose.yml's version, on PostgreSQL,
 * with N history shards, configured by the same files compose mounts (deploy/temporal/config.yaml,
 * dynamicconfig.yaml) and set up by the same scripts compose runs (setup-schema.sh, setup-namespaces.sh).
 *
 * The server and its sql tool are built once from the Go module proxy (`go install`, a few minutes on 2 cores) into
 * the cache directory, outside the clone, with the schema files beside them; every later start uses the cache.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import pg from 'pg';
import { EmbeddedServiceError } from '../src/errors.js';
import { goCommand, obtainTool, type GoTool } from './go-tools.js';
import { CLUSTER_SERVER_NAME, type CertificateFiles, type ClusterPki } from './pki.js';
import { resolveTemporalCliPath } from './temporal-cli.js';
import { TEMPORAL_AUDIENCE } from './token-issuer.js';

const exec = promisify(execFile);
const REPO = path.resolve(import.meta.dirname, '..');
/** The files every Temporal cluster of this project runs with; compose mounts the same ones. */
export const TEMPORAL_DEPLOY_DIR = path.join(REPO, 'deploy/temporal');
const SERVICE = 'Temporal cluster';
const pgClient = pg.Client;
/** A cold start on PostgreSQL (membership, shard ownership, the system workflows) takes ~15 s on 2 cores. */
const START_TIMEOUT_MS = 120_000;

/**
 * The server version: deploy/temporal/server-version, which docker-compose.yml's image tags must equal (a test checks).
 */
export async function temporalServerVersion(): Promise<string> {
  return (await fs.readFile(path.join(TEMPORAL_DEPLOY_DIR, 'server-version'), 'utf8')).trim();
}

interface TemporalServerBinaries {
  version: string;
  server: string;
  sql: string;
  /** The server module's schema/ directory (setup-schema.sh's TEMPORAL_SCHEMA_DIR). */
  schemaDir: string;
}

/** config.yaml's tuning variables, passed through from the environment (docs/cluster.md). */
const TUNING_VARIABLES = [
  'TEMPORAL_DB_MAX_CONNS',
  'TEMPORAL_VISIBILITY_DB_MAX_CONNS',
  'TEMPORAL_DB_SYNCHRONOUS_COMMIT',
  'TEMPORAL_LOG_LEVEL',
];

/** deploy/temporal/server: the server binary's Go module (the stock server with hold-sweeper's authorizer). */
const TEMPORAL_SERVER_MODULE = path.join(TEMPORAL_DEPLOY_DIR, 'server');

/** The files the server binary is built from, hashed: a change to any of them is a new binary. */
async function serverSourceHash(): Promise<string> {
  const hash = createHash('sha256');
  for (const file of (await fs.readdir(TEMPORAL_SERVER_MODULE)).sort()) {
    if (!/\.(go|mod|sum|json)$/.test(file)) continue;
    hash
      .update(file)
      .update('\0')
      .update(await fs.readFile(path.join(TEMPORAL_SERVER_MODULE, file)))
      .update('\0');
  }
  return hash.digest('hex').slice(0, 12);
}

/**
 * The server (built from deploy/temporal/server: the stock server of its version with hold-sweeper's authorizer) and
 * the stock sql tool, keyed by the version and the sources.
 */
export const TEMPORAL_SERVER: GoTool = {
  id: 'temporal-server',
  name: 'the Temporal server and its sql tool',
  dir: async (cacheDir) =>
    path.join(cacheDir, 'temporal-server', `${await temporalServerVersion()}-${await serverSourceHash()}`),
  files: ['server', 'sql', 'schema'],
  async build(into) {
    const version = await temporalServerVersion();
    const go = (args: string[], cwd?: string) =>
      goCommand(SERVICE, args, { cwd, GOBIN: into, remedy: 'set TEMPORAL_ADDRESS to a cluster you run' });
    const goMod = await fs.readFile(path.join(TEMPORAL_SERVER_MODULE, 'go.mod'), 'utf8');
    if (!goMod.includes(`go.temporal.io/server v${version}\n`)) {
      throw new EmbeddedServiceError(
        SERVICE,
        `deploy/temporal/server/go.mod does not require go.temporal.io/server v${version}`,
        'make it match deploy/temporal/server-version',
      );
    }
    // No debug symbols: a test's server, and the linker's largest single step.
    await go(['build', '-ldflags=-s -w', '-o', path.join(into, 'server'), '.'], TEMPORAL_SERVER_MODULE);
    await go(['install', '-ldflags=-s -w', `go.temporal.io/server/cmd/tools/sql@v${version}`]);
    const module = JSON.parse(await go(['mod', 'download', '-json', `go.temporal.io/server@v${version}`])) as {
      Dir: string;
    };
    await fs.cp(path.join(module.Dir, 'schema'), path.join(into, 'schema'), { recursive: true });
    // The module cache's files are read-only; the copy must be removable by the next rebuild.
    await exec('chmod', ['-R', 'u+w', path.join(into, 'schema')]);
  },
};

/** The Temporal server's binaries, from the cache or built once from the Go module proxy. */
export async function obtainTemporalServer(
  cacheDir: string,
  log: (line: string) => void = () => undefined,
): Promise<TemporalServerBinaries> {
  const dir = await obtainTool(TEMPORAL_SERVER, cacheDir, log);
  return {
    version: await temporalServerVersion(),
    server: path.join(dir, 'server'),
    sql: path.join(dir, 'sql'),
    schemaDir: path.join(dir, 'schema'),
  };
}

/** The Web UI server's version: deploy/temporal/ui-version, which docker-compose.yml's temporalio/ui tag must equal. */
export async function temporalUiVersion(): Promise<string> {
  return (await fs.readFile(path.join(TEMPORAL_DEPLOY_DIR, 'ui-version'), 'utf8')).trim();
}

/**
 * The Temporal Web UI server. `go install` refuses this module (its go.mod has a replace directive), so it is built
 * inside a copy of the module, as its own Makefile does; the UI's assets are embedded in the module.
 */
export const TEMPORAL_UI: GoTool = {
  id: 'temporal-ui',
  name: 'the Temporal Web UI server',
  dir: async (cacheDir) => path.join(cacheDir, 'temporal-ui', await temporalUiVersion()),
  files: ['ui-server'],
  async build(into) {
    const go = (args: string[], cwd?: string) =>
      goCommand(SERVICE, args, { cwd, GOBIN: into, remedy: 'set TEMPORAL_ADDRESS to a cluster you run' });
    const module = JSON.parse(
      await go(['mod', 'download', '-json', `github.com/temporalio/ui-server/v2@v${await temporalUiVersion()}`]),
    ) as { Dir: string };
    const source = path.join(into, 'src');
    await fs.cp(module.Dir, source, { recursive: true });
    await exec('chmod', ['-R', 'u+w', source]);
    await go(['build', '-ldflags=-s -w', '-o', path.join(into, 'ui-server'), './cmd/server'], source);
    await fs.rm(source, { recursive: true, force: true });
  },
};

/** The Web UI server's binary, from the cache or built once. */
export async function obtainTemporalUi(
  cacheDir: string,
  log: (line: string) => void = () => undefined,
): Promise<string> {
  return path.join(await obtainTool(TEMPORAL_UI, cacheDir, log), 'ui-server');
}

interface ClusterOptions {
  /** History shards: fixed when the cluster's databases are created. */
  shards: number;
  /** A PostgreSQL superuser URL (any database): the cluster creates its own two databases there. */
  postgresUrl: string;
  /** Prefix of those two databases (`<prefix>` and `<prefix>_visibility`); one per shard count. */
  databasePrefix?: string;
  namespaces: readonly string[];
  /**
   * The `temporal` CLI, for setup-namespaces.sh; found like the local stack finds it (dev/temporal-cli.ts) when
   * undefined.
   */
  cliPath?: string;
  cacheDir: string;
  /** Where the server's log goes. */
  dataDir: string;
  /** Frontend gRPC port; history, matching and worker take the next ones. Random free ports when undefined. */
  port?: number;
  /**
   * PostgreSQL's synchronous_commit for Temporal's sessions (config.yaml's TEMPORAL_DB_SYNCHRONOUS_COMMIT); on by
   * default.
   */
  synchronousCommit?: boolean;
  /** Start the Web UI server on this port too (built once, like the server). */
  ui?: { port: number; codecEndpoint?: string };
  /**
   * Lock it (docs/cluster.md#a-locked-cluster): TLS with client certificates on the frontend and between its nodes,
   * and every call authorized by a token from `jwksUrl` (audience TEMPORAL_AUDIENCE). `adminToken` carries
   * `temporal-system:admin`, for the setup and the health check; the Web UI server gets a client certificate of its
   * own.
   */
  security?: { pki: ClusterPki; jwksUrl: string; adminToken: string };
  log?: (line: string) => void;
}

/** How a client reaches a locked cluster: its CA, the name its certificate holds, a client certificate, a token. */
export function lockedClusterTls(pki: ClusterPki, client: CertificateFiles) {
  return fs.readFile(pki.ca).then(async (ca) => ({
    serverRootCACertificate: ca,
    serverNameOverride: CLUSTER_SERVER_NAME,
    clientCertPair: { crt: await fs.readFile(client.cert), key: await fs.readFile(client.key) },
  }));
}

export interface TemporalCluster {
  readonly address: string;
  /**
   * The internal-frontend of a locked cluster (frontend port + 3): the system workers' way in, by internode TLS alone.
   * No client of ours may pass there.
   */
  readonly internalFrontendAddress: string | undefined;
  readonly uiUrl: string | undefined;
  readonly metricsUrl: string;
  readonly shards: number;
  readonly pid: number;
  /**
   * A second history host: another server process running the history service alone, on the same persistence and
   * membership (frontend port + 4, metrics + 21); shards are spread over both hosts, and move when one dies.
   */
  addHistoryHost(): Promise<{ pid: number; kill(): Promise<void>; stop(): Promise<void> }>;
  stop(): Promise<void>;
}

const portFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });

/**
 * A frontend port whose siblings (config.yaml: +1, +2, +3 (internal-frontend), +4 (a second history host), +6, each
 * −1000 for membership, +10 HTTP, +20 and +21 metrics) are free too.
 */
async function freeClusterPort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    // Below Linux's ephemeral range (32768+), where outgoing connections would take a checked port back.
    const base = 11_000 + 30 * Math.floor(Math.random() * 700);
    const ports = [0, 1, 2, 3, 4, 6]
      .flatMap((offset) => [base + offset, base + offset - 1000])
      .concat([base + 10, base + 20, base + 21]);
    if ((await Promise.all(ports.map(portFree))).every(Boolean)) return base;
  }
  throw new EmbeddedServiceError(SERVICE, 'no free range of ports found', 'free some ports or pass one');
}

async function runScript(script: string, env: Record<string, string>, what: string): Promise<void> {
  try {
    await exec('sh', [path.join(TEMPORAL_DEPLOY_DIR, script)], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    });
  } catch (err) {
    const { stderr, stdout } = err as { stderr?: string; stdout?: string };
    throw new EmbeddedServiceError(
      SERVICE,
      `${what} (deploy/temporal/${script}) failed: ${(stderr || stdout || (err as Error).message).trim()}`,
      '',
      {
        cause: err,
      },
    );
  }
}

/**
 * Creates or upgrades the schema, starts the server, waits until it serves, registers namespaces and search attributes.
 */
export async function startTemporalCluster(options: ClusterOptions): Promise<TemporalCluster> {
  const log = options.log ?? (() => undefined);
  const binaries = await obtainTemporalServer(options.cacheDir, log);
  const pg = new URL(options.postgresUrl);
  const prefix = options.databasePrefix ?? `temporal_s${options.shards}`;
  const dbEnv = {
    TEMPORAL_DB_HOST: pg.hostname,
    TEMPORAL_DB_PORT: pg.port || '5432',
    TEMPORAL_DB_USER: decodeURIComponent(pg.username),
    TEMPORAL_DB_PASSWORD: decodeURIComponent(pg.password),
    TEMPORAL_DB_NAME: prefix,
    TEMPORAL_VISIBILITY_DB_NAME: `${prefix}_visibility`,
  };
  await runScript(
    'setup-schema.sh',
    { ...dbEnv, SQL_TOOL: binaries.sql, TEMPORAL_SCHEMA_DIR: binaries.schemaDir },
    'schema setup',
  );

  const port = options.port ?? (await freeClusterPort());
  await fs.mkdir(options.dataDir, { recursive: true });
  const logFile = path.join(options.dataDir, 'temporal-server.log');
  const security = options.security;
  const securityEnv = security
    ? {
        TEMPORAL_TLS_CA_FILE: security.pki.ca,
        TEMPORAL_TLS_INTERNODE_CA_FILE: security.pki.internodeCa,
        TEMPORAL_TLS_FRONTEND_CERT_FILE: security.pki.frontend.cert,
        TEMPORAL_TLS_FRONTEND_KEY_FILE: security.pki.frontend.key,
        TEMPORAL_TLS_INTERNODE_CERT_FILE: security.pki.internode.cert,
        TEMPORAL_TLS_INTERNODE_KEY_FILE: security.pki.internode.key,
        TEMPORAL_TLS_SERVER_NAME: CLUSTER_SERVER_NAME,
        TEMPORAL_AUTH_JWKS_URL: security.jwksUrl,
        TEMPORAL_AUTH_AUDIENCE: TEMPORAL_AUDIENCE,
      }
    : {};
  // A locked cluster runs an internal-frontend for its own system workers (config.yaml).
  const services = security ? ['frontend', 'internal-frontend', 'history', 'matching', 'worker'] : [];
  const serverEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    ...dbEnv,
    ...securityEnv,
    NUM_HISTORY_SHARDS: String(options.shards),
    TEMPORAL_FRONTEND_PORT: String(port),
    TEMPORAL_METRICS_ADDRESS: `127.0.0.1:${port + 20}`,
    TEMPORAL_DYNAMIC_CONFIG: path.join(TEMPORAL_DEPLOY_DIR, 'dynamicconfig.yaml'),
    // config.yaml's tuning knobs, when the caller's environment sets them.
    ...Object.fromEntries(TUNING_VARIABLES.filter((v) => process.env[v]).map((v) => [v, process.env[v]!])),
    ...(options.synchronousCommit === false ? { TEMPORAL_DB_SYNCHRONOUS_COMMIT: 'off' } : {}),
  };
  /**
   * One server process running `services` (none: every service config.yaml names), its output appended to `logFile`.
   */
  const spawnServer = (processServices: readonly string[], extraEnv: Record<string, string>, file: string) => {
    // Unlocked (the bench, npm start's cluster): no authorizer, said explicitly (the flag only silences the warning).
    const args = [
      '--root',
      REPO,
      '--config',
      'deploy/temporal',
      '--env',
      'config',
      ...(security ? [] : ['--allow-no-auth']),
      'start',
      ...processServices.flatMap((service) => ['--service', service]),
    ];
    const output = createWriteStream(file, { flags: 'a' });
    const child: ChildProcess = spawn(binaries.server, args, {
      cwd: REPO,
      env: { ...serverEnv, ...extraEnv },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.pipe(output);
    child.stderr!.pipe(output);
    const state: { exited: string | undefined } = { exited: undefined };
    const exit = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        state.exited = `exited (${signal ?? code})`;
        resolve();
      });
      child.once('error', (err) => {
        state.exited = err.message;
        resolve();
      });
    });
    const stopProcess = async (signal: NodeJS.Signals = 'SIGTERM') => {
      if (!state.exited) {
        child.kill(signal);
        const kill = setTimeout(() => child.kill('SIGKILL'), 20_000);
        await exit;
        clearTimeout(kill);
      }
      output.end();
    };
    return { child, state, stop: stopProcess };
  };
  const main = spawnServer(services, {}, logFile);
  const { child } = main;
  const historyHosts: { stop(signal?: NodeJS.Signals): Promise<void> }[] = [];
  const stop = async () => {
    await Promise.all(historyHosts.map((h) => h.stop()));
    await main.stop();
  };
  const exitedAs = () => main.state.exited;
  const address = `127.0.0.1:${port}`;
  const adminTls = security
    ? await lockedClusterTls(security.pki, await security.pki.client('cluster-admin'))
    : undefined;
  const adminConnection = { address, ...(security ? { tls: adminTls, apiKey: security.adminToken } : {}) };
  const failed = async (what: string) => {
    await stop();
    const tail = (await fs.readFile(logFile, 'utf8').catch(() => ''))
      .trim()
      .split('\n')
      .slice(-10)
      .map((line) => (line.length > 400 ? `${line.slice(0, 400)}…` : line))
      .join('\n');
    return new EmbeddedServiceError(
      SERVICE,
      `server ${binaries.version} on ${address}: ${what}\n${tail}`,
      `see ${logFile}`,
    );
  };

  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (exitedAs()) throw await failed(exitedAs()!);
    const serving = await Connection.connect({ ...adminConnection, connectTimeout: 2_000 })
      .then(async (connection) => {
        try {
          await connection.workflowService.getSystemInfo({});
          return true;
        } finally {
          await connection.close();
        }
      })
      .catch(() => false);
    if (serving) break;
    if (Date.now() > deadline) throw await failed(`not serving after ${START_TIMEOUT_MS / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  try {
    await runScript(
      'setup-namespaces.sh',
      {
        TEMPORAL_CLI:
          options.cliPath ??
          (await resolveTemporalCliPath({ explicitPath: process.env.TEMPORAL_CLI_PATH, cacheDir: options.cacheDir })),
        TEMPORAL_ADDRESS: address,
        NAMESPACES: options.namespaces.join(' '),
        // The CLI reads the same variables as the product (src/temporal-connection.ts): the admin's certificate and
        // token.
        ...(security
          ? {
              TEMPORAL_TLS_SERVER_CA_CERT_PATH: security.pki.ca,
              TEMPORAL_TLS_SERVER_NAME: CLUSTER_SERVER_NAME,
              TEMPORAL_TLS_CLIENT_CERT_PATH: (await security.pki.client('cluster-admin')).cert,
              TEMPORAL_TLS_CLIENT_KEY_PATH: (await security.pki.client('cluster-admin')).key,
              TEMPORAL_API_KEY: security.adminToken,
            }
          : {}),
      },
      'namespace setup',
    );
  } catch (err) {
    await stop();
    throw err;
  }
  log(
    `Temporal ${binaries.version} cluster on ${address}: ${options.shards} history shards on PostgreSQL ${pg.host} (log: ${logFile})`,
  );
  let ui: { url: string; stop(): Promise<void> } | undefined;
  if (options.ui) {
    try {
      const uiTls = security ? { ca: security.pki.ca, client: await security.pki.client('web-ui') } : undefined;
      ui = await startUi(
        await obtainTemporalUi(options.cacheDir, log),
        address,
        options.namespaces[0]!,
        { ...options.ui, tls: uiTls },
        options.dataDir,
      );
    } catch (err) {
      await stop();
      throw err;
    }
    log(`Temporal Web UI ${await temporalUiVersion()} on ${ui.url}`);
  }
  return {
    address,
    internalFrontendAddress: security ? `127.0.0.1:${port + 3}` : undefined,
    uiUrl: ui?.url,
    metricsUrl: `http://127.0.0.1:${port + 20}/metrics`,
    shards: options.shards,
    pid: child.pid!,
    async addHistoryHost() {
      const n = historyHosts.length + 1;
      if (n > 1)
        throw new EmbeddedServiceError(
          SERVICE,
          'one extra history host at most',
          'its ports are frontend + 4 and frontend + 21',
        );
      const hostLog = path.join(options.dataDir, `temporal-history-${n}.log`);
      const host = spawnServer(
        ['history'],
        { TEMPORAL_HISTORY_PORT: String(port + 4), TEMPORAL_METRICS_ADDRESS: `127.0.0.1:${port + 21}` },
        hostLog,
      );
      historyHosts.push(host);
      // Joined when the membership table lists it: the shards are then spread over both hosts.
      const membership = new URL(options.postgresUrl);
      membership.pathname = `/${prefix}`;
      const joined = async () => {
        const db = new pgClient({ connectionString: membership.toString() });
        try {
          await db.connect();
          const { rows } = await db.query<{ n: number }>(
            // Role 2 is history; a host is listed by its membership (ringpop) port.
            'SELECT count(*)::integer AS n FROM cluster_membership WHERE role = 2 AND rpc_port = ANY($1::integer[]) AND record_expiry > now()',
            [[port + 4, port + 4 - 1000]],
          );
          return rows[0]!.n > 0;
        } catch {
          return false;
        } finally {
          await db.end().catch(() => undefined);
        }
      };
      for (const deadline = Date.now() + START_TIMEOUT_MS; !(await joined());) {
        if (host.state.exited)
          throw new EmbeddedServiceError(SERVICE, `history host ${n} ${host.state.exited}`, `see ${hostLog}`);
        if (Date.now() > deadline)
          throw new EmbeddedServiceError(
            SERVICE,
            `history host ${n} did not join in ${START_TIMEOUT_MS / 1000} s`,
            `see ${hostLog}`,
          );
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      log(
        `Temporal history host ${n} (pid ${host.child.pid}) joined the cluster on 127.0.0.1:${port + 4} (log: ${hostLog})`,
      );
      return { pid: host.child.pid!, kill: () => host.stop('SIGKILL'), stop: () => host.stop() };
    },
    async stop() {
      await ui?.stop();
      await stop();
    },
  };
}

/** The Web UI server's own OIDC sign-in (its `auth` settings): the authorization-code flow against `issuer`. */
interface UiSignIn {
  issuer: string;
  clientId: string;
  clientSecret: string;
  scopes: readonly string[];
}

/**
 * The Web UI server against `address`, with a config of its own (it reads plain YAML, no environment). With `signIn`,
 * people sign in at the issuer and the UI passes each one's access token to the codec endpoint (`passAccessToken`).
 */
export async function startUi(
  binary: string,
  address: string,
  namespace: string,
  options: { port: number; codecEndpoint?: string; tls?: { ca: string; client: CertificateFiles }; signIn?: UiSignIn },
  dataDir: string,
): Promise<{ url: string; stop(): Promise<void> }> {
  const root = path.join(dataDir, 'ui');
  await fs.mkdir(path.join(root, 'config'), { recursive: true });
  const config = [
    `temporalGrpcAddress: ${address}`,
    `port: ${options.port}`,
    'enableUi: true',
    `defaultNamespace: ${namespace}`,
    'cors:',
    '  allowOrigins: []',
    'codec:',
    `  endpoint: ${options.codecEndpoint ?? ''}`,
    ...(options.signIn
      ? [
          '  passAccessToken: true',
          'auth:',
          '  enabled: true',
          '  providers:',
          '    - label: hold-sweeper',
          '      type: oidc',
          `      providerUrl: ${options.signIn.issuer}`,
          `      issuerUrl: ${options.signIn.issuer}`,
          `      clientId: ${options.signIn.clientId}`,
          `      clientSecret: ${options.signIn.clientSecret}`,
          `      callbackUrl: http://127.0.0.1:${options.port}/auth/sso/callback`,
          '      scopes:',
          ...options.signIn.scopes.map((scope) => `        - ${scope}`),
        ]
      : []),
    // Against a locked cluster: its own client certificate; every call it forwards carries the user's token, which the
    // cluster authorizes (a user whose token does not allow a namespace sees nothing of it).
    ...(options.tls
      ? [
          'tls:',
          `  caFile: ${options.tls.ca}`,
          `  certFile: ${options.tls.client.cert}`,
          `  keyFile: ${options.tls.client.key}`,
          `  serverName: ${CLUSTER_SERVER_NAME}`,
          '  enableHostVerification: true',
        ]
      : []),
    '',
  ].join('\n');
  await fs.writeFile(path.join(root, 'config', 'cluster.yaml'), config);
  const output = createWriteStream(path.join(dataDir, 'temporal-ui.log'), { flags: 'a' });
  const child = spawn(binary, ['--root', root, '--config', 'config', '--env', 'cluster', 'start'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.pipe(output);
  child.stderr!.pipe(output);
  const exit = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exit;
    }
    output.end();
  };
  const url = `http://127.0.0.1:${options.port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ok = await fetch(`${url}/api/v1/settings`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return { url, stop };
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new EmbeddedServiceError(
        'Temporal Web UI',
        `ui-server on port ${options.port} did not answer`,
        `see ${path.join(dataDir, 'temporal-ui.log')}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
