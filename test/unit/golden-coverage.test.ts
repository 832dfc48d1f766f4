/**
 * Coverage you cannot forget: the golden sets (test/golden/histories/<release>/, one per released version) hold a
 * recording of every waiting point the workflows declare (src/workflows/waiting-points.ts), left by every rulebook row
 * it can be left by; each set's coverage.json names the histories that show each cell, and is what the histories show;
 * and the workflows' source waits nowhere the list does not name, as far as a reading of the source can tell. The
 * replay itself is test/integration/golden-histories.test.ts.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createActivities } from '../../src/activities/index.js';
import { DEV_SECRET_KEYS, localKeyRing } from '../../src/delivery/secret-box.js';
import * as messages from '../../src/contracts/messages.js';
import * as processor from '../../src/contracts/processor.js';
import { NON_WAKING_MESSAGES, WAITING_POINTS } from '../../src/workflows/waiting-points.js';
import { coverageOf, declaredCells, jsonPayload, syntheticHistory } from '../support/coverage.js';
import { readWorkflowSource } from '../support/workflow-source.js';
import {
  COVERAGE_FILE,
  coverageMetadataOf,
  goldenSetDir,
  goldenSetDirs,
  RELEASE_COMMITS,
  releasedVersions,
} from '../support/golden.js';

const WORKFLOWS_DIR = path.resolve(import.meta.dirname, '../../src/workflows');
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

  it('the workflows wait nowhere the list does not name: every timer, label, activity, child and message in their source is declared', () => {
    expect(gateProblems(workflowSource)).toEqual([]);
    expect(reading(workflowSource).handled.length).toBeGreaterThan(5);
  });

  it('bites: an unlabelled wait, a patched sleep, a patched condition, an inline signal, a label the list lacks', () => {
    const mutated = (edit: string) =>
      workflowSource.map((f) =>
        f.file === 'release-expired-hold.ts'
          ? {
              ...f,
              text: f.text.replace(
                '  const ctx = { region: input.region, holdId };',
                `  const ctx = { region: input.region, holdId };\n${edit}`,
              ),
            }
          : f,
      );
    expect(workflowSource.some((f) => f.text.includes('  const ctx = { region: input.region, holdId };'))).toBe(true);
    const mutations: Record<string, [string, RegExp]> = {
      'unpatched wait': ['await sleep(1000);', /release-expired-hold\.ts:\d+: sleep with a timer but no summary/],
      'patched sleep': ["if (patched('p1')) await sleep(1000);", /sleep with a timer but no summary/],
      'patched condition': [
        "if (patched('p2')) await condition(() => false, 5000);",
        /condition with a timer but no summary/,
      ],
      'inline signal': ["setHandler(defineSignal('poke'), () => undefined);", /signal poke ends no declared wait/],
      'undeclared label': [
        "await condition(() => false, 5000, { summary: holdLabels.release('x') });",
        /timer label holdLabels\.release is not a declared timer/,
      ],
    };
    for (const [what, [edit, bites]] of Object.entries(mutations)) {
      expect(gateProblems(mutated(edit)), what).toContainEqual(expect.stringMatching(bites));
    }
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

/** The source of every workflow module (the list of waiting points aside), by file name. */
const workflowSource = fs
  .readdirSync(WORKFLOWS_DIR)
  .filter((f) => f.endsWith('.ts') && f !== 'waiting-points.ts')
  .map((file) => ({ file, text: fs.readFileSync(path.join(WORKFLOWS_DIR, file), 'utf8') }));

const story = {
  file: 'story.ts',
  text: fs.readFileSync(path.resolve(WORKFLOWS_DIR, '../contracts/story.ts'), 'utf8'),
};
const reading = (files: typeof workflowSource) => readWorkflowSource(files, story, { ...messages, ...processor });

/** What is wrong with `files` against src/workflows/waiting-points.ts: empty when the gate passes. */
function gateProblems(files: typeof workflowSource): string[] {
  const read = reading(files);
  const problems = [...read.problems];
  const declaredTimers = new Set(WAITING_POINTS.flatMap((p) => ('timer' in p.on ? [p.on.timer] : [])));
  const declaredLabels = new Set([
    ...declaredTimers,
    ...WAITING_POINTS.flatMap((p) => ('labels' in p.on ? [...(p.on.labels ?? [])] : [])),
  ]);
  for (const l of read.timerLabels)
    if (!declaredTimers.has(l as never)) problems.push(`timer label ${l} is not a declared timer`);
  for (const l of read.labels) if (!declaredLabels.has(l)) problems.push(`label ${l} is not declared`);
  for (const l of declaredLabels) if (!read.labels.has(l)) problems.push(`label ${l} is declared but never used`);

  const text = files.map((f) => f.text).join('\n');
  const called = activityNames.filter((name) =>
    new RegExp(`\\.${name}\\(|\\b${name}\\b[^(]*\\}\\s*=\\s*proxy`).test(text),
  );
  const declaredActivities = new Set(
    WAITING_POINTS.flatMap((p) =>
      'activity' in p.on ? [p.on.activity] : 'localActivity' in p.on ? [p.on.localActivity] : [],
    ),
  );
  if (called.length < 5) problems.push('the reading finds too few activity calls: it has gone blind');
  for (const name of called) if (!declaredActivities.has(name)) problems.push(`activity ${name} is not declared`);

  const children = new Set([...text.matchAll(/\b(?:startChild|executeChild)\((\w+)/g)].map((m) => m[1]));
  const declaredChildren = new Set(WAITING_POINTS.flatMap((p) => ('child' in p.on ? [p.on.child] : [])));
  for (const c of children) if (!declaredChildren.has(c as never)) problems.push(`child ${c} is not declared`);

  const waking = new Set(
    WAITING_POINTS.flatMap((p) => p.exits).flatMap((exit) =>
      /^(signal|update|kept-waiting):/.test(exit) ? [exit.split(':')[1]] : [],
    ),
  );
  for (const { name, kind } of read.handled)
    if (kind !== 'query' && !waking.has(name) && !(name in NON_WAKING_MESSAGES))
      problems.push(`${kind} ${name} ends no declared wait and is not declared as non-waking`);
  return problems;
}

const activityNames = Object.keys(
  createActivities({
    region: 'us',
    pool: new pg.Pool(),
    endpointRules: { allowInsecureHttp: false, allowPrivateAddresses: false },
    sealer: localKeyRing(DEV_SECRET_KEYS),
  }),
);
