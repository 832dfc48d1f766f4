/**
 * `npm run golden:coverage`: rewrites each committed set's coverage.json from its histories (after a change to the
 * waiting points or to how a history is read); test/unit/golden-coverage.test.ts fails while one is stale.
 */
import fs from 'node:fs';
import path from 'node:path';
import { COVERAGE_FILE, coverageMetadataOf, goldenSetDirs } from './golden.js';

for (const dir of goldenSetDirs()) {
  fs.writeFileSync(path.join(dir, COVERAGE_FILE), `${JSON.stringify(coverageMetadataOf(dir), null, 2)}\n`);
  console.log(`${path.relative(process.cwd(), dir)}/${COVERAGE_FILE}`);
}
