/** The committed golden histories (test/golden/histories/<release>/*.json), recorded by `npm run golden:record`. */
import fs from 'node:fs';
import path from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { Worker, type ReplayWorkerOptions } from '@temporalio/worker';

const ROOT = path.resolve(import.meta.dirname, '../golden/histories');

/**
 * Each history's workflow id, by file name, beside the histories of a release (older releases have none). A replay
 * must run under the recorded id when the workflow derives ids from its own: a sweep's batches are
 * `<sweep id>/page-n/batch-m`, and a child started under another id is a different command.
 */
export const WORKFLOW_IDS_FILE = 'workflow-ids.json';

/** Beside each set of encrypted histories (test/golden/encrypted/<release>/): its namespace and the test key it was encrypted under. */
export const ENCRYPTED_KEY_FILE = 'key.json';

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
        .filter((file) => file.endsWith('.json') && file !== WORKFLOW_IDS_FILE)
        .sort()
        .map((file) => ({
          release,
          file,
          workflowId: ids[file],
          history: historyFromJSON(JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'))),
        }));
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
        .filter((file) => file.endsWith('.json') && file !== WORKFLOW_IDS_FILE && file !== ENCRYPTED_KEY_FILE)
        .sort()
        .map((file) => ({
          release,
          file,
          workflowId: ids[file],
          history: historyFromJSON(JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'))),
        }));
      return { release, namespace, key: { id, key: Buffer.from(key, 'base64') }, histories };
    });
}

/**
 * Replays `histories` on one replay worker (one worker for them all: a worker per history costs seconds each) and
 * returns the ones that failed, as `<release>/<file>: <first line of the error>`. A history recorded before its
 * workflow id was kept replays under a placeholder id.
 */
export async function replayFailures(
  workflowBundle: ReplayWorkerOptions['workflowBundle'],
  histories: ReturnType<typeof goldenHistories>,
  dataConverter?: ReplayWorkerOptions['dataConverter'],
): Promise<string[]> {
  const failures: string[] = [];
  const inputs = histories.map((h) => ({ workflowId: h.workflowId ?? `golden/${h.release}/${h.file}`, history: h.history }));
  let i = 0;
  // Results come one per history, in order.
  for await (const result of Worker.runReplayHistories({ workflowBundle, replayName: 'golden-histories', dataConverter }, inputs)) {
    const { release, file } = histories[i++]!;
    if (result.error) failures.push(`${release}/${file}: ${result.error.message.split('\n')[0]}`);
  }
  if (i !== histories.length) failures.push(`replayed ${i} of ${histories.length} histories`);
  return failures;
}
