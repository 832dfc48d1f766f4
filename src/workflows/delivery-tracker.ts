/**
 * What a delivery workflow says about its webhook: the stage the `status` query and the Web UI's current details
 * answer with, the `DeliveryStatus` search attribute operators filter on, the last attempt, and the decisions that did
 * not apply. It presents what the rulebook (./delivery-rules.ts) decided and nothing else: it decides nothing.
 */
import { setCurrentDetails, upsertSearchAttributes } from '@temporalio/workflow';
import type { DeliveryFacts, DeliveryResume } from '../contracts/domain.js';
import type { HoldStage, HoldStatus, IgnoredSignal } from '../contracts/messages.js';
import { deliveryStatusUpdate, type DeliveryStatusValue } from '../contracts/search-attributes.js';
import { holdCurrentDetails } from '../contracts/story.js';
import type { Shown } from './delivery-rules.js';

/** Ignored decisions kept and shown (more would only lengthen every answer), and carried into the next run. */
const KEPT_IGNORED = 50;
/** Characters of text an ignored decision keeps, all its fields together: its own words, never its caller's. */
export const IGNORED_ENTRY_TEXT = 200;
/**
 * Bytes of JSON a run carries into its next (the delivery part of its continue-as-new input), at most: the oldest
 * ignored decisions are dropped first. The server refuses an input past 2 MB and ends the run, leaving its quarantine
 * with no workflow to decide it.
 */
export const CARRIED_STATE_BYTES = 16 * 1024;
/** Bytes of JSON of the `status` answer, at most: the oldest ignored decisions are dropped first (gRPC stops at 4 MB). */
export const STATUS_ANSWER_BYTES = 64 * 1024;

/** What a continued run's tracker starts from. */
type Presentation = Omit<DeliveryResume, 'facts'>;

export class DeliveryTracker {
  private stage: HoldStage;
  private status: DeliveryStatusValue;
  private lastAttempt: HoldStatus['lastAttempt'];
  private readonly ignoredSignals: IgnoredSignal[];

  /** `initial`: the stage before the first step (`releasing` for a hold; a continued run: where it stood). */
  constructor(
    readonly subjectId: string,
    initial: HoldStage,
    carried?: Presentation,
  ) {
    this.stage = initial;
    this.status = carried?.deliveryStatus ?? 'pending';
    this.lastAttempt = carried?.lastAttempt;
    this.ignoredSignals = (carried?.ignoredSignals ?? []).slice(-KEPT_IGNORED).map(bounded);
    this.publish();
  }

  /** The `status` query's answer. */
  get current(): HoldStatus {
    return newestWithin(STATUS_ANSWER_BYTES, this.ignoredSignals, (ignoredSignals) => ({
      ...this.stage,
      lastAttempt: this.lastAttempt,
      ignoredSignals,
    }));
  }

  /** Shows what the rulebook decided; the search attribute changes only when the status does. */
  show({ stage, status, attempt }: Shown): void {
    this.stage = stage;
    if (attempt) this.lastAttempt = { ...attempt, at: new Date().toISOString() };
    if (status !== this.status) {
      this.status = status;
      upsertSearchAttributes(deliveryStatusUpdate(status));
    }
    this.publish();
  }

  /** A decision that did not apply, kept with why. */
  ignore(ignored: Omit<IgnoredSignal, 'at' | 'stage'>): void {
    this.ignoredSignals.push(bounded({ ...ignored, at: new Date().toISOString(), stage: this.stage.stage }));
    this.ignoredSignals.splice(0, Math.max(0, this.ignoredSignals.length - KEPT_IGNORED));
    this.publish();
  }

  /** What the next run needs to go on deciding and telling the same story (the continue-as-new input's delivery). */
  carry(facts: DeliveryFacts): DeliveryResume {
    return newestWithin(CARRIED_STATE_BYTES, this.ignoredSignals, (ignoredSignals) => ({
      facts,
      deliveryStatus: this.status,
      lastAttempt: this.lastAttempt,
      ignoredSignals,
    }));
  }

  private publish(): void {
    setCurrentDetails(holdCurrentDetails(this.current));
  }
}

/**
 * An ignored decision as it is kept: its own fields only (an entry carried from a run that kept its caller's `by`,
 * `reason` or a quoted payload loses them), and `why` cut (ending in …) to what the text allowance leaves.
 */
function bounded({ signal, payload, at, stage, why }: IgnoredSignal): IgnoredSignal {
  const shape = payload ? { payload: { type: payload.type, bytes: payload.bytes } } : {};
  const left = IGNORED_ENTRY_TEXT - signal.length - at.length - stage.length - (payload?.type.length ?? 0);
  return { signal, ...shape, at, stage, why: why.length <= left ? why : `${why.slice(0, Math.max(0, left - 1))}…` };
}

/** `build` of the newest entries whose JSON fits in `bytes` (all of them if they fit; none if nothing else fits). */
function newestWithin<T>(bytes: number, entries: readonly IgnoredSignal[], build: (kept: IgnoredSignal[]) => T): T {
  const size = (value: unknown) => new TextEncoder().encode(JSON.stringify(value)).length;
  let kept = [...entries];
  let whole = build(kept);
  while (kept.length > 0 && size(whole) > bytes) {
    kept = kept.slice(1);
    whole = build(kept);
  }
  return whole;
}
