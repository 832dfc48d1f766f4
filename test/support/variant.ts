/**
 * Another build of the workflow code, for the tests that need one (the replay gate's proof, the deploy in the middle
 * of a night): a copy of src/ with some exact edits, bundled exactly as the worker bundles the real code; or the code
 * of an earlier revision, for recording the histories it wrote.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { DEFAULT_DEPLOYMENT_NAME } from '../../src/config.js';
import { buildIdOf } from '../../src/workers/deployment.js';
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

/**
 * The change the deploy tests refuse: the quarantine's DeliveryStatus upserted before the activity that records it (a
 * new command where a history that reached a quarantine has another); with `patchId`, the same behind `patched()`.
 * As src/workflows/webhook-delivery.ts writes it (prettier, width 120): the edits match its exact text.
 */
export function quarantineUpsertedFirst(patchId?: string): Edit[] {
  const file = 'workflows/webhook-delivery.ts';
  const quarantine = `      case 'quarantine': {
        const { reason, detail } = step;
`;
  const upsert = "upsertSearchAttributes(deliveryStatusUpdate('quarantined'));";
  // `patched`, `upsertSearchAttributes` and `deliveryStatusUpdate` are among the module's own imports.
  return [
    {
      file,
      from: quarantine,
      to: `${quarantine}        ${patchId ? `if (patched('${patchId}')) ${upsert}` : upsert}\n`,
    },
  ];
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

/**
 * The workflow code of an earlier build, as that build bundled it: src/ at git revision `revision` (`git archive`),
 * bundled with its own entry point and failure converter. For recording the histories that build writes (a state the
 * golden sets lack) with today's activities, which keep their names and inputs.
 */
export async function bundleOfRevision(dir: string, revision: string): Promise<{ code: string }> {
  await fs.mkdir(dir, { recursive: true });
  const archive = spawnSync('git', ['archive', '--format=tar', revision, 'src'], {
    cwd: REPO,
    maxBuffer: 64 * 1024 * 1024,
  });
  expect(archive.status, `git archive ${revision}: ${archive.stderr?.toString()}`).toBe(0);
  const untar = spawnSync('tar', ['-x', '-C', dir], { input: archive.stdout });
  expect(untar.status, `tar: ${untar.stderr?.toString()}`).toBe(0);
  await fs.symlink(path.join(REPO, 'node_modules'), path.join(dir, 'node_modules'));
  return bundleWorkflowCode({
    workflowsPath: path.join(dir, 'src/workflows/index.ts'),
    failureConverterPath: path.join(dir, 'src/codec/failure-converter.cjs'),
    logger: new DefaultLogger('WARN'),
  });
}

/**
 * The worker options that run the workflow code a recording is made of: build `revision`'s (GOLDEN_BUILD), bundled from
 * that revision under its own build id; with none, the working tree's (no options).
 */
export async function recordingBuild(revision: string | undefined) {
  if (!revision) return {};
  const bundle = await bundleOfRevision(await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-build-')), revision);
  return { workflowBundle: bundle, version: { deploymentName: DEFAULT_DEPLOYMENT_NAME, buildId: buildIdOf(bundle) } };
}
