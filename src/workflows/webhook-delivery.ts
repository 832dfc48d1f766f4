/**
 * One webhook, from its first attempt to an end (a hold's release, a processor event, a resend): a short loop that
 * carries out what the delivery rulebook (./delivery-rules.ts) says comes next and tells it what came of it.
 *
 * The attempt contract: a call of `deliverWebhook` is one HTTP attempt at most and ends with an answer
 * (`DeliverWebhookResult`) or a typed failure, which Temporal's retry policy (./activity-profiles.ts) retries
 * (`WebhookAttemptFailed`, after the activity's `nextRetryDelay`) within the horizon or stops on (the named ones). A
 * policy run's first call is the fast path, a local activity; its retryable failure is waited out here.
 */
import {
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  condition,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
} from '@temporalio/workflow';
import { TemporalFailure } from '@temporalio/common';
import type { Activities } from '../activities/index.js';
import type { AttemptFailedDetails } from '../contracts/delivery.js';
import type { DeliveryEnd, DeliveryResume } from '../contracts/domain.js';
import { DELIVERY_FAILURE_TYPES, RETRYABLE_DELIVERY_FAILURE } from '../contracts/failures.js';
import type { HoldStage } from '../contracts/messages.js';
import { holdLabels } from '../contracts/story.js';
import { ledgerActivity, webhookActivity, webhookLocalActivity } from './activity-profiles.js';
import { DecisionInbox, registerDeliveryHandlers } from './delivery-handlers.js';
import { firstFacts, next, type AttemptFailure, type Step, type WhileDelivering } from './delivery-rules.js';
import { DeliveryTracker } from './delivery-tracker.js';
import { runHistoryIsLong } from './history-budget.js';

interface Delivery {
  webhookId: string;
  /** The policy run a delivery with no `resume` starts at (1; a resend's run), and the policy's retry horizon. */
  policyRun: number;
  retryHorizonMs: number;
  resume: DeliveryResume | undefined;
  /** Fields every log line of this delivery carries. */
  ctx: Record<string, string>;
  continueAs: (resume: DeliveryResume) => Promise<never>;
}

/** A delivery's tracker and inbox, registered before its first step (a hold's release runs before the delivery). */
export function deliveryDesk(subjectId: string, initial: HoldStage, resume?: DeliveryResume) {
  const tracker = new DeliveryTracker(subjectId, initial, resume);
  const inbox = new DecisionInbox();
  registerDeliveryHandlers(tracker, inbox);
  return { tracker, inbox };
}

/** The webhook's policy runs and quarantines, until delivered, discarded, abandoned, or owned by another workflow. */
export async function deliverUntilDecided(
  d: Delivery,
  { tracker, inbox }: ReturnType<typeof deliveryDesk>,
): Promise<DeliveryEnd> {
  const { webhookId, ctx } = d;
  let decided = next(
    d.resume?.facts ?? firstFacts(d.policyRun, d.retryHorizonMs, Date.now()),
    { was: 'start' },
    Date.now(),
  );
  /** `merchantResumed` signals counted when the last attempt started: one sent during it ends the held wait after it. */
  let resumesAtAttempt = inbox.resumes;
  for (;;) {
    // What comes of a step is decided from the facts it carries: each case pairs them with what came of it.
    const { facts, step } = decided;
    tracker.show(decided.shown);
    switch (step.do) {
      case 'attempt':
        resumesAtAttempt = inbox.resumes;
        decided = next(step.facts, await attempt(webhookId, step), Date.now());
        break;
      case 'wait': {
        // A history without the patch's marker (1.0.0's) counts only a resume sent during the wait: one sent during
        // the attempt leaves its wait to the timer, so it replays as it ran.
        const since =
          step.for.kind === 'held' && inbox.resumes > resumesAtAttempt && !patched(RESUME_DURING_ATTEMPT)
            ? inbox.resumes
            : resumesAtAttempt;
        const summary = holdLabels.wait(step.for, step.until);
        const resumed = await condition(() => step.for.kind === 'held' && inbox.resumes > since, step.ms, { summary });
        decided = next(step.facts, { was: 'woke', resumed, historyLong: runHistoryIsLong() }, Date.now());
        break;
      }
      case 'quarantine': {
        const { reason, detail } = step;
        const { fourEyes, decideWithinMs } = await ledger(holdLabels.quarantine(webhookId, reason)).quarantineDelivery({
          webhookId,
          reason,
          detail,
        });
        log.warn('webhook quarantined: waiting for a human', { ...ctx, webhookId, reason, policyRun: facts.policyRun });
        decided = next(step.facts, { was: 'quarantined', fourEyes, timeoutMs: decideWithinMs }, Date.now());
        break;
      }
      case 'await_human': {
        inbox.waitingFor = { policyRun: facts.policyRun, fourEyes: step.facts.quarantine.fourEyes };
        const summary = holdLabels.human(new Date(step.untilMs).toISOString());
        const timeoutMs = Math.max(1, step.untilMs - Date.now());
        // A decision taken in the same task as the timeout wins over it.
        await condition(() => inbox.open !== undefined || runHistoryIsLong(), timeoutMs, { summary });
        decided = next(
          step.facts,
          inbox.open
            ? { was: 'decided', decision: inbox.open }
            : runHistoryIsLong()
              ? { was: 'history_long' }
              : { was: 'timed_out' },
          Date.now(),
        );
        break;
      }
      case 'record': {
        // The abandon too is taken before it is recorded: nothing decided meanwhile is taken, then dropped.
        const { decision } = step;
        inbox.open = decision;
        const answer = await ledger(holdLabels.decision(webhookId, decision.decision)).decideQuarantine({
          webhookId,
          policyRun: facts.policyRun,
          ...decision,
        });
        decided = next(step.facts, { was: 'recorded', answer }, Date.now());
        const why = !answer.recorded
          ? answer.why
          : answer.decision === decision.decision
            ? ''
            : `the ledger holds a ${answer.decision} by ${answer.by} for policy run ${facts.policyRun}`;
        inbox.answer(decision, why, decided.shown.stage.stage);
        const signal = decision.decision === 'replay' ? 'approveReplay' : 'discard';
        if (why && inbox.signalled.has(decision))
          tracker.ignore({ signal, payload: inbox.signalled.get(decision), why });
        log.info(why ? 'decision not recorded' : 'quarantine decided', { ...ctx, webhookId, ...decision, why });
        inbox.waitingFor = undefined;
        break;
      }
      case 'continue_as_new':
      case 'end':
        // Every handler's work is the loop's: none is left running when the run ends or continues.
        inbox.closing = true;
        await condition(allHandlersFinished);
        if (step.do === 'continue_as_new') return d.continueAs(tracker.carry(facts));
        if (step.end.status === 'delivered') log.info('webhook delivered', { ...ctx, webhookId, ...step.end });
        return step.end;
    }
  }
}

/** The patch that ends a held wait for a `merchantResumed` sent during the attempt before it. */
const RESUME_DURING_ATTEMPT = 'resume-during-attempt';

/** Ledger activities with their label on the timeline (user metadata: a summary per call). */
const ledger = (summary: string) => proxyActivities<Activities>({ ...ledgerActivity, summary });

/** One call of `deliverWebhook`, on the fast path or as the regular activity, and how it ended. */
async function attempt(webhookId: string, step: Extract<Step, { do: 'attempt' }>): Promise<WhileDelivering> {
  const { local, policyRun, reservedSlotMs } = step;
  const summary = (local ? holdLabels.deliver : holdLabels.deliverWithRetries)(webhookId, step.attempt);
  try {
    const { deliverWebhook } = local
      ? proxyLocalActivities<Activities>({ ...webhookLocalActivity, summary })
      : proxyActivities<Activities>({ ...webhookActivity(step.horizonMs), summary });
    return { was: 'answered', result: await deliverWebhook({ webhookId, policyRun, reservedSlotMs }) };
  } catch (err) {
    return { was: 'failed', failure: attemptEndOf(err, local) };
  }
}

/** The one mapping from a failed call to what the delivery does next. */
function attemptEndOf(err: unknown, local: boolean): AttemptFailure {
  if (!(err instanceof (local ? TemporalFailure : ActivityFailure))) throw err;
  // A local activity's failure reaches the workflow as the ApplicationFailure itself, a regular one's as its cause.
  const failure = err instanceof ActivityFailure ? (err.cause ?? err) : (err as TemporalFailure);
  const type = failure instanceof ApplicationFailure ? (failure.type ?? '') : '';
  const details = failure instanceof ApplicationFailure ? (failure.details?.[0] as AttemptFailedDetails) : undefined;
  const detail = failure.message;
  if (Object.hasOwn(DELIVERY_FAILURE_TYPES, type)) {
    const reason = DELIVERY_FAILURE_TYPES[type as keyof typeof DELIVERY_FAILURE_TYPES];
    return { kind: 'quarantine', reason, detail, attemptNumber: details?.attemptNumber };
  }
  // The horizon spent (retry state TIMEOUT), or a failure the policy does not name (a bug): wait for a human.
  if (!local) return { kind: 'quarantine', reason: 'exhausted', detail, attemptNumber: details?.attemptNumber };
  if (type === RETRYABLE_DELIVERY_FAILURE && details) return { kind: 'retry', ...details };
  log.warn('delivery fast path failed unexpectedly: retrying as a regular activity', { error: detail });
  return { kind: 'hand_over' };
}
