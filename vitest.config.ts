import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    reporters: ['default', './test/support/plain-summary-reporter.ts'],
    // One shared Temporal dev server and one embedded PostgreSQL for the whole run (see test/global-setup.ts).
    globalSetup: ['test/global-setup.ts'],
    // The Temporal worker's native core is happiest in its own process.
    pool: 'forks',
    // Two cores: two test files at a time, each with its own workers and databases.
    maxWorkers: 2,
    // Tests wait for real workflows on a real server; these bound a hung test, they do not pace anything.
    testTimeout: 120_000,
    hookTimeout: 180_000,
  },
});
