/**
 * Types shared by workflows, activities and the operator tooling. Pure declarations: safe in the workflow
 * bundle. Timestamps cross Temporal as ISO strings with microseconds (Postgres precision), so keyset cursors
 * and workflow ids built from them are exact.
 */
import type { InvalidHoldCode, QuarantineReason, ReleaseFailureType } from './failures.js';
import type { HeldBy } from './delivery.js';
import type { IgnoredSignal } from './messages.js';
import type { Region } from './regions.js';

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

/** The input of `sweepExpiredHolds`, as a schedule or `sweep-now` starts it. */
export interface SweepInput {
  region: Region;
  pageSize?: number;
  /** Holds per batch workflow within a page (the page's children are started by its batches); default 50. */
  batchSize?: number;
  releaseWaitMs?: number;
  /** Passed to each hold's workflow: how long a quarantined delivery waits for a decision. */
  quarantineTimeoutMs?: number;
  /** Carried across continue-as-new; absent on a sweep's first run. */
  progress?: { cutoff: string; after?: HoldCursor; totals: SweepTotals; finishing?: boolean };
}

/** The input and result of `startHoldBatch`: one batch of a sweep page, whose children it starts. */
export interface HoldBatchInput {
  region: Region;
  holds: HoldRef[];
  cutoff: string;
  quarantineTimeoutMs?: number;
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
   * "expired" by it, the clock the sweep decided by, never by the database's. Absent when started by hand or by a
   * sweep from before this field: the database clock decides then.
   */
  cutoff?: string;
  /** How long a quarantined delivery waits for a human before it is abandoned; default 14 days. */
  quarantineTimeoutMs?: number;
  /** Set by the workflow itself when it continues as new while its merchant is held (keeps its history short). */
  resume?: HoldResume;
}

/** What a hold workflow carries into its next run: where its delivery stood. */
export interface HoldResume {
  release: Extract<ReleaseOutcome, { status: 'released' | 'already_released' }>;
  policyRun: number;
  /** What was left of the policy run's retry horizon (time held does not count). */
  remainingHorizonMs: number;
  heldRecheckMs: number;
  /** When the merchant's current hold began (ms since the epoch, workflow time); absent when not held. */
  heldSince?: number;
  /** Why the merchant held it when the run ended (its next run reports `held` while it re-checks). */
  heldMerchantStatus?: HeldBy;
  deliveryStatus: 'pending' | 'held';
  lastAttempt?: { attemptNumber: number; outcome: string; at: string };
  /** The most recent ignored signals (bounded: the input of a run is history too). */
  ignoredSignals: IgnoredSignal[];
  /** A quarantine whose wait went on in this run (its history had grown long): the run waits for its decision again. */
  quarantine?: OpenQuarantine;
}

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
  delivery?:
    | { status: 'delivered' | 'discarded' | 'abandoned'; attempts?: number; policyRuns: number }
    /** Another workflow for the same business action already took this delivery to a final state. */
    | { status: 'handled_elsewhere'; deliveryStatus: string };
}
