import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { ReleaseOutcome } from '../domain.js';
import type { Region } from '../regions.js';
import { ledgerActivity } from './activity-profiles.js';

export interface ReleaseExpiredHoldInput {
  region: Region;
  holdId: string;
  expiresAt: string;
  merchantId: string;
}

export interface ReleaseExpiredHoldResult {
  release: ReleaseOutcome;
}

const { releaseHold } = proxyActivities<Activities>(ledgerActivity);

/**
 * One expired hold, from ledger release to its final state.
 *
 * Durable and replay-safe: every side effect is an activity, and the release is idempotent in Postgres, so a
 * retried activity, a replayed history or a duplicate workflow for the same hold can never release twice. The
 * input carries ids only; amounts and secrets are read by activities from the region's ledger.
 */
export async function releaseExpiredHold(input: ReleaseExpiredHoldInput): Promise<ReleaseExpiredHoldResult> {
  const release = await releaseHold({ holdId: input.holdId });
  return { release };
}
