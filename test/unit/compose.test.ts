/**
 * docker-compose.yml and the files around it (the Dockerfile, Temporal's, PostgreSQL's, Prometheus's, Perses's and
 * Dex's configuration, .env.example), which cannot run here: each service's configuration loaded by the product's own
 * loaders with the files `npm run credentials` writes, at the paths compose mounts them; its secrets, their modes, its
 * networks, and the identity provider's clients against what the Web UI, the APIs, the codec endpoint and Temporal are
 * configured with.
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import bcrypt from 'bcryptjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  CONFIG_VARIABLES,
  ENTRY_POINTS,
  loadApiConfig,
  loadConfig,
  loadMerchantApiConfig,
  loadProcessorConfig,
} from '../../src/config.js';
import { SERVICE_ROLES } from '../../src/db/roles.js';
import { ROLES } from '../../src/contracts/identity.js';
import { REGIONS } from '../../src/contracts/regions.js';
import { DEV_CONFIG_VARIABLES } from '../../dev/dev-config.js';
import { WORKER_NODE_FLAGS } from '../../dev/worker-processes.js';
import { COMPOSE_CALLERS, COMPOSE_DEX, DEMO_USERS, writeComposeCredentials } from '../../dev/credentials.js';
import { TEMPORAL_DEPLOY_DIR, temporalServerVersion, temporalUiVersion } from '../../dev/temporal-cluster.js';
import { startCodecServer } from '../../src/codec/codec-server.js';
import { SEARCH_ATTRIBUTES } from '../../src/contracts/search-attributes.js';

const REPO = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => fs.readFile(path.join(REPO, file), 'utf8');
/** The role a postgres:// URL connects as. */
const roleIn = (url: string) => decodeURIComponent(/^postgres(?:ql)?:\/\/([^:@/]+)/.exec(url)![1]!);
/**
 * The source `npm run build` compiles `dist/<X>.js` from (tsconfig.build.json: rootDir src, outDir dist); undefined for
 * any other path.
 */
function sourceOf(compiled: string): string | undefined {
  const module = /^dist\/(.+)\.js$/.exec(compiled)?.[1];
  return module === undefined ? undefined : `src/${module}.ts`;
}

type Service = Record<string, unknown> & {
  environment?: Record<string, string>;
  secrets?: string[];
  networks?: string[] | Record<string, { aliases?: string[] } | null>;
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
};
interface Compose {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
  networks: Record<string, { internal?: boolean } | null>;
  secrets: Record<string, { file: string }>;
}
const loadCompose = async () => parse(await read('docker-compose.yml'), { merge: true }) as Compose;

let compose: Compose;
let services: Record<string, Service>;
/** Where `npm run credentials` wrote this run's files (a fresh directory, as a first run writes them). */
let secretsDir: string;
/** The file on the host behind compose's secret `name`, in `secretsDir`. */
const hostFile = (name: string) => {
  const secret = compose.secrets[name];
  expect(secret, `secret ${name} is declared`).toBeDefined();
  return path.join(secretsDir, path.relative('./deploy/secrets', secret!.file));
};
/** Every /run/secrets/<name> a text names. */
const mountsNamedIn = (text: string) => [...text.matchAll(/\/run\/secrets\/([\w.-]+)/g)].map((m) => m[1]!);
const networksOf = (service: Service) =>
  Array.isArray(service.networks) ? service.networks : Object.keys(service.networks ?? {});
/**
 * `name`'s environment as its container sees it, every /run/secrets/<secret> (the secrets it lists) replaced by the
 * host file behind it, so that the loaders read what the container would.
 */
function inContainer(name: string): Record<string, string> {
  const service = services[name]!;
  return Object.fromEntries(
    Object.entries(service.environment ?? {}).map(([variable, value]) => {
      for (const secret of mountsNamedIn(value)) {
        expect(service.secrets, `${name} ${variable} reads ${secret}, which it mounts`).toContain(secret);
        value = value.replace(`/run/secrets/${secret}`, hostFile(secret));
      }
      // Compose's own defaults (${VAR:-default}): no variable needs setting.
      return [variable, value.replace(/^\$\{[A-Z_]+:-([^}]*)\}$/, '$1')];
    }),
  );
}
/** The content of the file `variable` names in `env` (a _FILE variable of inContainer's). */
const fileOf = (env: Record<string, string>, variable: string) => fs.readFile(env[variable]!, 'utf8');
/** The permissions a compose token grants: the claim Temporal reads them from (TEMPORAL_AUTH_PERMISSIONS_CLAIM). */
const permissionsIn = (token: string) =>
  (
    JSON.parse(Buffer.from(token.trim().split('.')[1]!, 'base64url').toString()) as Record<string, string[] | undefined>
  )[services.temporal!.environment!.TEMPORAL_AUTH_PERMISSIONS_CLAIM!];

beforeAll(async () => {
  compose = await loadCompose();
  services = compose.services;
  secretsDir = path.join(await fs.mkdtemp(path.join(os.tmpdir(), 'hs-compose-')), 'secrets');
  await writeComposeCredentials(secretsDir, 1);
}, 60_000);

afterAll(async () => {
  if (secretsDir) await fs.rm(path.dirname(secretsDir), { recursive: true, force: true });
});

describe('docker-compose.yml', () => {
  it('every service’s configuration loads, through the product’s loaders, from the files `npm run credentials` writes, at their mount points', async () => {
    for (const [name, service] of Object.entries(services)) {
      expect(service.image ?? service.build, `${name} has an image or a build`).toBeTruthy();
      if (service.build && (service.command as string[] | undefined)?.[0] === 'node') {
        // Compiled JavaScript the build makes from a source that exists.
        const command = (service.command as string[]).at(-1)!;
        expect(sourceOf(command), `${name} runs ${command}`).toBeDefined();
        await expect(
          fs.access(path.join(REPO, sourceOf(command)!)),
          `${name} runs ${command}`,
        ).resolves.toBeUndefined();
      }
      for (const dependency of Object.keys(service.depends_on ?? {}))
        expect(Object.keys(services), `${name} depends on ${dependency}`).toContain(dependency);
    }
    // The image itself (its stages, its CMD) has a test of its own below.
    const dockerfile = await read('Dockerfile');
    /** What every service of this repository's image may set: the loaders' variables, and Node's CA variable. */
    const known = (env: Record<string, string>) => {
      for (const variable of Object.keys(env))
        if (variable !== 'NODE_EXTRA_CA_CERTS') expect(CONFIG_VARIABLES as readonly string[]).toContain(variable);
    };
    for (const region of REGIONS) {
      const worker = services[`worker-${region}`]!;
      // The image's build id comes from the operator's BUILD_ID (the git revision), baked in as WORKER_BUILD_ID.
      expect(worker.build).toEqual({ context: '.', args: { BUILD_ID: '${BUILD_ID:-}' } });
      expect(dockerfile).toMatch(/^ARG BUILD_ID=$/m);
      expect(dockerfile).toMatch(/^ENV WORKER_BUILD_ID=\$\{BUILD_ID\}$/m);
      const env = inContainer(`worker-${region}`);
      known(env);
      const config = loadConfig(env, ENTRY_POINTS.worker);
      expect(config).toMatchObject({ mode: 'production', regions: [{ region, namespace: `hold-sweeper-${region}` }] });
      // Its own role, over TLS with the server's certificate checked against the stack's CA.
      const url = new URL(config.regions[0]!.databaseUrl!);
      expect(roleIn(url.href)).toBe(SERVICE_ROLES.worker);
      expect([url.host, url.searchParams.get('sslmode'), url.searchParams.get('sslrootcert')]).toEqual([
        'ledger-db:5432',
        'verify-full',
        '/run/secrets/ca.pem',
      ]);
      // Locked: the cluster's CA and name, the worker's own certificate, and a token file granting its region's write.
      expect(config.regions[0]!.temporal).toMatchObject({
        address: 'temporal:7233',
        tls: { serverNameOverride: 'temporal.hold.internal' },
      });
      const tls = config.regions[0]!.temporal!.tls as { clientCertPair?: { crt: Buffer } };
      expect(new X509Certificate(tls.clientCertPair!.crt).subject).toContain(`worker-${region}.clients.hold.internal`);
      expect(permissionsIn(await fs.readFile(config.regions[0]!.temporal!.apiKeyFile!, 'utf8'))).toEqual([
        `hold-sweeper-${region}:write`,
      ]);
      expect(config.regions[0]!.payloadKeys).toHaveLength(1);
      expect(config.observability.metricsAddress).toBe('0.0.0.0:9464');
      // Its build is the deploy step's to make current (below): the worker's token may not.
      expect(config.deployment).toEqual({ deploymentName: 'hold-sweeper', buildId: undefined, setCurrent: 'never' });

      // The deploy step: the same image's promote, as the namespace's admin (the schedules' arguments encrypted).
      const deployConfig = loadConfig(inContainer('deploy'), ENTRY_POINTS.promote);
      const deployRegion = deployConfig.regions.find((r) => r.region === region)!;
      expect(deployRegion.payloadKeys).toHaveLength(1);
      expect(permissionsIn(await fs.readFile(deployRegion.temporal!.apiKeyFile!, 'utf8'))).toContain(
        `hold-sweeper-${region}:admin`,
      );

      // The region's processor-event receiver: the same image, its own entry point, a configuration both loaders
      // accept.
      const receiver = services[`receiver-${region}`]!;
      expect(receiver.command).toEqual(['node', 'dist/bin/receiver.js']);
      const receiverEnv = inContainer(`receiver-${region}`);
      known(receiverEnv);
      const receiverConfig = loadConfig(receiverEnv, ENTRY_POINTS.receiver);
      expect(receiverConfig.regions.map((r) => r.region)).toEqual([region]);
      // Its own role, and no key to the merchants' secrets (it may not read them).
      expect(roleIn(receiverConfig.regions[0]!.databaseUrl!)).toBe(SERVICE_ROLES.receiver);
      expect(Object.keys(receiverEnv).filter((k) => k.startsWith('MERCHANT_SECRET_KEYS'))).toEqual([]);
      expect(loadProcessorConfig(receiverEnv, region, receiverConfig.mode)).toMatchObject({
        host: '0.0.0.0',
        port: 8090,
        behindTlsProxy: true,
        metrics: { host: '0.0.0.0', port: 9465 },
        gapWaitMs: 15 * 60_000,
      });
      expect(permissionsIn(await fs.readFile(receiverConfig.regions[0]!.temporal!.apiKeyFile!, 'utf8'))).toEqual([
        `hold-sweeper-${region}:write`,
      ]);

      // The region's admin API: the operators' role and the region's keys, its own Temporal identity, Dex as issuer.
      expect(services[`api-${region}`]!.command).toEqual(['node', 'dist/bin/api.js']);
      const apiEnv = inContainer(`api-${region}`);
      known(apiEnv);
      const apiConfig = loadConfig(apiEnv, ENTRY_POINTS.api);
      expect(roleIn(apiConfig.regions[0]!.databaseUrl!)).toBe(SERVICE_ROLES.ops);
      expect(loadApiConfig(apiEnv, apiConfig)).toMatchObject({
        region,
        port: 8443,
        issuer: COMPOSE_DEX.issuer,
        audience: `hold-sweeper-admin-${region}`,
        rolesClaim: 'groups',
        behindTlsProxy: true,
        metrics: { host: '0.0.0.0', port: 9466 },
      });
      expect(permissionsIn(await fs.readFile(apiConfig.regions[0]!.temporal!.apiKeyFile!, 'utf8'))).toEqual([
        `hold-sweeper-${region}:write`,
      ]);
      // The region's merchant API: its own role, and nothing else: no Temporal, no payload or merchant-secret key.
      expect(services[`merchant-api-${region}`]!.command).toEqual(['node', 'dist/bin/merchant-api.js']);
      const merchantEnv = inContainer(`merchant-api-${region}`);
      known(merchantEnv);
      const merchantConfig = loadConfig(merchantEnv, ENTRY_POINTS['merchant-api']);
      expect(roleIn(merchantConfig.regions[0]!.databaseUrl!)).toBe(SERVICE_ROLES.merchantApi);
      expect(Object.keys(merchantEnv).filter((k) => /^(TEMPORAL_|PAYLOAD_KEYS|MERCHANT_SECRET_KEYS)/.test(k))).toEqual(
        [],
      );
      expect(services[`merchant-api-${region}`]!.secrets).toEqual(['ca.pem', `ledger-url-merchant-api-${region}`]);
      expect(loadMerchantApiConfig(merchantEnv, merchantConfig)).toMatchObject({
        region,
        port: 8444,
        behindTlsProxy: true,
        metrics: { host: '0.0.0.0', port: 9467 },
      });
    }
    // The codec endpoint calls neither the ledger nor Temporal: it holds none of their credentials, nor the
    // merchant-secret key ring (src/bin/codec-server.ts). It serves its own TLS and verifies Dex's tokens.
    const codecEnv = inContainer('codec');
    known(codecEnv);
    const codecConfig = loadConfig(codecEnv, ENTRY_POINTS.codec);
    expect(codecConfig.regions.map((r) => r.payloadKeys?.length)).toEqual([1, 1]);
    expect(codecConfig.codecServer).toMatchObject({
      oidc: { issuer: COMPOSE_DEX.issuer, audience: 'hold-sweeper-codec', rolesClaim: 'groups' },
      behindTlsProxy: false,
      corsOrigins: ['http://localhost:8080'],
      // Its counters for Prometheus, never on the port the browsers reach.
      metrics: { host: '0.0.0.0', port: 9468 },
    });
    expect(new X509Certificate(await fs.readFile(codecConfig.codecServer.tls!.certFile)).checkHost('localhost')).toBe(
      'localhost',
    );
    expect(Object.keys(codecEnv).filter((k) => /^(MERCHANT_SECRET_KEYS|DATABASE_URL|TEMPORAL_)/.test(k))).toEqual([]);
    // The migrator owns the schema (ledger-init.sh makes it the databases' owner) and the operators' CLI has its own
    // role; nothing of the product connects as the database's superuser.
    for (const [name, role, entry] of [
      ['ledger-migrate', SERVICE_ROLES.migrator, ENTRY_POINTS.migrate],
      ['ops', SERVICE_ROLES.ops, ENTRY_POINTS.ops],
    ] as const) {
      const env = inContainer(name);
      known(env);
      const config = loadConfig(env, entry);
      expect(
        config.regions.map((r) => roleIn(r.databaseUrl!)),
        name,
      ).toEqual([role, role]);
    }
    expect(services['ledger-migrate']!.command).toEqual(['node', 'dist/bin/migrate.js']);
    // Every ledger URL a service mounts connects as one of the product's roles, over verified TLS.
    for (const name of Object.keys(compose.secrets).filter((s) => s.startsWith('ledger-url-'))) {
      const url = new URL(await fs.readFile(hostFile(name), 'utf8'));
      expect(Object.values(SERVICE_ROLES), name).toContain(roleIn(url.href));
      expect(url.searchParams.get('sslmode'), name).toBe('verify-full');
    }
    const init = await read('deploy/ledger-init.sh');
    for (const role of Object.values(SERVICE_ROLES)) expect(init).toContain(`CREATE ROLE ${role} LOGIN`);
    expect(init).toContain('OWNER hold_sweeper_migrator');
    expect(services['ledger-db']!.volumes).toContain(
      './deploy/ledger-init.sh:/docker-entrypoint-initdb.d/ledger-init.sh:ro',
    );
    // Nothing is published beyond this machine: whatever reaches a port from outside is decided in front of it.
    for (const [name, service] of Object.entries(services)) {
      for (const port of service.ports ?? []) expect(port, name).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
    }
  });

  it('every secret is a file `npm run credentials` writes, mounted with secrets: only where a *_FILE or *_PATH variable, a command or a mounted file names it; no secret is a value in compose', async () => {
    const text = await read('docker-compose.yml');
    // Needs no variable: nothing required from the operator's environment or a .env (${VAR:?}), no default secret.
    expect(text).not.toMatch(/\$\{[A-Z_]+:\?/);
    expect(text).not.toMatch(/postgres(ql)?:\/\/[^\s/]*:[^\s/]*@/);
    const generated = (await fs.readdir(secretsDir, { recursive: true, withFileTypes: true }))
      .filter((e) => e.isFile())
      .map((e) => path.relative(secretsDir, path.join(e.parentPath, e.name)));
    for (const [name, { file }] of Object.entries(compose.secrets)) {
      // Named as its file, so what a container mounts at /run/secrets/<name> is plainly which file.
      expect(path.basename(file), name).toBe(name);
      expect(generated, `${name}: npm run credentials writes ${file}`).toContain(
        path.relative('./deploy/secrets', file),
      );
    }
    // Everything generated is mounted somewhere, but what is for people (the demo users' passwords, the on-call
    // certificate and token for a person's temporal CLI) and the public JWKS, served from its directory.
    const forPeople = [
      'dex/demo-users.txt',
      'pki/client-on-call.pem',
      'pki/client-on-call.key',
      'tokens/on-call.token',
    ];
    expect(
      generated
        .filter((file) => !file.startsWith('jwks/') && !forPeople.includes(file))
        .filter((file) => !Object.values(compose.secrets).some((s) => s.file === `./deploy/secrets/${file}`)),
    ).toEqual([]);
    const mounted = new Set<string>();
    for (const [name, service] of Object.entries(services)) {
      const listed = service.secrets ?? [];
      for (const secret of listed) {
        expect(Object.keys(compose.secrets), `${name} mounts ${secret}`).toContain(secret);
        mounted.add(secret);
      }
      // What names a mount: the service's own settings and scripts, and the files it mounts (a ledger URL names its
      // CA, Dex's configuration its certificate).
      const scripts = await Promise.all(
        ((service.volumes as string[] | undefined) ?? [])
          .map((v) => v.split(':')[0]!)
          .filter((source) => /\.(sh|conf|yml)$/.test(source))
          .map((source) => read(source)),
      );
      const files = await Promise.all(listed.map((s) => fs.readFile(hostFile(s), 'utf8')));
      const own = JSON.stringify([service.environment, service.command, service.entrypoint, service.healthcheck]);
      const named = new Set([
        ...mountsNamedIn(own),
        ...scripts.flatMap(mountsNamedIn),
        ...files.flatMap(mountsNamedIn),
      ]);
      // Prometheus's configuration is its own file (deploy/prometheus/prometheus.yml, mounted above).
      expect([...named].sort(), `${name} mounts exactly what it names`).toEqual([...listed].sort());
      // A secret's value is never in the environment: only the file's path (…_FILE, …_PATH, the images' own names).
      for (const [variable, value] of Object.entries(service.environment ?? {})) {
        // (TEMPORAL_CODEC_PASS_ACCESS_TOKEN is the Web UI's flag to forward one.)
        if (/(PASSWORD|SECRET|TOKEN|_KEYS|_KEY)(_[A-Z]{2})?$/.test(variable) && !variable.includes('PASS_ACCESS'))
          expect(value, `${name} ${variable}`).toMatch(/^\/run\/secrets\//);
        expect(variable, `${name}: ${variable} is a URL with its password`).not.toMatch(/^DATABASE_URL_[A-Z]{2}$/);
      }
    }
    expect([...mounted].sort()).toEqual(Object.keys(compose.secrets).sort());
  });

  it('the secret files are readable by every container’s user: 0644 in a 0700 directory (file secrets keep the host’s owner and mode)', async () => {
    expect((await fs.stat(secretsDir)).mode & 0o777).toBe(0o700);
    for (const name of Object.keys(compose.secrets)) {
      const file = hostFile(name);
      // node (uid 1000, the Dockerfile's USER node), temporal (1000), the Web UI (user 1000:1000), Prometheus (65534),
      // Dex (1001), postgres (999) are not the host's owner: only "others" can read it in every one of them.
      expect((await fs.stat(file)).mode & 0o777, name).toBe(0o644);
      expect((await fs.stat(path.dirname(file))).mode & 0o777, name).toBe(0o700);
    }
    // The one file for no container: the demo users' passwords, the person at the host's alone.
    expect((await fs.stat(path.join(secretsDir, 'dex/demo-users.txt'))).mode & 0o777).toBe(0o600);
    // The public keys are served from their directory by the jwks service (busybox, root without capabilities).
    expect((await fs.stat(path.join(secretsDir, 'jwks/.well-known'))).mode & 0o777).toBe(0o755);
    expect(services.jwks!.volumes).toEqual(['./deploy/secrets/jwks:/www:ro']);
    expect(await read('Dockerfile')).toMatch(/^USER node$/m);
    // PostgreSQL refuses a key others may read: each server's entrypoint copies its key as postgres's alone, 0600,
    // where ssl_key_file points.
    for (const db of ['ledger-db', 'temporal-db']) {
      const service = services[db]!;
      const copy = (service.entrypoint as string[]).join(' ');
      expect(copy, db).toContain(
        `install -o postgres -g postgres -m 0600 /run/secrets/${db}.key /var/run/postgresql/server.key`,
      );
      expect(copy, db).toContain('exec docker-entrypoint.sh "$$@"');
      expect(service.command, db).toEqual(expect.arrayContaining(['ssl_key_file=/var/run/postgresql/server.key']));
      expect(service.tmpfs, db).toContain('/var/run/postgresql');
    }
  });

  it('PostgreSQL over TLS only: both servers serve their certificate for their name and refuse plaintext; every client verifies the server', async () => {
    const hba = (await read('deploy/postgres/pg_hba.conf'))
      .split('\n')
      .filter((line) => line.trim() && !line.startsWith('#'))
      .map((line) => line.split(/\s+/));
    // The network: hostssl only (a plaintext connection finds no entry); a password every time.
    expect(hba.map((l) => l[0])).toEqual(['local', 'hostssl', 'hostssl']);
    expect(hba.every((l) => l.at(-1) === 'scram-sha-256')).toBe(true);
    for (const db of ['ledger-db', 'temporal-db']) {
      const service = services[db]!;
      expect(service.command, db).toEqual(
        expect.arrayContaining([
          'ssl=on',
          `ssl_cert_file=/run/secrets/${db}.pem`,
          'hba_file=/etc/postgresql/pg_hba.conf',
        ]),
      );
      expect(service.volumes, db).toContain('./deploy/postgres/pg_hba.conf:/etc/postgresql/pg_hba.conf:ro');
      const cert = new X509Certificate(await fs.readFile(hostFile(`${db}.pem`)));
      expect(cert.checkHost(db), db).toBe(db);
      expect(cert.checkIssued(new X509Certificate(await fs.readFile(hostFile('ca.pem')))), db).toBe(true);
      // Its superuser's password from a file (the image reads POSTGRES_PASSWORD_FILE), none in the environment.
      expect(Object.keys(service.environment!).sort(), db).toEqual(['POSTGRES_PASSWORD_FILE', 'POSTGRES_USER']);
    }
    // Temporal and its schema tool: TLS to temporal-db against the stack's CA, the host's name checked
    // (config.yaml's enableHostVerification, setup-schema.sh's SQL_TLS), the password from its file.
    for (const name of ['temporal', 'temporal-schema']) {
      expect(services[name]!.environment, name).toMatchObject({
        TEMPORAL_DB_HOST: 'temporal-db',
        TEMPORAL_DB_TLS_CA_FILE: '/run/secrets/ca.pem',
        TEMPORAL_DB_PASSWORD_FILE: '/run/secrets/temporal-db-password',
      });
    }
    expect(await read('deploy/temporal/config.yaml')).toMatch(/enableHostVerification: true/);
    expect(await read('deploy/temporal/setup-schema.sh')).toContain('SQL_TLS=true SQL_TLS_CA_FILE=');
    // Production refuses a ledger URL without sslmode=verify-full (the loader test above loaded compose's).
    const plaintext = { ...inContainer('worker-us') };
    const url = await fileOf(plaintext, 'DATABASE_URL_US_FILE');
    delete plaintext.DATABASE_URL_US_FILE;
    expect(() =>
      loadConfig({ ...plaintext, DATABASE_URL_US: url.replace('sslmode=verify-full', 'sslmode=require') }),
    ).toThrow(/DATABASE_URL_US.*sslmode=verify-full/);
  });

  it('networks: the merchant APIs reach the ledger alone, the receivers the ledger and Temporal, the codec endpoint Dex; every network is internal but the edges', () => {
    const members = new Map<string, string[]>();
    for (const [name, service] of Object.entries(services)) {
      expect(networksOf(service).length, `${name} is on a network of its own choosing`).toBeGreaterThan(0);
      for (const network of networksOf(service)) {
        expect(Object.keys(compose.networks), `${name} is on ${network}`).toContain(network);
        members.set(network, [...(members.get(network) ?? []), name]);
      }
    }
    for (const network of Object.keys(compose.networks))
      expect(members.get(network)?.length ?? 0, network).toBeGreaterThan(1);
    /** Every service `name` shares a network with. */
    const reach = (name: string) =>
      [...new Set(networksOf(services[name]!).flatMap((n) => members.get(n)!))].filter((s) => s !== name).sort();
    // Prometheus scrapes every one of them: a network with each, never one it would open to another.
    for (const region of REGIONS) {
      const other = REGIONS.find((r) => r !== region)!;
      expect(reach(`merchant-api-${region}`)).toEqual(['ledger-db', `merchant-api-${other}`, 'prometheus']);
      expect(reach(`receiver-${region}`)).toEqual(['ledger-db', 'prometheus', `receiver-${other}`, 'temporal']);
    }
    expect(reach('codec')).toEqual(['dex', 'prometheus']);
    // The databases: their own clients and no one else.
    const ledgerClients = [
      'ledger-migrate',
      'ops',
      ...REGIONS.flatMap((r) => [`worker-${r}`, `receiver-${r}`, `api-${r}`, `merchant-api-${r}`]),
    ];
    expect(reach('ledger-db')).toEqual(ledgerClients.sort());
    expect(reach('temporal-db')).toEqual(['temporal', 'temporal-schema']);
    for (const name of Object.keys(services)) {
      if (![...ledgerClients, 'ledger-db'].includes(name)) expect(reach(name), name).not.toContain('ledger-db');
    }
    // An edge (not internal) is where ports are published or calls go out, one per kind of caller; every other network
    // has no way out.
    const edges = Object.entries(compose.networks)
      .filter(([, n]) => !n?.internal)
      .map(([name]) => name);
    expect(edges.sort()).toEqual(['browser-edge', 'egress', 'merchant-edge', 'operators', 'processor-edge']);
    for (const [name, service] of Object.entries(services)) {
      if (service.ports?.length)
        expect(
          networksOf(service).some((n) => edges.includes(n)),
          `${name} publishes a port from an edge`,
        ).toBe(true);
    }
    expect(members.get('merchant-edge')).toEqual(REGIONS.map((r) => `merchant-api-${r}`));
    expect(members.get('processor-edge')).toEqual(REGIONS.map((r) => `receiver-${r}`));
    // The workers send webhooks to merchants' endpoints on the internet; `merchant ping` too.
    expect(members.get('egress')).toEqual([...REGIONS.map((r) => `worker-${r}`), 'ops']);
  });

  it('Prometheus waits on nothing it watches: a failing worker does not keep alerting off', () => {
    expect(Object.keys(services.prometheus!.depends_on!)).toEqual(['alertmanager']);
    expect(Object.keys(services.alertmanager!.depends_on ?? {})).toEqual([]);
  });

  it('Dex, the stack’s identity provider, issues what the Web UI, the admin APIs, the codec endpoint and Temporal are configured to accept', async () => {
    const dex = parse(await fs.readFile(hostFile('dex-config.yaml'), 'utf8')) as {
      issuer: string;
      web: { https: string; tlsCert: string; tlsKey: string };
      telemetry: { http: string };
      oauth2: { grantTypes: string[]; passwordConnector: string };
      staticPasswords: { email: string; username: string; hash: string; groups: string[] }[];
      staticClients: {
        id: string;
        secret?: string;
        public?: boolean;
        redirectURIs?: string[];
        trustedPeers?: string[];
      }[];
    };
    const { issuer } = dex;
    const client = (id: string) => dex.staticClients.find((c) => c.id === id);
    // Run as the binary, with its configuration, certificate and key where the configuration says.
    expect(services.dex!.entrypoint).toEqual(['dex', 'serve', '/run/secrets/dex-config.yaml']);
    expect([dex.web.tlsCert, dex.web.tlsKey]).toEqual(['/run/secrets/dex.pem', '/run/secrets/dex.key']);
    // One issuer URL for the browser and the containers: published on loopback at its port, the alias inside compose
    // on every network its verifiers reach it by, and the name in its certificate.
    const { hostname, port } = new URL(issuer);
    expect(hostname).toMatch(/\.localhost$/);
    expect(dex.web.https).toBe(`0.0.0.0:${port}`);
    expect(services.dex!.ports).toEqual([`127.0.0.1:${port}:${port}`]);
    for (const network of Object.values(services.dex!.networks as Record<string, { aliases: string[] }>))
      expect(network.aliases).toEqual([hostname]);
    expect(new X509Certificate(await fs.readFile(hostFile('dex.pem'))).checkHost(hostname)).toBe(hostname);
    // Its health check asks its telemetry port.
    expect(JSON.stringify(services.dex!.healthcheck)).toContain(
      `http://127.0.0.1:${dex.telemetry.http.split(':')[1]}/healthz/ready`,
    );

    // The Web UI signs people in with its client (secret from its file), and asks for a token for the two services it
    // hands it to: Temporal and the codec endpoint.
    const ui = services['temporal-ui']!.environment!;
    expect([ui.TEMPORAL_AUTH_PROVIDER_URL, ui.TEMPORAL_AUTH_ISSUER_URL]).toEqual([issuer, issuer]);
    const uiClient = client(ui.TEMPORAL_AUTH_CLIENT_ID!)!;
    expect(uiClient.redirectURIs).toEqual([ui.TEMPORAL_AUTH_CALLBACK_URL]);
    expect(uiClient.secret).toBe(await fs.readFile(hostFile('temporal-ui-client-secret'), 'utf8'));
    const scopes = ui.TEMPORAL_AUTH_SCOPES!.split(',');
    expect(scopes).toEqual(expect.arrayContaining(['openid', COMPOSE_DEX.groupsClaim]));
    const audiences = scopes.filter((s) => s.startsWith('audience:server:client_id:')).map((s) => s.split(':').at(-1));
    const temporalEnv = services.temporal!.environment!;
    const codec = services.codec!.environment!;
    expect(audiences.sort()).toEqual([codec.CODEC_OIDC_AUDIENCE, temporalEnv.TEMPORAL_AUTH_AUDIENCE].sort());
    // Each audience is a client of Dex's trusting the Web UI (Dex refuses a token for an audience that does not).
    for (const audience of audiences) expect(client(audience!)!.trustedPeers).toContain(uiClient.id);
    // The codec endpoint takes the UI's token from the browser, over https from the UI's origin.
    expect(new URL(ui.TEMPORAL_CODEC_ENDPOINT!).protocol).toBe('https:');
    expect(new URL(ui.TEMPORAL_CODEC_ENDPOINT!).port).toBe(services.codec!.ports![0]!.split(':')[1]);
    expect(codec.CODEC_CORS_ORIGIN).toBe(new URL(ui.TEMPORAL_AUTH_CALLBACK_URL!).origin);
    // The admin APIs: Dex is their issuer, their audiences clients the operators' CLI client may ask for, never the
    // Web UI's (its token opens no admin API).
    for (const region of REGIONS) {
      const api = services[`api-${region}`]!.environment!;
      expect(api.API_OIDC_ISSUER).toBe(issuer);
      expect(client(api.API_OIDC_AUDIENCE!)!.trustedPeers).toEqual([COMPOSE_DEX.cliClient]);
    }
    expect(client(COMPOSE_DEX.cliClient)).toMatchObject({ public: true });
    expect(codec.CODEC_OIDC_ISSUER).toBe(issuer);
    // Temporal verifies people's tokens by Dex's keys and the services' by theirs, both with permissions in the claim
    // Dex fills from a user's groups, where the APIs and the codec endpoint read roles too.
    expect(temporalEnv.TEMPORAL_AUTH_JWKS_URL!.split(',')).toEqual([
      'http://jwks:8000/.well-known/jwks.json',
      `${issuer}/keys`,
    ]);
    expect(temporalEnv.SSL_CERT_FILE).toBe('/run/secrets/ca.pem');
    for (const claim of [
      temporalEnv.TEMPORAL_AUTH_PERMISSIONS_CLAIM,
      codec.CODEC_OIDC_ROLES_CLAIM,
      ...REGIONS.map((r) => services[`api-${r}`]!.environment!.API_OIDC_ROLES_CLAIM),
    ])
      expect(claim).toBe(COMPOSE_DEX.groupsClaim);
    for (const caller of COMPOSE_CALLERS.filter((c) => c.permissions.length > 0)) {
      const token = await fs.readFile(path.join(secretsDir, 'tokens', `${caller.name}.token`), 'utf8');
      expect(permissionsIn(token), caller.name).toEqual(caller.permissions);
    }

    // The demo users: each signs in with the password in demo-users.txt, and each group is a role of hold-sweeper's
    // (everywhere or in a region) or a Temporal permission on a namespace compose registers.
    const passwords = new Map(
      (await fs.readFile(path.join(secretsDir, 'dex/demo-users.txt'), 'utf8'))
        .trim()
        .split('\n')
        .map((line) => line.split(' ') as [string, string]),
    );
    const namespaces = loadConfig({}).regions.map((r) => r.namespace);
    expect(dex.staticPasswords.map((u) => u.username)).toEqual(DEMO_USERS.map((u) => u.name));
    for (const user of dex.staticPasswords) {
      expect(bcrypt.compareSync(passwords.get(user.email)!, user.hash), user.email).toBe(true);
      const roles = user.groups.filter((g) => (ROLES as readonly string[]).includes(g.replace(/^(us|eu):/, '')));
      const permissions = user.groups.filter((g) => /^[\w-]+:(read|write|admin)$/.test(g));
      expect([...roles, ...permissions].sort(), user.email).toEqual([...user.groups].sort());
      expect(roles.length, user.email).toBeGreaterThan(0);
      for (const permission of permissions) expect(namespaces, user.email).toContain(permission.split(':')[0]);
    }
    // A person's terminal gets a token with the password grant (or the device flow) from the CLI client.
    expect(dex.oauth2).toMatchObject({ passwordConnector: 'local' });
    expect(dex.oauth2.grantTypes).toEqual(
      expect.arrayContaining(['authorization_code', 'password', 'urn:ietf:params:oauth:grant-type:device_code']),
    );
  });

  it('docker-compose.yml runs the Temporal that dev/temporal-cluster.ts runs: same version, server build, config files and setup scripts, locked', async () => {
    const compose = parse(await read('docker-compose.yml'), { merge: true }) as {
      services: Record<string, Record<string, unknown>>;
    };
    const services = compose.services;
    const version = await temporalServerVersion();
    // The server is deploy/temporal/server built against that version, on the official image of that version.
    expect(services.temporal!.build).toBe('./deploy/temporal/server');
    expect(services.temporal!.image).toBe(`hold-sweeper-temporal:${version}`);
    expect(await read('deploy/temporal/server/Dockerfile')).toMatch(
      new RegExp(`^FROM temporalio/server:${version.replace(/\./g, '\\.')}$`, 'm'),
    );
    expect(await read('deploy/temporal/server/go.mod')).toContain(`go.temporal.io/server v${version}\n`);
    // Locked as the cluster test's cluster is: its TLS files, the JWKS and audience, the internal-frontend, no
    // --allow-no-auth.
    const command = JSON.stringify(services.temporal!.command);
    expect(command).toContain('hold-sweeper-temporal');
    for (const service of ['frontend', 'internal-frontend', 'history', 'matching', 'worker'])
      expect(command).toContain(`--service ${service} `.trimEnd());
    expect(command).not.toContain('allow-no-auth');
    expect(Object.keys(services.temporal!.environment as object)).toEqual(
      expect.arrayContaining([
        'TEMPORAL_TLS_CA_FILE',
        'TEMPORAL_TLS_FRONTEND_CERT_FILE',
        'TEMPORAL_TLS_INTERNODE_CERT_FILE',
        'TEMPORAL_TLS_SERVER_NAME',
        'TEMPORAL_AUTH_JWKS_URL',
        'TEMPORAL_AUTH_AUDIENCE',
      ]),
    );
    // The setup scripts run on the same image: its `temporal` CLI, and the sql tool and schema files of the same
    // version, built as dev/temporal-cluster.ts builds them.
    for (const service of ['temporal-schema', 'temporal-setup']) {
      expect(services[service]!.build, service).toBe('./deploy/temporal/server');
      expect(services[service]!.image, service).toBe(`hold-sweeper-temporal:${version}`);
    }
    const serverDockerfile = await read('deploy/temporal/server/Dockerfile');
    expect(serverDockerfile).toContain(`go install -trimpath go.temporal.io/server/cmd/tools/sql@v${version}`);
    expect(serverDockerfile).toContain(`go.temporal.io/server@v${version}/schema`);
    expect(serverDockerfile).toMatch(/^COPY --from=build \/out\/schema \/etc\/temporal\/schema$/m);
    expect(await read('deploy/temporal/setup-schema.sh')).toContain(
      'SCHEMA_DIR="${TEMPORAL_SCHEMA_DIR:-/etc/temporal/schema}"',
    );
    expect(services['temporal-ui']!.image).toBe(`temporalio/ui:${await temporalUiVersion()}`);
    // The files the cluster backend starts the server with are the files compose mounts.
    expect(path.resolve(REPO, 'deploy/temporal')).toBe(TEMPORAL_DEPLOY_DIR);
    expect(services.temporal!.volumes).toEqual(
      expect.arrayContaining([
        './deploy/temporal/config.yaml:/etc/temporal/config/docker.yaml:ro',
        './deploy/temporal/dynamicconfig.yaml:/etc/temporal/config/dynamicconfig/docker.yaml:ro',
      ]),
    );
    expect(JSON.stringify(services.temporal!.command)).toContain('--env docker');
    for (const [service, script] of [
      ['temporal-schema', 'setup-schema.sh'],
      ['temporal-setup', 'setup-namespaces.sh'],
    ] as const) {
      expect((services[service]!.volumes as string[])[0]).toBe('./deploy/temporal:/etc/hold-sweeper/temporal:ro');
      expect(services[service]!.entrypoint).toEqual(['sh', `/etc/hold-sweeper/temporal/${script}`]);
    }
    // The setup script registers exactly the product's namespaces and search attributes.
    const setup = await read('deploy/temporal/setup-namespaces.sh');
    expect(/SEARCH_ATTRIBUTES="\$\{SEARCH_ATTRIBUTES:-([^}]*)\}"/.exec(setup)![1]!.split(' ')).toEqual(
      SEARCH_ATTRIBUTES.map((a) => a.name),
    );
    const namespaces = loadConfig({}).regions.map((r) => r.namespace);
    expect(/NAMESPACES="\$\{NAMESPACES:-([^}]*)\}"/.exec(setup)![1]!.split(' ')).toEqual(namespaces);
  });

  it('docker-compose.yml and the Dockerfile: the image is built in a stage of its own and runs compiled JavaScript on Node 24', async () => {
    // The build compiles src/ alone into dist/ (what sourceOf maps back), with tsx; the image runs without it.
    expect(JSON.parse(await read('tsconfig.build.json'))).toEqual({
      extends: './tsconfig.json',
      compilerOptions: { rootDir: 'src', outDir: 'dist' },
      include: ['src/**/*.ts'],
    });
    const pkg = JSON.parse(await read('package.json')) as {
      scripts: Record<string, string>;
      dependencies: Record<string, string>;
    };
    expect(pkg.scripts.build).toBe('tsx dev/bin/build.ts');
    expect(Object.keys(pkg.dependencies)).not.toContain('tsx');

    const dockerfile = await read('Dockerfile');
    const stages: string[][] = [];
    for (const line of dockerfile.split('\n').filter((l) => l.trim() && !l.startsWith('#'))) {
      if (line.startsWith('FROM ')) stages.push([]);
      stages.at(-1)!.push(line);
    }
    expect(stages.map((stage) => stage[0])).toEqual([
      'FROM node:24-bookworm-slim AS build',
      'FROM node:24-bookworm-slim',
    ]);
    const [build, runtime] = stages as [string[], string[]];
    expect(build).toEqual(
      expect.arrayContaining(['WORKDIR /app', 'RUN npm ci --no-audit --no-fund', 'RUN npm run build']),
    );
    expect(runtime).toEqual(
      expect.arrayContaining([
        'WORKDIR /app',
        'ENV NODE_ENV=production HOLD_SWEEPER_MODE=production',
        'COPY --from=build /app/dist ./dist',
        // Where dev/bin/build.ts writes the bundle.
        'ENV WORKFLOW_BUNDLE_PATH=/app/dist/workflow-bundle.js',
        'USER node',
      ]),
    );
    expect(runtime.some((line) => /^RUN npm ci --omit=dev /.test(line))).toBe(true);
    expect(runtime.join('\n')).not.toContain('tsx');
    const cmd = JSON.parse(/^CMD (\[.*\])$/.exec(runtime.at(-1)!)![1]!) as string[];
    // The worker's node flags are the ones the suite and the benchmarks run it with, and `npm run worker`'s.
    expect(cmd).toEqual(['node', ...WORKER_NODE_FLAGS, 'dist/bin/worker.js']);
    await expect(fs.access(path.join(REPO, sourceOf(cmd.at(-1)!)!))).resolves.toBeUndefined();
    const { scripts } = JSON.parse(await read('package.json')) as { scripts: Record<string, string> };
    expect(scripts.worker).toBe(['tsx', ...WORKER_NODE_FLAGS, 'src/bin/worker.ts'].join(' '));
    // The build context is what the build stage copies and nothing else (no deploy/secrets/, no .env).
    const admitted = (await read('.dockerignore'))
      .split('\n')
      .filter((line) => line.startsWith('!'))
      .map((line) => line.slice(1).replace(/\/$/, ''));
    const copied = build.filter((line) => line.startsWith('COPY ')).flatMap((line) => line.split(' ').slice(1, -1));
    expect(copied.sort()).toEqual(admitted.sort());
  });

  it('docker-compose.yml hardens every service: read-only, no capabilities but the named ones, no new privileges, memory and process limits, health checks', async () => {
    const compose = parse(await read('docker-compose.yml'), { merge: true }) as {
      services: Record<string, Record<string, unknown>>;
      volumes: Record<string, unknown>;
    };
    const services = compose.services;
    // PostgreSQL's entrypoint gives its directories to postgres as root, then becomes postgres (said in the file).
    const postgresCaps = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'SETGID', 'SETUID'];
    const capsAdded: Record<string, string[]> = { 'temporal-db': postgresCaps, 'ledger-db': postgresCaps };
    // They exit when done, and what depends on them waits for that: no health check.
    const oneShots = ['temporal-schema', 'temporal-setup', 'ledger-migrate', 'deploy'];
    // Run by a person when needed (`docker compose run --rm ops ...`), never by `up`.
    const tools = ['ops'];
    // Its image has nothing to run a check with (Perses's binary alone: no shell, no HTTP client), and nothing waits on
    // it.
    const unchecked = ['perses'];
    for (const [name, service] of Object.entries(services)) {
      expect(service.read_only, `${name} is read-only`).toBe(true);
      expect(service.tmpfs, `${name} writes temporary files to a tmpfs`).toContain('/tmp');
      expect(service.cap_drop, name).toEqual(['ALL']);
      expect(service.cap_add, name).toEqual(capsAdded[name]);
      expect(service.security_opt, name).toEqual(['no-new-privileges:true']);
      expect(service.mem_limit, name).toMatch(/^\d+[mg]$/);
      expect(service.pids_limit, name).toBeGreaterThan(0);
      for (const volume of (service.volumes as string[] | undefined) ?? []) {
        const source = volume.split(':')[0]!;
        if (!source.startsWith('.') && !source.startsWith('/'))
          expect(Object.keys(compose.volumes), `${name} mounts volume ${source}`).toContain(source);
      }
      const check = (service.healthcheck as { test?: string[] } | undefined)?.test;
      if (oneShots.includes(name) || tools.includes(name)) {
        expect(service.restart, name).toBe('no');
        expect(check, name).toBeUndefined();
        if (tools.includes(name)) expect(service.profiles, name).toEqual(['ops']);
      } else if (unchecked.includes(name)) {
        expect(check, name).toBeUndefined();
        expect(
          Object.values(services).filter((s) => Object.keys((s.depends_on as object | undefined) ?? {}).includes(name)),
          `nothing waits on ${name}`,
        ).toEqual([]);
      } else {
        expect(check?.[0], `${name} has a health check`).toMatch(/^CMD(-SHELL)?$/);
      }
      // This repository's image (the Dockerfile): compiled JavaScript (its CMD, or another entry point of dist/), never
      // tsx.
      if (service.build === '.' || (service.build as { context?: string } | undefined)?.context === '.') {
        expect(JSON.stringify(service), name).not.toContain('tsx');
        // That its source exists: the first docker-compose test.
        if (service.command)
          expect(service.command, name).toEqual(['node', expect.stringMatching(/^dist\/bin\/.+\.js$/)]);
      }
    }
    for (const oneShot of oneShots) {
      const dependents = Object.values(services).filter(
        (s) =>
          (s.depends_on as Record<string, { condition: string }> | undefined)?.[oneShot]?.condition ===
          'service_completed_successfully',
      );
      expect(dependents.length, `something waits for ${oneShot} to complete`).toBeGreaterThan(0);
    }
    // The databases keep their data on their volume; the socket directory is a tmpfs.
    for (const db of ['temporal-db', 'ledger-db']) {
      expect(services[db]!.volumes).toContain(`${db}:/var/lib/postgresql/data`);
      expect(services[db]!.tmpfs).toContain('/var/run/postgresql');
    }
    // Each Node service's health check asks its own port, from inside the container (the image has no curl).
    const nodeCheckUrl = (name: string) =>
      /fetch\('([^']+)'/.exec((services[name]!.healthcheck as { test: string[] }).test.at(-1)!)![1]!;
    const portIn = (name: string, variable: string) =>
      (services[name]!.environment as Record<string, string>)[variable]!.split(':').at(-1);
    for (const region of ['us', 'eu']) {
      // A worker is healthy while it is ready: its ledger, Temporal and key ring (src/observability/health.ts).
      const workerCheck = new URL(nodeCheckUrl(`worker-${region}`));
      expect([workerCheck.port, workerCheck.pathname]).toEqual([
        portIn(`worker-${region}`, 'HEALTH_ADDRESS'),
        '/readyz',
      ]);
      const receiverCheck = new URL(nodeCheckUrl(`receiver-${region}`));
      expect([receiverCheck.port, receiverCheck.pathname]).toEqual([
        portIn(`receiver-${region}`, 'PROCESSOR_RECEIVER_ADDRESS'),
        '/healthz',
      ]);
    }
    expect(new URL(nodeCheckUrl('codec')).port).toBe(portIn('codec', 'CODEC_SERVER_ADDRESS'));
    // The codec endpoint passes its check without the token it requires of everything else, over its own TLS trusted
    // by the stack's CA (NODE_EXTRA_CA_CERTS): run the check against one with compose's certificate.
    const pki = path.join(secretsDir, 'pki');
    const codec = await startCodecServer({
      codecs: new Map(),
      corsOrigins: ['http://localhost:8080'],
      authToken: 'not-sent-by-the-check',
      https: {
        cert: await fs.readFile(path.join(pki, 'codec.pem')),
        key: await fs.readFile(path.join(pki, 'codec.key')),
      },
    });
    try {
      const script = (services.codec!.healthcheck as { test: string[] }).test
        .at(-1)!
        .replace(new URL(nodeCheckUrl('codec')).host, new URL(codec.url).host);
      expect((services.codec!.environment as Record<string, string>).NODE_EXTRA_CA_CERTS).toBe('/run/secrets/ca.pem');
      await expect(
        promisify(execFile)(process.execPath, ['-e', script], {
          timeout: 10_000,
          env: { ...process.env, NODE_EXTRA_CA_CERTS: path.join(pki, 'ca.pem') },
        }),
      ).resolves.toBeDefined();
    } finally {
      await codec.stop();
    }
  });

  it('Prometheus scrapes each worker, receiver and API (with its region) where each serves its metrics, the codec endpoint and Temporal, with the alert rules and Alertmanager', async () => {
    const prometheus = parse(await read('deploy/prometheus/prometheus.yml')) as {
      scrape_configs: { job_name: string; static_configs: { targets: string[]; labels?: { region?: string } }[] }[];
      rule_files: string[];
      alerting: { alertmanagers: { static_configs: { targets: string[] }[] }[] };
    };
    const targets = Object.fromEntries(
      prometheus.scrape_configs.map((c) => [
        c.job_name,
        c.static_configs.flatMap((s) => s.targets.map((t) => `${t}${s.labels?.region ? ` ${s.labels.region}` : ''}`)),
      ]),
    );
    expect(targets).toEqual({
      'hold-sweeper-workers': ['worker-us:9464 us', 'worker-eu:9464 eu'],
      'hold-sweeper-receivers': ['receiver-us:9465 us', 'receiver-eu:9465 eu'],
      'hold-sweeper-apis': ['api-us:9466 us', 'merchant-api-us:9467 us', 'api-eu:9466 eu', 'merchant-api-eu:9467 eu'],
      'hold-sweeper-codec': ['codec:9468'],
      temporal: ['temporal:8000'],
    });
    const compose = parse(await read('docker-compose.yml')) as {
      services: Record<string, { image?: string; volumes?: string[]; environment?: Record<string, string> }>;
    };
    // Each one's metrics address as its configuration reads it (production's default for the APIs), never the port its
    // callers reach.
    for (const region of ['us', 'eu'] as const) {
      const env = (name: string) => compose.services[name]!.environment ?? {};
      expect(env(`receiver-${region}`).PROCESSOR_RECEIVER_METRICS_ADDRESS).toBe('0.0.0.0:9465');
      expect(env(`receiver-${region}`).PROCESSOR_RECEIVER_ADDRESS).toBe('0.0.0.0:8090');
    }
    expect(compose.services.prometheus!.volumes).toEqual(
      expect.arrayContaining(['./deploy/prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro']),
    );
    expect(prometheus.rule_files).toEqual(['/etc/prometheus/alerts.yml']);
    // The versions compose runs are the ones the tests build and run (dev/prometheus-tools.ts).
    expect(compose.services.prometheus!.image).toBe(
      `prom/prometheus:v${(await read('deploy/prometheus/prometheus-version')).trim()}`,
    );
    expect(compose.services.alertmanager!.image).toBe(
      `prom/alertmanager:v${(await read('deploy/alertmanager/alertmanager-version')).trim()}`,
    );
    expect(prometheus.alerting.alertmanagers[0]!.static_configs[0]!.targets).toEqual(['alertmanager:9093']);
    expect(compose.services.temporal!.environment!.TEMPORAL_METRICS_ADDRESS).toBe('0.0.0.0:8000');
  });

  it('Perses serves the on-call dashboard: provisioned from deploy/perses, read-only, on compose’s Prometheus, at the tested version', async () => {
    const compose = parse(await read('docker-compose.yml'), { merge: true }) as {
      services: Record<
        string,
        {
          image?: string;
          volumes?: string[];
          environment?: Record<string, string>;
          depends_on?: object;
          ports?: string[];
          tmpfs?: string[];
        }
      >;
    };
    const perses = compose.services.perses!;
    expect(perses.image).toBe(`persesdev/perses:v${(await read('deploy/perses/perses-version')).trim()}`);
    // The provisioning folder Perses reads is the one mounted from the repository, and it holds the dashboard.
    const folder = perses.environment!.PERSES_PROVISIONING_FOLDERS_0!;
    expect(perses.volumes).toContain(`./deploy/perses/provisioning:${folder}:ro`);
    expect((await fs.readdir(path.join(REPO, 'deploy/perses/provisioning'))).sort()).toEqual([
      'dashboard-on-call.json',
      'datasource-prometheus.json',
      'project.json',
    ]);
    // The files are the dashboard's source: the UI cannot edit what the next provisioning pass would overwrite.
    expect(perses.environment!.PERSES_SECURITY_READONLY).toBe('true');
    // Its database is a volume, and the plugins it unpacks at start land on a tmpfs (the root filesystem is read-only).
    expect(perses.volumes).toContain('perses:/perses');
    expect(perses.tmpfs).toEqual(expect.arrayContaining(['/tmp', '/etc/perses/plugins']));
    // The datasource's URL is compose's Prometheus, on the port it listens on.
    const datasource = JSON.parse(await read('deploy/perses/provisioning/datasource-prometheus.json')) as {
      spec: { plugin: { spec: { proxy: { spec: { url: string } } } } };
    };
    const url = new URL(datasource.spec.plugin.spec.proxy.spec.url);
    expect(Object.keys(compose.services)).toContain(url.hostname);
    expect(compose.services[url.hostname]!.ports).toContain(`127.0.0.1:${url.port}:${url.port}`);
    expect(Object.keys(perses.depends_on!)).toEqual([url.hostname]);
    // Published on loopback only, like every port, on one no other service takes.
    const published = Object.values(compose.services).flatMap((s) => s.ports ?? []);
    expect(perses.ports).toEqual(['127.0.0.1:8081:8080']);
    expect(published.filter((p) => p.startsWith('127.0.0.1:8081:'))).toHaveLength(1);
  });

  it('alert rules parse, page on exported metrics, and each links its runbook section by an absolute URL', async () => {
    const rules = (
      parse(await read('deploy/prometheus/alerts.yml')) as {
        groups: {
          rules: { alert: string; expr: string; labels: { severity: string }; annotations: { runbook_url: string } }[];
        }[];
      }
    ).groups.flatMap((g) => g.rules);
    const runbook = await read('docs/runbook.md');
    const { repository } = JSON.parse(await read('package.json')) as { repository: { url: string } };
    // The workers' metrics, the receivers' and the codec endpoint's counters.
    const exported = (
      await Promise.all(
        ['src/observability/metrics.ts', 'src/processor/receiver.ts', 'src/codec/codec-server.ts'].map(read),
      )
    )
      .join('\n')
      .match(/'hold_sweeper_\w+'/g)!
      .map((m) => m.slice(1, -1));
    expect(rules.map((r) => r.alert)).toEqual([
      'WorkersDown',
      'LedgerGaugesStale',
      'ReceiversDown',
      'TemporalDown',
      'CodecServerDown',
      'HoldReleaseBehind',
      'WebhookDeliveryBehind',
      'WebhooksQuarantined',
      'QuarantinePastPageAge',
      'QuarantineAbandoned',
      'MerchantEndpointDisabled',
      'MerchantRateLimited',
      'MerchantFailing',
      'DuplicateSends',
      'WebhookOutcomesUnknown',
      'SweepNotCompleting',
      'WorkflowTaskFailures',
      'WorkerSlotsFull',
      'ProcessorEventGap',
      'LedgerReviewsOpen',
      'ProcessorCallbacksRefused',
    ]);
    for (const rule of rules) {
      expect(['page', 'ticket']).toContain(rule.labels.severity);
      expect(runbook).toContain(`## ${rule.alert}`);
      expect(rule.annotations.runbook_url).toBe(
        `${repository.url}/blob/main/docs/runbook.md#${rule.alert.toLowerCase()}`,
      );
      // A counter is exposed with `_total` after the name it was made with.
      for (const metric of rule.expr.match(/hold_sweeper_\w+/g) ?? [])
        expect(
          exported.filter((e) => e === metric || `${e}_total` === metric),
          metric,
        ).toHaveLength(1);
    }
  });

  it('.env.example lists exactly the variables the config loader reads', async () => {
    const listed = [...(await read('.env.example')).matchAll(/^#?\s?([A-Z][A-Z0-9_]+)=/gm)].map((m) => m[1]);
    expect([...new Set(listed)].sort()).toEqual([...new Set([...CONFIG_VARIABLES, ...DEV_CONFIG_VARIABLES])].sort());
  });
});

/**
 * The images compose pulls, each with where its tag is listed, the programs it has (what an entrypoint, a command, a
 * script or a health check may run) and the environment its own entrypoint reads. An image missing here is one whose
 * tag nobody checked: `docker compose up` would stop at its pull. A version bump is a row to re-check here.
 */
const PULLED_IMAGES: Record<string, { listed: string; programs: string[]; variables?: readonly string[] }> = {
  // docker-library/postgres 16/bookworm: PostgreSQL's binaries on PATH; docker-entrypoint.sh reads POSTGRES_* and the
  // *_FILE form of each (its file_env), and runs /docker-entrypoint-initdb.d/*.sh.
  'postgres:16': {
    listed: 'https://hub.docker.com/_/postgres (tag 16), "Environment Variables"',
    programs: ['sh', 'cat', 'install', 'docker-entrypoint.sh', 'postgres', 'psql', 'pg_isready'],
    variables: [
      'POSTGRES_USER',
      'POSTGRES_PASSWORD',
      'POSTGRES_PASSWORD_FILE',
      'POSTGRES_DB',
      'POSTGRES_INITDB_ARGS',
      'POSTGRES_HOST_AUTH_METHOD',
      'PGDATA',
    ],
  },
  'busybox:1.36': { listed: 'https://hub.docker.com/_/busybox (tag 1.36)', programs: ['sh', 'httpd', 'wget'] },
  // Alpine-based: busybox's wget and sh beside dex.
  'ghcr.io/dexidp/dex:v2.45.1': {
    listed: 'https://github.com/dexidp/dex/pkgs/container/dex (v2.45.1, the release of that name)',
    programs: ['dex', 'sh', 'wget'],
  },
  // temporalio/docker-builds server.Dockerfile, which built the 1.29 images (on temporalio/base-server, Alpine):
  // temporal-server, tctl and the `temporal` CLI in /usr/local/bin; no sql tool, no schema (the admin-tools image's,
  // built here instead: deploy/temporal/server/Dockerfile). The configuration it renders is ours
  // (deploy/temporal/config.yaml, mounted), read below; Go reads SSL_CERT_FILE.
  'temporalio/server:1.29.1': {
    listed: 'https://hub.docker.com/r/temporalio/server/tags (1.29.1, the server release of that name)',
    programs: ['sh', 'cat', 'grep', 'temporal', 'temporal-server', 'tctl'],
    variables: ['SSL_CERT_FILE'],
  },
  // github.com/temporalio/ui-server/v2@v2.34.0: docker/config-template.yaml (what start-ui-server.sh renders) and Go's
  // SSL_CERT_FILE.
  'temporalio/ui:2.34.0': {
    listed: 'https://hub.docker.com/r/temporalio/ui/tags (2.34.0, the ui-server release of that name)',
    programs: ['sh', 'cat', 'curl', 'start-ui-server.sh'],
    variables: [
      'TEMPORAL_ADDRESS',
      'TEMPORAL_CORS_ORIGINS',
      'TEMPORAL_TLS_CA',
      'TEMPORAL_TLS_CERT',
      'TEMPORAL_TLS_KEY',
      'TEMPORAL_TLS_SERVER_NAME',
      'TEMPORAL_TLS_ENABLE_HOST_VERIFICATION',
      'TEMPORAL_AUTH_ENABLED',
      'TEMPORAL_AUTH_PROVIDER_URL',
      'TEMPORAL_AUTH_ISSUER_URL',
      'TEMPORAL_AUTH_CLIENT_ID',
      'TEMPORAL_AUTH_CLIENT_SECRET',
      'TEMPORAL_AUTH_CALLBACK_URL',
      'TEMPORAL_AUTH_SCOPES',
      'TEMPORAL_CODEC_ENDPOINT',
      'TEMPORAL_CODEC_PASS_ACCESS_TOKEN',
      'SSL_CERT_FILE',
    ],
  },
  // Built on quay.io/prometheus/busybox: busybox's wget and sh.
  'prom/prometheus:v3.14.0': {
    listed: 'https://hub.docker.com/r/prom/prometheus/tags (v3.14.0; deploy/prometheus/prometheus-version)',
    programs: ['prometheus', 'promtool', 'sh', 'wget'],
  },
  'prom/alertmanager:v0.31.1': {
    listed: 'https://hub.docker.com/r/prom/alertmanager/tags (v0.31.1; deploy/alertmanager/alertmanager-version)',
    programs: ['alertmanager', 'amtool', 'sh', 'wget'],
  },
  // Distroless: the binary alone. Every PERSES_<KEY> sets that key of its configuration (its documented rule).
  'persesdev/perses:v0.53.1': {
    listed: 'https://hub.docker.com/r/persesdev/perses/tags (v0.53.1; deploy/perses/perses-version)',
    programs: ['perses'],
    variables: ['PERSES_PROVISIONING_FOLDERS_0', 'PERSES_SECURITY_READONLY'],
  },
  // The Dockerfiles' bases.
  'node:24-bookworm-slim': {
    listed: 'https://hub.docker.com/_/node (24-bookworm-slim)',
    programs: ['node', 'npm', 'sh'],
  },
  'golang:1.25-bookworm': { listed: 'https://hub.docker.com/_/golang (1.25-bookworm)', programs: ['go', 'sh'] },
};

/**
 * The environment of programs the setup scripts run, as each documents it: the `temporal` CLI's global flags'
 * variables (`temporal <command> --help`, docs.temporal.io/cli "Environment variables"; the names in CLI 1.x's binary).
 * It reads a token from TEMPORAL_API_KEY alone, no file.
 */
const PROGRAM_VARIABLES: Record<string, readonly string[]> = {
  temporal: [
    'TEMPORAL_ADDRESS',
    'TEMPORAL_NAMESPACE',
    'TEMPORAL_API_KEY',
    'TEMPORAL_TLS',
    'TEMPORAL_TLS_CLIENT_CERT_PATH',
    'TEMPORAL_TLS_CLIENT_KEY_PATH',
    'TEMPORAL_TLS_CLIENT_CERT_DATA',
    'TEMPORAL_TLS_CLIENT_KEY_DATA',
    'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
    'TEMPORAL_TLS_SERVER_CA_CERT_DATA',
    'TEMPORAL_TLS_SERVER_NAME',
    'TEMPORAL_TLS_DISABLE_HOST_VERIFICATION',
    'TEMPORAL_CODEC_ENDPOINT',
    'TEMPORAL_CODEC_AUTH',
    'TEMPORAL_ENV',
    'TEMPORAL_PROFILE',
    'TEMPORAL_CONFIG_FILE',
  ],
};

/** The shell variables a script reads (`$X`, `${X...}`), its comments aside. */
const shellVariables = (script: string) =>
  [
    ...script
      .split('\n')
      .filter((line) => !line.trimStart().startsWith('#'))
      .join('\n')
      .matchAll(/\$\{?([A-Za-z_][A-Za-z0-9_]*)/g),
  ].map((m) => m[1]!);

/** Whether `sh -n` parses `script` (compose's `$$` is a `$` to the shell). */
async function shellParses(script: string): Promise<string | undefined> {
  try {
    await promisify(execFile)('sh', ['-n', '-c', script.replaceAll('$$', '$')]);
    return undefined;
  } catch (err) {
    return (err as { stderr?: string }).stderr?.trim() || (err as Error).message;
  }
}

/** The programs a shell text runs: the first word of each command of each pipeline (assignments and `exec` aside). */
const programsIn = (script: string) =>
  script
    .replaceAll('$$', '$')
    .split(/\|\||&&|[|;\n]/)
    .map((command) =>
      command
        .trim()
        .split(/\s+/)
        .filter((word) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(word) && word !== 'exec' && word !== '!'),
    )
    .filter((words) => words.length > 0 && words[0] !== '')
    .map((words) => words[0]!);

/**
 * What `docker compose up` would meet that can be found without Docker, service by service: an image no table lists, an
 * environment variable nothing in the container reads, a mounted file or script that does not exist or does not parse,
 * a program its image lacks, a health check on PostgreSQL's socket. `files` stands in for repository files (a defect
 * applied to a copy); `secretsDir` is where `npm run credentials` wrote ./deploy/secrets.
 */
async function composeProblems(
  text: string,
  secretsDir: string,
  files: Record<string, string> = {},
): Promise<string[]> {
  const compose = parse(text, { merge: true }) as Compose;
  const repoFile = (file: string) => files[path.normalize(file)] ?? read(file);
  const hostPath = (source: string) =>
    source.startsWith('./deploy/secrets')
      ? path.join(secretsDir, path.relative('./deploy/secrets', source))
      : path.join(REPO, source);
  const exists = (file: string) =>
    fs.access(file).then(
      () => true,
      () => false,
    );
  const problems: string[] = [];
  for (const [name, service] of Object.entries(compose.services)) {
    const build = service.build as string | { context: string } | undefined;
    const context = typeof build === 'string' ? build : build?.context;
    // The image: a tag the table lists, or one built here on a base the table lists.
    let image: { programs: string[]; variables: string[] };
    if (context !== undefined) {
      const dockerfile = await repoFile(path.join(context, 'Dockerfile'));
      const stages = dockerfile.split(/^(?=FROM )/m).filter((s) => s.startsWith('FROM '));
      for (const stage of stages) {
        const base = /^FROM (\S+)/.exec(stage)![1]!;
        if (!PULLED_IMAGES[base]) problems.push(`${name}: ${context}/Dockerfile builds on ${base}, which no row lists`);
      }
      const final = stages.at(-1)!;
      const base = PULLED_IMAGES[/^FROM (\S+)/.exec(final)![1]!];
      // What the final stage copies onto PATH.
      const copied = [...final.matchAll(/^COPY (?:--\S+ )*(.+) (\/usr\/local\/bin\/\S*)$/gm)].flatMap(([, from, to]) =>
        to!.endsWith('/') ? from!.split(' ').map((f) => path.basename(f)) : [path.basename(to!)],
      );
      image = { programs: [...(base?.programs ?? []), ...copied], variables: [...(base?.variables ?? [])] };
    } else {
      const pulled = PULLED_IMAGES[service.image as string];
      if (!pulled)
        problems.push(`${name}: image ${String(service.image)} is not a tag the table of published images lists`);
      image = { programs: [...(pulled?.programs ?? [])], variables: [...(pulled?.variables ?? [])] };
    }
    /** Whether the image has `program` (unknown for an image no row lists: its own problem above). */
    const has = (program: string) =>
      (context === undefined && !PULLED_IMAGES[service.image as string]) ||
      image.programs.includes(path.basename(program));
    // This repository's image reads its configuration through the loaders, and Node its CA variable.
    const reads = new Set<string>(context === '.' ? [...CONFIG_VARIABLES, 'NODE_EXTRA_CA_CERTS'] : image.variables);

    // The files it mounts exist; the scripts and templates among them are read for the variables they read.
    const mounts = ((service.volumes as string[] | undefined) ?? [])
      .map((v) => v.split(':'))
      .filter(([source]) => source!.startsWith('./'))
      .map(([source, target]) => ({ source: source!, target: target! }));
    const scripts: string[] = [];
    for (const { source, target } of mounts) {
      if (!(await exists(hostPath(source)))) problems.push(`${name}: mounts ${source}, which does not exist`);
      else if (/\.ya?ml$/.test(source))
        for (const m of (await repoFile(source)).matchAll(/env "([A-Z0-9_]+)"/g)) reads.add(m[1]!);
      // PostgreSQL's image runs what is mounted in its init directory.
      else if (source.endsWith('.sh') && target.startsWith('/docker-entrypoint-initdb.d/'))
        scripts.push(await repoFile(source));
    }
    /** The host file behind a path in the container, through the service's mounts. */
    const onHost = (file: string) => {
      const mount = mounts.find(({ target }) => file === target || file.startsWith(`${target}/`));
      return mount && path.join(mount.source, path.relative(mount.target, file));
    };
    // Entrypoint and command: the program exists in the image; a script exists and parses; inline shell parses.
    const run = [
      ...((service.entrypoint as string[] | undefined) ?? []),
      ...((service.command as string[] | undefined) ?? []),
    ];
    const first = run[0];
    if (first !== undefined && !first.startsWith('-') && !has(first))
      problems.push(`${name}: runs ${first}, which its image does not have`);
    if (first !== undefined && ['sh', '/bin/sh'].includes(first)) {
      if (run[1] === '-c') {
        const error = await shellParses(run[2]!);
        if (error) problems.push(`${name}: its shell command does not parse: ${error}`);
        scripts.push(run[2]!.replaceAll('$$', '$'));
        for (const program of programsIn(run[2]!))
          if (!has(program) && !['export', 'cd'].includes(program))
            problems.push(`${name}: runs ${program}, which its image does not have`);
      } else {
        const host = onHost(run[1]!);
        if (!host || !(await exists(hostPath(host)))) problems.push(`${name}: runs ${run[1]}, which is not mounted`);
        else {
          const script = await repoFile(host);
          const error = await shellParses(script);
          if (error) problems.push(`${name}: ${host} does not parse: ${error}`);
          scripts.push(script);
        }
      }
    }
    for (const script of scripts) {
      for (const variable of shellVariables(script)) reads.add(variable);
      // The programs it runs read theirs.
      const code = script
        .split('\n')
        .filter((line) => !line.trimStart().startsWith('#'))
        .join('\n');
      for (const [program, variables] of Object.entries(PROGRAM_VARIABLES))
        if (new RegExp(`\\b${program}\\b`).test(code)) for (const variable of variables) reads.add(variable);
    }
    for (const variable of Object.keys(service.environment ?? {}))
      if (!reads.has(variable)) problems.push(`${name} sets ${variable}, which nothing it runs reads`);
    // A path its environment names inside a mount exists on the host.
    for (const [variable, value] of Object.entries(service.environment ?? {})) {
      const host = typeof value === 'string' && value.startsWith('/') ? onHost(value) : undefined;
      if (host && !(await exists(hostPath(host))))
        problems.push(`${name} ${variable} names ${value}, which does not exist (${host})`);
      for (const secret of mountsNamedIn(String(value)))
        if (!(service.secrets ?? []).includes(secret))
          problems.push(`${name} ${variable} names /run/secrets/${secret}, which it does not mount`);
    }
    // The health check: programs the image has, a shell text that parses, PostgreSQL asked over TCP.
    const check = (service.healthcheck as { test?: string[] } | undefined)?.test;
    if (check) {
      const shell = check[0] === 'CMD-SHELL' ? check.slice(1).join(' ') : undefined;
      if (shell !== undefined) {
        const error = await shellParses(shell);
        if (error) problems.push(`${name}: its health check does not parse: ${error}`);
      }
      const programs = shell !== undefined ? programsIn(shell) : [check[1]!];
      for (const program of programs)
        if (!has(program)) problems.push(`${name}: its health check runs ${program}, which its image does not have`);
      const words = shell !== undefined ? shell.split(/\s+/) : check;
      if (programs.some((p) => p === 'pg_isready' || p === 'psql') && !words.includes('-h'))
        problems.push(
          `${name}: its health check asks PostgreSQL on the socket, which the image's initialisation server answers before it restarts: ask over TCP (-h 127.0.0.1)`,
        );
    }
  }
  return problems;
}

describe('docker-compose.yml, checked by execution where it can be without Docker', () => {
  it('every image is a listed tag or built here; every variable is read, every file and script exists and parses, every health check runs a program its image has', async () => {
    expect(await composeProblems(await read('docker-compose.yml'), secretsDir)).toEqual([]);
  });

  it('a host with Docker brings it up: the workflow builds, waits for every health check, runs the smoke test, tears down', async () => {
    const workflow = parse(await read('.github/workflows/compose.yml')) as {
      jobs: Record<string, { steps: { run?: string; uses?: string; if?: string }[] }>;
    };
    const runs = Object.values(workflow.jobs)[0]!.steps.map((s) => s.run ?? s.uses ?? '');
    const at = (pattern: RegExp) => runs.findIndex((r) => pattern.test(r));
    const order = [
      /^npm ci$/,
      /^npm run credentials$/,
      /docker compose up --wait .*--build/,
      /^npx tsx test\/compose-smoke\.ts$/,
      /^docker compose down -v$/,
    ].map(at);
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    await expect(fs.access(path.join(REPO, 'test/compose-smoke.ts'))).resolves.toBeUndefined();
    // Torn down whatever happened before.
    expect(Object.values(workflow.jobs)[0]!.steps.at(-1)).toMatchObject({
      if: 'always()',
      run: 'docker compose down -v',
    });
  });

  it('finds each defect compose has had: an image tag not published, a token file the CLI does not read, a database reported ready on its socket', async () => {
    const text = await read('docker-compose.yml');
    // The admin-tools image has no tag 1.29.1 (its builds are 1.29.1-tctl-<v>-cli-<v>).
    const adminTools = text.replace(
      /(temporal-setup:\n(?:.*\n)*?) {4}build: \.\/deploy\/temporal\/server\n {4}image: hold-sweeper-temporal:1\.29\.1\n/,
      '$1    image: temporalio/admin-tools:1.29.1\n',
    );
    expect(adminTools).not.toBe(text);
    expect(await composeProblems(adminTools, secretsDir)).toContain(
      'temporal-setup: image temporalio/admin-tools:1.29.1 is not a tag the table of published images lists',
    );
    // The setup script that passed the token file to a CLI that reads a token from TEMPORAL_API_KEY only.
    const script = await read('deploy/temporal/setup-namespaces.sh');
    const noFile = script.replace(/^if \[ -n "\$\{TEMPORAL_API_KEY_FILE:-\}" \]; then\n(?:.*\n)*?fi\n/m, '');
    expect(noFile).not.toBe(script);
    expect(await composeProblems(text, secretsDir, { 'deploy/temporal/setup-namespaces.sh': noFile })).toContain(
      'temporal-setup sets TEMPORAL_API_KEY_FILE, which nothing it runs reads',
    );
    // pg_isready on the socket: true while the image's initialisation server runs.
    const onSocket = text.replace(
      /test: \['CMD', 'pg_isready', '-h', '127\.0\.0\.1', '-p', '5432', '-U', 'postgres', '-d', 'postgres'\]/,
      "test: ['CMD-SHELL', 'pg_isready -U postgres']",
    );
    expect(onSocket).not.toBe(text);
    expect(await composeProblems(onSocket, secretsDir)).toEqual([
      "ledger-db: its health check asks PostgreSQL on the socket, which the image's initialisation server answers before it restarts: ask over TCP (-h 127.0.0.1)",
    ]);
    // And what else it finds: a script that does not parse, a program the image lacks, a file that is not there.
    const broken = text
      .replace("entrypoint: ['dex', 'serve',", "entrypoint: ['dexd', 'serve',")
      .replace('./deploy/postgres/pg_hba.conf:/etc/postgresql/pg_hba.conf:ro', './deploy/postgres/nothing.conf:/x:ro');
    expect(await composeProblems(broken, secretsDir)).toEqual(
      expect.arrayContaining([
        'dex: runs dexd, which its image does not have',
        'temporal-db: mounts ./deploy/postgres/nothing.conf, which does not exist',
      ]),
    );
    expect(
      await composeProblems(text, secretsDir, {
        'deploy/temporal/setup-schema.sh': `${await read('deploy/temporal/setup-schema.sh')}\nif then\n`,
      }),
    ).toEqual([expect.stringMatching(/^temporal-schema: deploy\/temporal\/setup-schema\.sh does not parse/)]);
  });
});
