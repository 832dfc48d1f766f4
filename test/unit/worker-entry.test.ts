/**
 * Fail closed: no entry point runs in dev mode (no SSRF guard, plain http, no encryption, no four eyes, an optional
 * codec token) because a variable was forgotten. The real entry points, as `npm run worker`, `npm run codec-server`
 * and `npm run ops` start them; each stops at its configuration, before touching any service.
 */
import { spawnSync } from 'node:child_process';
import { expect, it } from 'vitest';

/**
 * Each test starts a real entry point under tsx (compiling its imports): seconds on a busy machine, as its spawn
 * allows.
 */
const SPAWN_MS = 60_000;

it(
  'fail closed: npm run worker without HOLD_SWEEPER_MODE refuses to start, naming the variable',
  () => {
    const env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      TEMPORAL_ADDRESS: '127.0.0.1:1',
      DATABASE_URL_US: 'postgres://u:p@127.0.0.1:1/x',
    };
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'src/bin/worker.ts'], {
      env,
      encoding: 'utf8',
      timeout: 60_000,
    });
    // Its last words, one line on stderr through the process's logger, and nothing on stdout.
    expect(JSON.parse(result.stderr)).toMatchObject({
      level: 'fatal',
      service: 'worker',
      msg: expect.stringMatching(/^ConfigError: HOLD_SWEEPER_MODE is not set/),
      err: { type: 'ConfigError', stack: expect.stringContaining('src/config.ts') },
    });
    expect(result.stdout).toBe('');
    expect(result.status).toBe(1);
  },
  SPAWN_MS,
);

it(
  'fail closed: npm run codec-server without HOLD_SWEEPER_MODE refuses to start (in dev its token is optional)',
  () => {
    const env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      CODEC_SERVER_ADDRESS: '127.0.0.1:0',
      PAYLOAD_KEYS_US: `k1:${Buffer.alloc(32).toString('base64')}`,
    };
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'src/bin/codec-server.ts'], {
      env,
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(result.stderr).toContain('ConfigError: HOLD_SWEEPER_MODE is not set');
    expect(result.stdout).not.toContain('codec endpoint serving');
    expect(result.status).toBe(1);
  },
  SPAWN_MS,
);

it(
  'fail closed: npm run ops without HOLD_SWEEPER_MODE refuses, even `merchant ping` (dev would allow private addresses)',
  () => {
    const env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      HOLD_SWEEPER_REGIONS: 'us',
      DATABASE_URL_US: 'postgres://u:p@127.0.0.1:1/x',
    };
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'src/bin/ops.ts', 'merchant', 'ping', 'm_1'], {
      env,
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(result.stderr).toContain('ConfigError: HOLD_SWEEPER_MODE is not set');
    expect(result.status).toBe(2);
  },
  SPAWN_MS,
);
