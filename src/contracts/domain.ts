/**
 * Types shared by workflows, activities and the operator tooling. Pure declarations: safe in the workflow
 * bundle. Timestamps cross Temporal as ISO strings with microseconds (Postgres precision), so keyset cursors
 * and workflow ids built from them are exact.
 */
import type { InvalidHoldCode, QuarantineReason, ReleaseFailureType } from './failures.js';
import type { AttemptFailedDetails, DeliverWebhookResult, HeldBy, ResendClaim } from './delivery.js';
import type { IgnoredSignal } from './messages.js';
import type { Region } from './regions.js';
import type { DeliveryStatusValue } from './search-attributes.js';

/** Keyset position in the (expires_at, id) order of the sweep. */
export interface HoldCursor {
  expiresAt: string;
  id: string;
}

/** The minimum a sweep needs to start a hold's workflow: ids only, no amounts, no merchant secrets. */
export interface HoldRef {
  holdId: string;
  expiresAt: string;
  merchantId: string;
  /**
   * An earlier, finished sweep answered for this hold (its expiry is at or before that sweep's cutoff) and it is
   * still active: its child ended without releasing it (or is still running). Its child may be started again.
   */
  leftActiveByEarlierSweep?: boolean;
  /** The hold's trace, when it is sampled: the W3C trace context of its root span (src/observability/tracing.ts). */
  trace?: Record<string, string>;
}

export interface RejectedHold {
  holdId: string;
  code: InvalidHoldCode;
}

export interface ExpiredHoldsPage {
  holds: HoldRef[];
  rejected: RejectedHold[];
  /** Where the next page starts; absent on the last page. */
  next?: HoldCursor;
}

/** What a hold's release wrote: its one ledger entry and its webhook (the outbox row), fixed from then on. */
export interface ReleasedHold {
  holdId: string;
  ledgerEntryId: string;
  amountMinor: string;
  currency: string;
  merchantId: string;
  releasedAt: string;
  /** The webhook fixed by this release: same id on every attempt and replay. */
  webhookId: string;
}

export type ReleaseOutcome =
  | ({ status: 'released' | 'already_released' } & ReleasedHold & {
        /** How long the delivery policy keeps retrying for this merchant. */
        retryHorizonMs: number;
      })
  /** A bad row (marked `rejected` with its code), or a release that can never succeed (see RELEASE_FAILURE_TYPES). */
  | { status: 'rejected'; holdId: string; code: InvalidHoldCode | ReleaseFailureType }
  /**
   * Not expired by the clock that decides: the hold's expiry changed after the sweep saw it (re-authorised upstream)
   * or is past the sweep's cutoff; for a workflow started without a cutoff, not yet past the database clock.
   */
  | { status: 'not_expired'; holdId: string; expiresAt: string }
  /** The row vanished upstream between the sweep's page and the release. */
  | { status: 'not_found'; holdId: string }
  /**
   * The processor captured or reversed the hold first (its event took the row lock before this release did): the
   * hold is settled, there is nothing to release, and its event's own webhook tells the merchant.
   */
  | { status: 'settled'; holdId: string; state: 'captured' | 'reversed' };

/**
 * A hold's release and, when it released (now or before), its webhook's first attempt: one local activity's answer
 * (`releaseAndDeliver`). The attempt's failure is part of the answer, never the activity's, so the release it follows
 * is never lost with it: its Temporal failure type, words and details, as the workflow would have read them.
 */
export type ReleasedAndTried = ReleaseOutcome & {
  firstAttempt?:
    { answered: DeliverWebhookResult } | { failed: { type: string; message: string; details?: AttemptFailedDetails } };
};

export interface SweepTotals {
  /** Expired active rows the sweep read, valid or not. */
  found: number;
  /** Child workflows this sweep started. */
  started: number;
  /** Children that already existed (another sweep, or a re-run): counted as done, never started twice. */
  alreadyStarted: number;
  /** Rows that can never be released as written; marked and reported, not retried. */
  rejected: number;
  pages: number;
}

export interface SweepResult extends SweepTotals {
  region: Region;
  sweepId: string;
  cutoff: string;
  /** Expired active valid holds at or before the cutoff still unreleased when the sweep ended (0 = none lost). */
  unreleasedAtEnd: number;
}

/**
 * How long a sweep's page waits for room under its `maxUnreleased` bound before it is listed anyway: holds that stay
 * active (a child that found its hold not expired as listed) must not stall a night.
 */
export const SWEEP_ROOM_WAIT_MAX_MS = 5 * 60_000;

/** The input of `sweepExpiredHolds`, as a schedule or `sweep-now` starts it. */
export interface SweepInput {
  region: Region;
  pageSize?: number;
  /** Holds per batch workflow within a page (the page's children are started by its batches); default 50. */
  batchSize?: number;
  releaseWaitMs?: number;
  /**
   * Backpressure (SWEEP_MAX_UNRELEASED): a page is listed, and its holds started, only once the holds this sweep
   * started and the ledger has not released leave room for it under this bound; absent, pages follow each other at
   * once.
   */
  maxUnreleased?: number;
  /** Carried across continue-as-new; absent on a sweep's first run. */
  progress?: { cutoff: string; after?: HoldCursor; totals: SweepTotals; finishing?: boolean };
}

/** The input and result of `startHoldBatch`: one batch of a sweep page, whose children it starts. */
export interface HoldBatchInput {
  region: Region;
  holds: HoldRef[];
  cutoff: string;
}

export interface HoldBatchResult {
  started: number;
  alreadyStarted: number;
}

/** The input and result of `releaseExpiredHold`, one workflow per hold. */
export interface ReleaseExpiredHoldInput {
  region: Region;
  holdId: string;
  expiresAt: string;
  merchantId: string;
  /**
   * The cutoff of the sweep that started this workflow (its first run's workflow clock). The release decides
   * "expired" by it, the clock the sweep decided by, never by the database's. Absent when started by hand (the outbox
   * reconciler): the database clock decides then.
   */
  cutoff?: string;
  /** The hold's trace, from the sweep's listing (`HoldRef.trace`); the workflow's spans continue it (tracing.cjs). */
  trace?: Record<string, string>;
  /**
   * The release and the webhook's first attempt run as one local activity (`releaseAndDeliver`: one marker in the
   * history, not two). Set by every start; absent from the histories 1.0.0 began, which replay their two as they ran.
   * Not a patch: its marker would cost the event this saves, on every hold.
   */
  releaseDelivers?: true;
  /** Set by the workflow itself when it continues as new (keeps each run's history short): released, and where its
   * delivery stood. */
  resume?: { release: Extract<ReleaseOutcome, { status: 'released' | 'already_released' }>; delivery: DeliveryResume };
}

/**
 * What a webhook's delivery knows that outlives a step (src/workflows/delivery-rules.ts decides by it), carried into
 * its next run by continue-as-new: delivering, or quarantined (its open quarantine), so that a rule for a quarantine
 * takes only facts that have one.
 */
export type DeliveryFacts = DeliveringFacts | QuarantinedFacts;
export type DeliveringFacts = FactsOfEveryDelivery & { quarantine?: undefined };
export type QuarantinedFacts = FactsOfEveryDelivery & { quarantine: OpenQuarantine };

interface FactsOfEveryDelivery {
  policyRun: number;
  /** The policy's retry horizon, and what is left of it in this run. */
  horizonMs: number;
  leftMs: number;
  /** The next attempt runs on the fast path (a local activity in the workflow task): a run's first, until one fails. */
  local: boolean;
  /** A queue place the worker reserved for the next attempt. */
  reservedSlotMs?: number;
  /** Answers in a row that every request in flight was taken. */
  busy: number;
  /** Held by a paused merchant or paused sends: by what, for how long so far, and the next re-check's wait. */
  held?: { by: HeldBy; heldMs: number; recheckMs: number };
  /** The last attempt's number (across runs), for labels. */
  attempt: number;
  /** When the step in progress began (workflow clock): a step's time counts against the horizon. */
  stepAt: number;
}

/** Where a delivery goes on in its next run: what it knows, and what it shows (the status query, DeliveryStatus). */
export interface DeliveryResume {
  facts: DeliveryFacts;
  deliveryStatus: DeliveryStatusValue;
  lastAttempt?: { attemptNumber: number; outcome: string; at: string };
  /** The most recent decisions that did not apply (bounded: the input of a run is history too). */
  ignoredSignals: IgnoredSignal[];
}

/** How a webhook's delivery ended. */
export type DeliveryEnd =
  | { status: 'delivered' | 'discarded' | 'abandoned'; attempts?: number; policyRuns: number }
  /** Another workflow for the same webhook already took it to an end. */
  | { status: 'handled_elsewhere'; deliveryStatus: string };

/** A quarantine waiting for a human: why, since when, what a decision needs, and when it is abandoned. */
export interface OpenQuarantine {
  reason: QuarantineReason;
  since: string;
  detail: string;
  /** An approval needs a reviewed replay request (four eyes): the worker's answer when it was quarantined. */
  fourEyes: boolean;
  /** Milliseconds since the epoch (workflow time). */
  abandonsAt: number;
}

export interface ReleaseExpiredHoldResult {
  release: ReleaseOutcome;
  delivery?: DeliveryEnd;
}

/** The input of `deliverHoldEvent`: one applied processor event's webhook (src/workflows/hold-events.ts). */
export interface DeliverHoldEventInput {
  region: string;
  holdId: string;
  webhookId: string;
  retryHorizonMs: number;
  resume?: DeliveryResume;
}

/** The input and result of `resendWebhook`: one resend of a webhook at an end (src/workflows/resend-webhook.ts). */
export interface ResendWebhookInput {
  region: string;
  webhookId: string;
  claim: Omit<ResendClaim, 'webhookId'>;
  /** Set on a continued run (with `resume`): what the first run's check answered. A first run asks the worker. */
  reopened?: { holdId: string; policyRun: number; retryHorizonMs: number };
  resume?: DeliveryResume;
}

export type ResendWebhookResult =
  | { webhookId: string; resendId: string; status: 'refused'; why: string }
  | { webhookId: string; resendId: string; status: 'resent'; policyRun: number; delivery: DeliveryEnd };
