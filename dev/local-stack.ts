/**
 * The local stack behind `npm start` (and the benchmark): whatever the configuration does not point at an
 * external service for is started here. Configured addresses always win: a region with DATABASE_URL_<R> uses
 * that database; TEMPORAL_ADDRESS(_<R>) means no dev server is started.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startCodecServer } from '../src/codec/codec-server.js';
import { EncryptionCodec } from '../src/codec/encryption-codec.js';
import type { Config } from '../src/config.js';
import { devStackFilePath, type DevStackFile } from '../src/ops/dev-stack-file.js';
import type { DevConfig } from './dev-config.js';
import { startEmbeddedPostgres, type RunningPostgres } from './embedded-postgres.js';
import type { Region } from '../src/contracts/regions.js';
import { startDevServer, type DevServer } from './temporal-dev-server.js';

export interface LocalStack {
  /** Temporal address per region (the dev server's, unless configured). */
  temporalAddress(region: Region): string;
  databaseUrl(region: Region): string;
  /** Web UI of the dev server; undefined when Temporal is external. */
  uiUrl: string | undefined;
  dataDir: string;
  stop(): Promise<void>;
}

export function ledgerDatabaseName(region: Region): string {
  return `hold_sweeper_${region}`;
}

export async function startLocalStack(config: Config, dev: DevConfig, options: { log: (line: string) => void }): Promise<LocalStack> {
  const ownDataDir = !dev.dataDir;
  const dataDir = dev.dataDir ?? (await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-')));
  // embedded-postgres runs as the `postgres` user when we are root: it must be able to reach its directory.
  await fs.chmod(dataDir, 0o777);

  const needTemporal = config.regions.some((r) => !r.temporalAddress);
  const needPostgres = config.regions.filter((r) => !r.databaseUrl);
  let server: DevServer | undefined;
  let postgres: RunningPostgres | undefined;
  let codec: { url: string; stop(): Promise<void> } | undefined;
  const encrypted = config.regions.filter((r) => r.payloadKeys);
  if (encrypted.length > 0) {
    // The dev server's Web UI decodes encrypted payloads through this endpoint (--ui-codec-endpoint).
    codec = await startCodecServer({
      codecs: new Map(encrypted.map((r) => [r.namespace, new EncryptionCodec(r.payloadKeys!)])),
      // The dev server's UI is on this stack's own port unless CODEC_CORS_ORIGIN says otherwise.
      corsOrigins: process.env.CODEC_CORS_ORIGIN
        ? config.codecServer.corsOrigins
        : ['127.0.0.1', 'localhost'].map((host) => `http://${host}:${dev.temporalUiPort}`),
      authToken: config.codecServer.authToken,
    });
    options.log(`Payloads encrypted (AES-256-GCM) in ${encrypted.map((r) => r.region).join(', ')}; the Web UI decodes through ${codec.url}`);
  }
  for (const region of config.regions.filter((r) => !r.payloadKeys)) {
    options.log(`Payloads are NOT encrypted in ${region.region}: no PAYLOAD_KEYS_${region.region.toUpperCase()} (allowed in dev mode only)`);
  }
  try {
    [server, postgres] = await Promise.all([
      needTemporal
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
      needPostgres.length > 0
        ? startEmbeddedPostgres({
            dataDir: path.join(dataDir, 'pg'),
            databases: needPostgres.map((r) => ledgerDatabaseName(r.region)),
            durable: true,
          })
        : undefined,
    ]);
  } catch (err) {
    await server?.stop();
    await postgres?.stop();
    await codec?.stop();
    throw err;
  }
  if (server) {
    const how = server.executable.type === 'existing-path' ? server.executable.path : "the SDK's download";
    options.log(`Temporal dev server on ${server.address} (binary: ${how})`);
  }
  if (postgres) options.log(`Embedded PostgreSQL on 127.0.0.1:${postgres.port} (data: ${path.join(dataDir, 'pg')})`);

  const regionConfig = (region: Region) => {
    const found = config.regions.find((r) => r.region === region);
    if (!found) throw new Error(`region ${region} is not configured (HOLD_SWEEPER_REGIONS)`);
    return found;
  };
  const temporalAddress = (region: Region) => regionConfig(region).temporalAddress ?? server!.address;
  const databaseUrl = (region: Region) => regionConfig(region).databaseUrl ?? postgres!.urlFor(ledgerDatabaseName(region));
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
