/**
 * Coverage you cannot forget: the golden sets (test/golden/histories/<release>/) hold a recording of every waiting
 * point
 * the workflows declare (src/workflows/waiting-points.ts), left every way it can be left; each set's coverage.json says
 * what each history covers, and is what the histories show; and the workflows' source waits nowhere the list does not
 * name, as far as a reading of the source can tell. The replay itself is test/integration/golden-histories.test.ts.
 */
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createActivities } from '../../src/activities/index.js';
import { DEV_SECRET_KEYS, localKeyRing } from '../../src/delivery/secret-box.js';
import * as messages from '../../src/contracts/messages.js';
import * as processor from '../../src/contracts/processor.js';
import { NON_WAKING_MESSAGES, WAITING_POINTS } from '../../src/workflows/waiting-points.js';
import { declaredCells } from '../support/coverage.js';
import { COVERAGE_FILE, coverageMetadataOf, goldenSetDirs } from '../support/golden.js';

const WORKFLOWS_DIR = path.resolve(import.meta.dirname, '../../src/workflows');
const source = fs
  .readdirSync(WORKFLOWS_DIR)
  .filter((f) => f.endsWith('.ts') && f !== 'waiting-points.ts')
  .map((f) => fs.readFileSync(path.join(WORKFLOWS_DIR, f), 'utf8'))
  .join('\n');

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

  it('the workflows wait nowhere the list does not name: every label, activity, child and message in their source is declared', () => {
    const declaredLabels = new Set(
      WAITING_POINTS.flatMap((p) =>
        'timer' in p.on ? [p.on.timer] : 'labels' in p.on ? [...(p.on.labels ?? [])] : [],
      ),
    );
    const usedLabels = new Set(
      [...source.matchAll(/\b(holdLabels|holdEventsLabels|resendLabels)\.(\w+)/g)].map((m) => `${m[1]}.${m[2]}`),
    );
    expect([...usedLabels].filter((l) => !declaredLabels.has(l))).toEqual([]);
    expect([...declaredLabels].filter((l) => !usedLabels.has(l))).toEqual([]);

    const activityNames = Object.keys(
      createActivities({
        region: 'us',
        pool: new pg.Pool(),
        endpointRules: { allowInsecureHttp: false, allowPrivateAddresses: false },
        sealer: localKeyRing(DEV_SECRET_KEYS),
      }),
    );
    const called = activityNames.filter((name) =>
      new RegExp(`\\.${name}\\(|\\b${name}\\b[^(]*\\}\\s*=\\s*proxy`).test(source),
    );
    const declaredActivities = new Set(
      WAITING_POINTS.flatMap((p) =>
        'activity' in p.on ? [p.on.activity] : 'localActivity' in p.on ? [p.on.localActivity] : [],
      ),
    );
    expect(called.length).toBeGreaterThan(5);
    expect(called.filter((name) => !declaredActivities.has(name))).toEqual([]);

    const children = new Set([...source.matchAll(/\b(?:startChild|executeChild)\((\w+)/g)].map((m) => m[1]));
    const declaredChildren = new Set(WAITING_POINTS.flatMap((p) => ('child' in p.on ? [p.on.child] : [])));
    expect([...children].filter((c) => !declaredChildren.has(c as never))).toEqual([]);

    const definitions = { ...messages, ...processor } as Record<string, unknown>;
    const handled = [...source.matchAll(/setHandler\(\s*(\w+)/g)].map(
      (m) => definitions[m[1]!] as { type?: string; name?: string } | undefined,
    );
    const waking = new Set(
      WAITING_POINTS.flatMap((p) => p.exits).flatMap((exit) =>
        /^(signal|update|kept-waiting):/.test(exit) ? [exit.split(':')[1]] : [],
      ),
    );
    const undeclared = handled
      .filter((d) => d?.type === 'signal' || d?.type === 'update')
      .map((d) => d!.name!)
      .filter((name) => !waking.has(name) && !(name in NON_WAKING_MESSAGES));
    expect(handled.length).toBeGreaterThan(5);
    expect(undeclared).toEqual([]);
  });
});
