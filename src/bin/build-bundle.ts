/**
 * Writes the workflow bundle to a file, for workers started with WORKFLOW_BUNDLE_PATH (the Docker image does
 * this at build time, so replicas start without running webpack).
 *
 *   npm run build:bundle -- dist/workflow-bundle.js
 */
import '../node-version.js';
import fs from 'node:fs/promises';
import path from 'node:path';
import { bundleWorkflows } from '../workers/region-worker.js';

const target = process.argv[2] ?? 'dist/workflow-bundle.js';
const { code } = await bundleWorkflows();
await fs.mkdir(path.dirname(path.resolve(target)), { recursive: true });
await fs.writeFile(target, code);
console.log(`workflow bundle written to ${target} (${(code.length / 1024).toFixed(0)} KiB)`);
