import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  log,
  ParentClosePolicy,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  startChild,
  upsertSearchAttributes,
  WorkflowIdReusePolicy,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { Activities } from '../activities/index.js';
import {
  holdEventsStatusQuery,
  processorEventSignal,
  skipMissingEventSignal,
  skipMissingEventUpdate,
  type ApplyProcessorEventResult,
  type HoldEventsInput,
  type HoldEventsResult,
  type HoldEventsStage,
  type HoldEventsStatus,
  type SkipMissingEvent,
} from '../contracts/processor.js';
import type { DeliverHoldEventInput, DeliveryEnd } from '../contracts/domain.js';
import type { Region } from '../contracts/regions.js';
import { isRefusedUnencrypted, UNENCRYPTED_REFUSED_WHY } from '../contracts/unencrypted.js';
import { deliveryStatusUpdate } from '../contracts/search-attributes.js';
import { eventDeliveryStart } from '../contracts/starts.js';
import { holdEventsCurrentDetails, holdEventsLabels } from '../contracts/story.js';
import { ledgerActivity } from './activity-profiles.js';
import { runHistoryIsLong } from './history-budget.js';
import { deliverUntilDecided, DeliveryState } from './webhook-delivery.js';

/**
 * A gap in a hold's sequence is waited for this long (the processor retries a lost callback) before a human is asked.
 */
const DEFAULT_GAP_WAIT_MS = 15 * 60_000;
/** With nothing left to apply the run stays open this long, then completes; the next event starts a new run. */
const DEFAULT_IDLE_MS = 60_000;

const withSummary = (summary: string) => proxyActivities<Activities>({ ...ledgerActivity, summary });

/**
 * One hold's processor events, applied in the processor's per-hold sequence: one workflow per hold (its id is the
 * hold's), started or signalled by the receiver (signal-with-start), so a hold's events queue here while different
 * holds apply in parallel. Each event is applied by an activity under the hold's row lock, which stays the final
 * arbiter (an event applies only as the hold's next sequence there too); each applied event that tells the merchant
 * starts its delivery workflow (`deliverHoldEvent`).
 *
 * A gap (an event ahead of the hold's next sequence) waits up to `gapWaitMs` for the missing one, then stops with
 * DeliveryStatus `event_gap` until it arrives or an operator skips it (`skipMissingEvent`).
 */
export async function applyHoldEvents(input: HoldEventsInput): Promise<HoldEventsResult> {
  const region = input.region as Region;
  const { holdId } = input;
  const gapWaitMs = input.gapWaitMs ?? DEFAULT_GAP_WAIT_MS;
  const idleMs = input.idleMs ?? DEFAULT_IDLE_MS;
  // Signalled, not yet applied: sequence -> event id. The ledger holds one event per (hold, sequence).
  const pending = new Map<number, string>((input.pending ?? []).map((ref) => [ref.sequence, ref.eventId]));
  const status: HoldEventsStatus = { holdId, stage: { stage: 'idle', applied: 0 }, applied: [], skipped: [] };
  let skip: SkipMissingEvent | undefined;
  // How each skip of this run ended (sequence -> recorded in the ledger), for the Updates that wait to answer.
  const skipOutcomes = new Map<number, boolean>();
  const enter = (stage: HoldEventsStage) => {
    status.stage = stage;
    setCurrentDetails(holdEventsCurrentDetails(status));
  };
  const waitingBehind = () => [...pending.keys()].sort((a, b) => a - b);

  setHandler(processorEventSignal, (ref) => {
    if (typeof ref?.eventId !== 'string' || !Number.isInteger(ref.sequence) || ref.sequence < 1) {
      log.warn('processorEvent signal ignored: not an event reference', {
        holdId,
        ...(isRefusedUnencrypted(ref) ? { why: UNENCRYPTED_REFUSED_WHY } : {}),
      });
      return;
    }
    if (!pending.has(ref.sequence)) pending.set(ref.sequence, ref.eventId);
  });
  /** The one rule for a skip, by signal or Update: well formed, and for the sequence the workflow waits for now. */
  const judgeSkip = (raw: unknown): { ok: true; skip: SkipMissingEvent } | { ok: false; why: string } => {
    if (isRefusedUnencrypted(raw)) return { ok: false, why: UNENCRYPTED_REFUSED_WHY };
    const p = (raw ?? {}) as Partial<SkipMissingEvent>;
    const waitingFor =
      status.stage.stage === 'stopped_for_human' || status.stage.stage === 'waiting_for_predecessor'
        ? status.stage.expected
        : undefined;
    if (
      typeof p.by !== 'string' ||
      !p.by.trim() ||
      typeof p.reason !== 'string' ||
      !p.reason.trim() ||
      (p.requestId !== undefined && typeof p.requestId !== 'string')
    ) {
      return {
        ok: false,
        why: 'malformed skipMissingEvent: needs { sequence: the missing one, by, reason, requestId? }',
      };
    }
    if (waitingFor === undefined || p.sequence !== waitingFor) {
      return {
        ok: false,
        why: `not waiting for sequence ${String(p.sequence)} (stage ${status.stage.stage}${waitingFor ? `, waiting for ${waitingFor}` : ''})`,
      };
    }
    if (skip)
      return { ok: false, why: `a skip of sequence ${skip.sequence} by ${skip.by} is already being carried out` };
    // The request, if any, is checked against the ledger by the activity that records the skip.
    return {
      ok: true,
      skip: {
        sequence: waitingFor,
        by: p.by,
        reason: p.reason,
        ...(p.requestId === undefined ? {} : { requestId: p.requestId }),
      },
    };
  };
  setHandler(skipMissingEventSignal, (raw) => {
    const verdict = judgeSkip(raw);
    if (verdict.ok) skip = verdict.skip;
    else log.warn('skipMissingEvent ignored', { holdId, why: verdict.why });
  });
  setHandler(
    skipMissingEventUpdate,
    async (request) => {
      const verdict = judgeSkip(request);
      if (!verdict.ok)
        throw ApplicationFailure.create({ type: 'SkipRefused', message: verdict.why, nonRetryable: true });
      const { sequence } = verdict.skip;
      // This skip's outcome, not an earlier refused one's.
      skipOutcomes.delete(sequence);
      skip = verdict.skip;
      await condition(() => skipOutcomes.has(sequence));
      return { sequence, skipped: skipOutcomes.get(sequence)! };
    },
    {
      validator: (request) => {
        const verdict = judgeSkip(request);
        if (!verdict.ok) throw new Error(verdict.why);
      },
    },
  );
  setHandler(holdEventsStatusQuery, () => status);

  for (;;) {
    if (pending.size === 0) {
      enter({ stage: 'idle', applied: status.applied.length });
      const until = new Date(Date.now() + idleMs).toISOString();
      await condition(() => pending.size > 0, idleMs, { summary: holdEventsLabels.idle(until) });
      // Decided by what was signalled, not by which of the two resolved first: a signal that lands with the timer
      // (or with a completion the server refused for it) is applied, never dropped by a completing run.
      if (pending.size === 0) break;
    }
    const sequence = Math.min(...pending.keys());
    const eventId = pending.get(sequence)!;
    enter({ stage: 'applying', sequence });
    const result: ApplyProcessorEventResult = await withSummary(
      holdEventsLabels.apply(eventId, sequence),
    ).applyProcessorEvent({ eventId });

    if (result.status === 'waiting') {
      await awaitPredecessor(result.expected, sequence);
      continue;
    }
    pending.delete(sequence);
    if (result.status === 'unknown_event') continue;
    status.applied.push({ sequence, eventId, outcome: result.outcome });
    if (result.webhook) await startDelivery(region, holdId, result.webhook);

    if (runHistoryIsLong()) {
      await condition(allHandlersFinished);
      return continueAsNew<typeof applyHoldEvents>({
        ...input,
        pending: [...pending].map(([s, id]) => ({ sequence: s, eventId: id })),
      });
    }
  }
  return { holdId, applied: status.applied.length };

  /**
   * The hold's next sequence is `expected`, and `sequence` is ahead of it: wait for it, then stop for a human. An
   * operator's skip of `expected` ends either wait.
   */
  async function awaitPredecessor(expected: number, sequence: number): Promise<void> {
    const filled = () => pending.has(expected) || Math.min(...pending.keys()) < sequence;
    const decided = () => filled() || skip?.sequence === expected;
    const until = new Date(Date.now() + gapWaitMs).toISOString();
    enter({ stage: 'waiting_for_predecessor', expected, until, pending: waitingBehind() });
    const stopped = !(await condition(decided, gapWaitMs, {
      summary: holdEventsLabels.predecessor(expected, until),
    }));
    if (stopped) {
      const since = new Date().toISOString();
      log.warn('processor event gap: stopped for a human', { holdId, expected, waitingBehind: waitingBehind() });
      upsertSearchAttributes(deliveryStatusUpdate('event_gap'));
      enter({ stage: 'stopped_for_human', expected, since, pending: waitingBehind() });
      // No timer: the stop waits for the event or a human as long as it takes (its stage says which sequence).
      await condition(decided);
    }
    if (!filled() && skip) {
      const { by, reason, requestId } = skip;
      const skipped = await withSummary(holdEventsLabels.skip(expected)).skipProcessorSequence({
        holdId,
        sequence: expected,
        by,
        reason,
        ...(requestId === undefined ? {} : { requestId }),
      });
      if (skipped) status.skipped.push({ sequence: expected, by, reason });
      skipOutcomes.set(expected, skipped);
    } else if (skip) {
      skipOutcomes.set(expected, false);
    }
    skip = undefined;
    if (stopped) upsertSearchAttributes(deliveryStatusUpdate('none'));
  }
}

/** Starts the workflow that delivers an applied event's webhook; one per webhook, never two. */
async function startDelivery(
  region: Region,
  holdId: string,
  webhook: NonNullable<Extract<ApplyProcessorEventResult, { webhook?: unknown }>['webhook']>,
) {
  try {
    await startChild(deliverHoldEvent, {
      ...eventDeliveryStart(region, { ...webhook, holdId }),
      parentClosePolicy: ParentClosePolicy.ABANDON,
      // A retried apply (already applied) finds its delivery started, or done: never a second delivery workflow.
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

/**
 * The webhook of one applied processor event, to a terminal state: the same delivery policy, merchant budget,
 * quarantine and operator decisions as a release's webhook (`deliverUntilDecided`). The send gate sends it only
 * after the hold's earlier webhooks have left `pending`, so the merchant hears of a hold's events in order.
 */
export async function deliverHoldEvent(
  input: DeliverHoldEventInput,
): Promise<{ webhookId: string; delivery: DeliveryEnd }> {
  // An event's webhook is delivered from its workflow's first moment: there is no release in this story.
  const stage = { stage: 'delivering', policyRun: input.resume?.facts.policyRun ?? 1 } as const;
  const state = new DeliveryState(input.holdId, stage, input.resume).registerHandlers();
  const delivery = await deliverUntilDecided(
    {
      webhookId: input.webhookId,
      policyRun: 1,
      retryHorizonMs: input.retryHorizonMs,
      ctx: { region: input.region, holdId: input.holdId, webhookId: input.webhookId },
      continueAs: (carry) => continueAsNew<typeof deliverHoldEvent>({ ...input, resume: carry }),
    },
    state,
  );
  return { webhookId: input.webhookId, delivery };
}
