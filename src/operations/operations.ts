/**
 * Operator operations on one region: what the `ops` CLI runs, and what the tests call directly. Reads come
 * from the region's ledger; decisions go to the per-hold workflows as Workflow Updates (`approveReplay`,
 * `discard`): the workflow validates each one and answers, so "applied" here means the workflow applied it and
 * recorded it, never only that a message was sent. Every decision is recorded in `operator_decisions` before it is
 * sent (the worker records only what a row there stands behind), with the workflow's answer or why it refused.
 */
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { decodeOptionalFailureToOptionalError } from '@temporalio/common/lib/internal-non-workflow/codec-helpers.js';
import type pg from 'pg';
import type { RegionConfig } from '../config.js';
import { inTransaction, type Queryable } from '../db/pool.js';
import { OperatorError } from '../errors.js';
import { identityKey, samePerson } from '../contracts/identity.js';
import { deliveryWorkflowId, eventDeliveryWorkflowId, holdWorkflowId } from '../contracts/ids.js';
import {
  approveReplayUpdate,
  discardUpdate,
  statusQuery,
  type ApproveReplay,
  type DecisionAnswer,
  type Discard,
  type HoldStatus,
} from '../contracts/messages.js';
import * as deliveries from '../sql/deliveries.js';
import {
  HOLD_RELEASED_EVENT,
  type DecisionTarget,
  type QuarantineFilters,
  type QuarantinedDelivery,
  type ResendFilters,
} from '../sql/deliveries.js';
import * as holds from '../sql/holds.js';
import * as records from '../sql/operator-records.js';
import * as events from '../sql/processor-events.js';
import { eventDeliveryStart } from '../contracts/starts.js';
import { startFromOutside } from '../delivery/starts.js';
import { withRetryHorizon } from '../delivery/policy.js';

export interface OpsContext {
  region: RegionConfig;
  pool: pg.Pool;
  client: Client;
  /** Four eyes (production mode, DecisionsConfig): one person's approval is refused before anything is sent. */
  fourEyes?: boolean;
}

/** Quarantined deliveries matching every given filter, oldest quarantine first. */
export async function listQuarantined(pool: Queryable, filters: QuarantineFilters): Promise<QuarantinedDelivery[]> {
  return deliveries.quarantinedDeliveries(pool, filters);
}

/** Freezes the quarantined deliveries matching `filters` into a replay request awaiting approval. */
export async function previewReplay(
  pool: Queryable,
  filters: QuarantineFilters,
  requestedBy: string,
): Promise<{ id: string; count: number; items: QuarantinedDelivery[] }> {
  const items = await listQuarantined(pool, filters);
  return freezeRequest(pool, { kind: 'replay', requestedBy, filters }, items, 'quarantined delivery', 'replay');
}

/**
 * Freezes `items` into a request awaiting a second person's approval: exactly these webhooks, in the policy run each
 * is in now. None is refused (`EmptySelection`, naming `what` and what there is `nothing to` do).
 */
export async function freezeRequest<T extends { webhookId: string; policyRun: number }>(
  pool: Queryable,
  request: { kind: records.RequestKind; requestedBy: string; filters: QuarantineFilters | ResendFilters },
  items: T[],
  what: string,
  nothingTo: string,
): Promise<{ id: string; count: number; items: T[] }> {
  if (items.length === 0)
    throw new OperatorError('EmptySelection', `no ${what} matches these filters; nothing to ${nothingTo}`);
  const id = `${request.kind === 'replay' ? 'rr' : 'rq'}_${randomUUID().slice(0, 8)}`;
  await inTransaction(pool, async (tx) => {
    await records.insertReplayRequest(tx, { ...request, id, itemCount: items.length });
    await records.insertReplayRequestItems(tx, id, items);
  });
  return { id, count: items.length, items };
}

/** A delivery an operator decides on, with the id of its workflow (the Update's addressee). */
type DeliveryTarget = DecisionTarget & { workflowId: string };

const deliveryTarget = (ctx: OpsContext, target: DecisionTarget): DeliveryTarget => ({
  ...target,
  workflowId: deliveryWorkflowId(ctx.region.region, target),
});

/**
 * The Update id of a decision: what it decides (the request it carries out, or who decides), on which webhook and
 * quarantined run. A retried call (a timeout, an interrupted bulk replay run again) sends the same id, and Temporal
 * answers it with the first call's outcome: it is applied once and reported `applied` both times, never `already
 * decided`. (An Update the validator refused leaves no outcome: the same id may be sent again.)
 */
function decisionUpdateId(target: DeliveryTarget, decision: Decision): string {
  const who =
    decision.signal === 'approveReplay'
      ? (decision.replayRequestId ?? identityKey(decision.approvedBy))
      : identityKey(decision.by);
  return `${decision.signal}/${who}/${target.webhookId}/run-${target.policyRun}`;
}

type Decision =
  | { signal: 'approveReplay'; approvedBy: string; reason: string; ticket?: string; replayRequestId?: string }
  | { signal: 'discard'; by: string; reason: string };

/**
 * A decision sent again after it was applied (the CLI retried after a timeout, the operator ran the command twice):
 * when the ledger's latest decision on the webhook is this one, by this person (and, for a frozen request, on its
 * frozen run), the answer is the one it got then, `applied`, never `ignored: already decided`.
 */
async function sameDecisionAlreadyRecorded(
  ctx: OpsContext,
  target: DeliveryTarget,
  decision: Decision,
  expectedRun: number | undefined,
): Promise<DecisionOutcome | undefined> {
  const latest = await deliveries.latestDecision(ctx.pool, target.webhookId);
  const kind = decision.signal === 'approveReplay' ? 'replay' : 'discard';
  const who = decision.signal === 'approveReplay' ? decision.approvedBy : decision.by;
  if (!latest || latest.decision !== kind || !samePerson(latest.decidedBy, who)) return undefined;
  if (expectedRun !== undefined && latest.policyRun !== expectedRun) return undefined;
  const stage =
    target.status === 'discarded' ? 'discarded' : target.status === 'delivered' ? 'delivered' : 'delivering';
  return { outcome: 'applied', answer: { decision: kind, policyRun: latest.policyRun, stage } };
}

/** `applied`: the workflow accepted the decision and recorded it (its answer); `ignored`: why it did not apply. */
type DecisionOutcome = { outcome: 'applied'; answer: DecisionAnswer } | { outcome: 'ignored'; detail: string };

/**
 * Records one decision in the ledger and sends it to the hold's workflow, as an Update naming the recorded decision,
 * for the policy run the ledger shows quarantined, if the ledger still shows it quarantined in the expected run;
 * otherwise sends nothing. The workflow has the last word: its validator refuses a decision it is not waiting for
 * (e.g. the ledger is a moment ahead of the workflow's stage), and the worker records it only as the ledger holds it.
 * Either way the outcome is kept with the decision.
 */
async function sendDecision(
  ctx: OpsContext,
  target: DeliveryTarget,
  decision: Decision,
  expectedRun?: number,
): Promise<DecisionOutcome> {
  const by = decision.signal === 'approveReplay' ? decision.approvedBy : decision.by;
  const logOnly = { webhookId: target.webhookId, signal: decision.signal, by, reason: decision.reason };
  const earlier =
    target.status === 'quarantined' && expectedRun === undefined
      ? undefined
      : await sameDecisionAlreadyRecorded(ctx, target, decision, expectedRun);
  const notSent: DecisionOutcome | undefined = earlier
    ? earlier
    : target.status !== 'quarantined'
      ? { outcome: 'ignored', detail: `delivery is ${target.status}, not quarantined` }
      : expectedRun !== undefined && target.policyRun !== expectedRun
        ? {
            outcome: 'ignored',
            detail: `quarantined again in run ${target.policyRun} after the preview froze run ${expectedRun}`,
          }
        : undefined;
  if (notSent) {
    await records.recordDecisionOutcome(ctx.pool, logOnly, outcomeDetail(notSent));
    return notSent;
  }
  const { policyRun } = target;
  const ticket = decision.signal === 'approveReplay' ? decision.ticket : undefined;
  const decisionId = await records.recordOperatorDecision(ctx.pool, { ...logOnly, policyRun, ticket });
  const handle = ctx.client.workflow.getHandle(target.workflowId);
  const updateId = decisionUpdateId(target, decision);
  let result: DecisionOutcome;
  try {
    const answer =
      decision.signal === 'approveReplay'
        ? await handle.executeUpdate(approveReplayUpdate, {
            updateId,
            args: [
              {
                approvedBy: decision.approvedBy,
                reason: decision.reason,
                ...(decision.ticket ? { ticket: decision.ticket } : {}),
                ...(decision.replayRequestId ? { replayRequestId: decision.replayRequestId } : {}),
                policyRun,
                decisionId,
              },
            ],
          })
        : await handle.executeUpdate(discardUpdate, {
            updateId,
            args: [{ by: decision.by, reason: decision.reason, policyRun, decisionId }],
          });
    result = { outcome: 'applied', answer };
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError)
      result = { outcome: 'ignored', detail: `refused by the workflow: ${err.cause?.message ?? err.message}` };
    else if (err instanceof WorkflowNotFoundError)
      result = { outcome: 'ignored', detail: `workflow ${target.workflowId} is not running` };
    else throw err;
  }
  await records.recordDecisionOutcome(ctx.pool, { decisionId }, outcomeDetail(result));
  return result;
}

const outcomeDetail = (result: DecisionOutcome) => ({
  outcome: result.outcome,
  detail:
    result.outcome === 'ignored'
      ? result.detail
      : `${result.answer.decision} of policy run ${result.answer.policyRun}; now ${result.answer.stage}`,
});

/**
 * The second person's approval of a frozen request (a bulk replay, or a bulk resend): refused for its requester (by
 * identity, `samePerson`), for a request of the other kind, and for a request another person approved; approved by this
 * one, it may be run again by them (to resume an interrupted run). Returns the request as approved.
 */
export async function approveRequest(
  ctx: OpsContext,
  requestId: string,
  approvedBy: string,
  kind: records.RequestKind,
): Promise<{ requestedBy: string; approvedBy: string }> {
  const request = await records.replayRequest(ctx.pool, requestId);
  if (!request || request.kind !== kind) {
    const other = request ? ` (it is a ${request.kind} request: npm run ops -- ${request.kind} approve)` : '';
    throw new OperatorError(
      'ReplayRequestNotFound',
      `${kind} request ${requestId} does not exist in region ${ctx.region.region}${other}`,
    );
  }
  if (samePerson(request.requestedBy, approvedBy)) {
    throw new OperatorError(
      'SelfApprovalRefused',
      `${kind} request ${requestId} was requested by ${request.requestedBy}; someone else must approve it`,
    );
  }
  if (request.status === 'pending') await records.markReplayRequestApproved(ctx.pool, requestId, approvedBy);
  const approver = (await records.replayRequest(ctx.pool, requestId))!.approvedBy;
  if (approver === null || !samePerson(approver, approvedBy)) {
    throw new OperatorError(
      'ReplayAlreadyApproved',
      `${kind} request ${requestId} is already approved by ${approver}; only they can resume it`,
    );
  }
  return { requestedBy: request.requestedBy, approvedBy: approver };
}

/**
 * Approves a frozen replay request: refused for the requester, and for a request another person approved; then
 * signals `approveReplay` to exactly the frozen deliveries still quarantined in the frozen run, at most
 * `signalsPerSecond` (each replay is then paced again by its merchant's budget, in the replay lane).
 *
 * Resumable item by item: run again by the same approver after an interruption, it sends only what has no recorded
 * outcome yet; an item whose frozen run the ledger shows replayed (the Update applied, the outcome not yet written
 * when it stopped) is recorded `applied` without sending again. Every Update carries an id derived from the request,
 * the webhook and the run, so even a resend is answered with the first outcome.
 */
export async function approveReplayRequest(
  ctx: OpsContext,
  requestId: string,
  approvedBy: string,
  options: { signalsPerSecond?: number; ticket?: string; send?: boolean } = {},
): Promise<{
  id: string;
  applied: number;
  ignored: { webhookId: string; detail: string }[];
  alreadyDone: number;
  recordOnly?: RecordedApproval;
}> {
  await approveRequest(ctx, requestId, approvedBy, 'replay');
  const items = await records.replayRequestItems(ctx.pool, requestId);
  const open = items.filter((i) => i.outcome === null);
  const frozenRun = new Map(open.map((i) => [i.webhookId, i.policyRun]));
  const decidedRun = new Set(open.filter((i) => i.decidedRun).map((i) => i.webhookId));
  const targets = (await deliveries.decisionTargetsOf(ctx.pool, [...frozenRun.keys()])).map((t) =>
    deliveryTarget(ctx, t),
  );
  if (options.send === false) {
    const approval: ApproveReplay = {
      approvedBy,
      reason: `replay request ${requestId}`,
      replayRequestId: requestId,
      ...(options.ticket ? { ticket: options.ticket } : {}),
    };
    const recordOnly: RecordedApproval = {
      namespace: ctx.region.namespace,
      workflowIds: targets.map((t) => t.workflowId),
      signal: 'approveReplay',
      input: approval,
    };
    return { id: requestId, applied: 0, ignored: [], alreadyDone: items.length - open.length, recordOnly };
  }
  const pauseMs = 1000 / (options.signalsPerSecond ?? 20);
  let applied = 0;
  const ignored: { webhookId: string; detail: string }[] = [];
  for (const target of targets) {
    if (decidedRun.has(target.webhookId)) {
      await records.recordReplayItemOutcome(ctx.pool, requestId, target.webhookId, 'applied');
      applied++;
      continue;
    }
    const result = await sendDecision(
      ctx,
      target,
      // The workflow checks the request itself (approved, by this approver, not its requester, covering the run).
      {
        signal: 'approveReplay',
        approvedBy,
        reason: `replay request ${requestId}`,
        ticket: options.ticket,
        replayRequestId: requestId,
      },
      frozenRun.get(target.webhookId),
    );
    await records.recordReplayItemOutcome(ctx.pool, requestId, target.webhookId, result.outcome);
    if (result.outcome === 'applied') applied++;
    else ignored.push({ webhookId: target.webhookId, detail: result.detail });
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
  return { id: requestId, applied, ignored, alreadyDone: items.length - open.length };
}

/**
 * The delivery an operator's `approve` / `discard` names: a hold id means its release's webhook; a webhook id
 * (`wh_...`) any webhook, a processor event's included.
 */
async function targetForHold(ctx: OpsContext, holdId: string): Promise<DeliveryTarget> {
  if (holdId.startsWith('wh_')) {
    const [byWebhook] = await deliveries.decisionTargetsOf(ctx.pool, [holdId]);
    if (!byWebhook)
      throw new OperatorError('NoDelivery', `webhook ${holdId} does not exist in region ${ctx.region.region}`);
    return deliveryTarget(ctx, byWebhook);
  }
  const target = await deliveries.decisionTargetOfHold(ctx.pool, holdId);
  if (target) return deliveryTarget(ctx, target);
  const state = await holds.holdState(ctx.pool, holdId);
  if (state === undefined)
    throw new OperatorError('HoldNotFound', `hold ${holdId} does not exist in region ${ctx.region.region}`);
  throw new OperatorError('NoDelivery', `hold ${holdId} has no webhook (state ${state}); nothing to decide`);
}

export async function discardHold(
  ctx: OpsContext,
  holdId: string,
  by: string,
  reason: string,
  options: { send?: boolean } = {},
): Promise<DecisionOutcome | RecordedDecision> {
  const target = await targetForHold(ctx, holdId);
  if (options.send !== false) return sendDecision(ctx, target, { signal: 'discard', by, reason });
  if (target.status !== 'quarantined') {
    throw new OperatorError(
      'NotQuarantined',
      `webhook ${target.webhookId} is ${target.status}, not quarantined: nothing to decide`,
    );
  }
  const { policyRun, webhookId, workflowId } = target;
  const decisionId = await records.recordOperatorDecision(ctx.pool, {
    webhookId,
    policyRun,
    signal: 'discard',
    by,
    reason,
  });
  const { namespace } = ctx.region;
  return {
    outcome: 'recorded',
    namespace,
    workflowId,
    signal: 'discard',
    input: { by, reason, policyRun, decisionId },
  };
}

/**
 * A decision recorded and not sent, for an operator who carries it with the `temporal` CLI (through the codec
 * endpoint) or the Web UI's Signal action: the signal and its input, which the worker applies to no other webhook or
 * run than the one it names (docs/security.md).
 */
interface RecordedDecision {
  outcome: 'recorded';
  namespace: string;
  workflowId: string;
  signal: 'discard';
  input: Discard;
}

/** An approved replay request not sent: its frozen webhooks' workflows and the one signal every one of them takes. */
interface RecordedApproval {
  namespace: string;
  workflowIds: string[];
  signal: 'approveReplay';
  input: ApproveReplay;
}

/**
 * One person's approval of one webhook's replay. Where four eyes rule (production) it is refused before anything is
 * sent: a replay needs a request by one person and an approval by another (`replay preview --webhook`, `replay
 * approve`). The workers refuse it too, whatever a client sends.
 */
export async function approveHold(
  ctx: OpsContext,
  holdId: string,
  approvedBy: string,
  reason: string,
  ticket?: string,
): Promise<DecisionOutcome> {
  const target = await targetForHold(ctx, holdId);
  if (ctx.fourEyes) throw fourEyesRequired(ctx, 'replay', target.webhookId);
  return sendDecision(ctx, target, { signal: 'approveReplay', approvedBy, reason, ticket });
}

/** One person's replay or resend of one webhook where four eyes rule: refused, naming the commands that do it. */
export function fourEyesRequired(ctx: OpsContext, kind: records.RequestKind, webhookId: string): OperatorError {
  return new OperatorError(
    'FourEyesRequired',
    `a ${kind} needs a request and a second person's approval: npm run ops -- ${kind} preview --webhook ${webhookId} ` +
      `--region ${ctx.region.region} --requested-by <you>, then ${kind} approve <request id> --by <someone else>`,
  );
}

interface HoldReport {
  hold: Record<string, unknown>;
  ledgerEntry: Record<string, unknown> | null;
  delivery: Record<string, unknown> | null;
  attempts: Record<string, unknown>[];
  decisions: Record<string, unknown>[];
  /** Resends of the hold's webhooks: who asked, who approved, why, when, the policy run and its workflow. */
  resends: Record<string, unknown>[];
  /** The processor's events about the hold, in sequence (`events show` has their workflow too). */
  processorEvents: Record<string, unknown>[];
  workflow: { workflowId: string; status: string; waiting: HoldStatus | null; retrying: RetryInProgress | null } | null;
}

/**
 * A webhook attempt Temporal is retrying (the regular activity, under its retry policy), from the server's own
 * pending-activity information: what the Web UI shows on the workflow's page. The workflow itself does not know.
 */
interface RetryInProgress {
  /** Temporal's attempt of this activity (the ledger's attempt numbers are in the attempt log). */
  attempt: number;
  lastFailure: string | null;
  nextAttemptAt: string | null;
}

async function retryInProgress(
  client: Client,
  description: Awaited<ReturnType<ReturnType<Client['workflow']['getHandle']>['describe']>>,
): Promise<RetryInProgress | null> {
  const pending = description.raw.pendingActivities?.find((a) => a.activityType?.name === 'deliverWebhook');
  if (!pending || (pending.attempt ?? 1) <= 1) return null;
  const seconds = pending.nextAttemptScheduleTime?.seconds;
  // In an encrypted region the failure's message is encrypted too ("Encoded failure"): decoded with the region's keys.
  const lastFailure = await decodeOptionalFailureToOptionalError(
    client.workflow.options.loadedDataConverter,
    pending.lastFailure,
  ).catch(() => undefined);
  return {
    attempt: pending.attempt ?? 1,
    lastFailure: lastFailure?.message ?? pending.lastFailure?.message ?? null,
    nextAttemptAt: seconds == null ? null : new Date(Number(seconds) * 1000).toISOString(),
  };
}

/**
 * A new delivery run for a processor event's webhook whose delivery workflow ended without finishing it (terminated,
 * timed out, failed: the webhook is still `pending` with nothing delivering it). Same workflow id, same webhook id;
 * refused while a run is open, for a webhook no longer pending, and for a release's webhook (its hold's workflow
 * delivers it).
 */
export async function redeliverEventWebhook(
  ctx: OpsContext,
  webhookId: string,
): Promise<{ workflowId: string; runId: string }> {
  const { region } = ctx.region;
  const webhook = await deliveries.webhookToDeliver(ctx.pool, webhookId);
  if (!webhook) throw new OperatorError('NoDelivery', `webhook ${webhookId} does not exist in region ${region}`);
  if (webhook.eventType === HOLD_RELEASED_EVENT) {
    throw new OperatorError(
      'NotAnEventWebhook',
      `webhook ${webhookId} is hold ${webhook.holdId}'s release: its hold's workflow delivers it`,
    );
  }
  if (webhook.status !== 'pending')
    throw new OperatorError('NotPending', `webhook ${webhookId} is ${webhook.status}: nothing to deliver`);
  const [target] = await deliveries.decisionTargetsOf(ctx.pool, [webhookId]);
  if (target?.drivenBy) {
    throw new OperatorError(
      'NotAnEventWebhook',
      `webhook ${webhookId} was resent: ${target.drivenBy} delivers it (the outbox reconciler starts it again if it ended)`,
    );
  }
  const workflowId = eventDeliveryWorkflowId(region, webhookId);
  try {
    const { status } = await ctx.client.workflow.getHandle(workflowId).describe();
    if (status.name === 'RUNNING')
      throw new OperatorError('DeliveryRunning', `webhook ${webhookId} is being delivered by ${workflowId}`);
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
  // A run that completed (delivered, discarded, abandoned) is never repeated; one that failed or was ended may be.
  const start = eventDeliveryStart(region, withRetryHorizon(webhook));
  return startFromOutside(ctx.client, ctx.region.taskQueue, 'deliverHoldEvent', start);
}

/** Everything about one hold: ledger, delivery, attempt log, decisions, and its workflow's own account. */
export async function holdStatus(ctx: OpsContext, holdId: string): Promise<HoldReport> {
  const found = await holds.holdForReport(ctx.pool, holdId);
  if (!found) throw new OperatorError('HoldNotFound', `hold ${holdId} does not exist in region ${ctx.region.region}`);
  const { hold, expiresAt } = found;
  const [ledgerEntry, delivery, attempts, decisions, resends, processorEvents] = await Promise.all([
    holds.ledgerEntryOfHold(ctx.pool, holdId),
    deliveries.deliveryOfHold(ctx.pool, holdId),
    deliveries.attemptsOfHold(ctx.pool, holdId),
    records.decisionsOfHold(ctx.pool, holdId),
    records.resendsOfHold(ctx.pool, holdId),
    events.eventsOfHold(ctx.pool, holdId),
  ]);
  let workflow: HoldReport['workflow'] = null;
  if (hold.state === 'released' || hold.state === 'active') {
    const workflowId = holdWorkflowId(ctx.region.region, holdId, expiresAt);
    const handle = ctx.client.workflow.getHandle(workflowId);
    try {
      const description = await handle.describe();
      const waiting = await handle.query(statusQuery).catch(() => null);
      workflow = {
        workflowId,
        status: description.status.name,
        waiting,
        retrying: await retryInProgress(ctx.client, description),
      };
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
  }
  return { hold, ledgerEntry, delivery, attempts, decisions, resends, processorEvents, workflow };
}
