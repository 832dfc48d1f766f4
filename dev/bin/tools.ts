/**
 * `npm run tools`: builds the Go tools the tests use (dev/tools.ts) that the cache lacks, one after the other, each
 * under its machine-wide lock. `--while <pid>`: only while that process lives (the test run that started it in the
 * background, test/support/sequencer.ts); then this process and its `go` commands stop.
 */
import '../../src/node-version.js';
import { parseArgs } from 'node:util';
import { loadDevConfig } from '../dev-config.js';
import { obtainTool } from '../go-tools.js';
import { missingTools } from '../tools.js';

const { values } = parseArgs({ options: { while: { type: 'string' } } });
if (values.while) {
  const parent = Number(values.while);
  setInterval(() => {
    try {
      process.kill(parent, 0);
    } catch {
      // Its process group: this process and the `go` commands it started.
      process.kill(-process.pid, 'SIGTERM');
    }
  }, 2000).unref();
}
const { cacheDir } = loadDevConfig();
for (const tool of await missingTools(cacheDir)) {
  await obtainTool(tool, cacheDir, (line) => console.log(`${new Date().toISOString()} ${line}`));
}
