/**
 * Configuration of the local stack only (the demo, the benchmark, the chaos run, the tests): where the Temporal
 * CLI and caches live, the dev server's ports, the demo's size. Production never reads these; its configuration
 * is src/config.ts. Validated and frozen the same way: a bad value fails at once, naming the variable.
 */
import { readSettings } from '../src/config.js';
import { DEV_VARIABLES } from '../src/config-schema.js';
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
export const DEV_CONFIG_VARIABLES = Object.keys(DEV_VARIABLES);

export function loadDevConfig(env: Readonly<Record<string, string | undefined>> = process.env): DevConfig {
  const v = readSettings(env, DEV_VARIABLES);
  return Object.freeze({
    temporalCliPath: v.TEMPORAL_CLI_PATH,
    temporalTestServerPath: v.TEMPORAL_TEST_SERVER_PATH,
    cacheDir: devCacheDir(env),
    dataDir: v.HOLD_SWEEPER_DATA_DIR,
    temporalPort: v.TEMPORAL_DEV_PORT,
    temporalUiPort: v.TEMPORAL_UI_PORT,
    demoHolds: v.DEMO_HOLDS,
  });
}
