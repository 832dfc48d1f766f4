/**
 * The production path, end to end: the Temporal server production runs (deploy/temporal/server-version, 4 history
 * shards on PostgreSQL, the config and setup scripts docker-compose.yml uses, started by dev/temporal-cluster.ts)
 * and the production entry point (`src/bin/worker.ts`, HOLD_SWEEPER_MODE=production: payload encryption, https
 * merchants only) as two worker processes. A small night with faults (503s, a 429 with Retry-After, a merchant
 * dropping connections, one rejecting everything, a worker SIGKILLed mid-night), then the invariant checker; and the
 * Web UI server (compose's version) answers from the cluster.
 *
 * The server and its sql tool are built from the Go module proxy the first time (minutes) and cached outside the
 * clone (HOLD_SWEEPER_CACHE_DIR); later runs start the cluster in seconds.
 */
import { execFile } from 'node:child_process';
import http2 from 'node:http2';
import https from 'node:https';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { msToTs } from '@temporalio/common/lib/time.js';
import pg from 'pg';
import { chromium } from 'playwright-core';
import { generate } from 'selfsigned';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { accountTotals, checkBalanced, checkInvariants } from '../../bench/invariants.js';
import { FakeProcessor, planCallbacks, sendCallbacks } from '../../dev/fake-processor.js';
import { startReceiverProcess, type ReceiverProcess } from '../../dev/receiver-process.js';
import { insertHolds, seededRandom } from '../../dev/seed.js';
import { generateSigningSecret } from '../../src/delivery/standard-webhooks.js';
import { loadDevConfig } from '../../dev/dev-config.js';
import { freePort } from '../../dev/embedded-postgres.js';
import { FakeMerchants } from '../../dev/fake-merchants.js';
import { ensureChromium } from '../../dev/chromium.js';
import { ANYONE, CLUSTER_RIGHTS, mayCall, type RightsService } from '../../dev/cluster-rights.js';
import { COMPOSE_CALLERS } from '../../dev/credentials.js';
import { CLUSTER_SERVER_NAME, createClusterPki, type CertificateFiles, type ClusterPki } from '../../dev/pki.js';
import {
  lockedClusterTls,
  obtainTemporalServer,
  startTemporalCluster,
  temporalServerVersion,
  type TemporalCluster,
} from '../../dev/temporal-cluster.js';
import { startTokenIssuer, type TokenIssuer } from '../../dev/token-issuer.js';
import { keyRingVariable, startWorkerProcesses, type WorkerProcesses } from '../../dev/worker-processes.js';
import { dataConverterFor } from '../../src/codec/encryption-codec.js';
import { loadConfig, type RegionConfig } from '../../src/config.js';
import { ADMIN_VERBS, type AdminVerb } from '../../src/operations/admin-verbs.js';
import { adminAudience } from '../../src/contracts/identity.js';
import { ensureSweepSchedule } from '../../src/schedules.js';
import { startDevOidcProvider } from '../../dev/oidc-provider.js';
import { requestFor, startApiProcess } from '../support/admin-api.js';
import { connectClient, keepApiKeyFresh, loadTemporalConnectionSettings } from '../../src/temporal-connection.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { discardSignal, statusQuery } from '../../src/contracts/messages.js';
import { openHarness } from '../support/harness.js';
import { holdWorkflowIdOf, recordedDecision, seedNight } from '../support/ledger.js';
import { TEST_SECRET_KEYS } from '../support/secrets.js';
import { temporalCli } from '../support/temporal-cli.js';
import { bundleVariant, quarantineUpsertedFirst, type Edit } from '../support/variant.js';

const REPO = path.resolve(import.meta.dirname, '../..');
const id = randomBytes(4).toString('hex');
const NAMESPACE = 'hold-sweeper-us';
const TASK_QUEUE = `c-${id}-us`;
let dir: string;
let cluster: TemporalCluster | undefined;
let admin: pg.Client;
let ledger: pg.Pool;
let ledgerUrl: string;
let merchants: FakeMerchants;
let caFile: string;
let workers: WorkerProcesses | undefined;
/** The production worker's environment: encrypted payloads, https merchants (trusted by their CA). */
const PAYLOAD_KEYS = [{ id: 'k1', key: randomBytes(32) }];
/** A client of the cluster that encrypts and decrypts as the workers do. */
const encryptedClient = (conn: Connection) =>
  new Client({
    connection: conn,
    namespace: NAMESPACE,
    dataConverter: dataConverterFor({
      namespace: NAMESPACE,
      payloadKeys: PAYLOAD_KEYS,
    }),
  });
let pki: ClusterPki;
let issuer: TokenIssuer;
/**
 * Each caller's identity on the locked cluster: its client certificate and its token (a file, as production mounts it).
 */
interface Identity {
  cert: CertificateFiles;
  token: string;
  tokenFile: string;
}
const identities = new Map<string, Identity>();
async function identity(name: string, permissions: readonly string[]): Promise<Identity> {
  const known = identities.get(name);
  if (known) return known;
  const token = await issuer.token(`${name}@hold-sweeper`, permissions);
  const tokenFile = path.join(dir, `${name}.token`);
  await fs.writeFile(tokenFile, token, { mode: 0o600 });
  const made = { cert: await pki.client(name), token, tokenFile };
  identities.set(name, made);
  return made;
}
/**
 * The callers of the locked cluster and the permissions each holds (docs/security.md): a service's token names it by its
 * subject (`worker@hold-sweeper`), a person's by its role.
 */
const operator = () => identity('operator', [`${NAMESPACE}:admin`]);
const worker = () => identity('worker', [`${NAMESPACE}:write`]);
const receiverIdentity = () => identity('receiver', [`${NAMESPACE}:write`]);
const adminApi = () => identity('admin-api', [`${NAMESPACE}:write`]);
const onCall = () => identity('on-call', [`${NAMESPACE}:read`]);
/**
 * The TEMPORAL_* variables of a process with `who`'s identity (src/temporal-connection.ts reads them, so does the CLI).
 */
const temporalEnv = (who: Identity): Record<string, string> => ({
  TEMPORAL_ADDRESS: cluster!.address,
  TEMPORAL_TLS_SERVER_CA_CERT_PATH: pki.ca,
  TEMPORAL_TLS_SERVER_NAME: CLUSTER_SERVER_NAME,
  TEMPORAL_TLS_CLIENT_CERT_PATH: who.cert.cert,
  TEMPORAL_TLS_CLIENT_KEY_PATH: who.cert.key,
  TEMPORAL_API_KEY_FILE: who.tokenFile,
});
/** An in-process connection with `who`'s identity. */
const connectAs = async (who: Identity) =>
  Connection.connect({ address: cluster!.address, tls: await lockedClusterTls(pki, who.cert), apiKey: who.token });
/** The CLI's environment with `who`'s identity (the CLI takes the key as TEMPORAL_API_KEY, not a file). */
const cliEnv = (who: Identity) => {
  const { TEMPORAL_API_KEY_FILE: _file, ...env } = temporalEnv(who);
  return { ...env, TEMPORAL_API_KEY: who.token };
};
/**
 * The ledger as `service`'s database role (production refuses the superuser the test itself uses), over TLS with the
 * server's certificate checked (production refuses anything less).
 */
const ledgerAs = (service: 'worker' | 'receiver' | 'ops') =>
  `${inject('ledgerRoleUrls')[service]}c_${id}_us${inject('postgresTlsQuery')}`;
const workerEnv = (who: Identity, service: 'worker' | 'ops' = 'worker'): Record<string, string> => ({
  HOLD_SWEEPER_MODE: 'production',
  HOLD_SWEEPER_REGIONS: 'us',
  ...temporalEnv(who),
  DATABASE_URL_US: ledgerAs(service),
  PAYLOAD_KEYS_US: keyRingVariable(PAYLOAD_KEYS),
  // What seedNight seals the ledger's merchant secrets with (its default ring): the workers open with the same.
  MERCHANT_SECRET_KEYS_US: keyRingVariable(TEST_SECRET_KEYS),
  TASK_QUEUE_US: TASK_QUEUE,
  SCHEDULE_ID_US: `c-${id}-sweep-us`,
  SWEEP_INTERVAL: '24h',
  WORKFLOW_BUNDLE_PATH: inject('workflowBundlePath'),
  WEBHOOK_TRUSTED_NETWORKS: '127.0.0.1/32',
  WEBHOOK_ALLOWED_PORTS: String(merchants.port),
  NODE_EXTRA_CA_CERTS: caFile,
});
/** `npm run <bin> -- <args>` as its own process, with `who`'s identity (exit code and output; never rejects). */
const run = (bin: 'ops' | 'promote', who: Identity, ...args: string[]) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', path.join(REPO, `src/bin/${bin}.ts`), ...args],
      { env: { ...process.env, ...workerEnv(who, 'ops') }, timeout: 120_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
const ops = (who: Identity, ...args: string[]) => run('ops', who, ...args);
let receiver: ReceiverProcess | undefined;
let connection: Connection | undefined;

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-cluster-'));
  const dev = loadDevConfig();
  // The cluster locked as production should be: mTLS on the frontend, TLS between its nodes, every call authorized.
  pki = await createClusterPki(path.join(dir, 'pki'));
  issuer = await startTokenIssuer();
  cluster = await startTemporalCluster({
    security: {
      pki,
      jwksUrl: issuer.jwksUrl,
      adminToken: await issuer.token('cluster-admin@hold-sweeper', ['temporal-system:admin']),
    },
    shards: 4,
    postgresUrl: `${inject('postgresUrlBase')}postgres`,
    databasePrefix: `temporal_c${id}`,
    namespaces: [NAMESPACE],
    cliPath: inject('temporalCliPath'),
    cacheDir: dev.cacheDir,
    dataDir: dir,
    ui: { port: await freePort() },
  });
  admin = new pg.Client({ connectionString: `${inject('postgresUrlBase')}postgres` });
  await admin.connect();
  await admin.query(`CREATE DATABASE c_${id}_us TEMPLATE ${pg.escapeIdentifier(inject('templateDatabase'))}`);
  ledgerUrl = `${inject('postgresUrlBase')}c_${id}_us`;
  ledger = new pg.Pool({ connectionString: ledgerUrl, max: 5 });
  // Production mode sends over https only: the merchants get a certificate the workers trust (NODE_EXTRA_CA_CERTS).
  const tls = await generate([{ name: 'commonName', value: '127.0.0.1' }], {
    keySize: 2048,
    algorithm: 'sha256',
    extensions: [{ name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] }],
  });
  caFile = path.join(dir, 'merchants-ca.pem');
  await fs.writeFile(caFile, tls.cert);
  merchants = new FakeMerchants();
  await merchants.start(0, { key: tls.private, cert: tls.cert });
}, 900_000);

afterAll(async () => {
  await receiver?.stop();
  await workers?.stop();
  await connection?.close();
  await merchants?.stop();
  await ledger?.end();
  await cluster?.stop();
  await issuer?.stop();
  await admin?.end();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

it('the production worker on the production Temporal (4 shards on PostgreSQL): a night with faults, every invariant holding', async () => {
  const version = await temporalServerVersion();
  // What the cluster is, asked with the platform team's cluster-wide read token (`temporal-system:read`).
  const platform = await connectAs(await identity('platform', ['temporal-system:read']));
  const info = await platform.workflowService.getClusterInfo({});
  await platform.close();
  expect(info.serverVersion).toBe(version);
  expect(info.historyShardCount).toBe(4);
  expect(info.persistenceStore).toBe('postgres12');
  connection = await connectAs(await operator());

  const night = await seedNight(ledger, 'us', `c${id}`, { expired: 60, merchants: 6, defective: true }, merchants);
  const m = night.merchantIds;
  // A row whose id (230 characters) makes a workflow id past the cluster's limit.maxIDLength of 255: among good rows of
  // one page, it must be rejected, not fail every start of its batch (and every later sweep at the same page).
  const longId = `h_c${id}_${'x'.repeat(230 - `h_c${id}_`.length)}`;
  await insertHolds(ledger, [{ ...night.expired[0]!, id: longId }]);
  const script = (merchant: string, responses: Parameters<FakeMerchants['script']>[1]['responses']) =>
    merchants.script(merchant, { secrets: [night.secrets.get(merchant)!], responses });
  script(m[1]!, [{ status: 503 }, { status: 503 }, { status: 200 }]);
  script(m[2]!, [{ status: 429, retryAfter: '1' }, { status: 200 }]);
  script(m[3]!, [{ status: 400 }]);
  script(m[4]!, [{ close: true }, { status: 200 }]);
  // Short backoff so the faulty merchants settle within the test; the policy itself is the real one.
  await ledger.query(`UPDATE merchants SET delivery_policy = '{"initialBackoffMs": 500, "maxBackoffMs": 5000}'`);

  workers = await startWorkerProcesses(2, workerEnv(await worker()));
  // The deploy step makes their build current and applies the schedules, with the namespace admin's credential
  // (docs/deploys.md): a worker's is refused at once, and changes neither.
  const client = encryptedClient(connection);
  const asWorker = await run('promote', await worker());
  expect(asWorker.code, asWorker.stderr).toBe(1);
  expect(asWorker.stderr + asWorker.stdout).toMatch(/PERMISSION_DENIED|Request unauthorized/);
  await expect(client.schedule.getHandle(`c-${id}-sweep-us`).describe()).rejects.toThrow(/not found/i);
  const promoted = await run('promote', await operator());
  expect(promoted, promoted.stderr).toMatchObject({ code: 0 });
  expect(promoted.stdout).toContain('"outcome":"made-current"');
  expect((await client.schedule.getHandle(`c-${id}-sweep-us`).describe()).action).toMatchObject({
    workflowType: 'sweepExpiredHolds',
    taskQueue: TASK_QUEUE,
  });
  const sweep = await client.workflow.start(sweepExpiredHolds, {
    taskQueue: TASK_QUEUE,
    workflowId: `sweep-${id}`,
    args: [{ region: 'us', pageSize: 15, releaseWaitMs: 30_000 }],
  });
  // A worker dies mid-night (no drain) and comes back.
  await expect
    .poll(
      async () => (await ledger.query(`SELECT count(*)::int AS n FROM auth_holds WHERE state = 'released'`)).rows[0].n,
      { timeout: 60_000 },
    )
    .toBeGreaterThan(10);
  workers.kill(0);
  await workers.restart(0);
  const result = await sweep.result();
  expect(result).toMatchObject({ found: 65, rejected: 5 });
  const { rows: unusable } = await ledger.query('SELECT state, reject_code FROM auth_holds WHERE id = $1', [longId]);
  expect(unusable).toEqual([{ state: 'rejected', reject_code: 'UnusableHoldId' }]);
  expect(result.started + result.alreadyStarted).toBe(60);

  const pending = `SELECT (SELECT count(*) FROM auth_holds WHERE state = 'active' AND expires_at <= now())::int
                        + (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending')::int AS n`;
  await expect.poll(async () => (await ledger.query(pending)).rows[0].n, { timeout: 120_000, interval: 500 }).toBe(0);
  const { rows } = await ledger.query<{ status: string; n: number }>(
    'SELECT status, count(*)::int AS n FROM webhook_deliveries GROUP BY 1 ORDER BY 1',
  );
  const rejectedByMerchant = night.expired.filter((h) => h.merchantId === m[3]).length;
  expect(rows).toEqual([
    { status: 'delivered', n: night.expired.length - rejectedByMerchant },
    { status: 'quarantined', n: rejectedByMerchant },
  ]);
  // The merchants saw https requests they verified, from workers that never logged a secret.
  expect(merchants.requests().every((r) => r.verified)).toBe(true);
  const texts = workers.output().map((text, i) => ({ source: `worker ${i}`, text }));
  for await (const execution of client.workflow.list({ query: `TaskQueue = '${TASK_QUEUE}'` }).intoHistories()) {
    texts.push({ source: `history ${execution.workflowId}`, text: JSON.stringify(execution.history) });
  }
  expect(texts.length).toBeGreaterThan(60);
  const violations = await checkInvariants({
    regions: [{ region: 'us', pool: ledger, secretKeys: TEST_SECRET_KEYS }],
    requests: merchants.requests(),
    texts,
  });
  expect(violations).toEqual([]);

  // The operator's CLI, through mTLS and the operator's token: why a quarantined hold waits, then ending it.
  const [quarantined] = night.expired.filter((h) => h.merchantId === m[3]);
  const status = await ops(await operator(), 'status', quarantined!.id, '--json');
  expect(status, status.stderr).toMatchObject({ code: 0 });
  expect(status.stdout).toContain('quarantined');
  const discarded = await ops(
    await operator(),
    'discard',
    quarantined!.id,
    '--by',
    'oncall-lead',
    '--reason',
    'merchant confirmed it has the hold',
  );
  expect(discarded, discarded.stderr).toMatchObject({ code: 0 });
  const handle = client.workflow.getHandle(await holdWorkflowIdOf(ledger, 'us', quarantined!.id));
  expect(await handle.result()).toMatchObject({ delivery: { status: 'discarded' } });

  // The Web UI server beside the cluster answers, and lists this night's workflows from it for on-call's read token.
  const query = encodeURIComponent(`TaskQueue="${TASK_QUEUE}" AND WorkflowType="releaseExpiredHold"`);
  const asOnCall = { headers: { Authorization: `Bearer ${(await onCall()).token}` } };
  const listed = (await (
    await fetch(`${cluster!.uiUrl}/api/v1/namespaces/${NAMESPACE}/workflows?query=${query}`, asOnCall)
  ).json()) as {
    executions?: unknown[];
  };
  expect(listed.executions?.length).toBeGreaterThan(0);
}, 300_000);

it('the production receiver on the production Temporal: the processor calls back while a sweep releases the same holds, every event applied once', async () => {
  const night = await seedNight(ledger, 'us', `cp${id}`, { expired: 40, future: 20, merchants: 3 }, merchants);
  const opening = await accountTotals(ledger);
  const secret = generateSigningSecret();
  const region = {
    region: 'us' as const,
    namespace: NAMESPACE,
    taskQueue: TASK_QUEUE,
    scheduleId: `c-${id}-sweep-us`,
    secretKeys: TEST_SECRET_KEYS,
  } as RegionConfig;
  receiver = await startReceiverProcess({
    region,
    databaseUrl: ledgerAs('receiver'),
    temporalAddress: cluster!.address,
    secret,
    env: {
      HOLD_SWEEPER_MODE: 'production',
      // As compose runs it: plain HTTP on loopback, a TLS-terminating proxy in front of it, said.
      PROCESSOR_RECEIVER_BEHIND_TLS_PROXY: 'true',
      PAYLOAD_KEYS_US: keyRingVariable(PAYLOAD_KEYS),
      ...temporalEnv(await receiverIdentity()),
    },
  });
  workers ??= await startWorkerProcesses(2, workerEnv(await worker()));
  connection ??= await connectAs(await operator());
  const client = encryptedClient(connection);
  const random = seededRandom(20);
  const plan = planCallbacks([...night.expired, ...night.future], 0.5, random);
  const [sweep, tally] = await Promise.all([
    client.workflow.execute(sweepExpiredHolds, {
      taskQueue: TASK_QUEUE,
      workflowId: `sweep-${id}-processor`,
      args: [{ region: 'us', pageSize: 15, releaseWaitMs: 30_000 }],
    }),
    sendCallbacks(new FakeProcessor(receiver.url, secret), plan, 3_000, random),
  ]);
  expect(sweep.unreleasedAtEnd).toBe(0);
  expect(tally.refused).toEqual([]);
  expect(tally.duplicates).toBeGreaterThan(0);
  const open = `SELECT (SELECT count(*) FROM processor_events WHERE applied_at IS NULL)::int
                     + (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending')::int AS n`;
  await expect.poll(async () => (await ledger.query(open)).rows[0].n, { timeout: 120_000, interval: 500 }).toBe(0);
  const outcomes = (
    await ledger.query<{ outcome: string; n: number }>(
      'SELECT outcome, count(*)::int AS n FROM processor_events GROUP BY 1',
    )
  ).rows;
  console.log(
    `[cluster] processor callbacks: ${tally.events} events, ${tally.requests} requests (${tally.duplicates} duplicates, ${tally.reordered} out of order); ${JSON.stringify(outcomes)}`,
  );
  expect(outcomes.reduce((n, r) => n + r.n, 0)).toBe(tally.events);
  const texts = [
    ...workers.output().map((text, i) => ({ source: `worker ${i}`, text })),
    { source: 'receiver', text: receiver.output() },
  ];
  for await (const execution of client.workflow.list({ query: `TaskQueue = '${TASK_QUEUE}'` }).intoHistories()) {
    texts.push({ source: `history ${execution.workflowId}`, text: JSON.stringify(execution.history) });
  }
  expect(
    await checkInvariants({
      regions: [{ region: 'us', pool: ledger, secretKeys: TEST_SECRET_KEYS }],
      requests: merchants.requests(),
      texts,
      secrets: [secret],
    }),
  ).toEqual([]);
  expect(await checkBalanced(ledger, opening)).toEqual([]);
}, 300_000);

/**
 * Build B of the deploy below: the quarantine's DeliveryStatus upserted before the activity that records it, outright
 * (no patch: a non-determinism storm for holds A quarantined), and a one-millisecond timer before the wait for a human
 * behind a patch (B's marker).
 */
// As src/workflows/webhook-delivery.ts writes it (prettier, width 120): the edits below match its exact text.
const BUILD_B: Edit[] = [
  ...quarantineUpsertedFirst(),
  {
    file: 'workflows/webhook-delivery.ts',
    from: `        state.awaitDecision(facts.policyRun, step.facts.quarantine.fourEyes);
`,
    to: `        state.awaitDecision(facts.policyRun, step.facts.quarantine.fourEyes);
        if (patched('cluster-deploy-build-b')) await sleep(1);
`,
  },
  {
    file: 'workflows/webhook-delivery.ts',
    from: '  proxyLocalActivities,\n',
    to: '  proxyLocalActivities,\n  sleep,\n',
  },
];

it('a deploy on the cluster: holds started after the promotion run on the new build; a non-determinism storm rolled back (what B wrote pinned to B, A current again) fails nothing after', async () => {
  // The test's own workers and clients act as the namespace's operator (set-current-version, update-options are admin).
  const deployer = await operator();
  const deployHarness = await openHarness({
    address: cluster!.address,
    tls: await lockedClusterTls(pki, deployer.cert),
    apiKey: deployer.token,
  });
  try {
    const us = await deployHarness.region('us');
    const deploymentName = `c-${id}-deploy`;
    const versionA = { deploymentName, buildId: 'build-a' };
    const versionB = { deploymentName, buildId: 'build-b' };
    await deployHarness.startWorker(us, undefined, undefined, { version: versionA, setCurrent: 'always' });
    const taskFailures = async (workflowId: string, after = 0) =>
      ((await us.client.workflow.getHandle(workflowId).fetchHistory()).events ?? []).filter(
        (e) => Number(e.eventId) > after && e.workflowTaskFailedEventAttributes,
      ).length;

    // Night 1, on A: m0 delivered, m1 quarantined (its quarantine written by A's code).
    const first = await seedNight(us.pool, 'us', `c${id}d1`, { expired: 6, merchants: 2 }, deployHarness.merchants);
    deployHarness.merchants.script(first.merchantIds[1]!, {
      secrets: [first.secrets.get(first.merchantIds[1]!)!],
      responses: [{ status: 400 }],
    });
    await us.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId: `sweep-${id}-d1`,
      args: [{ region: 'us', pageSize: 5, releaseWaitMs: 5_000 }],
    });
    // A discard as an operator makes it: recorded in the ledger first, then sent naming it.
    const holdIdOf = new Map<string, string>();
    const workflowOf = async (holdId: string) => {
      const workflowId = await holdWorkflowIdOf(us.pool, 'us', holdId);
      holdIdOf.set(workflowId, holdId);
      return workflowId;
    };
    const discarding = (workflowId: string) =>
      recordedDecision(us.pool, holdIdOf.get(workflowId)!, 'discard', 'grace', 'duplicate');
    const quarantinedByA = await Promise.all(
      first.expired.filter((h) => h.merchantId === first.merchantIds[1]).map((h) => workflowOf(h.id)),
    );
    for (const workflowId of quarantinedByA) {
      await expect
        .poll(async () => (await us.client.workflow.getHandle(workflowId).query(statusQuery)).stage, {
          timeout: 30_000,
        })
        .toBe('quarantined');
    }

    // Build B polls; a sweep starts on A (the ledger locked, so its first page waits), then B is made current.
    const bundleB = await bundleVariant(path.join(dir, 'deploy-b'), BUILD_B);
    await deployHarness.startWorker(us, undefined, undefined, {
      workflowBundle: bundleB,
      version: versionB,
      setCurrent: 'never',
    });
    const second = await seedNight(us.pool, 'us', `c${id}d2`, { expired: 12, merchants: 2 }, deployHarness.merchants);
    deployHarness.merchants.script(second.merchantIds[1]!, {
      secrets: [second.secrets.get(second.merchantIds[1]!)!],
      responses: [{ status: 400 }],
    });
    const lock = await us.pool.connect();
    let sweep;
    try {
      await lock.query('BEGIN');
      await lock.query('LOCK TABLE auth_holds IN ACCESS EXCLUSIVE MODE');
      sweep = await us.client.workflow.start(sweepExpiredHolds, {
        taskQueue: us.config.taskQueue,
        workflowId: `sweep-${id}-d2`,
        args: [{ region: 'us', pageSize: 5, releaseWaitMs: 5_000 }],
      });
      const listing = sweep;
      await expect
        .poll(async () => (await listing.describe()).raw.pendingActivities?.length ?? 0, { timeout: 30_000 })
        .toBe(1);
      // The server knows build B once its pollers have reached it: the operator's command succeeds from then on.
      const promote = () =>
        temporalCli(
          [
            'worker',
            'deployment',
            'set-current-version',
            '--deployment-name',
            deploymentName,
            '--build-id',
            'build-b',
            '--namespace',
            us.config.namespace,
            '--yes',
          ],
          cluster!.address,
          cliEnv(deployer),
        );
      await expect.poll(async () => (await promote()).code, { timeout: 60_000, interval: 1_000 }).toBe(0);
    } finally {
      await lock.query('COMMIT');
      lock.release();
    }
    await sweep.result();

    // The sweep ran every page on A (pinned); each hold it started after the promotion inherited nothing from it and
    // ran its first task on B.
    const sweepTasks = (await sweep.fetchHistory()).events!.filter((e) => e.workflowTaskCompletedEventAttributes);
    expect(new Set(sweepTasks.map((e) => e.workflowTaskCompletedEventAttributes!.deploymentVersion?.buildId))).toEqual(
      new Set(['build-a']),
    );
    for (const hold of second.expired) {
      const history = await us.client.workflow.getHandle(await holdWorkflowIdOf(us.pool, 'us', hold.id)).fetchHistory();
      const started = history.events![0]!.workflowExecutionStartedEventAttributes!;
      expect(started.inheritedPinnedVersion ?? undefined, `hold ${hold.id}`).toBeUndefined();
      const firstTask = history.events!.find(
        (e) => e.workflowTaskCompletedEventAttributes,
      )!.workflowTaskCompletedEventAttributes!;
      expect(firstTask.deploymentVersion?.buildId, `hold ${hold.id}`).toBe('build-b');
    }
    // Night 2's quarantined holds passed B's marker and wait on B.
    const quarantinedByB = await Promise.all(
      second.expired.filter((h) => h.merchantId === second.merchantIds[1]).map((h) => workflowOf(h.id)),
    );
    for (const workflowId of quarantinedByB) {
      await expect
        .poll(async () => (await us.client.workflow.getHandle(workflowId).query(statusQuery)).stage, {
          timeout: 30_000,
        })
        .toBe('quarantined');
    }

    // The storm: a decision on a hold A quarantined makes B replay A's history, and B's reordered step fails it.
    const [stormed] = quarantinedByA as [string];
    await us.client.workflow.getHandle(stormed).signal(discardSignal, await discarding(stormed));
    await expect.poll(() => taskFailures(stormed), { timeout: 30_000 }).toBeGreaterThan(0);

    // On 1.29.1 a hold failing mid-transition cannot be pinned back: its transition to B outranks any override
    // (GetEffectiveDeployment: transition, then override), and the override leaves the transition in place. So the
    // documented rollback (docs/deploys.md) keeps B's histories on B and moves the rest back: 1. pin what B wrote
    // last to B, by query; 2. make A current again. The stormed hold's next task starts on A, which wrote it.
    const updateOptions = (query: string, buildId: string) =>
      temporalCli(
        [
          'workflow',
          'update-options',
          '--namespace',
          us.config.namespace,
          '--query',
          query,
          '--versioning-override-behavior',
          'pinned',
          '--versioning-override-deployment-name',
          deploymentName,
          '--versioning-override-build-id',
          buildId,
          '--reason',
          'roll back a non-determinism storm',
          '--yes',
        ],
        cluster!.address,
        cliEnv(deployer),
      );
    const writtenByB = `TemporalWorkerDeploymentVersion = '${deploymentName}:build-b' AND TemporalWorkflowVersioningBehavior = 'AutoUpgrade' AND ExecutionStatus = 'Running'`;
    const pinned = await updateOptions(`${writtenByB} AND TaskQueue = '${us.config.taskQueue}'`, 'build-b');
    expect(pinned, pinned.stderr).toMatchObject({ code: 0 });
    // The batch job applies the override workflow by workflow: wait until each of B's waiting holds has it.
    for (const workflowId of quarantinedByB) {
      await expect
        .poll(
          async () =>
            (await us.client.workflow.getHandle(workflowId).describe()).raw.workflowExecutionInfo?.versioningInfo
              ?.versioningOverride,
          {
            timeout: 30_000,
          },
        )
        .toBeTruthy();
    }
    const back = await temporalCli(
      [
        'worker',
        'deployment',
        'set-current-version',
        '--deployment-name',
        deploymentName,
        '--build-id',
        'build-a',
        '--namespace',
        us.config.namespace,
        '--yes',
      ],
      cluster!.address,
      cliEnv(deployer),
    );
    expect(back, back.stderr).toMatchObject({ code: 0 });
    const lastEventId = async (workflowId: string) =>
      Number(((await us.client.workflow.getHandle(workflowId).fetchHistory()).events ?? []).at(-1)?.eventId ?? 0);
    const rollbackAt = new Map(
      await Promise.all([...quarantinedByA, ...quarantinedByB].map(async (w) => [w, await lastEventId(w)] as const)),
    );

    // Every quarantined hold, A's and B's, is decided now and completes on the build that wrote it: no task fails after
    // the rollback (the stormed hold's retry in flight at that moment may still have met B once).
    for (const workflowId of [...quarantinedByA, ...quarantinedByB].filter((w) => w !== stormed)) {
      await us.client.workflow.getHandle(workflowId).signal(discardSignal, await discarding(workflowId));
    }
    for (const workflowId of [...quarantinedByA, ...quarantinedByB]) {
      const handle = us.client.workflow.getHandle(workflowId);
      const outcome = await Promise.race([
        handle.result(),
        new Promise((resolve) => setTimeout(() => resolve('timeout'), 60_000)),
      ]);
      if (outcome === 'timeout') {
        const d = await handle.describe();
        const h = await handle.fetchHistory();
        throw new Error(
          `${workflowId} did not complete: ${d.status.name} ${JSON.stringify(d.raw.workflowExecutionInfo?.versioningInfo)} ${JSON.stringify(d.raw.pendingWorkflowTask)} ` +
            h
              .events!.slice(-8)
              .map((e) => Object.keys(e).find((k) => k.endsWith('Attributes')))
              .join(',') +
            JSON.stringify(
              h
                .events!.filter((e) => e.workflowTaskFailedEventAttributes)
                .slice(-2)
                .map((e) => ({
                  identity: e.workflowTaskFailedEventAttributes!.identity,
                  cause: e.workflowTaskFailedEventAttributes!.cause,
                  message: e.workflowTaskFailedEventAttributes!.failure?.message?.slice(0, 300),
                })),
            ),
        );
      }
      expect(outcome).toMatchObject({ delivery: { status: 'discarded' } });
      const tasks = (await handle.fetchHistory()).events!.filter((e) => e.workflowTaskCompletedEventAttributes);
      expect(tasks.at(-1)!.workflowTaskCompletedEventAttributes!.deploymentVersion?.buildId, workflowId).toBe(
        quarantinedByA.includes(workflowId) ? 'build-a' : 'build-b',
      );
      if (workflowId !== stormed)
        expect(await taskFailures(workflowId, rollbackAt.get(workflowId)), workflowId).toBe(0);
    }
    expect(
      await checkInvariants({
        regions: [{ region: 'us', pool: us.pool, secretKeys: us.config.secretKeys }],
        requests: deployHarness.merchants.requests(),
        texts: [],
      }),
    ).toEqual([]);
  } finally {
    await deployHarness.close();
  }
}, 300_000);

it('the internal-frontend is the cluster’s own: every client certificate the project issues is refused there, with or without a token, while the system workers it serves run schedules and batch jobs', async () => {
  const internal = cluster!.internalFrontendAddress!;
  const internodeCa = await fs.readFile(pki.internodeCa);
  // The client trusts the internode CA here, so that a refusal can only be the server's: an attacker would skip
  // verifying the server too.
  const connectInternal = async (cert: CertificateFiles, token?: string) =>
    Connection.connect({
      address: internal,
      tls: {
        serverRootCACertificate: internodeCa,
        serverNameOverride: CLUSTER_SERVER_NAME,
        clientCertPair: { crt: await fs.readFile(cert.cert), key: await fs.readFile(cert.key) },
      },
      ...(token ? { apiKey: token } : {}),
      connectTimeout: 5_000,
    });
  // What the internal-frontend would give: the cluster's own certificate lists every namespace as a system admin.
  const nodes = await connectInternal(pki.internode);
  try {
    const listed = await nodes.operatorService.listSearchAttributes({ namespace: NAMESPACE });
    expect(Object.keys(listed.customAttributes ?? {})).toContain('DeliveryStatus');
  } finally {
    await nodes.close();
  }
  // Each certificate asks once for the system info over gRPC (HTTP/2): answered, or the server ends the handshake.
  const grpcCall = async (cert: CertificateFiles, token?: string) =>
    new Promise<string>((resolve) => {
      void (async () => {
        const session = http2.connect(`https://${internal}`, {
          ca: internodeCa,
          servername: CLUSTER_SERVER_NAME,
          cert: await fs.readFile(cert.cert),
          key: await fs.readFile(cert.key),
        });
        session.once('error', (err) => resolve(`refused (${(err as NodeJS.ErrnoException).code ?? err.message})`));
        const request = session.request({
          ':method': 'POST',
          ':path': '/temporal.api.workflowservice.v1.WorkflowService/GetSystemInfo',
          'content-type': 'application/grpc',
          te: 'trailers',
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        });
        request.once('error', (err) => resolve(`refused (${(err as NodeJS.ErrnoException).code ?? err.message})`));
        request.once('response', (headers) => {
          resolve(`answered (HTTP ${headers[':status']})`);
          session.close();
        });
        // An empty GetSystemInfoRequest: the 5-byte gRPC frame header of a zero-length message.
        request.end(Buffer.alloc(5));
      })();
    });
  expect(await grpcCall(pki.internode)).toBe('answered (HTTP 200)');
  const operatorId = await operator();
  const callers = [
    ...COMPOSE_CALLERS.map((c) => c.name),
    ...['cluster-admin', 'operator', 'worker', 'on-call', 'receiver', 'admin-api'],
  ];
  for (const name of callers) {
    const cert = await pki.client(name);
    for (const token of [undefined, operatorId.token]) {
      expect(await grpcCall(cert, token), `${name}'s certificate${token ? " with the operator's token" : ''}`).toMatch(
        /^refused/,
      );
    }
  }
  // Its HTTP API is not served at all (Temporal would serve it with the frontend's TLS and system-admin claims).
  const httpPort = Number(internal.split(':')[1]) + 10;
  const http = await new Promise<string>((resolve) => {
    const socket = net.connect(httpPort, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve('listening');
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
  expect(http).toBe('ECONNREFUSED');

  // The system workers reach it: a schedule fires, and a batch job runs to its end.
  const asOperator = new Client({ connection: await connectAs(operatorId), namespace: NAMESPACE });
  const probeQueue = `c-${id}-nobody`;
  const scheduleId = `c-${id}-fires`;
  const schedule = await asOperator.schedule.create({
    scheduleId,
    spec: { intervals: [{ every: '1h' }] },
    action: { type: 'startWorkflow', workflowType: 'scheduleProbe', taskQueue: probeQueue },
  });
  try {
    await schedule.trigger();
    await expect
      .poll(async () => (await schedule.describe()).info.recentActions.length, { timeout: 60_000 })
      .toBeGreaterThan(0);
  } finally {
    await schedule.delete();
  }
  const probes = await Promise.all(
    [1, 2].map((n) =>
      asOperator.workflow.start('batchProbe', { taskQueue: probeQueue, workflowId: `c-${id}-batch-probe-${n}` }),
    ),
  );
  const jobId = `c-${id}-batch-terminate`;
  await asOperator.workflowService.startBatchOperation({
    namespace: NAMESPACE,
    jobId,
    executions: probes.map((p) => ({ workflowId: p.workflowId })),
    reason: 'the system worker runs batch jobs through the internal-frontend',
    terminationOperation: {},
  });
  await expect
    .poll(
      async () => (await asOperator.workflowService.describeBatchOperation({ namespace: NAMESPACE, jobId })).state ?? 0,
      { timeout: 60_000 },
    )
    .toBe(proto.temporal.api.enums.v1.BatchOperationState.BATCH_OPERATION_STATE_COMPLETED);
  for (const probe of probes) expect((await probe.describe()).status.name).toBe('TERMINATED');
  await asOperator.connection.close();
}, 300_000);

it('the admin API in production on the locked cluster, as its own caller (its certificate, hold-sweeper-us:write): every verb gets past authorization, sweep now included', async () => {
  // An https issuer, as production requires; the API trusts its certificate's CA like any private CA.
  const tls = { cert: await fs.readFile(pki.frontend.cert), key: await fs.readFile(pki.frontend.key) };
  const oidc = await startDevOidcProvider([], { tls });
  const apiIdentity = await adminApi();
  // The sweep schedule the deploy step applies: here, by the operator, in case no deploy ran yet.
  const operatorConnection = await connectAs(await operator());
  const config = loadConfig(workerEnv(await worker()));
  await ensureSweepSchedule(encryptedClient(operatorConnection), config.regions[0]!, config.sweep);
  await operatorConnection.close();
  const [port, metricsPort] = [await freePort(), await freePort()];
  const api = await startApiProcess({
    ...process.env,
    ...workerEnv(apiIdentity, 'ops'),
    NODE_EXTRA_CA_CERTS: pki.ca,
    API_ADDRESS: `127.0.0.1:${port}`,
    API_METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
    API_OIDC_ISSUER: oidc.issuer,
    API_TLS_CERT_FILE: pki.frontend.cert,
    API_TLS_KEY_FILE: pki.frontend.key,
  });
  try {
    const ca = await fs.readFile(pki.ca);
    const call = (verb: AdminVerb, token: string) => {
      const { url, init } = requestFor(verb);
      return new Promise<{ status: number; body: string }>((resolve, reject) => {
        const request = https.request(
          `https://127.0.0.1:${port}${url}`,
          { method: init.method, headers: { ...(init.headers as object), authorization: `Bearer ${token}` }, ca },
          (response) => {
            let body = '';
            response.on('data', (d: Buffer) => (body += d.toString()));
            response.on('end', () => resolve({ status: response.statusCode!, body }));
          },
        );
        request.on('error', reject);
        request.end(init.body as string | undefined);
      });
    };
    const tokenFor = (role: string) =>
      oidc.mint({ subject: `${role}@hold-sweeper`, roles: [role], audience: adminAudience('us') });
    for (const verb of ADMIN_VERBS) {
      const answer = await call(verb, await tokenFor(verb.roles[0]!));
      // Past authorization: done, or refused by the input, the ledger (a placeholder id) or four eyes, never a
      // crash, and never a permission Temporal denied the API.
      expect(answer.status, `${verb.id}: ${answer.status} ${answer.body}\n${api.output()}`).toBeLessThan(500);
      expect(answer.body, verb.id).not.toMatch(/"error":"(Forbidden|Unauthenticated)"/);
      if (verb.id === 'sweep.now') expect(JSON.parse(answer.body)).toMatchObject({ workflowId: expect.any(String) });
    }
  } finally {
    api.stop();
    await oidc.stop();
  }
}, 300_000);

it('the server binary refuses a configuration that looks locked and is not: authorization without the frontend’s TLS, internode TLS on the client CA (named, or the same certificate under another name)', async () => {
  const { server } = await obtainTemporalServer(loadDevConfig().cacheDir);
  const copy = path.join(dir, 'same-ca-copy.pem');
  await fs.copyFile(pki.ca, copy);
  const locked = {
    TEMPORAL_TLS_CA_FILE: pki.ca,
    TEMPORAL_TLS_INTERNODE_CA_FILE: pki.internodeCa,
    TEMPORAL_TLS_FRONTEND_CERT_FILE: pki.frontend.cert,
    TEMPORAL_TLS_FRONTEND_KEY_FILE: pki.frontend.key,
    TEMPORAL_TLS_INTERNODE_CERT_FILE: pki.internode.cert,
    TEMPORAL_TLS_INTERNODE_KEY_FILE: pki.internode.key,
    TEMPORAL_TLS_SERVER_NAME: CLUSTER_SERVER_NAME,
    TEMPORAL_AUTH_JWKS_URL: issuer.jwksUrl,
    TEMPORAL_AUTH_AUDIENCE: 'temporal-frontend',
  };
  // Each is refused before it opens a port or a database connection: no database is configured here at all.
  const start = (env: Record<string, string>) =>
    new Promise<{ code: number; output: string }>((resolve) => {
      execFile(
        server,
        ['--root', REPO, '--config', 'deploy/temporal', '--env', 'config', 'start'],
        { env: { PATH: process.env.PATH, ...env }, timeout: 60_000 },
        (err, stdout, stderr) =>
          resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, output: stdout + stderr }),
      );
    });
  const withoutTls = await start({
    TEMPORAL_AUTH_JWKS_URL: locked.TEMPORAL_AUTH_JWKS_URL,
    TEMPORAL_AUTH_AUDIENCE: locked.TEMPORAL_AUTH_AUDIENCE,
  });
  expect(withoutTls.code).toBe(1);
  expect(withoutTls.output).toContain('tokens would cross in clear');
  const named = await start({ ...locked, TEMPORAL_TLS_INTERNODE_CA_FILE: pki.ca });
  expect(named.code).not.toBe(0);
  expect(named.output).toContain('TEMPORAL_TLS_INTERNODE_CA_FILE is TEMPORAL_TLS_CA_FILE');
  const renamed = await start({ ...locked, TEMPORAL_TLS_INTERNODE_CA_FILE: copy });
  expect(renamed.code).toBe(1);
  expect(renamed.output).toContain('give internode TLS its own CA');
}, 120_000);

/** gRPC's PERMISSION_DENIED: what the frontend answers a call its authorizer refused. */
const PERMISSION_DENIED = 7;
/** What a call came to: 'allowed', 'PermissionDenied' (the authorizer's answer), or the error it failed with. */
const outcomeOf = (call: Promise<unknown>) =>
  call.then(
    () => 'allowed',
    (err: { code?: number; message?: string; cause?: { code?: number } }) =>
      // A refusal at connect time (the probe call) arrives as the cause of the SDK's "Failed to connect".
      (err.code ?? err.cause?.code) === PERMISSION_DENIED ? 'PermissionDenied' : `${err.code}: ${err.message}`,
  );

it('the locked cluster refuses: no client certificate, no token, a token for the other region, an expired, foreign or misaddressed token; a worker cannot terminate or register a namespace; the Web UI shows a namespace only to a token that allows it', async () => {
  const [ca, operatorId, workerId, onCallId, euAdmin] = [
    await fs.readFile(pki.ca),
    await operator(),
    await worker(),
    await onCall(),
    await identity('eu-operator', ['hold-sweeper-eu:admin']),
  ];
  const opened: Connection[] = [];
  const connect = async (who: { cert?: CertificateFiles; token?: string }) => {
    const connection = await Connection.connect({
      address: cluster!.address,
      tls: who.cert
        ? await lockedClusterTls(pki, who.cert)
        : { serverRootCACertificate: ca, serverNameOverride: CLUSTER_SERVER_NAME },
      ...(who.token ? { apiKey: who.token } : {}),
      connectTimeout: 5_000,
    });
    opened.push(connection);
    return connection;
  };
  const list = (connection: Connection, namespace = NAMESPACE) =>
    connection.workflowService.listWorkflowExecutions({ namespace, pageSize: 1 });
  try {
    // Transport: no client certificate, or no TLS at all, and there is no connection to speak of.
    await expect(connect({ token: operatorId.token })).rejects.toThrow();
    await expect(
      Connection.connect({ address: cluster!.address, apiKey: operatorId.token, connectTimeout: 5_000 }),
    ).rejects.toThrow();
    await expect(Connection.connect({ address: cluster!.address, connectTimeout: 5_000 })).rejects.toThrow();

    // A certificate proves which machine calls, not what it may do: without a token only the health check answers.
    const certOnly = await connect({ cert: operatorId.cert });
    expect(await outcomeOf(certOnly.workflowService.getSystemInfo({}))).toBe('allowed');
    expect(await outcomeOf(list(certOnly))).toBe('PermissionDenied');
    // Tokens the cluster must not take: another region's, an expired one, one for another audience, one it did not
    // sign.
    const stranger = await startTokenIssuer();
    const refusedTokens = {
      'hold-sweeper-eu:admin': euAdmin.token,
      expired: await issuer.token('late@hold-sweeper', [`${NAMESPACE}:admin`], {
        expiresIn: Math.floor(Date.now() / 1000) - 60,
      }),
      'audience codec-server': await issuer.token('confused@hold-sweeper', [`${NAMESPACE}:admin`], {
        audience: 'codec-server',
      }),
      'signed by another key': await stranger.token('forger@hold-sweeper', [`${NAMESPACE}:admin`]),
    };
    await stranger.stop();
    for (const [what, token] of Object.entries(refusedTokens)) {
      // The frontend refuses a token it cannot verify before any authorizer runs: even the connection's first call.
      expect(await outcomeOf(connect({ cert: operatorId.cert, token }).then(list)), what).toBe('PermissionDenied');
    }

    // The admin API's token (`:write`): it starts and signals workflows; ending, resetting, batch jobs and namespaces
    // are not its to do.
    const asApi = new Client({ connection: await connect(await adminApi()), namespace: NAMESPACE });
    const probeId = `authz-probe-${id}`;
    const probe = await asApi.workflow.start('authzProbe', { taskQueue: `c-${id}-nobody`, workflowId: probeId });
    expect(await outcomeOf(probe.signal('hello'))).toBe('allowed');
    expect(await outcomeOf(probe.terminate('the admin API tries'))).toBe('PermissionDenied');
    expect(await outcomeOf(probe.cancel())).toBe('PermissionDenied');
    expect(
      await outcomeOf(
        asApi.workflowService.startBatchOperation({
          namespace: NAMESPACE,
          jobId: `c-${id}-batch`,
          visibilityQuery: `WorkflowId = '${probeId}'`,
          reason: 'the admin API tries',
          terminationOperation: {},
        }),
      ),
    ).toBe('PermissionDenied');
    expect(
      await outcomeOf(
        asApi.workflowService.registerNamespace({
          namespace: `c-${id}-rogue`,
          workflowExecutionRetentionPeriod: msToTs('1 day'),
        }),
      ),
    ).toBe('PermissionDenied');
    // On-call's token (`:read`) reads and changes nothing.
    const asOnCall = new Client({ connection: await connect(onCallId), namespace: NAMESPACE });
    expect(await outcomeOf(asOnCall.workflow.getHandle(probeId).describe())).toBe('allowed');
    expect(await outcomeOf(asOnCall.workflow.getHandle(probeId).signal('hello'))).toBe('PermissionDenied');

    // The Web UI, in a browser: the namespace's workflows for on-call's token; an error page, and none of them, for no
    // token or the other region's; a write through the UI needs the namespace's admin, whatever the button shows.
    const browser = await chromium.launch({
      executablePath: await ensureChromium(),
      headless: true,
      args: ['--no-sandbox', '--disable-dev-shm-usage'],
    });
    try {
      const seenBy = async (token: string | undefined) => {
        const context = await browser.newContext(
          token ? { extraHTTPHeaders: { Authorization: `Bearer ${token}` } } : {},
        );
        try {
          const page = await context.newPage();
          await page.goto(
            `${cluster!.uiUrl}/namespaces/${NAMESPACE}/workflows?query=${encodeURIComponent(`WorkflowId="${probeId}"`)}`,
          );
          // The UI renders either the list or its error page; wait for one of them, then read what it shows.
          await page
            .getByText(new RegExp(`${probeId}|Uh oh`))
            .first()
            .waitFor({ timeout: 30_000 });
          return (await page.locator('body').innerText()).replace(/\s+/g, ' ');
        } finally {
          await context.close();
        }
      };
      expect(await seenBy(onCallId.token)).toContain(probeId);
      for (const token of [undefined, euAdmin.token]) {
        const text = await seenBy(token);
        expect(text).toContain('Uh oh');
        expect(text).not.toContain(probeId);
      }
    } finally {
      await browser.close();
    }
    const terminateThroughUi = (who: Identity) =>
      fetch(`${cluster!.uiUrl}/api/v1/namespaces/${NAMESPACE}/workflows/${probeId}/terminate`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${who.token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ reason: 'through the Web UI' }),
      }).then((r) => r.status);
    expect(await terminateThroughUi(onCallId)).toBe(403);
    expect(await terminateThroughUi(workerId)).toBe(403);
    expect(await terminateThroughUi(operatorId)).toBe(200);
    expect((await asOnCall.workflow.getHandle(probeId).describe()).status.name).toBe('TERMINATED');

    // Temporal Cloud's way in, by configuration alone: a temporal.toml profile with an API key (a bearer token, as
    // Cloud's keys are), TLS and the namespace. The cluster's JWT authorizer checks it like any other token.
    const toml = path.join(dir, 'temporal.toml');
    await fs.writeFile(
      toml,
      [
        '[profile.cloud]',
        `address = "${cluster!.address}"`,
        `namespace = "${NAMESPACE}"`,
        `api_key = "${onCallId.token}"`,
        '[profile.cloud.tls]',
        `server_ca_cert_path = "${pki.ca}"`,
        `server_name = "${CLUSTER_SERVER_NAME}"`,
        `client_cert_path = "${onCallId.cert.cert}"`,
        `client_key_path = "${onCallId.cert.key}"`,
        '',
      ].join('\n'),
    );
    const cloud = loadTemporalConnectionSettings({ TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'cloud' }, 'us', {
      servesOneRegion: true,
    });
    expect(cloud).toMatchObject({ address: cluster!.address, namespace: NAMESPACE });
    const viaProfile = await connectClient(cloud, cloud.address!);
    opened.push(viaProfile);
    expect(await outcomeOf(list(viaProfile))).toBe('allowed');

    // A key rotated without a restart: the file's token changes, the open connection carries the new one.
    const keyFile = path.join(dir, 'rotating.token');
    await fs.writeFile(keyFile, euAdmin.token, { mode: 0o600 });
    const rotating = loadTemporalConnectionSettings(
      { ...temporalEnv(onCallId), TEMPORAL_API_KEY_FILE: keyFile, TEMPORAL_API_KEY_REFRESH: '1' },
      'us',
      {
        servesOneRegion: true,
      },
    );
    const rotated = await connectClient(rotating, cluster!.address);
    opened.push(rotated);
    const errors: Error[] = [];
    const stop = keepApiKeyFresh(rotating, [rotated], (err) => errors.push(err));
    try {
      expect(await outcomeOf(list(rotated))).toBe('PermissionDenied');
      await fs.writeFile(keyFile, onCallId.token);
      await expect.poll(() => outcomeOf(list(rotated)), { timeout: 15_000 }).toBe('allowed');
    } finally {
      stop();
    }
    expect(errors).toEqual([]);
  } finally {
    await Promise.all(opened.map((c) => c.close()));
  }
}, 300_000);

it('each caller may call exactly what deploy/temporal/server/cluster-rights.json lists: every WorkflowService and OperatorService method, as every caller the project issues credentials for', async () => {
  const callers: Record<string, Identity | { cert: CertificateFiles; token?: undefined }> = {
    worker: await worker(),
    receiver: await receiverIdentity(),
    'admin-api': await adminApi(),
    operator: await operator(),
    'on-call': await onCall(),
    [ANYONE]: { cert: (await onCall()).cert },
  };
  expect(Object.keys(callers).sort()).toEqual(Object.keys(CLUSTER_RIGHTS.callers).sort());
  const connections = Object.fromEntries(
    await Promise.all(
      Object.entries(callers).map(async ([caller, who]) => [
        caller,
        await Connection.connect({
          address: cluster!.address,
          tls: await lockedClusterTls(pki, who.cert),
          ...(who.token ? { apiKey: who.token } : {}),
        }),
      ]),
    ),
  ) as Record<string, Connection>;
  const services = {
    WorkflowService: proto.temporal.api.workflowservice.v1.WorkflowService,
    OperatorService: proto.temporal.api.operatorservice.v1.OperatorService,
  } as const;
  /**
   * What a call with a near-empty request came to: refused by the authorizer, not served by this server version, or
   * past the authorizer (whatever the handler then made of the request).
   */
  const outcome = async (connection: Connection, service: RightsService, method: string, request: object = {}) => {
    const stub = (service === 'WorkflowService'
      ? connection.workflowService
      : connection.operatorService) as unknown as Record<string, (request: object) => Promise<unknown>>;
    const call = stub[method.charAt(0).toLowerCase() + method.slice(1)]!;
    try {
      // A handler that waits (a long poll) has let the call through already: its deadline ends the wait.
      await connection.withDeadline(Date.now() + 5_000, () => call.call(stub, { namespace: NAMESPACE, ...request }));
      return 'passed';
    } catch (err) {
      const { code, message } = err as { code?: number; message?: string };
      if (code === PERMISSION_DENIED && message?.includes('Request unauthorized')) return 'refused';
      // gRPC's own answer to a method the server does not register (a handler's Unimplemented, for a feature this
      // cluster leaves off, comes after the authorizer let the call through).
      return code === 12 && /unknown (method|service)/.test(message ?? '') ? 'unserved' : 'passed';
    }
  };
  const rows = await Promise.all(
    (Object.keys(services) as RightsService[]).flatMap((service) =>
      Object.keys((services[service] as unknown as { methods: object }).methods).map(async (method) => ({
        service,
        method,
        outcomes: Object.fromEntries(
          await Promise.all(
            Object.keys(callers).map(async (caller) => [caller, await outcome(connections[caller]!, service, method)]),
          ),
        ) as Record<string, string>,
      })),
    ),
  );
  // A right the table narrows is refused for the near-empty request above, and allowed for one inside it: the admin
  // API's PatchSchedule only pauses (of a schedule that does not exist: the handler's NotFound is past the authorizer).
  const narrowed = await Promise.all(
    Object.entries(CLUSTER_RIGHTS.narrowed.WorkflowService ?? {}).flatMap(([method, callers]) =>
      Object.keys(callers).map(async (caller) => ({
        method,
        caller,
        inside: await outcome(connections[caller]!, 'WorkflowService', method, {
          scheduleId: `c-${id}-none`,
          patch: { pause: 'the rights matrix' },
        }),
      })),
    ),
  );
  expect(narrowed).toEqual([{ method: 'PatchSchedule', caller: 'admin-api', inside: 'passed' }]);
  await Promise.all(Object.values(connections).map((c) => c.close()));
  const mismatches: string[] = [];
  const mark = { passed: '✓', refused: '·', unserved: '-' } as Record<string, string>;
  const lines = rows.map(({ service, method, outcomes }) => {
    const cells = Object.keys(callers).map((caller) => {
      const got = outcomes[caller]!;
      // A method this server does not serve is one the table must not list; any other answers as the table says.
      const want =
        got === 'unserved' && !(method in CLUSTER_RIGHTS.methods[service])
          ? 'unserved'
          : mayCall(service, method, caller) && !CLUSTER_RIGHTS.narrowed[service]?.[method]?.[caller]
            ? 'passed'
            : 'refused';
      if (got !== want) mismatches.push(`${service}.${method} as ${caller}: ${got}, the table says ${want}`);
      return `${mark[got]}${got === want ? ' ' : '!'}`.padEnd(10);
    });
    return `${`${service}.${method}`.padEnd(62)}${cells.join('')}`;
  });
  console.log(
    `[cluster] rights (✓ passed the authorizer, · refused, - not served, ! not as the table says; a narrowed right is refused for an empty request):\n${' '.repeat(62)}${Object.keys(
      callers,
    )
      .map((c) => c.padEnd(10))
      .join('')}\n${lines.join('\n')}`,
  );
  expect(mismatches).toEqual([]);
  // Every method the server serves is in the table, so a new one is refused until someone decides who may call it.
  const served = rows.filter((r) => Object.values(r.outcomes).some((o) => o !== 'unserved'));
  expect(served.filter((r) => !(r.method in CLUSTER_RIGHTS.methods[r.service])).map((r) => r.method)).toEqual([]);
}, 120_000);
