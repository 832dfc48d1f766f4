/**
 * Coverage you cannot forget: the golden sets (test/golden/histories/<release>/) hold a recording of every waiting
 * point the workflows declare (src/workflows/waiting-points.ts), left every way it can be left; each set's
 * coverage.json says what each history covers, and is what the histories show. That the workflows' source waits nowhere
 * the list does not name is test/unit/workflow-gate.test.ts; the replay itself is
 * test/integration/golden-histories.test.ts.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { coverageOf, declaredCells, jsonPayload, syntheticHistory } from '../support/coverage.js';
import { COVERAGE_FILE, coverageMetadataOf, goldenSetDirs } from '../support/golden.js';

describe('golden coverage', () => {
  const sets = goldenSetDirs().map((dir) => ({ release: path.basename(dir), dir, coverage: coverageMetadataOf(dir) }));

  it("each set's coverage.json is what its histories show", () => {
    for (const { dir, coverage } of sets) {
      const committed = JSON.parse(fs.readFileSync(path.join(dir, COVERAGE_FILE), 'utf8')) as unknown;
      expect(committed, `${path.basename(dir)}/${COVERAGE_FILE} is stale: npm run golden:coverage`).toEqual(coverage);
    }
  });

  it('every declared waiting point, and every way out of it, has a recording, or says why it cannot', () => {
    const recorded = new Set(sets.flatMap(({ coverage }) => Object.values(coverage).flat()));
    const missing = [...declaredCells()]
      .filter(([cell, why]) => !recorded.has(cell) && why === undefined)
      .map(([cell]) => cell);
    expect(missing, 'record them: npm run golden:record (test/golden/record*.test.ts)').toEqual([]);
    // And nothing is recorded that the list does not declare: a recording of a way out the list forgot.
    const declared = declaredCells();
    expect([...recorded].filter((cell) => !declared.has(cell))).toEqual([]);
  });

  it('a timer in a golden history whose summary is no declared label is a cell the list does not declare', () => {
    const history = syntheticHistory('releaseExpiredHold', [
      { timerStartedEventAttributes: { timerId: '1' } },
      { timerStartedEventAttributes: { timerId: '2' }, userMetadata: { summary: jsonPayload('sleeping a bit') } },
    ]);
    const cells = [...coverageOf(history)];
    const declared = declaredCells();
    expect(cells.filter((cell) => !declared.has(cell))).toEqual([
      'releaseExpiredHold.undeclared-timer.(no summary)',
      'releaseExpiredHold.undeclared-timer.sleeping a bit',
    ]);
  });
});
