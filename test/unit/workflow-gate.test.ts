/**
 * The replay gate's reading of the workflow source (test/support/workflow-source.ts): the workflows wait nowhere
 * test/support/waiting-points.ts does not name, and the reading catches a wait however it is written.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleWorkflows } from '../../src/workers/region-worker.js';
import { MUTATIONS, type Mutation } from '../support/gate-mutations.js';
import { gateProblems, readWorkflowSource, REPO } from '../support/workflow-source.js';

// The type checker reads the SDK's declarations the first time: seconds, more on a loaded machine.
const SLOW = { timeout: 180_000 };

describe('the replay gate', () => {
  it(
    'the workflows wait nowhere the list does not name: every timer, label, activity, child and message is declared',
    SLOW,
    () => {
      const read = readWorkflowSource();
      expect(gateProblems(read)).toEqual([]);
      // The reading has not gone blind: it read the bundle's modules and found each construct the workflows use.
      expect(read.modules).toEqual(
        expect.arrayContaining([
          'src/workflows/index.ts',
          'src/workflows/interceptors.ts',
          'src/workflows/tracing.cjs',
          'src/workflows/webhook-delivery.ts',
          'src/contracts/story.ts',
        ]),
      );
      expect(read.timerLabels.size).toBeGreaterThanOrEqual(8);
      expect(read.labels.size).toBeGreaterThanOrEqual(16);
      expect(read.handled.length).toBeGreaterThanOrEqual(10);
      expect(new Set(read.activities.map((a) => a.name)).size).toBeGreaterThanOrEqual(11);
      expect(read.activities.some((a) => a.local)).toBe(true);
      expect(new Set(read.children.map((c) => c.name))).toEqual(
        new Set(['startHoldBatch', 'releaseExpiredHold', 'deliverHoldEvent']),
      );
      expect(new Set(read.continued.map((c) => c.name)).size).toBeGreaterThanOrEqual(5);
      for (const api of ['condition', 'setHandler', 'proxyActivities', 'proxyLocalActivities', 'startChild'])
        expect(read.calls.get(api), api).toBeGreaterThan(0);
    },
  );

  it('reads every module of ours the workflow bundle holds, whatever its extension', SLOW, async () => {
    const { code } = await bundleWorkflows();
    // The bundler keys each module by its path: `/***/ "./src/workflows/index.ts":`.
    const bundled = [...code.matchAll(/^\/\*{3}\/ "\.\/([^"]+)"/gm)].map((m) => m[1]!);
    const ours = bundled.filter((m) => !m.startsWith('node_modules/'));
    expect(ours).toContain('src/workflows/tracing.cjs');
    expect(new Set(readWorkflowSource().modules)).toEqual(new Set(ours));
  });

  describe('bites: a new wait, however it is written, fails it', () => {
    // A copy of the repository's source the mutations are written into, type-checked against its own packages.
    let copy: string;
    beforeAll(() => {
      copy = fs.mkdtempSync(path.join(os.tmpdir(), 'workflow-gate-'));
      fs.cpSync(path.join(REPO, 'src'), path.join(copy, 'src'), { recursive: true });
      for (const file of ['tsconfig.json', 'package.json'])
        fs.copyFileSync(path.join(REPO, file), path.join(copy, file));
      fs.symlinkSync(path.join(REPO, 'node_modules'), path.join(copy, 'node_modules'));
    });
    afterAll(() => fs.rmSync(copy, { recursive: true, force: true }));

    /** The gate's problems with `edits` written into the copy, which is then put back as it was. */
    function problemsWith(edits: Mutation['edits']): string[] {
      const before = new Map<string, string | undefined>();
      try {
        for (const [file, edit] of Object.entries(edits)) {
          const at = path.join(copy, file);
          before.set(at, fs.existsSync(at) ? fs.readFileSync(at, 'utf8') : undefined);
          fs.writeFileSync(at, edit(before.get(at) ?? ''));
        }
        return gateProblems(readWorkflowSource(copy));
      } finally {
        for (const [at, text] of before)
          if (text === undefined) fs.rmSync(at);
          else fs.writeFileSync(at, text);
      }
    }

    it.each(Object.entries(MUTATIONS))('%s', SLOW, (_, { edits, bites }) => {
      expect(problemsWith(edits)).toContainEqual(expect.stringMatching(bites));
    });

    it("but not a patched wait at a declared timer, with its label: the deploy rules' way", SLOW, () => {
      const release = 'src/workflows/release-expired-hold.ts';
      const edits = {
        [release]: (text: string) =>
          `import { patched, sleep } from '@temporalio/workflow';\n${text.replace(
            '  const ctx = { region: input.region, holdId };\n',
            "$&  if (patched('gate-check')) await sleep(1000, { summary: holdLabels.budget('normal', 'x') });\n",
          )}`,
      };
      expect(problemsWith(edits)).toEqual([]);
    });

    it('and the copy, unmutated, passes', SLOW, () => {
      expect(gateProblems(readWorkflowSource(copy))).toEqual([]);
    });
  });
});
