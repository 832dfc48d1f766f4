/**
 * The order test files run in: vitest's own (the longest first once it has timed them, the largest first before),
 * except that
 * - the files much longer than their size says go first: started last, each would run alone at the end while the
 *   other workers have nothing left to do;
 * - on a machine whose cache lacks a Go-built tool, the files that need one (dev/tools.ts) go last and the tools are
 *   built in the background from the start, at low priority: the other files run while Go compiles, instead of
 *   workers waiting on the builds.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { loadDevConfig } from '../../dev/dev-config.js';
import { GO_TOOLS, missingTools, TOOL_TESTS } from '../../dev/tools.js';

const REPO = path.resolve(import.meta.dirname, '../..');

/**
 * Longest first (a warm machine's seconds): the lint and type-check of the whole repository (106 s); the quarantine
 * floods, whose big signals wait out the time-skipping server's held signal (100 s); a small file that restarts servers
 * (79 s); the time-skipping server's quarantine waits (71 s).
 */
const LONG_FOR_THEIR_SIZE = [
  'static-checks.test.ts',
  'quarantine-flood.test.ts',
  'chaos.test.ts',
  'time-skipping.test.ts',
];

export default class ToolsLastSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const vitests = await super.sort(files);
    const rank = (spec: TestSpecification) => LONG_FOR_THEIR_SIZE.indexOf(path.basename(spec.moduleId));
    const first = vitests.filter((spec) => rank(spec) >= 0).sort((a, b) => rank(a) - rank(b));
    const sorted = [...first, ...vitests.filter((spec) => rank(spec) < 0)];
    const { cacheDir } = loadDevConfig();
    const missing = new Set((await missingTools(cacheDir)).map((tool) => tool.id));
    const waits = (spec: TestSpecification) =>
      (TOOL_TESTS[path.basename(spec.moduleId)] ?? []).some((tool) => missing.has(tool.id));
    // In the order their tools come out of the background build.
    const ready = (spec: TestSpecification) =>
      Math.max(...TOOL_TESTS[path.basename(spec.moduleId)]!.map((tool) => GO_TOOLS.indexOf(tool)));
    const last = sorted.filter(waits).sort((a, b) => ready(a) - ready(b));
    if (last.length > 0) buildToolsInBackground(cacheDir, [...missing]);
    return [...sorted.filter((spec) => !waits(spec)), ...last];
  }
}

/** `npm run tools`, nice'd, for as long as this run lasts (dev/bin/tools.ts stops with it). */
function buildToolsInBackground(cacheDir: string, tools: string[]): void {
  fs.mkdirSync(cacheDir, { recursive: true });
  const logFile = path.join(cacheDir, 'tools-build.log');
  const log = fs.openSync(logFile, 'w');
  const child = spawn(
    'nice',
    ['-n', '19', process.execPath, '--import', 'tsx', 'dev/bin/tools.ts', '--while', String(process.pid)],
    { cwd: REPO, detached: true, stdio: ['ignore', log, log] },
  );
  child.unref();
  fs.closeSync(log);
  console.log(`[tools] building ${tools.join(', ')} in the background; the files that need them run last (${logFile})`);
}
