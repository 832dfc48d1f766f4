/**
 * Starts, once for the whole test run, the real services every test uses: a Temporal dev server (obtained
 * offline, see dev/temporal-cli.ts) and an embedded PostgreSQL with a migrated template database from
 * which each test file clones its own ledgers. The workflow bundle is built once here too.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { generate } from 'selfsigned';
import type { TestProject } from 'vitest/node';
import { loadDevConfig } from '../../dev/dev-config.js';
import { migrate } from '../../src/db/migrate.js';
import { SERVICE_ROLES } from '../../src/db/roles.js';
import { DEV_SECRET_KEYS, localKeyRing } from '../../src/delivery/secret-box.js';
import { freePort, startEmbeddedPostgres } from '../../dev/embedded-postgres.js';
import { startCodecServer } from '../../src/codec/codec-server.js';
import { EncryptionCodec } from '../../src/codec/encryption-codec.js';
import { startDevServer } from '../../dev/temporal-dev-server.js';
import { bundleWorkflows } from '../../src/workers/region-worker.js';

export const TEMPLATE_DATABASE = 'hold_sweeper_template';
export const TEST_NAMESPACES = ['hold-sweeper-us', 'hold-sweeper-eu'] as const;
/**
 * The key the shared server's Web UI decodes `hold-sweeper-eu` with, through the codec endpoint below: a test that
 * wants the UI to show its encrypted payloads in clear encrypts with it (`inject('uiPayloadKey')`).
 */
const UI_PAYLOAD_KEY = { id: 'ui-test', key: randomBytes(32) };

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    temporalCliPath: string | undefined;
    postgresUrlBase: string;
    templateDatabase: string;
    workflowBundleCode: string;
    /** The same bundle as a file, for worker processes (WORKFLOW_BUNDLE_PATH). */
    workflowBundlePath: string;
    /**
     * Each service's database role, as production has them (src/db/roles.ts):
     * `postgres://<role>:<password>@host:port/`,
     * a database name to append. The template's grants are theirs, so every cloned ledger has them.
     */
    ledgerRoleUrls: Record<keyof typeof SERVICE_ROLES, string>;
    /**
     * The query a production-mode process appends to its DATABASE_URL: the embedded PostgreSQL serves TLS with a
     * certificate for 127.0.0.1, and production requires sslmode=verify-full (`?sslmode=verify-full&sslrootcert=…`).
     */
    postgresTlsQuery: string;
    /** The dev server's Web UI (test/integration/web-ui-browser.test.ts). */
    uiUrl: string;
    /** The payload key the Web UI's codec endpoint decodes `hold-sweeper-eu` with, base64. */
    uiPayloadKey: { id: string; key: string };
  }
}

export default async function setup(project: TestProject) {
  const dev = loadDevConfig();
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-test-'));
  await fs.chmod(dataDir, 0o777);
  const started = Date.now();
  // Its own CA: a self-signed certificate for the address every test connects to.
  const postgresTls = await generate([{ name: 'commonName', value: '127.0.0.1' }], {
    keySize: 2048,
    algorithm: 'sha256',
    extensions: [{ name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] }],
  });
  const postgresCa = path.join(dataDir, 'postgres-ca.pem');
  await fs.writeFile(postgresCa, postgresTls.cert);
  // The Web UI on, with a codec endpoint as `npm start` runs it, for the browser test.
  const uiPort = await freePort();
  const codec = await startCodecServer({
    codecs: new Map([
      ['hold-sweeper-eu', new EncryptionCodec([UI_PAYLOAD_KEY], { namespace: 'hold-sweeper-eu', unencrypted: 'pass' })],
    ]),
    plainNamespaces: ['hold-sweeper-us'],
    corsOrigins: [`http://127.0.0.1:${uiPort}`, `http://localhost:${uiPort}`],
    authToken: undefined,
  });
  const [server, postgres, bundle] = await Promise.all([
    startDevServer({
      namespaces: TEST_NAMESPACES,
      dataDir: path.join(dataDir, 'temporal'),
      explicitCliPath: dev.temporalCliPath,
      cacheDir: dev.cacheDir,
      uiPort,
      extraArgs: ['--ui-codec-endpoint', codec.url],
    }),
    startEmbeddedPostgres({
      dataDir: path.join(dataDir, 'pg'),
      databases: [TEMPLATE_DATABASE],
      durable: false,
      tls: { cert: postgresTls.cert, key: postgresTls.private },
    }),
    bundleWorkflows(),
  ]);
  // The service roles first: the template's migration grants them their privileges (src/db/rights.ts).
  const rolePassword = randomBytes(12).toString('hex');
  const admin = new pg.Client({ connectionString: postgres.urlFor('postgres') });
  await admin.connect();
  for (const role of Object.values(SERVICE_ROLES)) {
    await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD '${rolePassword}'`);
  }
  await admin.end();
  const ledgerRoleUrls = Object.fromEntries(
    Object.entries(SERVICE_ROLES).map(([service, role]) => [
      service,
      postgres.urlFor('').replace(/\/\/[^@]*@/, `//${role}:${rolePassword}@`),
    ]),
  ) as Record<keyof typeof SERVICE_ROLES, string>;
  const pool = new pg.Pool({ connectionString: postgres.urlFor(TEMPLATE_DATABASE) });
  // The template holds no merchant: the sealing step has nothing to seal, whichever region and ring it is given.
  await migrate(pool, { region: 'us', sealer: localKeyRing(DEV_SECRET_KEYS) });
  await pool.end();
  console.log(
    `[global-setup] Temporal ${server.address}, PostgreSQL :${postgres.port}, ready in ${Date.now() - started} ms`,
  );

  project.provide('temporalAddress', server.address);
  project.provide('temporalCliPath', server.executable.type === 'existing-path' ? server.executable.path : undefined);
  project.provide('postgresUrlBase', postgres.urlFor(''));
  project.provide('templateDatabase', TEMPLATE_DATABASE);
  project.provide('ledgerRoleUrls', ledgerRoleUrls);
  project.provide('postgresTlsQuery', `?sslmode=verify-full&sslrootcert=${encodeURIComponent(postgresCa)}`);
  project.provide('workflowBundleCode', bundle.code);
  const bundlePath = path.join(dataDir, 'workflow-bundle.js');
  await fs.writeFile(bundlePath, bundle.code);
  project.provide('workflowBundlePath', bundlePath);
  project.provide('uiUrl', server.uiUrl!);
  project.provide('uiPayloadKey', { id: UI_PAYLOAD_KEY.id, key: UI_PAYLOAD_KEY.key.toString('base64') });

  return async () => {
    await server.stop();
    await codec.stop();
    await postgres.stop();
    await fs.rm(dataDir, { recursive: true, force: true });
  };
}
