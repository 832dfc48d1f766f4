/**
 * A Node.js 24 LTS binary, the image's Node (Dockerfile), for the test that runs the compiled entry points under it
 * while the suite runs on the machine's own Node (test/integration/node24.test.ts). Obtained like the Temporal CLI
 * (dev/temporal-cli.ts): from a package registry once per machine, then from the cache directory.
 *
 * Routes, in order:
 *   1. A copy cached by an earlier run of route 2, `<cacheDir>/node/v<version>-<platform>-<arch>/node`.
 *   2. The npm registry's `node-<platform>-<arch>` package (the official release build, repackaged for the `node`
 *      package on npm): `npm pack` downloads its tarball and checks it against the registry's integrity; it is checked
 *      again here against the integrity the registry states, and only `bin/node` is extracted.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { NodeBinaryNotFoundError } from '../src/errors.js';
import { describe, installIntoCache, isExecutable, type RouteAttempt } from './temporal-cli.js';

const run = promisify(execFile);

/**
 * Node 24 "Krypton", the LTS line the image's `node:24-bookworm-slim` follows; pinned so every run tests the same
 * build.
 */
export const NODE24_VERSION = '24.22.3';

const PACKAGE = `node-${process.platform}-${process.arch}`;

export const cachedNode24Path = (cacheDir: string) =>
  path.join(cacheDir, 'node', `v${NODE24_VERSION}-${process.platform}-${process.arch}`, 'node');

/** The binary answers `--version` with the version it was obtained as, or it is not used. */
async function checkVersion(binary: string): Promise<string> {
  const { stdout } = await run(binary, ['--version'], { timeout: 30_000 });
  if (stdout.trim() !== `v${NODE24_VERSION}`) throw new Error(`${binary} --version answered ${stdout.trim()}`);
  return binary;
}

async function fromNpmRegistry(cacheDir: string): Promise<string> {
  await fs.mkdir(cacheDir, { recursive: true });
  const work = await fs.mkdtemp(path.join(cacheDir, 'node-'));
  try {
    const spec = `${PACKAGE}@${NODE24_VERSION}`;
    const stated = JSON.parse(
      (await run('npm', ['view', spec, 'dist.integrity', '--json'], { cwd: work, timeout: 120_000 })).stdout,
    ) as string;
    const [packed] = JSON.parse(
      (
        await run('npm', ['pack', spec, '--json', '--pack-destination', work], {
          cwd: work,
          timeout: 600_000,
          maxBuffer: 16 * 1024 * 1024,
        })
      ).stdout,
    ) as { filename: string }[];
    const tarball = path.join(work, packed!.filename);
    const actual = `sha512-${createHash('sha512')
      .update(await fs.readFile(tarball))
      .digest('base64')}`;
    if (actual !== stated)
      throw new Error(`${spec}: the tarball's integrity ${actual} is not the registry's ${stated}`);
    await run('tar', ['-xzf', tarball, '-C', work, 'package/bin/node'], { timeout: 120_000 });
    return await checkVersion(
      await installIntoCache(path.join(work, 'package', 'bin', 'node'), cachedNode24Path(cacheDir)),
    );
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
}

/**
 * The path of a Node.js NODE24_VERSION binary; a NodeBinaryNotFoundError naming each route's outcome when there is
 * none.
 */
export async function resolveNode24(cacheDir: string): Promise<string> {
  const attempts: RouteAttempt[] = [];
  const cached = cachedNode24Path(cacheDir);
  if (await isExecutable(cached)) {
    try {
      return await checkVersion(cached);
    } catch (err) {
      attempts.push({ route: 'cached copy', outcome: `unusable: ${describe(err)}` });
    }
  } else {
    attempts.push({ route: 'cached copy', outcome: `none at ${cached}` });
  }
  const route = `npm registry ${PACKAGE}@${NODE24_VERSION}`;
  try {
    return await fromNpmRegistry(cacheDir);
  } catch (err) {
    attempts.push({ route, outcome: `failed: ${describe(err)}` });
  }
  throw new NodeBinaryNotFoundError(NODE24_VERSION, attempts, cached);
}
