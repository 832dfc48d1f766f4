/** A worker's start (src/workers/startup.ts): it waits for what restarts, and stops at once at what no wait fixes. */
import { expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { NotReachableError, whenReachable } from '../../src/workers/startup.js';

const failingThen = (errors: unknown[]) => {
  let calls = 0;
  return {
    attempt: async () => {
      const err = errors[calls++];
      if (err) throw err;
      return 'up';
    },
    calls: () => calls,
  };
};

it('retries a connection refused until it answers, saying so each time', async () => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
  const { attempt, calls } = failingThen([refused, refused]);
  const warned: string[] = [];
  await expect(
    whenReachable('ledger database', attempt, { warn: (message) => warned.push(message), pauseMs: 0 }),
  ).resolves.toBe('up');
  expect(calls()).toBe(3);
  expect(warned).toEqual([
    'ledger database not reachable yet; retrying',
    'ledger database not reachable yet; retrying',
  ]);
});

it('stops at once at a refused role (ConfigError) or a wrong password (28P01), naming it', async () => {
  const owner = new ConfigError('DATABASE_URL_US', '(redacted: connects as hold_sweeper_migrator)', 'the worker role');
  const password = Object.assign(new Error('password authentication failed for user "w"'), { code: '28P01' });
  for (const err of [owner, password]) {
    const { attempt, calls } = failingThen([err]);
    const warned: string[] = [];
    await expect(whenReachable('ledger database', attempt, { warn: (m) => warned.push(m), pauseMs: 0 })).rejects.toBe(
      err,
    );
    expect(calls()).toBe(1);
    expect(warned).toEqual([]);
  }
});

it('gives up on what does not come back within its wait, with the last error', async () => {
  const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
  const { attempt } = failingThen([refused]);
  const failed = whenReachable('Temporal', attempt, { warn: () => undefined, retryMs: -1, pauseMs: 0 });
  await expect(failed).rejects.toThrow(
    new NotReachableError('Temporal not reachable within 0 s: connect ECONNREFUSED'),
  );
  await expect(failed).rejects.toHaveProperty('cause', refused);
});
