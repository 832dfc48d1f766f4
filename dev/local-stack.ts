/**
 * The local stack behind `npm start` (and the benchmark): whatever the configuration does not point at an
 * external service for is started here. Configured addresses always win: a region with DATABASE_URL_<R> uses
 * that database; TEMPORAL_ADDRESS(_<R>) means no dev server is started.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startCodecServer, type CodecServer } from '../src/codec/codec-server.js';
import { EncryptionCodec } from '../src/codec/encryption-codec.js';
import type { Config } from '../src/config.js';
import { DEV_SECRET_KEY_ID } from '../src/delivery/secret-box.js';
import { devStackFilePath, type DevStackFile } from '../src/dev-stack.js';
import type { DevConfig } from './dev-config.js';
import { startEmbeddedPostgres, type RunningPostgres } from './embedded-postgres.js';
import type { Region } from '../src/contracts/regions.js';
import { startDevServer, type DevServer } from './temporal-dev-server.js';
import { startTemporalCluster } from './temporal-cluster.js';

/**
 * Which Temporal the stack starts when none is configured: the dev server (single shard, SQLite; the default) or
 * the production server on the embedded PostgreSQL with `shards` history shards (dev/temporal-cluster.ts).
 */
export interface TemporalBackend {
  kind: 'dev' | 'cluster';
  shards: number;
  /**
   * Cluster only: PostgreSQL's synchronous_commit for Temporal's sessions (config.yaml's
   * TEMPORAL_DB_SYNCHRONOUS_COMMIT). Off, a commit returns before its WAL reaches the disk (a crash may lose the last
   * fraction of a second of acknowledged writes, never corrupt): docs/cluster.md measures what it buys.
   */
  synchronousCommit?: boolean;
}

/** Reads `--temporal dev|cluster` and `--shards N` from a command line; throws naming the flag on a bad value. */
export function parseTemporalBackend(argv: readonly string[]): TemporalBackend {
  const value = (flag: string) => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const kind = value('--temporal') ?? 'dev';
  if (kind !== 'dev' && kind !== 'cluster')
    throw new Error(`--temporal ${kind}: expected "dev" (the dev server) or "cluster" (PostgreSQL, sharded)`);
  const rawShards = value('--shards') ?? '4';
  const shards = Number(rawShards);
  if (!Number.isInteger(shards) || shards < 1 || shards > 1024)
    throw new Error(`--shards ${rawShards}: expected an integer from 1 to 1024`);
  const commit = value('--synchronous-commit') ?? 'on';
  if (commit !== 'on' && commit !== 'off') throw new Error(`--synchronous-commit ${commit}: expected "on" or "off"`);
  return { kind, shards, synchronousCommit: commit === 'on' };
}

interface LocalStack {
  /** Temporal address per region (the dev server's, unless configured). */
  temporalAddress(region: Region): string;
  databaseUrl(region: Region): string;
  /** Web UI of the dev server or the cluster; undefined when Temporal is external. */
  uiUrl: string | undefined;
  dataDir: string;
  stop(): Promise<void>;
}

function ledgerDatabaseName(region: Region): string {
  return `hold_sweeper_${region}`;
}

export async function startLocalStack(
  config: Config,
  dev: DevConfig,
  options: { log: (line: string) => void; temporal?: TemporalBackend },
): Promise<LocalStack> {
  const backend = options.temporal ?? { kind: 'dev', shards: 1 };
  const ownDataDir = !dev.dataDir;
  const dataDir = dev.dataDir ?? (await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-')));
  // embedded-postgres runs as the `postgres` user when we are root: it must be able to reach its directory.
  await fs.chmod(dataDir, 0o777);

  const needTemporal = config.regions.some((r) => !r.temporalAddress);
  const needPostgres = config.regions.filter((r) => !r.databaseUrl);
  let server: Pick<DevServer, 'address' | 'uiUrl' | 'stop'> | undefined;
  let postgres: RunningPostgres | undefined;
  let codec: CodecServer | undefined;
  const encrypted = config.regions.filter((r) => r.payloadKeys);
  if (encrypted.length > 0) {
    // The dev server's Web UI decodes encrypted payloads through this endpoint (--ui-codec-endpoint).
    codec = await startCodecServer({
      codecs: new Map(
        encrypted.map((r) => [
          r.namespace,
          new EncryptionCodec(r.payloadKeys!, { namespace: r.namespace, unencrypted: 'pass' }),
        ]),
      ),
      plainNamespaces: config.regions.filter((r) => !r.payloadKeys).map((r) => r.namespace),
      // The dev server's UI is on this stack's own port unless CODEC_CORS_ORIGIN says otherwise.
      corsOrigins: process.env.CODEC_CORS_ORIGIN
        ? config.codecServer.corsOrigins
        : ['127.0.0.1', 'localhost'].map((host) => `http://${host}:${dev.temporalUiPort}`),
      authToken: config.codecServer.authToken,
      metrics: config.codecServer.metrics,
    });
    options.log(
      `Payloads encrypted (AES-256-GCM) in ${encrypted.map((r) => r.region).join(', ')}; the Web UI decodes through ${codec.url}` +
        (codec.metricsUrl ? `; its counters on ${codec.metricsUrl}` : ''),
    );
  }
  for (const region of config.regions.filter((r) => !r.payloadKeys)) {
    options.log(
      `Payloads are NOT encrypted in ${region.region}: no PAYLOAD_KEYS_${region.region.toUpperCase()} (allowed in dev mode only)`,
    );
  }
  for (const region of config.regions.filter((r) => r.secretKeys.some((k) => k.id === DEV_SECRET_KEY_ID))) {
    const variable = `MERCHANT_SECRET_KEYS_${region.region.toUpperCase()}`;
    options.log(
      `Merchant secrets in ${region.region} are sealed with the built-in dev key, which protects nothing (${variable} sets your own)`,
    );
  }
  const cluster = needTemporal && backend.kind === 'cluster';
  try {
    let devServer: DevServer | undefined;
    [devServer, postgres] = await Promise.all([
      needTemporal && !cluster
        ? startDevServer({
            namespaces: [...new Set(config.regions.map((r) => r.namespace))],
            dataDir: path.join(dataDir, 'temporal'),
            explicitCliPath: dev.temporalCliPath,
            cacheDir: dev.cacheDir,
            port: dev.temporalPort,
            uiPort: dev.temporalUiPort,
            extraArgs: codec ? ['--ui-codec-endpoint', codec.url] : [],
          })
        : undefined,
      needPostgres.length > 0 || cluster
        ? startEmbeddedPostgres({
            dataDir: path.join(dataDir, 'pg'),
            databases: needPostgres.map((r) => ledgerDatabaseName(r.region)),
            durable: true,
          })
        : undefined,
    ]);
    server = devServer;
    if (devServer) {
      const how = devServer.executable.type === 'existing-path' ? devServer.executable.path : "the SDK's download";
      options.log(`Temporal dev server on ${devServer.address} (binary: ${how})`);
    }
    if (cluster) {
      server = await startTemporalCluster({
        shards: backend.shards,
        postgresUrl: postgres!.urlFor('postgres'),
        namespaces: [...new Set(config.regions.map((r) => r.namespace))],
        cacheDir: dev.cacheDir,
        dataDir: path.join(dataDir, 'temporal-cluster'),
        port: dev.temporalPort,
        synchronousCommit: backend.synchronousCommit,
        ui: { port: dev.temporalUiPort, codecEndpoint: codec?.url },
        log: options.log,
      });
    }
  } catch (err) {
    await server?.stop();
    await postgres?.stop();
    await codec?.stop();
    throw err;
  }
  if (postgres) options.log(`Embedded PostgreSQL on 127.0.0.1:${postgres.port} (data: ${path.join(dataDir, 'pg')})`);

  const regionConfig = (region: Region) => {
    const found = config.regions.find((r) => r.region === region);
    if (!found) throw new Error(`region ${region} is not configured (HOLD_SWEEPER_REGIONS)`);
    return found;
  };
  const temporalAddress = (region: Region) => regionConfig(region).temporalAddress ?? server!.address;
  const databaseUrl = (region: Region) =>
    regionConfig(region).databaseUrl ?? postgres!.urlFor(ledgerDatabaseName(region));
  const stackFile: DevStackFile = {
    pid: process.pid,
    temporalAddress: Object.fromEntries(config.regions.map((r) => [r.region, temporalAddress(r.region)])),
    databaseUrl: Object.fromEntries(config.regions.map((r) => [r.region, databaseUrl(r.region)])),
    uiUrl: server?.uiUrl,
  };
  await fs.mkdir(dev.cacheDir, { recursive: true });
  await fs.writeFile(devStackFilePath(dev.cacheDir), JSON.stringify(stackFile, null, 2));
  return {
    temporalAddress,
    databaseUrl,
    uiUrl: server?.uiUrl,
    dataDir,
    async stop() {
      await fs.rm(devStackFilePath(dev.cacheDir), { force: true });
      await server?.stop();
      await postgres?.stop();
      await codec?.stop();
      if (ownDataDir) await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
}
