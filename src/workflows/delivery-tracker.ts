/**
 * What a delivery workflow says about its webhook: the stage the `status` query and the Web UI's current details
 * answer with, the `DeliveryStatus` search attribute operators filter on, the last attempt, and the decisions that did
 * not apply. It presents what the rulebook (./delivery-rules.ts) decided and nothing else: it decides nothing.
 */
import { setCurrentDetails, upsertSearchAttributes } from '@temporalio/workflow';
import type { DeliveryResume } from '../contracts/domain.js';
import type { HoldStage, HoldStatus, IgnoredSignal } from '../contracts/messages.js';
import { deliveryStatusUpdate, type DeliveryStatusValue } from '../contracts/search-attributes.js';
import { holdCurrentDetails } from '../contracts/story.js';
import type { Shown } from './delivery-rules.js';

/** Ignored decisions kept and shown (more would only lengthen every answer), and carried into the next run. */
const KEPT_IGNORED = 50;
const CARRIED_IGNORED = 20;

/** What a continued run's tracker starts from. */
export type Presentation = Omit<DeliveryResume, 'facts'>;

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
    this.ignoredSignals = [...(carried?.ignoredSignals ?? [])];
    this.publish();
  }

  /** The `status` query's answer. */
  get current(): HoldStatus {
    return { ...this.stage, lastAttempt: this.lastAttempt, ignoredSignals: [...this.ignoredSignals] };
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
    this.ignoredSignals.push({ ...ignored, at: new Date().toISOString(), stage: this.stage.stage });
    this.ignoredSignals.splice(0, Math.max(0, this.ignoredSignals.length - KEPT_IGNORED));
    this.publish();
  }

  /** What the next run needs to go on telling the same story. */
  carry(): Presentation {
    return {
      deliveryStatus: this.status,
      lastAttempt: this.lastAttempt,
      ignoredSignals: this.ignoredSignals.slice(-CARRIED_IGNORED),
    };
  }

  private publish(): void {
    setCurrentDetails(holdCurrentDetails(this.current));
  }
}
