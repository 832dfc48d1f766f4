/**
 * Configuration of the local stack only (the demo, the benchmark, the chaos run, the tests): where the Temporal
 * CLI and caches live, the dev server's ports, the demo's size. Production never reads these; its configuration
 * is src/config.ts. Validated and frozen the same way: a bad value fails at once, naming the variable.
 */
import { readInt } from '../src/config.js';
import { devCacheDir } from '../src/dev-stack.js';

export interface DevConfig {
  /** A `temporal` binary to use instead of searching (dev/temporal-cli.ts). */
  readonly temporalCliPath: string | undefined;
  /** The time-skipping test server the tests use; found like the CLI when unset. */
  readonly temporalTestServerPath: string | undefined;
  /** Downloads and the running stack's address file; outside the clone. */
  readonly cacheDir: string;
  /** Where the dev server's SQLite file and the embedded PostgreSQL live; a fresh temp dir when unset. */
  readonly dataDir: string | undefined;
  readonly temporalPort: number;
  readonly temporalUiPort: number;
  /** Holds per region in `npm start`'s demo night. */
  readonly demoHolds: number;
}

/** Every variable this loader reads; `.env.example` lists them beside the production ones (checked by a test). */
export const DEV_CONFIG_VARIABLES = [
  'TEMPORAL_CLI_PATH',
  'TEMPORAL_TEST_SERVER_PATH',
  'HOLD_SWEEPER_CACHE_DIR',
  'HOLD_SWEEPER_DATA_DIR',
  'TEMPORAL_DEV_PORT',
  'TEMPORAL_UI_PORT',
  'DEMO_HOLDS',
] as const;

export function loadDevConfig(env: Readonly<Record<string, string | undefined>> = process.env): DevConfig {
  return Object.freeze({
    temporalCliPath: env.TEMPORAL_CLI_PATH || undefined,
    temporalTestServerPath: env.TEMPORAL_TEST_SERVER_PATH || undefined,
    cacheDir: devCacheDir(env),
    dataDir: env.HOLD_SWEEPER_DATA_DIR || undefined,
    temporalPort: readInt(env, 'TEMPORAL_DEV_PORT', 7233, 1, 65535),
    temporalUiPort: readInt(env, 'TEMPORAL_UI_PORT', 8233, 1, 65535),
    demoHolds: readInt(env, 'DEMO_HOLDS', 300, 0, 1_000_000),
  });
}
