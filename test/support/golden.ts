/** The committed golden histories (test/golden/histories/<release>/*.json), recorded by `npm run golden:record`. */
import fs from 'node:fs';
import path from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';

const ROOT = path.resolve(import.meta.dirname, '../golden/histories');

/** Every golden history: release, file, parsed history. */
export function goldenHistories() {
  return fs
    .readdirSync(ROOT)
    .sort()
    .flatMap((release) =>
      fs
        .readdirSync(path.join(ROOT, release))
        .filter((file) => file.endsWith('.json'))
        .sort()
        .map((file) => ({ release, file, history: historyFromJSON(JSON.parse(fs.readFileSync(path.join(ROOT, release, file), 'utf8'))) })),
    );
}
