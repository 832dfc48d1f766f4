// Node 24 or a clear refusal, before anything else loads.
import './src/node-version.js';
import { defineConfig } from 'vitest/config';
import ToolsLastSequencer from './test/support/sequencer.js';

export default defineConfig({
  test: {
    reporters: ['default', './test/support/plain-summary-reporter.ts'],
    // The Temporal worker's native core is happiest in its own process.
    pool: 'forks',
    // Three test files at a time, each with its own workers and databases, on two cores: an integration file waits on
    // timers, merchants and the server most of its time (with two at a time the machine was half idle).
    maxWorkers: 3,
    sequence: { sequencer: ToolsLastSequencer },
    projects: [
      {
        extends: true,
        // Pure code: policy, config, signing, endpoint guard, codec, the import layers. No server starts.
        test: { name: 'unit', include: ['test/unit/**/*.test.ts'] },
      },
      {
        extends: true,
        test: {
          // Workflow code against Temporal's time-skipping test server, activities stubbed: no Postgres, no HTTP, no
          // dev server (test/support/workflow-env.ts). Each file starts its own test server.
          name: 'workflow',
          include: ['test/workflow/**/*.test.ts'],
          globalSetup: ['test/workflow/global-setup.ts'],
          // Bound a hung test; time is skipped, so nothing here waits for real, but a test server replaying long
          // histories on a machine another process keeps busy takes past a minute: the integration tests' bound.
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          // One shared Temporal dev server and one embedded PostgreSQL for the whole run
          // (test/integration/global-setup.ts).
          globalSetup: ['test/integration/global-setup.ts'],
          // Tests wait for real workflows on a real server; these bound a hung test, they do not pace anything.
          testTimeout: 120_000,
          hookTimeout: 180_000,
        },
      },
      {
        extends: true,
        test: {
          // `npm run golden:record` only: records this release's golden histories (test/golden/record.test.ts).
          name: 'golden',
          include: ['test/golden/**/*.test.ts'],
          // One recorder at a time: each drives timers and merchants' pace, which two at once on two cores would
          // stretch.
          fileParallelism: false,
          globalSetup: ['test/integration/global-setup.ts'],
          testTimeout: 180_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
