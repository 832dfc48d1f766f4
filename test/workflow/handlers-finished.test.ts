/**
 * Every return of a workflow waits for its handlers (src/workflows/interceptors.ts), on Temporal's time-skipping test
 * server: a workflow that returns while an Update it took is running stays open until the Update has answered, so the
 * Update's caller gets its answer, whichever return the workflow took (an idle hold's events, a hold not released, a
 * refused resend, or one added later).
 */
import { randomUUID } from 'node:crypto';
import { WorkflowUpdateStage } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, Worker } from '@temporalio/worker';
import { expect, it } from 'vitest';
import { withWorkflowEnv, type WorkflowEnv } from '../support/workflow-env.js';
import { goSignal, returnsWhileUpdateRuns, slowUpdate } from './fixtures/early-return.js';

let w: WorkflowEnv;
withWorkflowEnv((env) => (w = env));

const fromHere = (p: string) => new URL(p, import.meta.url).pathname;

it('a workflow that returns while an Update it took runs completes after the Update answers, not before', async () => {
  const bundle = await bundleWorkflowCode({
    workflowsPath: fromHere('./fixtures/early-return.ts'),
    workflowInterceptorModules: [fromHere('../../src/workflows/interceptors.ts')],
    logger: new DefaultLogger('WARN'),
  });
  const taskQueue = `wf-own-${randomUUID()}`;
  const worker = await Worker.create({
    connection: w.env.nativeConnection,
    namespace: w.env.namespace ?? 'default',
    taskQueue,
    workflowBundle: bundle,
  });
  await worker.runUntil(async () => {
    const handle = await w.env.client.workflow.start(returnsWhileUpdateRuns, {
      taskQueue,
      workflowId: `early-return-${randomUUID()}`,
    });
    const update = await handle.startUpdate(slowUpdate, { waitForStage: WorkflowUpdateStage.ACCEPTED });
    // The workflow has returned from its code, and its Update runs on: the run is still open.
    await expect.poll(async () => (await handle.fetchHistory()).events?.length ?? 0).toBeGreaterThan(0);
    const open = (await handle.describe()).status.name;
    console.log(`[workflow] returned with an Update running: the run is ${open}`);
    expect(open).toBe('RUNNING');
    await handle.signal(goSignal);
    expect(await update.result()).toBe('answered');
    expect(await handle.result()).toBe('returned');
  });
});
