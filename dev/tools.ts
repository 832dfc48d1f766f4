/**
 * Every Go-built tool the tests use, and which test file needs which: the suite builds the missing ones in the
 * background from its start (test/integration/global-setup.ts) and runs the files that need them last
 * (test/support/sequencer.ts), so a fresh machine compiles while the other files run instead of before them.
 */
import { isBuilt, type GoTool } from './go-tools.js';
import { AMTOOL, PROMETHEUS } from './prometheus-tools.js';
import { TEMPORAL_SERVER, TEMPORAL_UI } from './temporal-cluster.js';

/**
 * In the order the background build makes them: the Temporal server first, by far the longest build (about five
 * minutes beside a test run on a 2-core machine) for the longest of these files (cluster.test.ts), which then runs
 * while the others build. Built after the others, it would be the whole tail of a first run, with nothing else left to
 * run beside it.
 */
export const GO_TOOLS: readonly GoTool[] = [TEMPORAL_SERVER, PROMETHEUS, AMTOOL, TEMPORAL_UI];

/** The test files (by name) that build or wait for a tool, and the tools each needs. */
export const TOOL_TESTS: Readonly<Record<string, readonly GoTool[]>> = {
  'cluster.test.ts': [TEMPORAL_SERVER],
  'alerts-live.test.ts': [PROMETHEUS],
  'alert-rules.test.ts': [PROMETHEUS, AMTOOL],
  'web-ui-oidc.test.ts': [TEMPORAL_UI],
};

/** The tools not in the cache yet. */
export async function missingTools(cacheDir: string): Promise<GoTool[]> {
  const built = await Promise.all(GO_TOOLS.map((tool) => isBuilt(tool, cacheDir)));
  return GO_TOOLS.filter((_, i) => !built[i]);
}
