/**
 * Operator commands for the processor's events (`npm run ops -- events ...`, `reviews ...`): a hold's event log from
 * the ledger and its workflow's own account, a skip of a missing sequence (sent to the hold's event workflow, which
 * records it), and the ledger reviews events opened (late captures, events that could not apply).
 */
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { identityKey, samePerson } from '../contracts/identity.js';
import { holdEventsWorkflowId } from '../contracts/ids.js';
import {
  holdEventsStatusQuery,
  skipMissingEventUpdate,
  type HoldEventsStatus,
  type SkipAnswer,
} from '../contracts/processor.js';
import { OperatorError } from '../errors.js';
import * as events from '../sql/processor-events.js';
import * as records from '../sql/operator-records.js';
import type { OpsContext } from './operations.js';

interface HoldEventsReport {
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
  if (log.length === 0)
    throw new OperatorError('NoHoldEvents', `hold ${holdId} has no processor events in region ${ctx.region.region}`);
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

/** Refused, naming why, unless the hold's event workflow is waiting for exactly `sequence`. */
async function assertWaitingFor(ctx: OpsContext, holdId: string, sequence: number) {
  const handle = ctx.client.workflow.getHandle(holdEventsWorkflowId(ctx.region.region, holdId));
  let account: HoldEventsStatus;
  try {
    account = await handle.query(holdEventsStatusQuery);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError)
      throw new OperatorError('NotWaitingForSequence', `hold ${holdId} has no running event workflow`);
    throw err;
  }
  const { stage } = account;
  const waitingFor =
    stage.stage === 'stopped_for_human' || stage.stage === 'waiting_for_predecessor' ? stage.expected : undefined;
  if (waitingFor !== sequence) {
    throw new OperatorError(
      'NotWaitingForSequence',
      `hold ${holdId}'s event workflow is ${stage.stage}${waitingFor === undefined ? '' : ` waiting for sequence ${waitingFor}`}, not for sequence ${sequence}`,
    );
  }
}

/**
 * Skips the missing `sequence` of a hold whose event workflow is stopped at that gap (or waiting for it), as a
 * `skipMissingEvent` Update: the workflow's validator refuses a skip it is not waiting for (nothing sent, the reason
 * named), and it answers once the ledger recorded the skip or refused it. The Update's id comes from the hold, the
 * sequence and the request (or the operator), so a retried call gets the first call's answer, never a second skip.
 * With `requestId` (four eyes), as the approver of that skip request.
 */
export async function skipMissingEvent(
  ctx: OpsContext,
  holdId: string,
  sequence: number,
  by: string,
  reason: string,
  requestId?: string,
): Promise<{ skipped: true; workflowId: string }> {
  const handle = ctx.client.workflow.getHandle(holdEventsWorkflowId(ctx.region.region, holdId));
  let answer: SkipAnswer;
  try {
    answer = await handle.executeUpdate(skipMissingEventUpdate, {
      updateId: `skip/${holdId}/sequence-${sequence}/${requestId ?? identityKey(by)}`,
      args: [{ sequence, by, reason, ...(requestId === undefined ? {} : { requestId }) }],
    });
  } catch (err) {
    if (err instanceof WorkflowNotFoundError)
      throw new OperatorError('NotWaitingForSequence', `hold ${holdId} has no running event workflow`);
    if (err instanceof WorkflowUpdateFailedError) {
      throw new OperatorError(
        'NotWaitingForSequence',
        `hold ${holdId}'s event workflow refused the skip: ${err.cause?.message ?? err.message}`,
      );
    }
    throw err;
  }
  if (!answer.skipped) {
    throw new OperatorError(
      'SkipNotRecorded',
      `the workflow tried the skip of sequence ${sequence} and the ledger did not record it` +
        (requestId === undefined
          ? ' (a production worker needs an approved skip request: events skip, then events approve-skip)'
          : ''),
    );
  }
  return { skipped: true, workflowId: handle.workflowId };
}

/**
 * Four eyes, first half: records a request to skip the missing `sequence` (the workflow must be waiting for it), for
 * someone else to approve with `approveSkip`. Nothing is sent to the workflow yet.
 */
export async function requestSkip(
  ctx: OpsContext,
  holdId: string,
  sequence: number,
  requestedBy: string,
  reason: string,
): Promise<{ requestId: string }> {
  await assertWaitingFor(ctx, holdId, sequence);
  const requestId = `sr_${randomUUID().slice(0, 8)}`;
  await records.insertSkipRequest(ctx.pool, { id: requestId, holdId, sequence, requestedBy, reason });
  return { requestId };
}

/**
 * Four eyes, second half: approves a skip request (never its requester: refused here and by the ledger), then
 * carries it out as its approver; the worker checks the request against the ledger before it records the skip.
 */
export async function approveSkip(
  ctx: OpsContext,
  requestId: string,
  approvedBy: string,
): Promise<{ skipped: true; workflowId: string }> {
  const request = await records.skipRequest(ctx.pool, requestId);
  if (!request)
    throw new OperatorError(
      'SkipRequestNotFound',
      `skip request ${requestId} does not exist in region ${ctx.region.region}`,
    );
  if (samePerson(request.requestedBy, approvedBy)) {
    throw new OperatorError(
      'SelfApprovalRefused',
      `skip request ${requestId} was requested by ${request.requestedBy}; someone else must approve it`,
    );
  }
  if (request.status === 'pending' && !(await records.markSkipRequestApproved(ctx.pool, requestId, approvedBy))) {
    throw new OperatorError('SkipAlreadyApproved', `skip request ${requestId} was approved by someone else meanwhile`);
  }
  const approver = request.approvedBy ?? approvedBy;
  if (!samePerson(approver, approvedBy)) {
    throw new OperatorError('SkipAlreadyApproved', `skip request ${requestId} is already approved by ${approver}`);
  }
  return skipMissingEvent(ctx, request.holdId, request.sequence, approvedBy, request.reason, requestId);
}

export async function resolveReview(
  ctx: Pick<OpsContext, 'pool'>,
  eventId: string,
  by: string,
): Promise<{ resolved: true }> {
  if (!(await events.resolveReview(ctx.pool, eventId, by)))
    throw new OperatorError('ReviewNotOpen', `no open review for event ${eventId}`);
  return { resolved: true };
}
