/** The committed golden histories (test/golden/histories/<release>/*.json), recorded by `npm run golden:record`. */
import fs from 'node:fs';
import path from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';

const ROOT = path.resolve(import.meta.dirname, '../golden/histories');

/**
 * Each history's workflow id, by file name, beside the histories of a release (older releases have none). A replay
 * must run under the recorded id when the workflow derives ids from its own: a sweep's batches are
 * `<sweep id>/page-n/batch-m`, and a child started under another id is a different command.
 */
export const WORKFLOW_IDS_FILE = 'workflow-ids.json';

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
