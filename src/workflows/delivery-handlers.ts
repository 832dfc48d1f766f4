/**
 * The messages a delivery workflow answers, registered by one call: the `status` query, the decisions on a quarantine
 * (`approveReplay`, `discard`, as signals and as Updates), `merchantResumed`, and `deliveryAttemptFailed` (sent by the
 * delivery activity of builds before the attempt contract; still read in the histories they wrote).
 *
 * One rule decides whether a decision applies, whatever way it comes (`judge`): an Update that does not apply is
 * refused
 * by its validator and never enters history; a signal that does not apply is kept, with why, in the status.
 */
import { ApplicationFailure, log, patched, proxyActivities, setHandler } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import {
  approveReplaySignal,
  approveReplayUpdate,
  deliveryAttemptFailedSignal,
  discardSignal,
  discardUpdate,
  merchantResumedSignal,
  parseDecision,
  statusQuery,
  type DecisionAnswer,
  type DecisionKind,
} from '../contracts/messages.js';
import { ledgerActivity } from './activity-profiles.js';
import type { DeliveryTracker, HumanDecision } from './delivery-tracker.js';

const { verifyReplayApproval } = proxyActivities<Activities>(ledgerActivity);

/** Why an approval without a replay request is refused where four eyes rule (production). */
const FOUR_EYES_WHY =
  'four eyes: an approval needs a replay request approved by a second person ' +
  '(npm run ops -- replay preview --webhook <id> --requested-by <you>, then replay approve <request id> --by <someone else>)';

/** Of two decisions settled in one workflow task, the first stands; before, the later one overwrote it. */
const FIRST_DECISION_STANDS_PATCH = 'first-decision-stands';

type Verdict =
  { ok: true; decision: HumanDecision; policyRun: number; replayRequestId?: string } | { ok: false; why: string };

export function registerDeliveryHandlers(tracker: DeliveryTracker): void {
  /** The one rule for decisions: does this one apply now? */
  const judge = (kind: DecisionKind, payload: unknown): Verdict => {
    const parsed = parseDecision(kind, payload);
    if (!parsed.ok) return parsed;
    const stage = tracker.current;
    if (stage.stage !== 'quarantined') return { ok: false, why: `not waiting for a decision (stage ${stage.stage})` };
    const decided = tracker.openDecision;
    if (decided) return { ok: false, why: `already decided: ${decided.decision} by ${decided.by}` };
    const { value } = parsed;
    if (value.policyRun !== undefined && value.policyRun !== stage.policyRun) {
      return {
        ok: false,
        why: `stale: for policy run ${value.policyRun}, but the quarantine is policy run ${stage.policyRun}`,
      };
    }
    if ('approvedBy' in value && tracker.fourEyes && value.replayRequestId === undefined)
      return { ok: false, why: FOUR_EYES_WHY };
    const ids = {
      ...(value.decisionId === undefined ? {} : { decisionId: value.decisionId }),
      ...('replayRequestId' in value && value.replayRequestId !== undefined
        ? { replayRequestId: value.replayRequestId }
        : {}),
    };
    if ('approvedBy' in value) {
      const replay: HumanDecision = {
        decision: 'replay',
        by: value.approvedBy,
        reason: value.reason,
        ticket: value.ticket,
        ...ids,
      };
      return { ok: true, policyRun: stage.policyRun, decision: replay, replayRequestId: value.replayRequestId };
    }
    return {
      ok: true,
      policyRun: stage.policyRun,
      decision: { decision: 'discard', by: value.by, reason: value.reason, ...ids },
    };
  };

  /**
   * `judge`, and for an approval that names a replay request, the four-eyes check against the ledger (an activity),
   * then `judge` again: the workflow may have moved on while the ledger answered.
   */
  const decide = async (kind: DecisionKind, payload: unknown): Promise<Verdict> => {
    const verdict = judge(kind, payload);
    if (!verdict.ok || verdict.replayRequestId === undefined) return verdict;
    const claim = {
      holdId: tracker.subjectId,
      policyRun: verdict.policyRun,
      replayRequestId: verdict.replayRequestId,
      approvedBy: verdict.decision.by,
    };
    const check = await verifyReplayApproval(claim);
    if (!check.ok) return check;
    // The check was for this quarantine's run: if another run is quarantined by now, the approval is stale.
    const again = judge(kind, payload);
    return again.ok && again.policyRun !== verdict.policyRun
      ? {
          ok: false,
          why: `stale: checked for policy run ${verdict.policyRun}, but the quarantine is policy run ${again.policyRun}`,
        }
      : again;
  };

  const ignore = (signal: DecisionKind, payload: unknown, why: string) => {
    const p = typeof payload === 'object' && payload !== null ? (payload as Record<string, unknown>) : {};
    const text = (value: unknown) => (typeof value === 'string' ? value.slice(0, 200) : undefined);
    const by = text(signal === 'approveReplay' ? p.approvedBy : p.by);
    const stage = tracker.current.stage;
    tracker.ignore({ signal, by, reason: text(p.reason), at: new Date().toISOString(), stage, why });
    log.warn('signal ignored', { signal, by, stage, why, holdId: tracker.subjectId });
  };

  /**
   * Settles a decision that applied when judged; another may have settled while this one was judged (the handlers are
   * async: two decisions in one workflow task both pass `judge`), and then the first stands and this one does not
   * apply.
   * Histories written before this rule let the later one overwrite the earlier (no patch marker: they replay so).
   */
  const settle = (verdict: Extract<Verdict, { ok: true }>): Verdict => {
    const decided = tracker.openDecision;
    if (decided && patched(FIRST_DECISION_STANDS_PATCH))
      return { ok: false, why: `already decided: ${decided.decision} by ${decided.by}` };
    tracker.settle(verdict.decision);
    return verdict;
  };

  const decideBySignal = (kind: DecisionKind) => async (payload: unknown) => {
    const judged = await decide(kind, payload);
    const verdict = judged.ok ? settle(judged) : judged;
    if (!verdict.ok) ignore(kind, payload, verdict.why);
  };

  /** An update's validator refuses what does not apply (nothing enters history); its handler answers once recorded. */
  const decideByUpdate = (kind: DecisionKind) =>
    [
      async (payload: unknown): Promise<DecisionAnswer> => {
        const judged = await decide(kind, payload);
        const verdict = judged.ok ? settle(judged) : judged;
        if (!verdict.ok)
          throw ApplicationFailure.create({ type: 'DecisionRefused', message: verdict.why, nonRetryable: true });
        const refused = await tracker.recorded(verdict.policyRun, verdict.decision);
        if (refused !== undefined)
          throw ApplicationFailure.create({ type: 'DecisionRefused', message: refused, nonRetryable: true });
        return {
          decision: verdict.decision.decision as DecisionAnswer['decision'],
          policyRun: verdict.policyRun,
          stage: tracker.current.stage,
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
  setHandler(approveReplaySignal, decideBySignal('approveReplay'));
  setHandler(discardSignal, decideBySignal('discard'));
  setHandler(approveReplayUpdate, ...decideByUpdate('approveReplay'));
  setHandler(discardUpdate, ...decideByUpdate('discard'));
  setHandler(deliveryAttemptFailedSignal, (failed) => {
    // Sent by the delivery activity of earlier builds; anything else (a client's malformed or unencrypted signal) is
    // dropped.
    if (typeof failed?.attemptNumber !== 'number' || typeof failed.nextAttemptAt !== 'string') {
      log.warn('deliveryAttemptFailed signal ignored: not an attempt report', { holdId: tracker.subjectId });
      return;
    }
    tracker.noteAttempt({
      attemptNumber: failed.attemptNumber,
      outcome: failed.outcome,
      retry: { at: failed.nextAttemptAt, reason: failed.reason },
    });
  });
  setHandler(merchantResumedSignal, () => tracker.merchantIsBack());
}
