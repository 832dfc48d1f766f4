/**
 * Another build of the workflow code, for the tests that need one (the replay gate's proof, the deploy in the middle
 * of a night): a copy of src/ with some exact edits, bundled exactly as the worker bundles the real code.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'vitest';
import { bundleWorkflows } from '../../src/workers/region-worker.js';

const REPO = path.resolve(import.meta.dirname, '../..');

export interface Edit {
  /** Relative to src/. */
  file: string;
  /** Text that must appear in the file exactly once... */
  from: string;
  /** ...and what replaces it. */
  to: string;
}

/** Copies src/ into `dir`, applies `edits` (each must match exactly once) and returns the bundle. */
export async function bundleVariant(dir: string, edits: readonly Edit[]): Promise<{ code: string }> {
  const src = path.join(dir, 'src');
  await fs.cp(path.join(REPO, 'src'), src, { recursive: true });
  await fs.symlink(path.join(REPO, 'node_modules'), path.join(dir, 'node_modules'));
  for (const { file, from, to } of edits) {
    const target = path.join(src, file);
    const code = await fs.readFile(target, 'utf8');
    expect(code.split(from).length - 1, `${file} holds the text to edit exactly once`).toBe(1);
    await fs.writeFile(target, code.replace(from, to));
  }
  return bundleWorkflows(path.join(src, 'workflows/index.ts'));
}
