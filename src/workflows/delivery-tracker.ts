/**
 * What a delivery workflow knows of its webhook and says about it: the stage and the `DeliveryStatus` search attribute
 * (changed together, by `enter`), the last attempt, the decision signals that did not apply, and the human decision on
 * a quarantine while one is open. The `status` query and the Web UI's current details answer from it
 * (./delivery-handlers.ts registers them); ./webhook-delivery.ts moves it from stage to stage.
 *
 * State only: it sends no command but the search attribute `enter` upserts, in the order the delivery enters its
 * stages.
 */
import { condition, setCurrentDetails, upsertSearchAttributes } from '@temporalio/workflow';
import type { HoldResume } from '../contracts/domain.js';
import type { QuarantineDecision } from '../contracts/delivery.js';
import type { HoldStage, HoldStatus, IgnoredSignal } from '../contracts/messages.js';
import { deliveryStatusUpdate, type DeliveryStatusValue } from '../contracts/search-attributes.js';
import { holdCurrentDetails, holdLabels } from '../contracts/story.js';

/** The human decision on a quarantined delivery, as `decideQuarantine` records it. */
export type HumanDecision = Pick<
  QuarantineDecision,
  'decision' | 'by' | 'reason' | 'ticket' | 'decisionId' | 'replayRequestId'
>;

/** What one HTTP attempt came to, as far as the workflow learns it. */
export interface AttemptReport {
  attemptNumber: number;
  /** "delivered", "HTTP 503", "AttemptTimeout", a quarantine's detail. */
  outcome: string;
  /** Set when the attempt failed and will be tried again: when, and why then. */
  retry?: { at: string; reason: string };
}

/** Where a continued run's tracker starts from: what the previous run carried. */
export type TrackerResume = Pick<HoldResume, 'lastAttempt' | 'ignoredSignals' | 'deliveryStatus'> &
  Partial<Pick<HoldResume, 'policyRun' | 'heldMerchantStatus'>>;

/** Ignored signals kept in memory (and shown): the newest; the count says how many there were. */
const KEPT_IGNORED_SIGNALS = 50;
/** Ignored signals carried into the next run: the newest few, so the run's input stays small. */
const CARRIED_IGNORED_SIGNALS = 20;

/** 14 days, 12 hours, 30 minutes, 2 seconds: the largest whole unit. */
function durationText(ms: number): string {
  const units: [string, number][] = [
    ['day', 86_400_000],
    ['hour', 3_600_000],
    ['minute', 60_000],
    ['second', 1_000],
  ];
  const [unit, size] = units.find(([, size]) => ms >= size) ?? units[units.length - 1]!;
  const n = Math.round(ms / size);
  return `${n} ${unit}${n === 1 ? '' : 's'}`;
}

export class DeliveryTracker {
  private stage: HoldStage;
  private lastAttempt: HoldStatus['lastAttempt'];
  private readonly ignoredSignals: IgnoredSignal[];
  /** The DeliveryStatus search attribute as last set ('pending' from the sweep or the parent, or carried). */
  private status: DeliveryStatusValue;
  private merchantResumed = false;
  /** The open quarantine's decision, from a signal, an update, or the timeout (abandon). */
  private decision: HumanDecision | undefined;
  /** Whether the open quarantine's approvals need a reviewed replay request (the worker's rule). */
  private fourEyesRule = false;
  /** The policy run whose decision the ledger has recorded: an update waiting for it answers then. */
  private recordedRun = 0;
  /** Decisions the ledger refused to record, with why: the update that made one answers with it. */
  private readonly refusals = new WeakMap<HumanDecision, string>();

  /**
   * `initial`: the stage before the delivery's first step (`releasing` for a hold, `delivering` for an event's
   * webhook).
   * A run continued while its merchant was paused starts as paused (a query may come before its first task runs).
   */
  constructor(
    readonly subjectId: string,
    initial: HoldStage,
    resume?: TrackerResume,
  ) {
    this.stage =
      resume?.deliveryStatus === 'held' && resume.heldMerchantStatus && resume.policyRun
        ? {
            stage: 'held',
            policyRun: resume.policyRun,
            merchantStatus: resume.heldMerchantStatus,
            until: new Date().toISOString(),
          }
        : initial;
    this.lastAttempt = resume?.lastAttempt;
    this.ignoredSignals = [...(resume?.ignoredSignals ?? [])];
    this.status = resume?.deliveryStatus ?? 'pending';
    this.publish();
  }

  /** The `status` query's answer. */
  get current(): HoldStatus {
    return { ...this.stage, lastAttempt: this.lastAttempt, ignoredSignals: [...this.ignoredSignals] };
  }

  get deliveryStatus(): DeliveryStatusValue {
    return this.status;
  }

  get lastAttemptNumber(): number | undefined {
    return this.lastAttempt?.attemptNumber;
  }

  /** Moves to `next`; with a `status`, the search attribute operators filter on changes with it. */
  enter(next: HoldStage, status?: DeliveryStatusValue): void {
    this.stage = next;
    this.publish();
    if (status) {
      this.status = status;
      upsertSearchAttributes(deliveryStatusUpdate(status));
    }
  }

  /** An attempt's outcome; a failed one that will be tried again moves a delivering stage to its wait. */
  noteAttempt(report: AttemptReport): void {
    this.lastAttempt = { attemptNumber: report.attemptNumber, outcome: report.outcome, at: new Date().toISOString() };
    const { stage } = this;
    if (
      report.retry &&
      (stage.stage === 'delivering' || stage.stage === 'honouring_retry_after' || stage.stage === 'backing_off')
    ) {
      this.stage = {
        stage: report.retry.reason.startsWith('Retry-After') ? 'honouring_retry_after' : 'backing_off',
        policyRun: stage.policyRun,
        attempt: report.attemptNumber,
        until: report.retry.at,
        reason: report.retry.reason,
      };
    }
    this.publish();
  }

  /** A decision signal that did not apply, kept with why (the newest KEPT_IGNORED_SIGNALS). */
  ignore(signal: IgnoredSignal): void {
    this.ignoredSignals.push(signal);
    if (this.ignoredSignals.length > KEPT_IGNORED_SIGNALS)
      this.ignoredSignals.splice(0, this.ignoredSignals.length - KEPT_IGNORED_SIGNALS);
    this.publish();
  }

  /** What the next run needs to go on telling the same story. */
  carry(): Pick<HoldResume, 'deliveryStatus' | 'lastAttempt' | 'ignoredSignals'> {
    return {
      deliveryStatus: this.status === 'held' ? 'held' : 'pending',
      lastAttempt: this.lastAttempt,
      ignoredSignals: this.ignoredSignals.slice(-CARRIED_IGNORED_SIGNALS),
    };
  }

  /** `merchantResumed` arrived: a paused merchant's re-check need not wait for its timer. */
  merchantIsBack(): void {
    this.merchantResumed = true;
  }

  /** Waits up to `ms` for the merchant to be reported active again; true when it was. */
  async awaitMerchantResumed(ms: number, summary: string): Promise<boolean> {
    const resumed = await condition(() => this.merchantResumed, ms, { summary });
    this.merchantResumed = false;
    return resumed;
  }

  // The open quarantine's decision (./delivery-handlers.ts decides what applies; ./webhook-delivery.ts waits for it).

  get openDecision(): HumanDecision | undefined {
    return this.decision;
  }

  get fourEyes(): boolean {
    return this.fourEyesRule;
  }

  /** A decision that applies: the wait for a human ends with it. */
  settle(decision: HumanDecision): void {
    this.decision = decision;
  }

  /** The ledger has recorded the decision on `policyRun`'s quarantine: updates waiting for it answer. */
  decisionRecorded(policyRun: number): void {
    this.recordedRun = policyRun;
  }

  /**
   * The ledger refused to record the open decision (nothing in it stands behind the decision): the wait for a human
   * goes on, and the decision is kept with why, like a signal that did not apply.
   */
  decisionRefused(decision: HumanDecision, why: string): void {
    this.refusals.set(decision, why);
    if (this.decision === decision) this.decision = undefined;
    const kind = decision.decision === 'replay' ? 'approveReplay' : 'discard';
    this.ignore({
      signal: kind,
      by: decision.by,
      reason: decision.reason,
      at: new Date().toISOString(),
      stage: 'quarantined',
      why,
    });
  }

  /**
   * Resolves once the ledger has recorded a decision on `policyRun` (or a later run's): undefined; or with why, once it
   * refused to record `decision`.
   */
  async recorded(policyRun: number, decision: HumanDecision): Promise<string | undefined> {
    await condition(() => this.recordedRun >= policyRun || this.refusals.has(decision));
    return this.refusals.get(decision);
  }

  /**
   * The wait for a human on a quarantined delivery: `approveReplay` or `discard`, whichever applies first, or `abandon`
   * when nobody decides by `abandonsAt`. With `fourEyes` (the worker's rule, from its answer to `quarantineDelivery`:
   * never from a caller), an approval without a replay request is refused. `leave` (a history grown long) ends the wait
   * early with undefined: the caller continues as new and waits again in the next run.
   *
   * The abandon is settled here, before anything is recorded: from then on no decision applies (an update is refused by
   * its validator, a signal ignored), so none is answered and then dropped. A decision that arrived in the same
   * activation as the timeout wins over the abandon where `decisionWinsTies()` says so (a patch: histories written
   * before returned the abandon, and dropped the decision).
   */
  async awaitHumanDecision(
    abandonsAt: number,
    rules: { fourEyes: boolean; timeoutMs: number; decisionWinsTies: () => boolean; leave?: () => boolean },
  ): Promise<HumanDecision | undefined> {
    this.decision = undefined;
    this.fourEyesRule = rules.fourEyes;
    const timeoutMs = Math.max(1, abandonsAt - Date.now());
    const summary = holdLabels.human(new Date(abandonsAt).toISOString());
    const leave = rules.leave ?? (() => false);
    const decided = await condition(() => this.decision !== undefined || leave(), timeoutMs, { summary });
    if (this.decision !== undefined && (decided || rules.decisionWinsTies())) return this.decision;
    if (decided) return undefined;
    this.decision = {
      decision: 'abandon',
      by: 'hold-sweeper',
      reason: `no decision within ${durationText(rules.timeoutMs)}`,
    };
    return this.decision;
  }

  private publish(): void {
    setCurrentDetails(holdCurrentDetails(this.current));
  }
}
