/**
 * Adds one plain line after vitest's own summary, `N passed, N failed[, N skipped]`, so CI and scripts can
 * read the outcome without parsing vitest's decorated output.
 */
import type { Reporter, TestModule } from 'vitest/node';

export default class PlainSummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>) {
    const count = { passed: 0, failed: 0, skipped: 0 };
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') count.passed++;
        else if (state === 'failed') count.failed++;
        else count.skipped++;
      }
      // A file that failed to load has no tests to count; it still failed.
      if (module.state() === 'failed' && [...module.children.allTests()].length === 0) count.failed++;
    }
    count.failed += unhandledErrors.length;
    console.log(`\n${count.passed} passed, ${count.failed} failed${count.skipped ? `, ${count.skipped} skipped` : ''}`);
  }
}
