/**
 * A real Temporal dev server (`temporal server start-dev`) for `npm start`, the tests and the benchmark.
 *
 * File-backed SQLite with WAL and synchronous=NORMAL (4–10x faster than the default rollback journal),
 * the Web UI on, one namespace per region, and the product's search attributes registered. The SDK's
 * ephemeral-server support spawns the process, waits until it answers and stops it on teardown.
 */
import path from 'node:path';
import fs from 'node:fs/promises';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { EmbeddedServiceError, TemporalCliNotFoundError } from '../src/errors.js';
import { SEARCH_ATTRIBUTES } from '../src/contracts/search-attributes.js';
import { temporalExecutables, type RouteAttempt, type TemporalExecutable } from './temporal-cli.js';

interface DevServerOptions {
  namespaces: readonly string[];
  /** Directory for the SQLite file; the server's state survives a restart on the same directory. */
  dataDir: string;
  explicitCliPath: string | undefined;
  cacheDir: string;
  /** gRPC port; random free port when undefined. */
  port?: number;
  /** Web UI port; the UI is off when undefined. */
  uiPort?: number;
  extraArgs?: readonly string[];
}

export interface DevServer {
  readonly address: string;
  readonly uiUrl: string | undefined;
  readonly executable: TemporalExecutable;
  stop(): Promise<void>;
}

function devServerArgs(options: DevServerOptions): string[] {
  const args: string[] = [];
  for (const ns of options.namespaces.slice(1)) args.push('--namespace', ns);
  args.push('--sqlite-pragma', 'journal_mode=WAL', '--sqlite-pragma', 'synchronous=NORMAL');
  args.push(...(options.extraArgs ?? []));
  return args;
}

/**
 * The SDK gives the server a fixed 5 s to answer; on a loaded 2-core machine a cold start misses that now and then
 * (the server did not fail: it was slow). Such a start is tried again, up to three times in all.
 */
const START_TRIES = 3;

async function startWith(executable: TemporalExecutable, options: DevServerOptions): Promise<TestWorkflowEnvironment> {
  for (let tries = 1; ; tries++) {
    try {
      return await startOnce(executable, options);
    } catch (err) {
      if (tries >= START_TRIES || !/did not start within/.test((err as Error).message)) throw err;
    }
  }
}

async function startOnce(executable: TemporalExecutable, options: DevServerOptions): Promise<TestWorkflowEnvironment> {
  return TestWorkflowEnvironment.createLocal({
    server: {
      executable,
      dbFilename: path.join(options.dataDir, 'temporal.sqlite'),
      namespace: options.namespaces[0] ?? 'default',
      ip: '127.0.0.1',
      port: options.port,
      ui: options.uiPort !== undefined,
      uiPort: options.uiPort,
      searchAttributes: [...SEARCH_ATTRIBUTES],
      // The server's own warnings (slow workflow tasks under load, retries) would drown the product's output.
      log: { format: 'pretty', level: 'error' },
      extraArgs: devServerArgs(options),
    },
  });
}

/** Starts the dev server with the first executable route that works; see temporal-cli.ts for the order. */
export async function startDevServer(options: DevServerOptions): Promise<DevServer> {
  await fs.mkdir(options.dataDir, { recursive: true });
  const attempts: RouteAttempt[] = [];
  for await (const executable of temporalExecutables(
    { explicitPath: options.explicitCliPath, cacheDir: options.cacheDir },
    attempts,
  )) {
    let env: TestWorkflowEnvironment;
    try {
      env = await startWith(executable, options);
    } catch (err) {
      // A failed SDK download is expected offline: note it and try the registry routes. A binary we found
      // but cannot start (port taken, bad flags) is a real error, reported with what to do.
      if (executable.type === 'cached-download') {
        attempts[attempts.length - 1]!.outcome = `failed: ${(err as Error).message.split('\n')[0]}`;
        continue;
      }
      const ports =
        options.uiPort === undefined
          ? `port ${options.port ?? '(random)'}`
          : `ports ${options.port ?? '(random)'} and ${options.uiPort}`;
      throw new EmbeddedServiceError(
        'Temporal dev server',
        `${executable.path} on ${ports} with data in ${options.dataDir}: ${(err as Error).message}`,
        'if a port is taken, set TEMPORAL_DEV_PORT and TEMPORAL_UI_PORT to free ones or stop what holds it; set TEMPORAL_CLI_PATH to another ' +
          '`temporal` binary, or TEMPORAL_ADDRESS to use a server you run',
        { cause: err },
      );
    }
    if (executable.type === 'cached-download') attempts[attempts.length - 1]!.outcome = 'downloaded';
    return {
      address: env.address,
      uiUrl: options.uiPort !== undefined ? `http://127.0.0.1:${options.uiPort}` : undefined,
      executable,
      stop: () => env.teardown(),
    };
  }
  throw new TemporalCliNotFoundError(attempts);
}
