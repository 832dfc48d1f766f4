/**
 * The operator CLI's edges that need no stack (src/ops/cli.ts): a command that does not exist is refused before any
 * configuration is read, each command has its own help, and an admin API that does not answer is named by its URL.
 */
import { expect, it } from 'vitest';
import { freePort } from '../../dev/embedded-postgres.js';
import { ConfigError } from '../../src/errors.js';
import { AdminApiUnreachable } from '../../src/ops/admin-client.js';
import { runOps } from '../../src/ops/cli.js';

/** Nothing configured at all: not even HOLD_SWEEPER_MODE. */
const NOTHING = {};

it('refuses a command that does not exist before reading any configuration, listing the ones that do', async () => {
  const refused = runOps(['statsu', 'h_1'], () => undefined, NOTHING);
  await expect(refused).rejects.toThrow(ConfigError);
  await expect(refused).rejects.toThrow(/command="statsu".*one of sweep-now, status, .*audit/);
});

it('prints the help of the command asked about, and of a sub-command, with the options every command takes', async () => {
  const printed: string[] = [];
  expect(await runOps(['status', '--help'], (line) => printed.push(line), NOTHING)).toBe(0);
  expect(printed.join('\n')).toContain('status <hold id>');
  expect(printed.join('\n')).not.toContain('sweep-now');
  expect(printed.join('\n')).toContain('--region us|eu');
  printed.length = 0;
  expect(await runOps(['merchant', 'rotate-secret', '--help'], (line) => printed.push(line), NOTHING)).toBe(0);
  expect(printed.join('\n')).toMatch(/Usage: npm run ops -- merchant rotate-secret/);
  expect(printed.join('\n')).toContain('--overlap 24h');
  expect(printed.join('\n')).not.toContain('merchant add');
});

it('names the URL of an admin API that does not answer, and why, instead of "fetch failed"', async () => {
  const url = `http://127.0.0.1:${await freePort()}`;
  const env = { HOLD_SWEEPER_API_URL_US: url, HOLD_SWEEPER_API_TOKEN: 'a-token' };
  const failed = runOps(['sweeps', 'status'], () => undefined, env);
  await expect(failed).rejects.toThrow(AdminApiUnreachable);
  await expect(failed).rejects.toThrow(new RegExp(`${url}/v1/sweeps/status did not answer \\(.*ECONNREFUSED`));
  await expect(failed).rejects.not.toThrow(/a-token/);
});
