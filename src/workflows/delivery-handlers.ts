/**
 * The messages a delivery workflow answers: `status`, the decisions on a quarantine (`approveReplay`, `discard`, as
 * signals and as Updates) and `merchantResumed`. One synchronous rule (`judge`) takes a decision or refuses it; a
 * refused Update never enters history, a refused signal is kept with why and its payload's shape, never its text. A
 * taken decision waits in the inbox for the loop, which records it (the ledger has the last word) and answers it: the
 * handlers run nothing themselves, so no handler's work outlives the run.
 */
import { ApplicationFailure, condition, log, setHandler } from '@temporalio/workflow';
import {
  approveReplaySignal,
  approveReplayUpdate,
  discardSignal,
  discardUpdate,
  merchantResumedSignal,
  parseDecision,
  payloadShape,
  statusQuery,
  type DecisionAnswer,
  type DecisionKind,
  type PayloadShape,
} from '../contracts/messages.js';
import type { HumanDecision } from './delivery-rules.js';
import type { DeliveryTracker } from './delivery-tracker.js';

const FOUR_EYES_WHY =
  'four eyes: an approval needs a replay request approved by a second person ' +
  '(npm run ops -- replay preview --webhook <id> --requested-by <you>, then replay approve <request id> --by <someone else>)';

/** What the loop tells the handlers of the wait for a human, and what they leave for it. */
export class DecisionInbox {
  /** The quarantined run a decision is taken for now, and its rule; undefined: not waiting for a human. */
  waitingFor: { policyRun: number; fourEyes: boolean } | undefined;
  /** A taken decision, until the loop has recorded or refused it. */
  open: HumanDecision | undefined;
  /** The loop is ending the run (or continuing it as new): nothing more is taken in it. */
  closing = false;
  /** `merchantResumed` signals taken: a count, so one sent while an attempt runs is not lost when the wait begins. */
  resumes = 0;
  /**
   * Decisions taken by signal, with what their payload was: one the ledger refuses is kept in the status, since no
   * caller waits for the answer.
   */
  readonly signalled = new WeakMap<HumanDecision, PayloadShape>();
  private readonly answers = new WeakMap<HumanDecision, { why: string; stage: string }>();

  /** The loop's word on the open decision (why it did not apply, if it did not) and the stage it moved to. */
  answer(decision: HumanDecision, why: string, stage: string): void {
    this.answers.set(decision, { why, stage });
    if (this.open === decision) this.open = undefined;
  }

  async answerOf(decision: HumanDecision) {
    await condition(() => this.answers.has(decision));
    return this.answers.get(decision)!;
  }
}

export function registerDeliveryHandlers(tracker: DeliveryTracker, inbox: DecisionInbox): void {
  const judge = (
    kind: DecisionKind,
    payload: unknown,
  ): { ok: true; run: number; decision: HumanDecision } | { ok: false; why: string } => {
    const parsed = parseDecision(kind, payload);
    if (!parsed.ok) return parsed;
    const { value } = parsed;
    const waiting = inbox.waitingFor;
    if (!waiting || inbox.closing)
      return { ok: false, why: `not waiting for a decision (stage ${tracker.current.stage})` };
    if (inbox.open) return { ok: false, why: `already decided: ${inbox.open.decision} by ${inbox.open.by}` };
    if (value.policyRun !== undefined && value.policyRun !== waiting.policyRun) {
      const why = `stale: for policy run ${value.policyRun}, but the quarantine is policy run ${waiting.policyRun}`;
      return { ok: false, why };
    }
    const { reason, decisionId } = value;
    if (!('approvedBy' in value))
      return { ok: true, run: waiting.policyRun, decision: { decision: 'discard', by: value.by, reason, decisionId } };
    if (waiting.fourEyes && value.replayRequestId === undefined) return { ok: false, why: FOUR_EYES_WHY };
    const { approvedBy: by, ticket, replayRequestId } = value;
    return {
      ok: true,
      run: waiting.policyRun,
      decision: { decision: 'replay', by, reason, ticket, decisionId, replayRequestId },
    };
  };

  const bySignal = (kind: DecisionKind) => (payload: unknown) => {
    const verdict = judge(kind, payload);
    const shape = payloadShape(payload);
    if (verdict.ok) {
      inbox.open = verdict.decision;
      inbox.signalled.set(verdict.decision, shape);
      return;
    }
    tracker.ignore({ signal: kind, payload: shape, why: verdict.why });
    log.warn('signal ignored', { signal: kind, payload: shape, why: verdict.why, holdId: tracker.subjectId });
  };

  const refused = (why: string) =>
    ApplicationFailure.create({ type: 'DecisionRefused', message: why, nonRetryable: true });
  const byUpdate = (kind: DecisionKind) =>
    [
      async (payload: unknown): Promise<DecisionAnswer> => {
        const verdict = judge(kind, payload);
        if (!verdict.ok) throw refused(verdict.why);
        inbox.open = verdict.decision;
        const { why, stage } = await inbox.answerOf(verdict.decision);
        if (why) throw refused(why);
        return {
          decision: verdict.decision.decision as DecisionAnswer['decision'],
          policyRun: verdict.run,
          stage: stage as DecisionAnswer['stage'],
        };
      },
      {
        validator: (payload: unknown) => {
          const verdict = judge(kind, payload);
          if (!verdict.ok) throw new Error(verdict.why);
        },
      },
    ] as const;

  setHandler(statusQuery, () => tracker.current);
  setHandler(approveReplaySignal, bySignal('approveReplay'));
  setHandler(discardSignal, bySignal('discard'));
  setHandler(approveReplayUpdate, ...byUpdate('approveReplay'));
  setHandler(discardUpdate, ...byUpdate('discard'));
  setHandler(merchantResumedSignal, () => {
    inbox.resumes += 1;
  });
}
