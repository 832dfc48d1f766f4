import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildIdOf } from '../../src/workers/deployment.js';
import { describe, expect, it } from 'vitest';
import {
  CONFIG_VARIABLES,
  DEFAULT_SWEEP_TIMEOUT_MS,
  loadApiConfig,
  loadConfig,
  loadMerchantApiConfig,
  loadProcessorConfig,
  parseDuration,
  redactUrl,
  SWEEP_RELEASE_WAIT_MS,
} from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { adminApiFromEnv } from '../../src/operations/admin-client.js';
import { DEV_SECRET_KEYS } from '../../src/delivery/secret-box.js';
import { TEMPORAL_CONNECTION_VARIABLES } from '../../src/temporal-connection.js';
import { DEV_CONFIG_VARIABLES, loadDevConfig } from '../../dev/dev-config.js';
import { CONFIGURATION_DOC, withGeneratedTables } from '../../dev/config-docs.js';
import { DEFAULT_RELEASE_WAIT_MS } from '../../src/workflows/sweep-expired-holds.js';

/** A production configuration of the US region that loads (TLS to Temporal, its payload and merchant-secret keys). */
const PRODUCTION_US = {
  HOLD_SWEEPER_MODE: 'production',
  HOLD_SWEEPER_REGIONS: 'us',
  DATABASE_URL_US: 'postgres://h/us?sslmode=verify-full',
  TEMPORAL_ADDRESS: 't:7233',
  TEMPORAL_TLS: 'true',
  PAYLOAD_KEYS_US: `k1:${Buffer.alloc(32, 3).toString('base64')}`,
  MERCHANT_SECRET_KEYS_US: `k1:${Buffer.alloc(32, 4).toString('base64')}`,
};

/** The error the production loader or the local stack's own loader (dev/dev-config.ts) raises for `env`. */
function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
    loadDevConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('config', () => {
  it('has working defaults for dev: both regions, embedded services', () => {
    const config = loadConfig({});
    expect(config.mode).toBe('dev');
    expect(
      config.regions.map((r) => [r.region, r.namespace, r.taskQueue, r.scheduleId, r.databaseUrl, r.temporalAddress]),
    ).toEqual([
      ['us', 'hold-sweeper-us', 'hold-sweeper-us', 'hold-sweep-us', undefined, undefined],
      ['eu', 'hold-sweeper-eu', 'hold-sweeper-eu', 'hold-sweep-eu', undefined, undefined],
    ]);
    expect(config.sweep).toEqual({
      intervalMs: 900_000,
      catchupWindowMs: 3_600_000,
      pageSize: 500,
      batchSize: 50,
      maxUnreleased: 1000,
      timeoutMs: 2 * 3_600_000,
    });
    expect(config.decisions).toEqual({ fourEyes: false, quarantineTimeoutMs: 14 * 86_400_000 });
    expect(Object.isFrozen(config) && Object.isFrozen(config.regions[0])).toBe(true);
  });

  it('reads per-region settings, with TEMPORAL_ADDRESS as the shared fallback', () => {
    const config = loadConfig({
      HOLD_SWEEPER_REGIONS: 'eu',
      TEMPORAL_ADDRESS: 'temporal:7233',
      DATABASE_URL_EU: 'postgres://u:p@db-eu:5432/ledger',
      TEMPORAL_NAMESPACE_EU: 'payments-eu',
      SWEEP_INTERVAL: '5m',
      SWEEP_PAGE_SIZE: '250',
      SWEEP_BATCH_SIZE: '25',
    });
    expect(config.regions).toMatchObject([
      {
        region: 'eu',
        databaseUrl: 'postgres://u:p@db-eu:5432/ledger',
        temporalAddress: 'temporal:7233',
        namespace: 'payments-eu',
        taskQueue: 'hold-sweeper-eu',
        scheduleId: 'hold-sweep-eu',
        payloadKeys: undefined,
        temporal: { address: 'temporal:7233', tls: undefined, apiKey: undefined },
      },
    ]);
    expect(config.sweep.intervalMs).toBe(300_000);
    expect(config.sweep.pageSize).toBe(250);
    expect(config.sweep.batchSize).toBe(25);
    // Backpressure follows the page size unless said: one page releasing while the next starts.
    expect(config.sweep.maxUnreleased).toBe(500);
    expect(loadConfig({ SWEEP_MAX_UNRELEASED: '300' }).sweep.maxUnreleased).toBe(300);
    expect(loadConfig({}).sweep.batchSize).toBe(50);
    expect(loadConfig({ WORKER_MAX_CACHED_WORKFLOWS: '500' }).worker.maxCachedWorkflows).toBe(500);
    expect(loadConfig({}).worker.maxCachedWorkflows).toBeUndefined();
    // One hold in a hundred traced unless said; none and every one are choices too.
    expect(loadConfig({}).observability.traceSampleRatio).toBe(0.01);
    expect(loadConfig({ TRACE_SAMPLE_RATIO: '0' }).observability.traceSampleRatio).toBe(0);
    expect(loadConfig({ TRACE_SAMPLE_RATIO: '5%' }).observability.traceSampleRatio).toBe(0.05);
  });

  it.each([
    ['HOLD_SWEEPER_MODE', 'prod'],
    ['HOLD_SWEEPER_REGIONS', 'us,apac'],
    ['HOLD_SWEEPER_REGIONS', ' , '],
    ['SWEEP_INTERVAL', '15 minutes'],
    ['SWEEP_INTERVAL', '0s'],
    ['SWEEP_CATCHUP_WINDOW', '5s'],
    ['SWEEP_PAGE_SIZE', '0'],
    ['SWEEP_PAGE_SIZE', '2001'],
    ['SWEEP_PAGE_SIZE', '-5'],
    ['SWEEP_BATCH_SIZE', '0'],
    ['SWEEP_BATCH_SIZE', 'fifty'],
    ['SWEEP_MAX_UNRELEASED', '0'],
    ['SWEEP_MAX_UNRELEASED', 'unbounded'],
    ['TEMPORAL_ADDRESS', 'http://temporal'],
    ['TEMPORAL_ADDRESS_US', 'temporal'],
    ['TEMPORAL_NAMESPACE_EU', 'bad namespace'],
    ['TASK_QUEUE_US', ''],
    ['DATABASE_URL_US', 'mysql://u:p@h/db'],
    ['DATABASE_URL_EU', 'not a url'],
    ['TEMPORAL_DEV_PORT', '70000'],
    ['DEMO_HOLDS', 'many'],
    ['QUARANTINE_DECISION_TIMEOUT', '2 weeks'],
    ['SWEEP_TIMEOUT', 'forever'],
    ['SWEEP_TIMEOUT', '5m'],
    ['LOG_LEVEL', 'chatty'],
    ['TRACE_SAMPLE_RATIO', '1.5'],
    ['TRACE_SAMPLE_RATIO', '-0.1'],
    ['TRACE_SAMPLE_RATIO', 'some'],
    ['METRICS_ADDRESS', 'everywhere'],
    ['METRICS_GAUGE_INTERVAL', 'often'],
    ['WORKER_MAX_CACHED_WORKFLOWS', '-1'],
    ['WORKER_MAX_CACHED_WORKFLOWS', 'lots'],
    ['WORKER_DEPLOYMENT_NAME', 'hold.sweeper'],
    ['WORKER_BUILD_ID', 'rev 1'],
    ['WORKER_SET_CURRENT', 'sometimes'],
    ['WEBHOOK_TRUSTED_NETWORKS', '10.0.0.0'],
    ['WEBHOOK_TRUSTED_NETWORKS', '10.0.0.0/33'],
    ['WEBHOOK_TRUSTED_NETWORKS', 'intranet/8'],
    ['WEBHOOK_ALLOWED_PORTS', '0'],
    ['WEBHOOK_ALLOWED_PORTS', '65536'],
    ['WEBHOOK_ALLOWED_PORTS', 'https'],
    ['WEBHOOK_ALLOWED_PORTS', '443,'],
    ['WEBHOOK_ALLOWED_PORTS', '443;8443'],
    ['WEBHOOK_ALLOWED_PORTS', '-443'],
  ])('%s=%j is rejected with an error that names the variable', (variable, value) => {
    const err = configError({ [variable]: value });
    expect(err.variable).toBe(variable);
    expect(err.message).toContain(variable);
  });

  it('versions every worker: the deployment, the build id (unset = from the bundle), and when a build makes itself current', () => {
    expect(loadConfig({}).deployment).toEqual({
      deploymentName: 'hold-sweeper',
      buildId: undefined,
      setCurrent: 'always',
    });
    const key = `k1:${Buffer.alloc(32, 3).toString('base64')}`;
    const production = loadConfig({
      HOLD_SWEEPER_MODE: 'production',
      HOLD_SWEEPER_REGIONS: 'us',
      DATABASE_URL_US: 'postgres://h/us?sslmode=verify-full',
      TEMPORAL_ADDRESS: 't:7233',
      TEMPORAL_TLS: 'true',
      PAYLOAD_KEYS_US: key,
      MERCHANT_SECRET_KEYS_US: key,
    });
    // Production's build is made current by the deploy step (npm run promote), never by a starting worker.
    expect(production.deployment.setCurrent).toBe('never');
    expect(loadConfig({ WORKER_BUILD_ID: '3f8aa79', WORKER_SET_CURRENT: 'if-none' }).deployment).toMatchObject({
      buildId: '3f8aa79',
      setCurrent: 'if-none',
    });
    // The same workflow code is the same build; any change to it is another.
    expect(buildIdOf({ code: 'a' })).toBe(buildIdOf({ code: 'a' }));
    expect(buildIdOf({ code: 'a' })).toMatch(/^wf-[0-9a-f]{12}$/);
    expect(buildIdOf({ code: 'b' })).not.toBe(buildIdOf({ code: 'a' }));
    expect(buildIdOf({ code: 'a' }, '3f8aa79')).toBe('3f8aa79');
  });

  it('allows merchant endpoints port 443 alone in production, any port in dev, and the ports WEBHOOK_ALLOWED_PORTS names', () => {
    const production = PRODUCTION_US;
    expect(loadConfig(production).webhooks.allowedPorts).toEqual([443]);
    expect(loadConfig({ ...production, WEBHOOK_ALLOWED_PORTS: '443, 8443' }).webhooks.allowedPorts).toEqual([
      443, 8443,
    ]);
    expect(loadConfig({}).webhooks.allowedPorts).toBeUndefined();
    expect(loadConfig({ WEBHOOK_ALLOWED_PORTS: '9000' }).webhooks.allowedPorts).toEqual([9000]);
    expect(configError({ ...production, WEBHOOK_ALLOWED_PORTS: '70000' }).message).toBe(
      'WEBHOOK_ALLOWED_PORTS="70000" is invalid: expected comma-separated ports from 1 to 65535, e.g. 443,8443',
    );
  });

  it('reports every bad variable at once, one line each, never echoing a secret', () => {
    const err = configError({
      SWEEP_INTERVAL: 'soon',
      LOG_LEVEL: 'chatty',
      DATABASE_URL_US: 'mysql://ledger:hunter2@db/ledger',
      PAYLOAD_KEYS_EU: 'not-a-key-ring',
    });
    expect(err.problems.map((p) => p.variable)).toEqual([
      'SWEEP_INTERVAL',
      'LOG_LEVEL',
      'DATABASE_URL_US',
      'PAYLOAD_KEYS_EU',
    ]);
    expect(err.variable).toBe('SWEEP_INTERVAL');
    expect(err.message.split('\n')).toHaveLength(5);
    expect(err.message).toMatch(/^4 configuration problems:/);
    expect(err.message).not.toMatch(/hunter2|not-a-key-ring/);
  });

  it('production mode requires each region’s database, Temporal address, keys and TLS, all named at once', () => {
    const missing = (env: Record<string, string>) => configError(env).problems.map((p) => p.variable);
    expect(missing({ HOLD_SWEEPER_MODE: 'production', HOLD_SWEEPER_REGIONS: 'us' })).toEqual([
      'DATABASE_URL_US',
      'TEMPORAL_ADDRESS_US',
      'PAYLOAD_KEYS_US',
      'MERCHANT_SECRET_KEYS_US',
      'TEMPORAL_TLS',
    ]);
    const reachable = {
      HOLD_SWEEPER_MODE: 'production',
      HOLD_SWEEPER_REGIONS: 'us',
      DATABASE_URL_US: 'postgres://h/db?sslmode=verify-full',
      TEMPORAL_ADDRESS: 't:7233',
    };
    expect(missing(reachable)).toEqual(['PAYLOAD_KEYS_US', 'MERCHANT_SECRET_KEYS_US', 'TEMPORAL_TLS']);
    const keyed = {
      ...reachable,
      PAYLOAD_KEYS_US: `k1:${Buffer.alloc(32).toString('base64')}`,
      MERCHANT_SECRET_KEYS_US: `k1:${Buffer.alloc(32, 5).toString('base64')}`,
    };
    expect(missing(keyed)).toEqual(['TEMPORAL_TLS']);
    const tls = { ...keyed, TEMPORAL_TLS: 'true' };
    // The codec endpoint in production: each user's token verified, over TLS; a static token is refused.
    expect(configError({ ...tls, CODEC_SERVER_ADDRESS: '0.0.0.0:8888' }).variable).toBe('CODEC_OIDC_ISSUER');
    expect(configError({ ...tls, CODEC_SERVER_ADDRESS: '0.0.0.0:8888', CODEC_AUTH_TOKEN: 'secret' })).toMatchObject({
      variable: 'CODEC_AUTH_TOKEN',
      value: '(redacted)',
    });
    expect(
      configError({ ...tls, CODEC_SERVER_ADDRESS: '0.0.0.0:8888', CODEC_OIDC_ISSUER: 'https://login.example.com' })
        .variable,
    ).toBe('CODEC_TLS_CERT_FILE');
    expect(
      configError({
        ...tls,
        CODEC_SERVER_ADDRESS: '0.0.0.0:8888',
        CODEC_OIDC_ISSUER: 'http://login.example.com',
        CODEC_BEHIND_TLS_PROXY: 'true',
      }).variable,
    ).toBe('CODEC_OIDC_ISSUER');
    expect(
      loadConfig({
        ...tls,
        CODEC_SERVER_ADDRESS: '0.0.0.0:8888',
        CODEC_OIDC_ISSUER: 'https://login.example.com',
        CODEC_BEHIND_TLS_PROXY: 'true',
      }).codecServer,
    ).toMatchObject({
      oidc: { issuer: 'https://login.example.com', audience: 'hold-sweeper-codec' },
      behindTlsProxy: true,
    });
  });

  it('production reaches the ledger over TLS only: a DATABASE_URL without sslmode=verify-full is refused, its password never echoed', () => {
    for (const url of [
      'postgres://u:pw@h/us',
      'postgres://u:pw@h/us?sslmode=require',
      'postgres://u:pw@h/us?sslmode=disable',
    ]) {
      const err = configError({ ...PRODUCTION_US, DATABASE_URL_US: url });
      expect(err).toMatchObject({ variable: 'DATABASE_URL_US', value: expect.stringContaining('u:***@h/us') });
      expect(err.message).toContain('sslmode=verify-full');
    }
    expect(
      loadConfig({ ...PRODUCTION_US, DATABASE_URL_US: 'postgres://u:pw@h/us?sslmode=verify-full&sslrootcert=/ca.pem' })
        .regions[0]!.databaseUrl,
    ).toContain('verify-full');
    // Dev and the tests' embedded PostgreSQL: plaintext on loopback, as before.
    expect(loadConfig({ DATABASE_URL_US: 'postgres://u:pw@127.0.0.1/us' }).regions[0]!.databaseUrl).toBe(
      'postgres://u:pw@127.0.0.1/us',
    );
  });

  it('reads a secret or a database URL from the file <NAME>_FILE names (compose’s secrets), never both, never an unreadable one', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-config-files-'));
    const file = (name: string, content: string) => {
      fs.writeFileSync(path.join(dir, name), content);
      return path.join(dir, name);
    };
    const key = `k9:${Buffer.alloc(32, 9).toString('base64')}`;
    const { DATABASE_URL_US: _url, PAYLOAD_KEYS_US: _keys, ...rest } = PRODUCTION_US;
    const fromFiles = {
      ...rest,
      DATABASE_URL_US_FILE: file('url', 'postgres://u:pw@h/us?sslmode=verify-full\n'),
      PAYLOAD_KEYS_US_FILE: file('keys', `${key}\n`),
    };
    const region = loadConfig(fromFiles).regions[0]!;
    expect(region.databaseUrl).toBe('postgres://u:pw@h/us?sslmode=verify-full');
    expect(region.payloadKeys!.map((k) => k.id)).toEqual(['k9']);
    // Both given: which one is meant is not guessed.
    expect(configError({ ...fromFiles, PAYLOAD_KEYS_US: key })).toMatchObject({
      variable: 'PAYLOAD_KEYS_US',
      value: '(redacted)',
      expected: 'PAYLOAD_KEYS_US or PAYLOAD_KEYS_US_FILE, not both',
    });
    expect(configError({ ...fromFiles, PAYLOAD_KEYS_US_FILE: path.join(dir, 'missing') })).toMatchObject({
      variable: 'PAYLOAD_KEYS_US_FILE',
      expected: 'a readable file (ENOENT)',
    });
    // A bad secret from a file is named by its variable, its content never shown.
    const bad = configError({ ...fromFiles, PAYLOAD_KEYS_US_FILE: file('bad', 'k1:short-and-secret') });
    expect(bad).toMatchObject({ variable: 'PAYLOAD_KEYS_US', value: '(redacted)' });
    expect(bad.message).not.toContain('short-and-secret');
    // The processor's signing secret and the admin API's variables read the same way.
    const secret = `whsec_${Buffer.alloc(24, 9).toString('base64')}`;
    expect(
      loadProcessorConfig({ PROCESSOR_SIGNING_SECRET_US_FILE: file('whsec', secret) }, 'us', 'dev').signingKey,
    ).toEqual(Buffer.alloc(24, 9));
    // Only secrets and database URLs have a _FILE form; each is listed with its variable.
    expect(CONFIG_VARIABLES.filter((v) => v.endsWith('_FILE') && !/^TEMPORAL_|_TLS_/.test(v))).toEqual([
      'CODEC_AUTH_TOKEN_FILE',
      'DATABASE_URL_US_FILE',
      'PAYLOAD_KEYS_US_FILE',
      'MERCHANT_SECRET_KEYS_US_FILE',
      'PROCESSOR_SIGNING_SECRET_US_FILE',
      'DATABASE_URL_EU_FILE',
      'PAYLOAD_KEYS_EU_FILE',
      'MERCHANT_SECRET_KEYS_EU_FILE',
      'PROCESSOR_SIGNING_SECRET_EU_FILE',
    ]);
    expect(loadConfig({ SWEEP_INTERVAL_FILE: file('interval', '5m') }).sweep.intervalMs).toBe(900_000);
    fs.rmSync(dir, { recursive: true });
  });

  it('reads the merchant-secret key ring per region, the dev ring when unset in dev; production requires its own and never echoes it', () => {
    const k1 = Buffer.alloc(32, 1).toString('base64');
    const k2 = Buffer.alloc(32, 2).toString('base64');
    const [us, eu] = loadConfig({ MERCHANT_SECRET_KEYS_EU: `k2:${k2},k1:${k1}` }).regions;
    expect(us!.secretKeys).toEqual(DEV_SECRET_KEYS);
    expect(eu!.secretKeys.map((k) => k.id)).toEqual(['k2', 'k1']);

    const production = {
      HOLD_SWEEPER_MODE: 'production',
      HOLD_SWEEPER_REGIONS: 'us,eu',
      DATABASE_URL_US: 'postgres://h/us?sslmode=verify-full',
      DATABASE_URL_EU: 'postgres://h/eu?sslmode=verify-full',
      TEMPORAL_ADDRESS: 't:7233',
      TEMPORAL_TLS: 'true',
      PAYLOAD_KEYS_US: `k1:${k1}`,
      PAYLOAD_KEYS_EU: `k1:${k2}`,
      MERCHANT_SECRET_KEYS_US: `s1:${k2}`,
    };
    const missing = configError(production);
    expect(missing).toMatchObject({ name: 'ConfigError', variable: 'MERCHANT_SECRET_KEYS_EU', value: undefined });
    expect(missing.message).toMatch(/^MERCHANT_SECRET_KEYS_EU is not set: expected id:base64key/);
    expect(
      loadConfig({ ...production, MERCHANT_SECRET_KEYS_EU: `s1:${k1}` }).regions[0]!.secretKeys.map((k) => k.id),
    ).toEqual(['s1']);

    const devKey = DEV_SECRET_KEYS[0]!.key.toString('base64');
    for (const bad of [`dev:${k1}`, `own:${devKey}`, `s1:${k1.slice(4)}`, `s1:${k1},s1:${k2}`]) {
      const err = configError({ ...production, MERCHANT_SECRET_KEYS_EU: bad });
      expect(err.variable).toBe('MERCHANT_SECRET_KEYS_EU');
      for (const material of [k1, devKey]) expect(err.message).not.toContain(material.slice(4, 20));
    }
    // The dev ring is refused in production, named as such; in dev the variable may name it.
    expect(configError({ ...production, MERCHANT_SECRET_KEYS_EU: `dev:${k1}` }).message).toMatch(
      /built-in dev key \("dev"\) protects nothing/,
    );
    expect(loadConfig({ MERCHANT_SECRET_KEYS_US: `dev:${devKey}` }).regions[0]!.secretKeys).toEqual(DEV_SECRET_KEYS);

    // The codec endpoint never holds the ring: neither read nor required.
    const { MERCHANT_SECRET_KEYS_US: _held, ...codec } = production;
    expect(loadConfig(codec, { merchantSecrets: 'not-held' }).regions.map((r) => r.secretKeys)).toEqual([[], []]);
  });

  it('never echoes a database password in an error', () => {
    const err = configError({ DATABASE_URL_US: 'mysql://ledger:s3cret-pw@db/ledger' });
    expect(err.message).not.toContain('s3cret-pw');
    expect(err.message).toContain('ledger:***@');
  });

  it.each([
    ['a slash', 'mysql://ledger:Pw5x/Qz8k@db/ledger', 'Pw5x/Qz8k'],
    ['an @', 'mysql://ledger:Pw5x@Qz8k@db/ledger', 'Pw5x@Qz8k'],
    ['a slash after digits (a parser would read a port)', 'mysql://ledger:44331/Qz8k@db/ledger', '44331/Qz8k'],
    ['a colon', 'mysql://ledger:Pw5x:Qz8k@db/ledger', 'Pw5x:Qz8k'],
  ])('never echoes a database password holding %s', (_what, url, password) => {
    const err = configError({ DATABASE_URL_US: url });
    expect(err.message).toContain('DATABASE_URL_US');
    for (const part of [password, ...password.split(/[/@:]/)]) expect(err.message).not.toContain(part);
    expect(redactUrl(url)).toBe('mysql://ledger:***@db/ledger');
  });

  it.each([
    ['password', 'mysql://ledger@db/ledger?password=Pw5xQz8k&sslmode=require', 'Pw5xQz8k'],
    ['sslpassword', 'mysql://ledger@db/ledger?sslmode=verify-full&sslpassword=Pw5xQz8k', 'Pw5xQz8k'],
    ['a percent-encoded PassWord', 'mysql://db/ledger?user=ledger&Pass%57ord=Pw5xQz8k', 'Pw5xQz8k'],
    ['api_token holding an @ and a #', 'mysql://db/ledger?api_token=Pw5x@Qz8k#frag', 'Pw5x@Qz8k#frag'],
    ['client_secret after a stray ?', 'mysql://db/ledger?sslmode=require?client_secret=Pw5xQz8k', 'Pw5xQz8k'],
    ['sslkey, besides a password in the user information', 'mysql://u:Pw5x@db/l?sslkey=Qz8k', 'Qz8k'],
  ])('never echoes a secret in a query parameter: %s', (_what, url, secret) => {
    const err = configError({ DATABASE_URL_US: url });
    expect(err.message).toContain('DATABASE_URL_US');
    for (const part of [secret, ...secret.split(/[@#]/), 'Pw5x']) expect(err.message).not.toContain(part);
    expect(redactUrl(url)).toMatch(/=\*\*\*($|&)/);
  });

  it('keeps the parameters that hold no secret, as written', () => {
    expect(
      redactUrl('postgres://ledger:Pw5x@db:5432/ledger?sslmode=verify-full&application_name=ops&sslpassword=x'),
    ).toBe('postgres://ledger:***@db:5432/ledger?sslmode=verify-full&application_name=ops&sslpassword=***');
  });

  it('a bounded sweep: SWEEP_TIMEOUT defaults to 100 pages × 60 s + the final release wait + slack, and never undercuts that wait', () => {
    expect(DEFAULT_SWEEP_TIMEOUT_MS).toBe(100 * 60_000 + DEFAULT_RELEASE_WAIT_MS + 10 * 60_000);
    // config.ts keeps its own copy so that loading configuration never loads workflow code.
    expect(SWEEP_RELEASE_WAIT_MS).toBe(DEFAULT_RELEASE_WAIT_MS);
    expect(loadConfig({ SWEEP_TIMEOUT: '6h' }).sweep.timeoutMs).toBe(6 * 3_600_000);
    expect(loadConfig({ SWEEP_TIMEOUT: '11m' }).sweep.timeoutMs).toBe(11 * 60_000);
    const err = configError({ SWEEP_TIMEOUT: '10m' });
    expect(err.variable).toBe('SWEEP_TIMEOUT');
    expect(err.message).toContain(`at least ${DEFAULT_RELEASE_WAIT_MS + 60_000} ms`);
  });

  it('parses durations', () => {
    expect([
      parseDuration('X', '500ms'),
      parseDuration('X', '30s'),
      parseDuration('X', '2h'),
      parseDuration('X', '3d'),
    ]).toEqual([500, 30_000, 7_200_000, 259_200_000]);
  });
});

describe('the processor-event receiver’s config', () => {
  const secret = `whsec_${Buffer.alloc(24, 3).toString('base64')}`;
  const receiverError = (env: Record<string, string>): ConfigError => {
    try {
      loadProcessorConfig(env, 'us', 'production');
    } catch (err) {
      if (err instanceof ConfigError) return err;
      throw err;
    }
    throw new Error('expected a ConfigError');
  };

  it('reads the region’s processor secret, where to listen and the gap wait', () => {
    const config = loadProcessorConfig(
      {
        PROCESSOR_SIGNING_SECRET_US: secret,
        PROCESSOR_RECEIVER_ADDRESS: '10.0.0.5:9000',
        PROCESSOR_GAP_WAIT: '5m',
        PROCESSOR_RECEIVER_BEHIND_TLS_PROXY: 'true',
      },
      'us',
      'production',
    );
    expect(config).toMatchObject({ host: '10.0.0.5', port: 9000, gapWaitMs: 300_000 });
    expect(config.signingKey).toEqual(Buffer.alloc(24, 3));
    expect(loadProcessorConfig({ PROCESSOR_SIGNING_SECRET_US: secret }, 'us', 'dev')).toMatchObject({
      host: '127.0.0.1',
      port: 8090,
      gapWaitMs: 900_000,
    });
  });

  it('names a missing or malformed secret without echoing it, a bad address and a bad gap wait', () => {
    expect(receiverError({})).toMatchObject({ variable: 'PROCESSOR_SIGNING_SECRET_US' });
    const short = receiverError({ PROCESSOR_SIGNING_SECRET_US: 'whsec_c2hvcnQ=' });
    expect(short).toMatchObject({ variable: 'PROCESSOR_SIGNING_SECRET_US' });
    expect(short.message).not.toContain('c2hvcnQ');
    expect(receiverError({ PROCESSOR_SIGNING_SECRET_US: 'not base64!' }).message).not.toContain('not base64');
    expect(
      receiverError({ PROCESSOR_SIGNING_SECRET_US: secret, PROCESSOR_RECEIVER_ADDRESS: 'localhost' }),
    ).toMatchObject({
      variable: 'PROCESSOR_RECEIVER_ADDRESS',
    });
    expect(
      receiverError({ PROCESSOR_SIGNING_SECRET_US: secret, PROCESSOR_RECEIVER_ADDRESS: 'host:99999' }),
    ).toMatchObject({
      variable: 'PROCESSOR_RECEIVER_ADDRESS',
    });
    expect(
      receiverError({
        PROCESSOR_SIGNING_SECRET_US: secret,
        PROCESSOR_RECEIVER_BEHIND_TLS_PROXY: 'true',
        PROCESSOR_GAP_WAIT: 'soon',
      }),
    ).toMatchObject({
      variable: 'PROCESSOR_GAP_WAIT',
    });
  });

  it('production: its own TLS, or behind a TLS proxy said; its metrics on their own address, never the processor’s port', () => {
    expect(receiverError({ PROCESSOR_SIGNING_SECRET_US: secret })).toMatchObject({
      variable: 'PROCESSOR_RECEIVER_TLS_CERT_FILE',
    });
    expect(
      receiverError({ PROCESSOR_SIGNING_SECRET_US: secret, PROCESSOR_RECEIVER_TLS_CERT_FILE: '/c.pem' }),
    ).toMatchObject({ variable: 'PROCESSOR_RECEIVER_TLS_KEY_FILE' });
    const own = loadProcessorConfig(
      {
        PROCESSOR_SIGNING_SECRET_US: secret,
        PROCESSOR_RECEIVER_TLS_CERT_FILE: '/c.pem',
        PROCESSOR_RECEIVER_TLS_KEY_FILE: '/k.pem',
      },
      'us',
      'production',
    );
    expect(own).toMatchObject({
      port: 8090,
      tls: { certFile: '/c.pem', keyFile: '/k.pem' },
      behindTlsProxy: false,
      metrics: { host: '0.0.0.0', port: 9465 },
    });
    expect(
      loadProcessorConfig(
        { PROCESSOR_SIGNING_SECRET_US: secret, PROCESSOR_RECEIVER_BEHIND_TLS_PROXY: 'true' },
        'us',
        'production',
      ),
    ).toMatchObject({ behindTlsProxy: true });
    // Dev serves metrics only where told, and plain HTTP.
    const dev = loadProcessorConfig({ PROCESSOR_SIGNING_SECRET_US: secret }, 'us', 'dev');
    expect(dev.metrics).toBeUndefined();
    expect(dev.tls).toBeUndefined();
    expect(
      loadProcessorConfig(
        { PROCESSOR_SIGNING_SECRET_US: secret, PROCESSOR_RECEIVER_METRICS_ADDRESS: '127.0.0.1:9999' },
        'us',
        'dev',
      ).metrics,
    ).toEqual({ host: '127.0.0.1', port: 9999 });
  });
});

describe('the ops CLI as a client of the admin API', () => {
  it('sends its token over https, or plain http only to loopback; each region’s token first', () => {
    const urlError = (url: string) => {
      try {
        adminApiFromEnv({ HOLD_SWEEPER_API_URL_US: url, HOLD_SWEEPER_API_TOKEN: 't' }, undefined);
      } catch (err) {
        if (err instanceof ConfigError) return err.message;
        throw err;
      }
      return 'accepted';
    };
    expect(urlError('http://10.0.0.1:8443')).toMatch(/http:\/\/ only to loopback/);
    expect(urlError('http://api.example.com')).toMatch(/http:\/\/ only to loopback/);
    expect(urlError('ftp://127.0.0.1')).toMatch(/an https:\/\/ URL/);
    for (const fine of [
      'https://api.example.com',
      'http://127.0.0.1:8443',
      'http://127.0.0.2:1',
      'http://localhost:1',
      'http://[::1]:1',
    ])
      expect(urlError(fine), fine).toBe('accepted');
    expect(() => adminApiFromEnv({ HOLD_SWEEPER_API_URL_EU: 'https://eu.example.com' }, undefined)).toThrow(
      /HOLD_SWEEPER_API_TOKEN_EU/,
    );
  });
});

describe('the admin API’s config', () => {
  const production = { ...PRODUCTION_US, API_OIDC_ISSUER: 'https://login.example.com/realms/ops' };
  const apiError = (env: Record<string, string>) => {
    try {
      loadApiConfig(env, loadConfig(env));
    } catch (err) {
      if (err instanceof ConfigError) return err;
      throw err;
    }
    throw new Error('expected a ConfigError');
  };

  it('production: with its own TLS, or explicitly behind a TLS proxy; the issuer, audience and roles claim', () => {
    const tls = loadApiConfig(
      { ...production, API_TLS_CERT_FILE: '/c.pem', API_TLS_KEY_FILE: '/k.pem' },
      loadConfig(production),
    );
    expect(tls).toMatchObject({
      region: 'us',
      host: '0.0.0.0',
      port: 8443,
      issuer: 'https://login.example.com/realms/ops',
      audience: 'hold-sweeper-admin-us',
      rolesClaim: 'roles',
      clockToleranceSeconds: 30,
      maxTokenAgeSeconds: 86_400,
      tls: { certFile: '/c.pem', keyFile: '/k.pem' },
      behindTlsProxy: false,
    });
    expect(loadApiConfig({ ...production, API_BEHIND_TLS_PROXY: 'true' }, loadConfig(production))).toMatchObject({
      behindTlsProxy: true,
    });
    expect(
      loadApiConfig({ ...production, API_BEHIND_TLS_PROXY: 'true', API_REGION: 'us' }, loadConfig(production)).region,
    ).toBe('us');
  });

  it("a bearer token lives a day unless said, on the admin API's verifier and the codec endpoint's alike", () => {
    const behind = { ...production, API_BEHIND_TLS_PROXY: 'true' };
    expect(loadApiConfig({ ...behind, API_TOKEN_MAX_AGE: '2h' }, loadConfig(production)).maxTokenAgeSeconds).toBe(
      7_200,
    );
    const codec = { CODEC_OIDC_ISSUER: 'https://login.example.com/realms/ops' };
    expect(loadConfig(codec).codecServer.oidc?.maxTokenAgeSeconds).toBe(86_400);
    expect(loadConfig({ ...codec, CODEC_OIDC_TOKEN_MAX_AGE: '15m' }).codecServer.oidc?.maxTokenAgeSeconds).toBe(900);
    expect(apiError({ ...behind, API_TOKEN_MAX_AGE: 'forever' }).variable).toBe('API_TOKEN_MAX_AGE');
  });

  it('the merchant API: its own address and TLS settings, the same refusal without TLS in production', () => {
    expect(
      loadMerchantApiConfig({ ...production, MERCHANT_API_BEHIND_TLS_PROXY: 'true' }, loadConfig(production)),
    ).toMatchObject({
      region: 'us',
      host: '0.0.0.0',
      port: 8444,
      behindTlsProxy: true,
    });
    expect(() => loadMerchantApiConfig(production, loadConfig(production))).toThrow(/MERCHANT_API_TLS_CERT_FILE/);
    // The admin API's TLS does not cover it: each listener says its own.
    expect(() =>
      loadMerchantApiConfig({ ...production, API_BEHIND_TLS_PROXY: 'true' }, loadConfig(production)),
    ).toThrow(/MERCHANT_API_TLS_CERT_FILE/);
    expect(
      loadMerchantApiConfig({ HOLD_SWEEPER_REGIONS: 'eu' }, loadConfig({ HOLD_SWEEPER_REGIONS: 'eu' })),
    ).toMatchObject({
      region: 'eu',
      host: '127.0.0.1',
      port: 8444,
    });
  });

  it('production refuses no TLS, no issuer, an http issuer, half a certificate, another region; dev takes plain http', () => {
    expect(apiError(production)).toMatchObject({ variable: 'API_TLS_CERT_FILE' });
    expect(apiError({ ...production, API_BEHIND_TLS_PROXY: 'true', API_OIDC_ISSUER: '' })).toMatchObject({
      variable: 'API_OIDC_ISSUER',
    });
    expect(
      apiError({ ...production, API_BEHIND_TLS_PROXY: 'true', API_OIDC_ISSUER: 'http://login.example.com' }),
    ).toMatchObject({
      variable: 'API_OIDC_ISSUER',
    });
    expect(apiError({ ...production, API_TLS_CERT_FILE: '/c.pem' })).toMatchObject({ variable: 'API_TLS_KEY_FILE' });
    expect(apiError({ ...production, API_BEHIND_TLS_PROXY: 'yes' })).toMatchObject({
      variable: 'API_BEHIND_TLS_PROXY',
    });
    expect(apiError({ ...production, API_BEHIND_TLS_PROXY: 'true', API_REGION: 'eu' })).toMatchObject({
      variable: 'API_REGION',
    });
    expect(apiError({ ...production, API_BEHIND_TLS_PROXY: 'true', API_ADDRESS: 'everywhere' })).toMatchObject({
      variable: 'API_ADDRESS',
    });
    // Two regions: which one is said.
    expect(apiError({ API_OIDC_ISSUER: 'http://127.0.0.1:9000' })).toMatchObject({ variable: 'API_REGION' });
    expect(loadApiConfig({ API_OIDC_ISSUER: 'http://127.0.0.1:9000', API_REGION: 'eu' }, loadConfig({}))).toMatchObject(
      {
        region: 'eu',
        host: '127.0.0.1',
        issuer: 'http://127.0.0.1:9000',
        behindTlsProxy: false,
      },
    );
  });
});

describe('docs/configuration.md', () => {
  const doc = fs.readFileSync(CONFIGURATION_DOC, 'utf8');

  it('lists every variable as the schema declares it (npm run docs:config writes its tables)', () => {
    expect(withGeneratedTables(doc)).toBe(doc);
    const tables = withGeneratedTables(doc.replace(/\| `SWEEP_INTERVAL` \|[^\n]*\n/, ''));
    expect(tables).toContain('| `SWEEP_INTERVAL` |');
    for (const variable of [...CONFIG_VARIABLES, ...DEV_CONFIG_VARIABLES]) {
      // The Temporal connection's are grouped in rows of their own (`TEMPORAL_TLS_CLIENT_CERT_PATH` (`_DATA`)).
      const connection = (TEMPORAL_CONNECTION_VARIABLES as readonly string[]).includes(
        variable.replace(/_(US|EU)$/, ''),
      );
      if (!connection) expect(doc, variable).toContain(`\`${variable}\``);
    }
  });
});
