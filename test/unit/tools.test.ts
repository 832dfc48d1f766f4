/**
 * A test file that builds or waits for a Go tool is listed in dev/tools.ts with what it needs: the sequencer runs it
 * last on a machine that lacks the tool, while the background build makes it. Unlisted, it would build in the middle
 * of the run and hold one of the two workers for minutes.
 */
import fs from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { GO_TOOLS, TOOL_TESTS } from '../../dev/tools.js';

const INTEGRATION = path.resolve(import.meta.dirname, '../integration');

/** What each tool's obtain function (or the cluster that builds it) is called in a test file. */
const USES: Record<string, RegExp> = {
  'temporal-server': /\b(obtainTemporalServer|startTemporalCluster)\(/,
  'temporal-ui': /\bobtainTemporalUi\(/,
  prometheus: /\b(obtainPrometheus|obtainPromtool)\(/,
  amtool: /\bobtainAmtool\(/,
};

it('every test file that needs a Go tool is listed with exactly the tools it needs', () => {
  expect(Object.keys(USES).sort()).toEqual(GO_TOOLS.map((tool) => tool.id).sort());
  const needs = Object.fromEntries(
    fs
      .readdirSync(INTEGRATION)
      .filter((file) => file.endsWith('.test.ts'))
      .map((file) => {
        const text = fs.readFileSync(path.join(INTEGRATION, file), 'utf8');
        return [file, Object.keys(USES).filter((id) => USES[id]!.test(text))] as const;
      })
      .filter(([, tools]) => tools.length > 0),
  );
  const listed = Object.fromEntries(
    Object.entries(TOOL_TESTS).map(([file, tools]) => [file, tools.map((tool) => tool.id).sort()]),
  );
  expect(listed).toEqual(Object.fromEntries(Object.entries(needs).map(([file, tools]) => [file, tools.sort()])));
});
