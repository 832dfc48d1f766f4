/**
 * Adds one plain line after vitest's own summary, `N passed, N failed[, N skipped]`, so CI and scripts can
 * read the outcome without parsing vitest's decorated output.
 */
import type { Reporter, TestModule } from 'vitest/node';

export default class PlainSummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>) {
    const count = { passed: 0, failed: 0, skipped: 0 };
    for (const module of testModules) {
      const failedBefore = count.failed;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') count.passed++;
        else if (state === 'failed') count.failed++;
        else count.skipped++;
      }
      // A file can fail with none of its tests failed: it did not load, or a hook (an afterAll's assertion) failed.
      if (module.state() === 'failed' && count.failed === failedBefore) count.failed++;
    }
    count.failed += unhandledErrors.length;
    console.log(`\n${count.passed} passed, ${count.failed} failed${count.skipped ? `, ${count.skipped} skipped` : ''}`);
  }
}
