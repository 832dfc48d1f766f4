/**
 * The image installs its production dependencies with `npm ci --omit=dev --omit=optional` (Dockerfile), which refuses a lockfile out
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
import { REQUIRED_NODE_MAJOR, unsupportedNode } from '../../src/node-version.js';

const REPO = path.resolve(import.meta.dirname, '../..');

it(
  'the lockfile is one `npm ci --omit=dev --omit=optional` accepts, leaving out the npm scripts’ Node',
  { timeout: 300_000 },
  async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hs-npm-ci-'));
    try {
      for (const file of ['package.json', 'package-lock.json'])
        await fs.copyFile(path.join(REPO, file), path.join(dir, file));
      // Resolves with the output on exit code 0; rejects with npm's own words otherwise.
      const ci = promisify(execFile)(
        'npm',
        ['ci', '--omit=dev', '--omit=optional', '--dry-run', '--ignore-scripts', '--no-audit', '--no-fund'],
        {
          cwd: dir,
          timeout: 240_000,
          maxBuffer: 16 * 1024 * 1024,
        },
      );
      const { stdout } = await ci;
      expect(stdout).toMatch(/^added \d+ packages/m);
      expect(stdout).toMatch(/^add @temporalio\/worker /m);
      expect(stdout).not.toMatch(/^add node-linux-/m);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  },
);

it('the suite runs on the Node the image runs, the one the npm scripts are pinned to; an older one is refused by name', async () => {
  const dockerfile = await fs.readFile(path.join(REPO, 'Dockerfile'), 'utf8');
  const pkg = JSON.parse(await fs.readFile(path.join(REPO, 'package.json'), 'utf8')) as {
    optionalDependencies: Record<string, string>;
  };
  const major = String(REQUIRED_NODE_MAJOR);
  expect(new Set([...dockerfile.matchAll(/^FROM node:(\d+)-/gm)].map((m) => m[1]))).toEqual(new Set([major]));
  expect(Object.keys(pkg.optionalDependencies)).toContain(`node-${process.platform}-${process.arch}`);
  for (const version of Object.values(pkg.optionalDependencies)) expect(version.split('.')[0]).toBe(major);
  expect(process.versions.node.split('.')[0]).toBe(major);
  expect(unsupportedNode('20.20.2')).toMatch(/needs Node 24 or later; this is Node 20\.20\.2/);
  expect(unsupportedNode('24.0.0')).toBeUndefined();
});
