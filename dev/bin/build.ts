/**
 * `npm run build`: what production runs, as JavaScript (the Dockerfile's build stage runs this). Compiles src/ alone
 * into dist/ (tsconfig.build.json), copies the files the compiled code reads from beside itself (every file of src/
 * that is not TypeScript: the SQL migrations, the failure converter), then writes dist/workflow-bundle.js with the
 * compiled dist/bin/build-bundle.js, so the last step already runs without tsx.
 *
 *   npm run build && HOLD_SWEEPER_MODE=... WORKFLOW_BUNDLE_PATH=dist/workflow-bundle.js node dist/bin/worker.js
 */
import '../../src/node-version.js';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';

const REPO = path.resolve(import.meta.dirname, '../..');
const SRC = path.join(REPO, 'src');
const DIST = path.join(REPO, 'dist');

// From scratch: a module removed from src/ must not linger in dist/ and ship.
await fs.rm(DIST, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', path.join(REPO, 'tsconfig.build.json')], { cwd: REPO, stdio: 'inherit' });

const assets = (await fs.readdir(SRC, { recursive: true, withFileTypes: true })).filter(
  (entry) => entry.isFile() && !entry.name.endsWith('.ts'),
);
for (const asset of assets) {
  const target = path.join(DIST, path.relative(SRC, path.join(asset.parentPath, asset.name)));
  await fs.mkdir(path.dirname(target), { recursive: true });
  await fs.copyFile(path.join(asset.parentPath, asset.name), target);
}
console.log(`compiled src/ into dist/, with ${assets.length} files that are not TypeScript`);

execFileSync(process.execPath, [path.join(DIST, 'bin/build-bundle.js'), path.join(DIST, 'workflow-bundle.js')], {
  cwd: REPO,
  stdio: 'inherit',
});
