/**
 * `npm run golden:coverage`: rewrites each committed set's coverage.json from its histories (after a change to the
 * waiting points or to how a history is read); test/unit/golden-coverage.test.ts fails while one is stale.
 */
import fs from 'node:fs';
import path from 'node:path';
import { declaredCells } from './coverage.js';
import { COVERAGE_FILE, coverageFileContent, goldenSetDirs } from './golden.js';

const recorded = new Set<string>();
for (const dir of goldenSetDirs()) {
  const content = coverageFileContent(dir);
  fs.writeFileSync(path.join(dir, COVERAGE_FILE), content);
  for (const cell of Object.keys(JSON.parse(content) as object)) recorded.add(cell);
  console.log(`${path.relative(process.cwd(), dir)}/${COVERAGE_FILE}`);
}
// The gate's figure: declared cells, how many a recording shows, how many say why none can.
const cells = [...declaredCells()];
const shown = cells.filter(([cell]) => recorded.has(cell)).length;
const excused = cells.filter(([cell, why]) => !recorded.has(cell) && why !== undefined).length;
console.log(
  `${cells.length} declared cells: ${shown} recorded, ${excused} unrecordable or unreleased, ${cells.length - shown - excused} missing`,
);
