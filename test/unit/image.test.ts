/**
 * The image installs its production dependencies with `npm ci --omit=dev` (Dockerfile), which refuses a lockfile out
 * of step with package.json, whatever it omits: one that lacked vite's optional `napi-windows-process-start-time`
 * (a Windows-only package, never installed here) failed the image's build with "Missing: ... from lock file" while
 * `npm install` and every test passed. The same command on a copy of the two files, as the image's build runs it.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const REPO = path.resolve(import.meta.dirname, '../..');

it('the lockfile is one `npm ci --omit=dev` accepts', { timeout: 300_000 }, async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hs-npm-ci-'));
  try {
    for (const file of ['package.json', 'package-lock.json'])
      await fs.copyFile(path.join(REPO, file), path.join(dir, file));
    // Resolves with the output on exit code 0; rejects with npm's own words otherwise.
    const ci = promisify(execFile)(
      'npm',
      ['ci', '--omit=dev', '--dry-run', '--ignore-scripts', '--no-audit', '--no-fund'],
      {
        cwd: dir,
        timeout: 240_000,
        maxBuffer: 16 * 1024 * 1024,
      },
    );
    await expect(ci).resolves.toMatchObject({ stdout: expect.stringMatching(/^added \d+ packages/m) });
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
});
