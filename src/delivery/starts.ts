/**
 * A webhook's delivery workflow started from outside a workflow: again by the outbox reconciler's activity
 * (src/activities/outbox.ts) for a pending webhook nothing is driving, and by `npm run ops -- events redeliver` (same
 * workflow id and webhook id as the run that ended); and a resend's (`npm run ops -- resend`,
 * src/operations/resends.ts). The ledger decides what is sent (the release is idempotent and answers `already_released`
 * with the webhook; the delivery re-reads its status before any request; a resend's first step reopens its webhook only
 * from an end).
 */
import { WorkflowIdReusePolicy, type Client } from '@temporalio/client';

/**
 * `start` (built by src/contracts/starts.ts, as a child's is) on the region's task queue; `more` joins its input: where
 * the run goes on from, as a continued run would. Reuse policy ALLOW_DUPLICATE_FAILED_ONLY: a run that ended without
 * finishing (terminated, timed out, failed) may be followed by a new one; a running one is never doubled, and a
 * completed one is never repeated (the start fails with WorkflowExecutionAlreadyStartedError: the caller reports it).
 */
export async function startFromOutside<I extends object>(
  client: Client,
  taskQueue: string,
  workflowType: 'releaseExpiredHold' | 'deliverHoldEvent' | 'resendWebhook',
  start: { workflowId: string; args: [I] },
  more?: Partial<I>,
): Promise<{ workflowId: string; runId: string }> {
  const handle = await client.workflow.start(workflowType, {
    ...start,
    args: [{ ...start.args[0], ...more }],
    taskQueue,
    workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
  });
  return { workflowId: start.workflowId, runId: handle.firstExecutionRunId };
}
