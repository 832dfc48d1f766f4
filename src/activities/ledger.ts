/**
 * Ledger activities: the only code that reads or writes a region's holds, accounts and ledger entries (their
 * statements are in src/sql/holds.ts; the release's outbox row in src/sql/deliveries.ts).
 *
 * Exactly-once release rests on the database, not on Temporal: the hold row is locked, what to do is decided by the
 * rulebook (`decideRelease` in src/ledger/hold-rules.ts), and the hold is flipped in the same transaction that writes
 * the one ledger entry (unique idempotency key) and moves the amount from held to available. A second call, from a
 * retry or a duplicate workflow, finds the row
 * released and reports "already released" without writing anything.
 *
 * A release that can never succeed (RELEASE_FAILURE_TYPES in src/contracts/failures.ts) is not retried: the release
 * answers `rejected` with the failure's name as its code, and marks the hold so when it is still active.
 */
import { cancellationSignal, heartbeat, log, sleep } from '@temporalio/activity';
import { noopMetricMeter, type MetricMeter } from '@temporalio/common';
import type pg from 'pg';
import {
  SWEEP_ROOM_WAIT_MAX_MS,
  type ExpiredHoldsPage,
  type HoldCursor,
  type HoldRef,
  type RejectedHold,
  type ReleaseOutcome,
  type SweepResult,
  type SweepTotals,
} from '../contracts/domain.js';
import { inTransaction } from '../db/pool.js';
import { InsufficientHeldBalance, ReleasedWithoutWebhook } from '../errors.js';
import { withRetryHorizon } from '../delivery/policy.js';
import { deliveryMetrics } from '../observability/metrics.js';
import { sweptHoldTrace } from '../observability/tracing.js';
import type { Region } from '../contracts/regions.js';
import * as holds from '../sql/holds.js';
import { maxHoldIdBytes } from '../contracts/ids.js';
import { decideRelease, RELEASE_SHORT_BALANCE } from '../ledger/hold-rules.js';

/** Before every row in (expires_at, id) order. */
const START_CURSOR: HoldCursor = { expiresAt: '-infinity', id: '' };

/**
 * The release's transaction, within its local activity's 3 s (src/workflows/activity-profiles.ts): a hold row another
 * release holds is given up after 1 s, any statement after 2 s, and the statement running when the activity is
 * cancelled (it timed out) is cancelled on the server, so the retry never queues behind a transaction still open.
 */
const RELEASE_LIMITS = () => ({ lockTimeoutMs: 1_000, statementTimeoutMs: 2_000, signal: cancellationSignal() });

/** How often the sweep's waits (for room, for the last releases) re-count unreleased holds. */
const RELEASE_POLL_MS = 500;

export interface LedgerDeps {
  region: Region;
  pool: pg.Pool;
  /** Where product metrics go (the runtime's Prometheus meter in workers); a no-op by default. */
  meter?: MetricMeter;
  /**
   * The server's workflow id limit (`limit.maxIDLength`); a hold whose ids would exceed it is rejected. Default 255.
   */
  maxWorkflowIdLength?: number;
}

export interface ListExpiredHoldsInput {
  cutoff: string;
  after?: HoldCursor;
  limit: number;
  /**
   * The sweep's bound (SweepInput): before listing after `after`, wait until the holds listed up to it and still
   * unreleased leave room for `limit` more, at most SWEEP_ROOM_WAIT_MAX_MS.
   */
  maxUnreleased?: number;
}

export interface ReleaseHoldInput {
  holdId: string;
  /** The hold's expiry as the sweep saw it; with `cutoff`, the hold's must still be this one. */
  expiresAt?: string;
  /**
   * The cutoff of the sweep that found the hold: "expired" is decided by it, by the clock the sweep decided by.
   * Absent for a workflow started by hand (or by a sweep from before this field): the database clock decides.
   */
  cutoff?: string;
}

interface FinishSweepInput {
  sweepId: string;
  cutoff: string;
  totals: SweepTotals;
  /** How long to wait for the children of this sweep to release before reporting what is left. */
  releaseWaitMs: number;
  /**
   * When the sweep's own bound (SWEEP_TIMEOUT) ends it, ISO 8601. A sweep that outlived it records nothing: it is
   * gone (TIMED_OUT), and the row would claim it finished. The activity's heartbeat learns of it only up to 24 s late.
   */
  sweepExpiresAt?: string;
}

export function createLedgerActivities({ region, pool, meter = noopMetricMeter, maxWorkflowIdLength }: LedgerDeps) {
  /**
   * Polls the ledger, heartbeating, until at most `atMost` holds at or before `cutoff` (and `upTo`) are unreleased or
   * `waitMs` has passed; the last count, and how long it waited.
   */
  async function untilUnreleasedAtMost(cutoff: string, upTo: HoldCursor | undefined, atMost: number, waitMs: number) {
    const startedAt = Date.now();
    for (;;) {
      const unreleased = await holds.countUnreleased(pool, cutoff, upTo);
      const waitedMs = Date.now() - startedAt;
      if (unreleased <= atMost || waitedMs >= waitMs) return { unreleased, waitedMs };
      heartbeat({ unreleased });
      await sleep(RELEASE_POLL_MS);
    }
  }
  const { duplicateSuppressions } = deliveryMetrics(meter);
  const releaseLag = meter.createHistogram(
    'hold_sweeper_release_lag_seconds',
    'float',
    '',
    'from a hold’s expiry to its release in the ledger',
  );
  const holdIdBytes = maxHoldIdBytes(maxWorkflowIdLength);
  return {
    /**
     * One page of expired active holds at or before `cutoff`, in (expires_at, id) order after `after`.
     * Rows that can never be released are marked `rejected` here and reported, so they leave the active set
     * and no later page or sweep trips over them again: a row whose id cannot be part of a workflow id among them,
     * which would otherwise fail every child start of its batch, and so every later sweep at the same page.
     */
    async listExpiredHolds({
      cutoff,
      after = START_CURSOR,
      limit,
      maxUnreleased,
    }: ListExpiredHoldsInput): Promise<ExpiredHoldsPage> {
      if (maxUnreleased !== undefined && after !== START_CURSOR) {
        const room = Math.max(0, maxUnreleased - limit);
        const { unreleased, waitedMs } = await untilUnreleasedAtMost(cutoff, after, room, SWEEP_ROOM_WAIT_MAX_MS);
        if (unreleased > room) {
          log.warn('sweep page listed without room: holds listed earlier are still unreleased', {
            region,
            unreleased,
            maxUnreleased,
            waitedMs,
          });
        } else if (waitedMs > 0)
          log.info('sweep page waited for room', { region, unreleased, maxUnreleased, waitedMs });
      }
      const rows = await holds.expiredHoldsPage(pool, cutoff, after, limit, holdIdBytes);
      const releasable: HoldRef[] = [];
      const rejected: RejectedHold[] = [];
      for (const row of rows) {
        if (row.defect) rejected.push({ holdId: row.id, code: row.defect });
        else {
          // Each set only when there is one: the common page's payload (sweep history) stays as it was.
          const left = row.leftActiveByEarlierSweep ? { leftActiveByEarlierSweep: true } : {};
          const trace = sweptHoldTrace(row.id, row.merchantId);
          releasable.push({
            holdId: row.id,
            expiresAt: row.expiresAt,
            merchantId: row.merchantId,
            ...left,
            ...(trace ? { trace } : {}),
          });
        }
      }
      await holds.markRejected(pool, rejected);
      const last = rows[rows.length - 1];
      return rows.length === limit && last
        ? { holds: releasable, rejected, next: { expiresAt: last.expiresAt, id: last.id } }
        : { holds: releasable, rejected };
    },

    /** Releases one hold exactly once; see the module comment. */
    async releaseHold({ holdId, expiresAt, cutoff }: ReleaseHoldInput): Promise<ReleaseOutcome> {
      let releasedExpiry: string | undefined;
      const outcome = await inTransaction<ReleaseOutcome>(
        pool,
        async (tx) => {
          const hold = await holds.lockHoldForRelease(
            tx,
            holdId,
            cutoff === undefined ? undefined : { cutoff, expiresAt },
          );
          const decision = decideRelease(hold);
          switch (decision.action) {
            case 'not_found':
              return { status: 'not_found', holdId };
            case 'already_released':
              duplicateSuppressions.add(1, { kind: 'already_released' });
              try {
                return { status: 'already_released', ...withRetryHorizon(await holds.releasedEntry(tx, holdId)) };
              } catch (err) {
                if (!(err instanceof ReleasedWithoutWebhook)) throw err;
                log.warn('released hold without its webhook: nothing to deliver', {
                  region,
                  holdId,
                  error: err.message,
                });
                return { status: 'rejected', holdId, code: err.name };
              }
            case 'rejected':
              return { status: 'rejected', holdId, code: decision.code };
            case 'settled':
              return { status: 'settled', holdId, state: decision.state };
            case 'reject':
              await holds.markRejected(tx, [{ holdId, code: decision.code }]);
              return { status: 'rejected', holdId, code: decision.code };
            case 'not_expired':
              return { status: 'not_expired', holdId, expiresAt: decision.expiresAt };
            case 'release':
              break;
          }
          try {
            const released = withRetryHorizon(await holds.releaseLockedHold(tx, holdId, hold!));
            releasedExpiry = hold!.expiresAt;
            return { status: 'released', ...released };
          } catch (err) {
            if (!(err instanceof InsufficientHeldBalance)) throw err;
            // Nothing was written and the hold is still locked: it is marked in the same transaction.
            const { code } = RELEASE_SHORT_BALANCE;
            await holds.markRejected(tx, [{ holdId, code }]);
            log.warn('hold rejected: cannot be released as written', { region, holdId, code, error: err.message });
            return { status: 'rejected', holdId, code };
          }
        },
        RELEASE_LIMITS(),
      );
      // The release's line in a hold's story, whatever the answer (its workflow logs none of its own): the ids of what
      // was written, or why nothing was.
      log.info('hold release', {
        region,
        holdId,
        status: outcome.status,
        ...('webhookId' in outcome ? { ledgerEntryId: outcome.ledgerEntryId, webhookId: outcome.webhookId } : {}),
        ...('code' in outcome ? { code: outcome.code } : {}),
        ...('state' in outcome ? { state: outcome.state } : {}),
      });
      // Committed: how long after its expiry the hold was released (a sweep's interval, plus the night's queue).
      if (outcome.status === 'released' && releasedExpiry)
        releaseLag.record(Math.max(0, Date.now() - Date.parse(releasedExpiry)) / 1000, { region });
      return outcome;
    },

    /**
     * Waits (bounded) until no expired active hold at or before the cutoff is left, then records the sweep.
     * What is still unreleased at the end is reported, not failed: the next sweep picks it up.
     */
    async finishSweep({
      sweepId,
      cutoff,
      totals,
      releaseWaitMs,
      sweepExpiresAt,
    }: FinishSweepInput): Promise<SweepResult> {
      const expires = sweepExpiresAt === undefined ? Infinity : Date.parse(sweepExpiresAt);
      const waitMs = Math.min(releaseWaitMs, expires - Date.now());
      const { unreleased } = await untilUnreleasedAtMost(cutoff, undefined, 0, waitMs);
      if (Date.now() >= expires) {
        log.warn('sweep ended by its bound: no sweep run recorded', { region, sweepId, unreleased });
        return { region, sweepId, cutoff, ...totals, unreleasedAtEnd: unreleased };
      }
      await holds.recordSweepRun(pool, sweepId, cutoff, totals, unreleased);
      return { region, sweepId, cutoff, ...totals, unreleasedAtEnd: unreleased };
    },
  };
}
