/**
 * How a region reaches Temporal (src/temporal-connection.ts): envconfig's conventions (a temporal.toml profile, the
 * TEMPORAL_* variables), per-region overrides for a process serving two regions, booleans read strictly, production
 * refusing plaintext unless said, an API key from a file that rotates without a restart, and no key in any message.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { connectionOptionsOf, keepApiKeyFresh, loadTemporalConnectionSettings } from '../../src/temporal-connection.js';

const tempDir = () => fs.mkdtemp(path.join(os.tmpdir(), 'hs-temporal-conn-'));
const configError = (fn: () => unknown): ConfigError => {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
};
const PRODUCTION = {
  HOLD_SWEEPER_MODE: 'production',
  DATABASE_URL_US: 'postgres://h/us?sslmode=verify-full',
  DATABASE_URL_EU: 'postgres://h/eu?sslmode=verify-full',
  PAYLOAD_KEYS_US: `k1:${Buffer.alloc(32, 1).toString('base64')}`,
  PAYLOAD_KEYS_EU: `k1:${Buffer.alloc(32, 2).toString('base64')}`,
  MERCHANT_SECRET_KEYS_US: `k1:${Buffer.alloc(32, 3).toString('base64')}`,
  MERCHANT_SECRET_KEYS_EU: `k1:${Buffer.alloc(32, 4).toString('base64')}`,
  TEMPORAL_ADDRESS: 'temporal.hold.internal:7233',
};

describe('Temporal connection settings', () => {
  it("reads a region's own profile from temporal.toml, and its own variables over the shared ones", async () => {
    const dir = await tempDir();
    const file = path.join(dir, 'temporal.toml');
    await fs.writeFile(
      file,
      [
        '[profile.us]',
        'address = "us.temporal.hold.internal:7233"',
        'namespace = "hold-sweeper-us"',
        '[profile.us.tls]',
        `server_ca_cert_path = "${path.join(dir, 'ca.pem')}"`,
        'server_name = "temporal.hold.internal"',
        '[profile.us.grpc_meta]',
        'x-tenant = "hold"',
        '',
      ].join('\n'),
    );
    await fs.writeFile(path.join(dir, 'ca.pem'), '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    const env = {
      TEMPORAL_CONFIG_FILE: file,
      TEMPORAL_PROFILE_US: 'us',
      TEMPORAL_ADDRESS_EU: 'eu.temporal:7233',
      TEMPORAL_API_KEY_EU: 'eu-key',
    };
    const us = loadTemporalConnectionSettings(env, 'us', { servesOneRegion: false });
    expect(us).toMatchObject({
      address: 'us.temporal.hold.internal:7233',
      apiKey: undefined,
      metadata: { 'x-tenant': 'hold' },
    });
    expect(us.tls).toMatchObject({ serverNameOverride: 'temporal.hold.internal' });
    const eu = loadTemporalConnectionSettings(env, 'eu', { servesOneRegion: false });
    // The EU region has no profile of its own: its variables, and TLS on for its key.
    expect(eu).toMatchObject({ address: 'eu.temporal:7233', apiKey: 'eu-key', tls: true });
    // A profile's namespace serves a process of one region; with two, each region's namespace is its own.
    expect(us.namespace).toBeUndefined();
    expect(loadTemporalConnectionSettings(env, 'us', { servesOneRegion: true }).namespace).toBe('hold-sweeper-us');
    expect(connectionOptionsOf(eu, eu.address!)).toEqual({ address: 'eu.temporal:7233', tls: true, apiKey: 'eu-key' });
  });

  it.each([
    ['TEMPORAL_TLS', 'TRUE'],
    ['TEMPORAL_TLS', 'yes'],
    ['TEMPORAL_TLS_EU', 'on'],
    ['TEMPORAL_TLS_DISABLE_HOST_VERIFICATION', 'True'],
  ])('refuses %s=%s instead of reading it as false, as envconfig would', (variable, value) => {
    const err = configError(() => loadConfig({ [variable]: value }));
    expect(err.variable).toBe(variable);
    expect(err.message).toMatch(/true, false, 1 or 0/);
  });

  it('refuses disabling host verification, which the TypeScript SDK would silently not do', () => {
    expect(configError(() => loadConfig({ TEMPORAL_TLS_DISABLE_HOST_VERIFICATION: 'true' })).message).toMatch(
      /TEMPORAL_TLS_SERVER_NAME/,
    );
  });

  it('production refuses a plaintext connection unless TLS is disabled explicitly, region by region', () => {
    expect(configError(() => loadConfig(PRODUCTION)).variable).toBe('TEMPORAL_TLS');
    expect(configError(() => loadConfig({ ...PRODUCTION, TEMPORAL_TLS_US: 'true' })).variable).toBe('TEMPORAL_TLS');
    // TLS with the system's roots: an empty TLS config, which the SDK connects with.
    expect(loadConfig({ ...PRODUCTION, TEMPORAL_TLS: 'true' }).regions.map((r) => Boolean(r.temporal?.tls))).toEqual([
      true,
      true,
    ]);
    expect(
      loadConfig({ ...PRODUCTION, TEMPORAL_TLS: 'false' }).regions.map((r) => r.temporal?.tlsDisabledExplicitly),
    ).toEqual([true, true]);
    expect(loadConfig({ ...PRODUCTION, TEMPORAL_API_KEY: 'k' }).regions.map((r) => Boolean(r.temporal?.tls))).toEqual([
      true,
      true,
    ]);
  });

  it('names a missing profile, and never puts an API key in a message', async () => {
    const err = configError(() =>
      loadConfig({
        TEMPORAL_PROFILE: 'nope',
        TEMPORAL_CONFIG_FILE: '/nonexistent/temporal.toml',
        TEMPORAL_API_KEY: 'sekr1t-token',
      }),
    );
    expect(err.variable).toBe('TEMPORAL_PROFILE');
    expect(err.message).not.toContain('sekr1t-token');
    const both = configError(() =>
      loadConfig({ TEMPORAL_API_KEY: 'sekr1t-token', TEMPORAL_API_KEY_FILE: '/run/secrets/t' }),
    );
    expect(both.variable).toBe('TEMPORAL_API_KEY_FILE');
    expect(both.message).not.toContain('sekr1t-token');
  });

  it('rotates an API key read from a file without a restart: every connection gets the new one', async () => {
    const dir = await tempDir();
    const file = path.join(dir, 'token');
    await fs.writeFile(file, 'token-1\n');
    const settings = loadTemporalConnectionSettings(
      { TEMPORAL_API_KEY_FILE: file, TEMPORAL_API_KEY_REFRESH: '1' },
      'us',
      { servesOneRegion: true },
    );
    expect(connectionOptionsOf(settings, 't:7233')).toMatchObject({ apiKey: 'token-1', tls: true });
    const given: string[] = [];
    const errors: Error[] = [];
    const stop = keepApiKeyFresh(
      settings,
      [{ setApiKey: (k) => void given.push(`a:${k}`) }, { setApiKey: async (k) => void given.push(`b:${k}`) }],
      (e) => errors.push(e),
    );
    try {
      await fs.writeFile(file, 'token-2\n');
      await expect.poll(() => given, { timeout: 5_000 }).toEqual(['a:token-2', 'b:token-2']);
      // An unreadable file keeps the last key and says so; it never throws out of the timer.
      await fs.rm(file);
      await expect.poll(() => errors.length, { timeout: 5_000 }).toBeGreaterThan(0);
      expect(errors[0]!.message).not.toContain('token-2');
      expect(given).toEqual(['a:token-2', 'b:token-2']);
    } finally {
      stop();
    }
  });
});
