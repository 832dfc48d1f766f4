/**
 * The code as a reviewer's tools see it: eslint, prettier and the type checker over the whole repository. They run as
 * a file of the suite, beside the others, not before them: on two cores they are half a minute of CPU that the
 * integration files, mostly waiting on timers and merchants, leave free. `npm run lint` and `npm run typecheck` run
 * them alone; prettier's, eslint's and tsc's caches (node_modules/.cache) make a second run recheck only what changed.
 * eslint's cache is per file: a type-aware rule (a floating promise) in a file that did not change is not rechecked
 * when another file changes a type under it. tsc still checks every type; CI, from a clean clone, lints every file.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const exec = promisify(execFile);
const REPO = path.resolve(import.meta.dirname, '../..');

/** An npm script of this repository: its exit code, and on failure everything it printed. */
const npmScript = (name: string) =>
  exec('npm', ['run', '--silent', name], { cwd: REPO, maxBuffer: 64 * 1024 * 1024 }).then(
    () => ({ code: 0, output: '' }),
    (err: { code?: number | string; stdout?: string; stderr?: string }) => ({
      code: err.code ?? 1,
      output: `${err.stdout ?? ''}${err.stderr ?? ''}`.trim(),
    }),
  );

// One after the other: the file takes one of the run's workers, not two.
describe('static checks', { timeout: 600_000 }, () => {
  it.each(['lint', 'typecheck'])('npm run %s passes', async (script) => {
    const { code, output } = await npmScript(script);
    expect(code, output).toBe(0);
  });
});
