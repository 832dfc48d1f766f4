/**
 * The workflow project's one bundle of the product's workflows, for every file's workers (test/support/workflow-env.ts):
 * webpack over the workflows costs seconds of CPU, which each file would otherwise pay again on a busy machine. The
 * same entry point and workflow interceptors as production's bundle (src/workers/region-worker.ts); not its failure
 * converter, which only matters for encryption and would hide the failure messages the tests read in histories.
 */
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import type { TestProject } from 'vitest/node';

const fromHere = (relative: string) => fileURLToPath(new URL(relative, import.meta.url));

export default async function setup(project: TestProject) {
  const bundle = await bundleWorkflowCode({
    workflowsPath: fromHere('../../src/workflows/index.ts'),
    workflowInterceptorModules: [fromHere('../../src/workflows/interceptors.ts')],
    logger: new DefaultLogger('WARN'),
  });
  project.provide('workflowBundleCode', bundle.code);
}
