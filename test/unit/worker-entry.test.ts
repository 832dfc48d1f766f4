/**
 * Case 9 of the hardening issue, fail closed: the production worker entry point never runs in dev mode (no SSRF
 * guard, plain http, no encryption) because a variable was forgotten. The real entry point, as `npm run worker`
 * starts it; it stops at its configuration, before touching any service.
 */
import { spawnSync } from 'node:child_process';
import { expect, it } from 'vitest';

it('case 9, fail closed: npm run worker without HOLD_SWEEPER_MODE refuses to start, naming the variable', () => {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, TEMPORAL_ADDRESS: '127.0.0.1:1', DATABASE_URL_US: 'postgres://u:p@127.0.0.1:1/x' };
  const result = spawnSync(process.execPath, ['--import', 'tsx', 'src/bin/worker.ts'], { env, encoding: 'utf8', timeout: 60_000 });
  expect(result.stderr).toContain('ConfigError: HOLD_SWEEPER_MODE is not set');
  expect(result.status).toBe(1);
});
