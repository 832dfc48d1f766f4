/** The committed golden histories (test/golden/histories/<release>/*.json), recorded by `npm run golden:record`. */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { ReplayWorkerOptions } from '@temporalio/worker';
import {
  addHistoryFile,
  historyFileContent,
  historyOfFileContent,
  isHistoryFile,
  replaySet,
  WORKFLOW_IDS_FILE,
} from '../../src/workers/replay.js';
import { coverageOf } from './coverage.js';

/**
 * The release a recording run writes for: GOLDEN_RELEASE, else `build` (a recording made from an earlier build's
 * code), else the git revision it runs at. Its set is `test/golden/<kind>/<release>/`.
 */
export function goldenRelease(build?: string): string {
  return (
    process.env.GOLDEN_RELEASE ??
    build ??
    execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()
  );
}

/** Where `release`'s recordings of `kind` go: test/golden/histories/<release>/ or test/golden/encrypted/<release>/. */
export function goldenSetDir(release: string, kind: 'histories' | 'encrypted' = 'histories'): string {
  return path.resolve(import.meta.dirname, '../golden', kind, release);
}

const ROOT = path.resolve(import.meta.dirname, '../golden/histories');

/**
 * Each history's workflow id, by file name, beside the histories of a release (older releases have none). A replay
 * must run under the recorded id when the workflow derives ids from its own: a sweep's batches are
 * `<sweep id>/page-n/batch-m`, and a child started under another id is a different command. The format of a set is
 * the product's (src/workers/replay.ts): a history that refuses a promotion is saved as one.
 */
export { historyFileContent, isHistoryFile, WORKFLOW_IDS_FILE };

/**
 * Beside each set: each cell of test/support/waiting-points.ts its histories show (test/support/coverage.ts), and the
 * histories that show it.
 */
export const COVERAGE_FILE = 'coverage.json';

/**
 * Beside each set of encrypted histories (test/golden/encrypted/<release>/): its namespace and the test key it was
 * encrypted under.
 */
export const ENCRYPTED_KEY_FILE = 'key.json';

/** A recorded history, read back. */
export const readHistoryFile = (file: string) => historyOfFileContent(fs.readFileSync(file));

/** Every golden history: release, file, parsed history, and the workflow id it ran under when it was recorded. */
export function goldenHistories() {
  return fs
    .readdirSync(ROOT)
    .sort()
    .flatMap((release) => {
      const dir = path.join(ROOT, release);
      const idsFile = path.join(dir, WORKFLOW_IDS_FILE);
      const ids: Record<string, string> = fs.existsSync(idsFile) ? JSON.parse(fs.readFileSync(idsFile, 'utf8')) : {};
      return fs
        .readdirSync(dir)
        .filter(isHistoryFile)
        .sort()
        .map((file) => ({ release, file, workflowId: ids[file], history: readHistoryFile(path.join(dir, file)) }));
    });
}

const ENCRYPTED_ROOT = path.resolve(import.meta.dirname, '../golden/encrypted');

/**
 * Every committed set of encrypted histories (test/golden/encrypted/<release>/, recorded by record-encrypted.test.ts):
 * its namespace and test key, and its histories as the server stored them (ciphertext).
 */
export function encryptedGoldenSets() {
  return fs
    .readdirSync(ENCRYPTED_ROOT)
    .sort()
    .map((release) => {
      const dir = path.join(ENCRYPTED_ROOT, release);
      const { namespace, id, key } = JSON.parse(fs.readFileSync(path.join(dir, ENCRYPTED_KEY_FILE), 'utf8')) as {
        namespace: string;
        id: string;
        key: string;
      };
      const ids: Record<string, string> = JSON.parse(fs.readFileSync(path.join(dir, WORKFLOW_IDS_FILE), 'utf8'));
      const histories = fs
        .readdirSync(dir)
        .filter(isHistoryFile)
        .sort()
        .map((file) => ({ release, file, workflowId: ids[file], history: readHistoryFile(path.join(dir, file)) }));
      return { release, namespace, key: { id, key: Buffer.from(key, 'base64') }, histories };
    });
}

/**
 * Replays `histories` on one replay worker (one worker for them all: a worker per history costs seconds each) and
 * returns the ones that failed, as `<release>/<file>: <first line of the error>`. A history recorded before its
 * workflow id was kept replays under a placeholder id.
 */
export const replayFailures = (
  workflowBundle: ReplayWorkerOptions['workflowBundle'],
  histories: ReturnType<typeof goldenHistories>,
  dataConverter?: ReplayWorkerOptions['dataConverter'],
): Promise<string[]> =>
  replaySet(
    workflowBundle as { code: string },
    histories.map((h) => ({
      file: `${h.release}/${h.file}`,
      workflowId: h.workflowId ?? `golden/${h.release}/${h.file}`,
      history: h.history,
    })),
    dataConverter,
  );

/**
 * Adds one history to the set in `out` (a release's directory), as `<name>-<n>.json.gz` (n: the files already there, so
 * names never collide), and its workflow id to the set's workflow-ids.json. Never removes a file: several recorders add
 * to one release's set. `npm run golden:coverage` then rewrites the set's coverage.json.
 */
export async function addRecording(
  out: string,
  name: string,
  workflowId: string,
  history: Parameters<typeof historyFileContent>[0],
): Promise<string> {
  const file = await addHistoryFile(out, name, workflowId, history);
  return file;
}

/** Each cell the histories of the set in `dir` show -> the histories that show it (`npm run golden:coverage`). */
export function coverageMetadataOf(dir: string): Record<string, string[]> {
  const byCell: Record<string, string[]> = {};
  for (const file of fs.readdirSync(dir).filter(isHistoryFile).sort())
    for (const cell of coverageOf(readHistoryFile(path.join(dir, file)))) (byCell[cell] ??= []).push(file);
  return Object.fromEntries(Object.entries(byCell).sort(([a], [b]) => (a < b ? -1 : 1)));
}

/** The set's coverage.json, as `npm run golden:coverage` and a recorder write it. */
export const coverageFileContent = (dir: string) => `${JSON.stringify(coverageMetadataOf(dir), null, 2)}\n`;

/**
 * The released versions, newest first: the `## <version>` headings of CHANGELOG.md (`## Unreleased` is none). A golden
 * set exists for each and for nothing else: a set is what a build that ran somewhere wrote.
 */
export function releasedVersions(): string[] {
  const changelog = fs.readFileSync(path.resolve(import.meta.dirname, '../../CHANGELOG.md'), 'utf8');
  return [...changelog.matchAll(/^## (\d+\.\d+\.\d+)\s*$/gm)].map((m) => m[1]!);
}

/**
 * The commit each release was cut from: its source tree is what `unreleased` cells of
 * test/support/waiting-points.ts are checked against (test/unit/golden-coverage.test.ts).
 */
export const RELEASE_COMMITS: Readonly<Record<string, string>> = { '1.0.0': 'f6c3f92' };

/** The directory of each committed set of plain histories. */
export const goldenSetDirs = () =>
  fs
    .readdirSync(ROOT)
    .sort()
    .map((release) => path.join(ROOT, release));

/**
 * Adds the history of every execution (every run) on `taskQueue` to the set in `out`, named `<workflow type>-<tag>`.
 */
export async function addRecordings(client: Client, taskQueue: string, out: string, tag: string): Promise<string[]> {
  const written: string[] = [];
  for await (const execution of client.workflow.list({ query: `TaskQueue = '${taskQueue}'` })) {
    const history = await client.workflow.getHandle(execution.workflowId, execution.runId).fetchHistory();
    written.push(await addRecording(out, `${execution.type}-${tag}`, execution.workflowId, history));
  }
  return written;
}
