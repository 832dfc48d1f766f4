/**
 * Coverage you cannot forget: the golden sets (test/golden/histories/<release>/, one per released version) hold a
 * recording of every waiting point the workflows declare (test/support/waiting-points.ts), left by every rulebook row
 * it can be left by; each set's coverage.json names the histories that show each cell, and is what the histories show.
 * That the workflows' source waits nowhere the list does not name is test/unit/workflow-gate.test.ts; the replay
 * itself is test/integration/golden-histories.test.ts.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { coverageOf, declaredCells, jsonPayload, syntheticHistory } from '../support/coverage.js';
import { WAITING_POINTS } from '../support/waiting-points.js';
import {
  COVERAGE_FILE,
  coverageMetadataOf,
  goldenSetDir,
  goldenSetDirs,
  RELEASE_COMMITS,
  releasedVersions,
} from '../support/golden.js';

const REPO = path.resolve(import.meta.dirname, '../..');

describe('golden coverage', () => {
  const sets = goldenSetDirs().map((dir) => ({ release: path.basename(dir), dir, coverage: coverageMetadataOf(dir) }));

  it("each set's coverage.json is what its histories show", () => {
    for (const { dir, coverage } of sets) {
      const committed = JSON.parse(fs.readFileSync(path.join(dir, COVERAGE_FILE), 'utf8')) as unknown;
      expect(committed, `${path.basename(dir)}/${COVERAGE_FILE} is stale: npm run golden:coverage`).toEqual(coverage);
    }
  });

  it('every declared waiting point, and every way out of it, has a recording, or says why it cannot', () => {
    const recorded = new Set(sets.flatMap(({ coverage }) => Object.keys(coverage)));
    const missing = [...declaredCells()]
      .filter(([cell, why]) => !recorded.has(cell) && why === undefined)
      .map(([cell]) => cell);
    expect(missing, 'record them: npm run golden:record (test/golden/record*.test.ts)').toEqual([]);
    // And nothing is recorded that the list does not declare: a recording of a way out the list forgot.
    const declared = declaredCells();
    expect([...recorded].filter((cell) => !declared.has(cell))).toEqual([]);
  });

  it('a golden set exists for each released version in CHANGELOG.md, and for nothing else', () => {
    const released = releasedVersions();
    expect(released[0], 'CHANGELOG.md names a release').toMatch(/^\d+\.\d+\.\d+$/);
    for (const kind of ['histories', 'encrypted'] as const)
      expect(fs.readdirSync(path.dirname(goldenSetDir('x', kind))).sort(), kind).toEqual([...released].sort());
    expect(Object.keys(RELEASE_COMMITS).sort()).toEqual([...released].sort());
    for (const [version, commit] of Object.entries(RELEASE_COMMITS))
      expect(git('show', `${commit}:CHANGELOG.md`).stdout, `${commit} is release ${version}`).toMatch(
        new RegExp(`^## ${version.replaceAll('.', '\\.')}\\s*$`, 'm'),
      );
  });

  it('a cell excused as unreleased is workflow code the newest release lacks, and no release recorded it', () => {
    const newest = RELEASE_COMMITS[releasedVersions()[0]!]!;
    const unreleased = WAITING_POINTS.flatMap((p) => (p.unreleased ? [p.unreleased.in] : []));
    expect(unreleased.length).toBeGreaterThan(0);
    for (const file of new Set(unreleased)) {
      expect(fs.existsSync(path.join(REPO, file)), `${file} exists`).toBe(true);
      expect(git('cat-file', '-e', `${newest}:${file}`).status, `${file} is not in ${newest}`).not.toBe(0);
    }
    const recorded = new Set(sets.flatMap(({ coverage }) => Object.keys(coverage)));
    const excused = [...declaredCells()].filter(([, why]) => why?.startsWith('unreleased')).map(([cell]) => cell);
    expect(excused.filter((cell) => recorded.has(cell))).toEqual([]);
  });

  it("an exit is keyed on what chooses the next row: the ledger's word on a decision, a start's trace header", () => {
    const decided = (asked: string, answer: object) => {
      const history = syntheticHistory('releaseExpiredHold', [
        {
          activityTaskScheduledEventAttributes: {
            activityType: { name: 'decideQuarantine' },
            input: { payloads: [jsonPayload({ decision: asked })] },
          },
        },
        {
          activityTaskCompletedEventAttributes: {
            scheduledEventId: 2 as never,
            result: { payloads: [jsonPayload(answer)] },
          },
        },
      ]);
      return [...coverageOf(history)].filter((cell) => cell.startsWith('delivery.decide.completed'));
    };
    expect(decided('discard', { recorded: false, why: 'no' })).toEqual(['delivery.decide.completed:refused']);
    expect(decided('discard', { recorded: true, decision: 'discard' })).toEqual([
      'delivery.decide.completed:recorded:discard',
    ]);
    expect(decided('discard', { recorded: true, decision: 'abandon' })).toEqual([
      'delivery.decide.completed:overruled',
    ]);
    const traced = syntheticHistory('applyHoldEvents', []);
    traced.events![0]!.workflowExecutionStartedEventAttributes!.header = {
      fields: { '_tracer-data': jsonPayload({}) },
    };
    expect(coverageOf(traced)).toContain('applyHoldEvents.start.traced');
    expect(coverageOf(syntheticHistory('applyHoldEvents', []))).toContain('applyHoldEvents.start.untraced');
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

const git = (...args: string[]) => spawnSync('git', args, { cwd: REPO, encoding: 'utf8' });
