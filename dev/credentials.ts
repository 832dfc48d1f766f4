/**
 * Everything docker-compose.yml needs that must not be in the repository, and the files that hold it: one CA and its
 * certificates (Temporal's frontend and nodes, each caller's client certificate, the databases', Dex's and the codec
 * endpoint's server certificates), a signing key's JWKS and a token per service calling Temporal, every database
 * password and the URL each service connects with, the payload and merchant-secret key rings, the processor's
 * signing secrets, and Dex's configuration (its clients' secrets, the demo users' password hashes). `npm run
 * credentials` writes them (dev/bin/credentials.ts); compose mounts each file with `secrets:` into the containers
 * that use it, read through a `*_FILE` or `*_PATH` variable. docs/security.md has the callers' table. Production
 * brings its own CA, identity provider and key management: the callers and their permissions are what carries over.
 *
 * Modes: the directory is 0700 and each file 0644. Compose (without swarm) bind-mounts a file secret as it is on the
 * host, with the host's owner and mode (`uid`, `gid` and `mode` of the long syntax are not applied to file secrets),
 * and the containers run as different users (node 1000, postgres 999, dex 1001): a file only its host owner may
 * read would be unreadable in most of them. So the directory is the lock on the host, and inside a container a
 * file is there only if the service is granted it.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import bcrypt from 'bcryptjs';
import { stringify } from 'yaml';
import { adminAudience, CODEC_AUDIENCE } from '../src/contracts/identity.js';
import { REGIONS } from '../src/contracts/regions.js';
import { SERVICE_ROLES } from '../src/db/roles.js';
import { createClusterPki } from './pki.js';
import { createTokenSigner, serviceSubject, TEMPORAL_AUDIENCE, type ServiceCaller } from './token-issuer.js';

interface Caller {
  /** The client certificate's name (client-<name>.pem) and the token's file (<name>.token). */
  name: string;
  /**
   * The token's subject. A service's names its caller in deploy/temporal/server/cluster-rights.json before the @
   * (serviceSubject): the cluster allows it that caller's methods, in the namespaces its permissions name.
   */
  subject: string;
  /** Temporal's permissions claim; none: a certificate only (the Web UI server forwards each user's own token). */
  permissions: readonly string[];
  who: string;
}

const SERVICE_WHO: Record<ServiceCaller, string> = {
  worker: 'worker',
  receiver: 'processor receiver',
  'admin-api': 'admin API (operators’ verbs on their verified behalf)',
};

/** Every caller of the compose stack's Temporal and what it may do there. */
export const COMPOSE_CALLERS: readonly Caller[] = [
  {
    name: 'temporal-setup',
    subject: 'temporal-setup@hold-sweeper',
    permissions: ['temporal-system:admin'],
    who: 'the one-shot setup: namespaces, search attributes',
  },
  // A service per region: its token's subject names the service, its permissions the region's namespace.
  ...(['worker', 'receiver', 'api'] as const).flatMap((prefix) =>
    REGIONS.map((region): Caller => {
      const service: ServiceCaller = prefix === 'api' ? 'admin-api' : prefix;
      const namespace = `hold-sweeper-${region}`;
      return {
        name: `${prefix}-${region}`,
        subject: serviceSubject(service, namespace),
        permissions: [`${namespace}:write`],
        who: `the ${region.toUpperCase()} ${SERVICE_WHO[service]}`,
      };
    }),
  ),
  {
    name: 'operator',
    subject: 'operator@hold-sweeper',
    permissions: REGIONS.map((region) => `hold-sweeper-${region}:admin`),
    who: 'an operator and the deploy step (npm run promote): the ops CLI, the temporal CLI',
  },
  {
    name: 'on-call',
    subject: 'on-call@hold-sweeper',
    permissions: REGIONS.map((region) => `hold-sweeper-${region}:read`),
    who: 'on-call, reading: the Web UI, the temporal CLI',
  },
  {
    name: 'web-ui',
    subject: '',
    permissions: [],
    who: 'the Web UI server (its certificate; each request carries its user token)',
  },
];

/**
 * Compose's identity provider (Dex). Its issuer's host is `dex.localhost`: browsers resolve every `*.localhost` name to
 * the loopback address Dex is published on, and inside compose it is Dex's network alias, so the browser and the
 * containers reach one issuer URL.
 */
export const COMPOSE_DEX = {
  issuer: 'https://dex.localhost:5556/dex',
  hostname: 'dex.localhost',
  /** The claim Dex puts a user's groups in: hold-sweeper's roles and Temporal's permissions, both read from it. */
  groupsClaim: 'groups',
  webUiClient: 'temporal-ui',
  webUiCallback: 'http://localhost:8080/auth/sso/callback',
  /** The operators' command-line client (device flow, or a password for the demo users): no secret. */
  cliClient: 'hold-sweeper-cli',
} as const;

/**
 * The demo's people, signing in to the Web UI, the admin APIs and the codec endpoint through Dex. Each one's groups
 * hold hold-sweeper's roles (`operator`, `us:viewer`: src/contracts/identity.ts) and Temporal's permissions
 * (`hold-sweeper-us:admin`); each reader ignores the other's.
 */
export const DEMO_USERS = [
  {
    name: 'operator',
    groups: ['operator', 'hold-sweeper-us:admin', 'hold-sweeper-eu:admin'],
    who: 'runs every verb, encodes and decodes; Temporal admin of both namespaces',
  },
  {
    name: 'approver',
    groups: ['approver', 'hold-sweeper-us:read', 'hold-sweeper-eu:read'],
    who: 'the second pair of eyes on replays and skips; reads Temporal',
  },
  {
    name: 'merchant-admin',
    groups: ['merchant-admin', 'hold-sweeper-us:read', 'hold-sweeper-eu:read'],
    who: 'manages merchants; reads Temporal',
  },
  {
    name: 'on-call',
    groups: ['viewer', 'hold-sweeper-us:read', 'hold-sweeper-eu:read'],
    who: 'reads: the ledger through the admin API, payloads through the codec, the Web UI',
  },
] as const;

/** The ledger's services and the role each connects as (docker-compose.yml's `ledger-url-<service>-<region>`). */
const LEDGER_SERVICES = {
  migrator: SERVICE_ROLES.migrator,
  worker: SERVICE_ROLES.worker,
  receiver: SERVICE_ROLES.receiver,
  ops: SERVICE_ROLES.ops,
  'merchant-api': SERVICE_ROLES.merchantApi,
} as const;

const secret = (bytes = 24) => randomBytes(bytes).toString('base64url');
const keyRing = () => `k1:${randomBytes(32).toString('base64')}`;

/** Dex's configuration for compose: its clients, the audiences they ask for, the demo users (with these hashes). */
function dexConfig(clientSecrets: Record<string, string>, users: { name: string; hash: string; groups: string[] }[]) {
  const { issuer, webUiClient, webUiCallback, cliClient } = COMPOSE_DEX;
  // An audience is a client of Dex's that trusts the clients allowed to ask for tokens with it in `aud`.
  const audience = (id: string, trustedPeers: string[]) => ({ id, name: id, secret: clientSecrets[id], trustedPeers });
  return {
    issuer,
    storage: { type: 'memory' },
    web: { https: '0.0.0.0:5556', tlsCert: '/run/secrets/dex.pem', tlsKey: '/run/secrets/dex.key' },
    telemetry: { http: '0.0.0.0:5558' },
    logger: { level: 'info', format: 'json' },
    expiry: { idTokens: '1h', refreshTokens: { validIfNotUsedFor: '24h', absoluteLifetime: '168h' } },
    oauth2: {
      skipApprovalScreen: true,
      responseTypes: ['code'],
      grantTypes: ['authorization_code', 'refresh_token', 'password', 'urn:ietf:params:oauth:grant-type:device_code'],
      // The password grant (the demo users, from a terminal) checks the static passwords below.
      passwordConnector: 'local',
    },
    enablePasswordDB: true,
    staticPasswords: users.map((u) => ({
      email: `${u.name}@hold-sweeper.localhost`,
      username: u.name,
      userID: u.name,
      hash: u.hash,
      groups: u.groups,
    })),
    staticClients: [
      {
        id: webUiClient,
        name: 'Temporal Web UI',
        secret: clientSecrets[webUiClient],
        redirectURIs: [webUiCallback],
      },
      { id: cliClient, name: 'hold-sweeper operators', public: true },
      // The Web UI forwards its user's token to Temporal and to the codec endpoint: one token, both audiences.
      audience(TEMPORAL_AUDIENCE, [webUiClient, cliClient]),
      audience(CODEC_AUDIENCE, [webUiClient, cliClient]),
      ...REGIONS.map((region) => audience(adminAudience(region), [cliClient])),
    ],
  };
}

/**
 * Writes compose's credentials into `dir` (which must not hold any yet; made 0700): pki/, jwks/, tokens/ (the files
 * the locked Temporal needs), db/ (passwords, and each service's ledger URL with its password, over TLS), keys/ (key
 * rings, signing secrets), dex/ (Dex's configuration, the Web UI's client secret, and demo-users.txt: the demo users'
 * passwords, for the person at the host only). Certificates and tokens are valid for `validDays`; the signing key is
 * not kept: run it again into an empty directory to renew everything.
 */
export async function writeComposeCredentials(
  dir: string,
  validDays: number,
): Promise<{ callers: readonly Caller[]; users: { name: string; password: string }[] }> {
  const existing = await fs.readdir(dir).catch(() => []);
  if (existing.length > 0) throw new Error(`${dir} is not empty: move it away to issue new credentials`);
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  await fs.chmod(dir, 0o700);
  const write = async (file: string, content: string) => {
    await fs.mkdir(path.dirname(path.join(dir, file)), { recursive: true, mode: 0o700 });
    await fs.writeFile(path.join(dir, file), content);
  };

  const pki = await createClusterPki(path.join(dir, 'pki'), { validDays });
  await pki.server('ledger-db', ['ledger-db']);
  await pki.server('temporal-db', ['temporal-db']);
  await pki.server('dex', [COMPOSE_DEX.hostname, 'dex']);
  // The browser calls the codec endpoint at https://localhost:8888 (the Web UI sends a user's token only to https).
  await pki.server('codec', ['localhost', 'codec']);

  const signer = await createTokenSigner('hold-sweeper-compose', COMPOSE_DEX.groupsClaim);
  await write('jwks/.well-known/jwks.json', JSON.stringify(signer.jwks, null, 2));
  for (const caller of COMPOSE_CALLERS) {
    await pki.client(caller.name);
    if (caller.permissions.length === 0) continue;
    const token = await signer.token(caller.subject, caller.permissions, { expiresIn: `${validDays}d` });
    await write(`tokens/${caller.name}.token`, token);
  }

  await write('db/ledger-admin-password', secret());
  await write('db/temporal-db-password', secret());
  for (const [service, role] of Object.entries(LEDGER_SERVICES)) {
    const password = secret();
    await write(`db/ledger-${service}-password`, password);
    for (const region of REGIONS) {
      await write(
        `db/ledger-url-${service}-${region}`,
        `postgres://${role}:${password}@ledger-db:5432/hold_sweeper_${region}?sslmode=verify-full&sslrootcert=/run/secrets/ca.pem`,
      );
    }
  }
  for (const region of REGIONS) {
    await write(`keys/payload-keys-${region}`, keyRing());
    await write(`keys/merchant-secret-keys-${region}`, keyRing());
    // The processor gives its own at onboarding: replace this one with it.
    await write(`keys/processor-signing-secret-${region}`, `whsec_${randomBytes(32).toString('base64')}`);
  }

  const clientSecrets = Object.fromEntries(
    [COMPOSE_DEX.webUiClient, TEMPORAL_AUDIENCE, CODEC_AUDIENCE, ...REGIONS.map(adminAudience)].map((id) => [
      id,
      secret(),
    ]),
  );
  await write('dex/temporal-ui-client-secret', clientSecrets[COMPOSE_DEX.webUiClient]!);
  const users = DEMO_USERS.map((u) => ({ ...u, groups: [...u.groups], password: secret(12) }));
  await write(
    'dex/dex-config.yaml',
    stringify(
      dexConfig(
        clientSecrets,
        users.map((u) => ({ ...u, hash: bcrypt.hashSync(u.password, 10) })),
      ),
    ),
  );
  await write('dex/demo-users.txt', users.map((u) => `${u.name}@hold-sweeper.localhost ${u.password}\n`).join(''));

  await readableInContainers(dir);
  return { callers: COMPOSE_CALLERS, users: users.map(({ name, password }) => ({ name, password })) };
}

/**
 * Every file 0644, every directory 0700 (the module's comment says why). Two exceptions: demo-users.txt is for no
 * container (0600), and jwks/ is public and mounted as a directory, which the jwks service must enter (0755).
 */
async function readableInContainers(dir: string): Promise<void> {
  for (const entry of await fs.readdir(dir, { recursive: true, withFileTypes: true })) {
    const file = path.join(entry.parentPath, entry.name);
    const jwks = path.relative(dir, file).startsWith('jwks');
    if (entry.isDirectory()) await fs.chmod(file, jwks ? 0o755 : 0o700);
    else await fs.chmod(file, entry.name === 'demo-users.txt' ? 0o600 : 0o644);
  }
}
