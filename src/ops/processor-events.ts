/**
 * Operator commands for the processor's events (`npm run ops -- events ...`, `reviews ...`): a hold's event log from
 * the ledger and its workflow's own account, a skip of a missing sequence (sent to the hold's event workflow, which
 * records it), and the ledger reviews events opened (late captures, events that could not apply).
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { holdEventsWorkflowId } from '../contracts/ids.js';
import { holdEventsStatusQuery, skipMissingEventSignal, type HoldEventsStatus } from '../contracts/processor.js';
import { OperatorError } from '../errors.js';
import * as events from '../sql/processor-events.js';
import type { OpsContext } from './operations.js';

export interface HoldEventsReport {
  holdId: string;
  events: Record<string, unknown>[];
  skips: Record<string, unknown>[];
  reviews: Record<string, unknown>[];
  /** The hold's event workflow, if one ran: its status and, while it runs, its own account (the status query). */
  workflow: { workflowId: string; status: string; account?: HoldEventsStatus } | null;
}

export async function holdEvents(ctx: OpsContext, holdId: string): Promise<HoldEventsReport> {
  const [log, skips, reviews] = await Promise.all([
    events.eventsOfHold(ctx.pool, holdId),
    events.skipsOfHold(ctx.pool, holdId),
    events.reviews(ctx.pool, { all: true, holdId }),
  ]);
  if (log.length === 0) throw new OperatorError('NoHoldEvents', `hold ${holdId} has no processor events in region ${ctx.region.region}`);
  const workflowId = holdEventsWorkflowId(ctx.region.region, holdId);
  const handle = ctx.client.workflow.getHandle(workflowId);
  let workflow: HoldEventsReport['workflow'] = null;
  try {
    const description = await handle.describe();
    workflow = { workflowId, status: description.status.name };
    if (description.status.name === 'RUNNING') workflow.account = await handle.query(holdEventsStatusQuery);
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
  return { holdId, events: log, skips, reviews, workflow };
}

/** How long `skip` waits to see the hold's workflow record the skip in the ledger. */
const SKIP_CONFIRM_MS = 15_000;

/**
 * Skips the missing `sequence` of a hold whose event workflow is stopped at that gap (or waiting for it): the
 * workflow records the skip in the ledger and applies what follows. Refused, sending nothing, when the workflow is not
 * waiting for exactly that sequence.
 */
export async function skipMissingEvent(
  ctx: OpsContext,
  holdId: string,
  sequence: number,
  by: string,
  reason: string,
): Promise<{ skipped: true; workflowId: string }> {
  const workflowId = holdEventsWorkflowId(ctx.region.region, holdId);
  const handle = ctx.client.workflow.getHandle(workflowId);
  let account: HoldEventsStatus;
  try {
    account = await handle.query(holdEventsStatusQuery);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new OperatorError('NotWaitingForSequence', `hold ${holdId} has no running event workflow`);
    throw err;
  }
  const { stage } = account;
  const waitingFor = stage.stage === 'stopped_for_human' || stage.stage === 'waiting_for_predecessor' ? stage.expected : undefined;
  if (waitingFor !== sequence) {
    throw new OperatorError(
      'NotWaitingForSequence',
      `hold ${holdId}'s event workflow is ${stage.stage}${waitingFor === undefined ? '' : ` waiting for sequence ${waitingFor}`}, not for sequence ${sequence}`,
    );
  }
  await handle.signal(skipMissingEventSignal, { sequence, by, reason });
  const deadline = Date.now() + SKIP_CONFIRM_MS;
  while (!(await events.isSkipped(ctx.pool, holdId, sequence))) {
    if (Date.now() > deadline) {
      throw new OperatorError('NotWaitingForSequence', `the skip was sent, but the workflow has not recorded it within ${SKIP_CONFIRM_MS / 1000} s`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return { skipped: true, workflowId };
}

export async function resolveReview(ctx: Pick<OpsContext, 'pool'>, eventId: string, by: string): Promise<{ resolved: true }> {
  if (!(await events.resolveReview(ctx.pool, eventId, by))) throw new OperatorError('ReviewNotOpen', `no open review for event ${eventId}`);
  return { resolved: true };
}
