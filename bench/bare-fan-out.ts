/**
 * The benchmark's ceiling: the sweep's fan-out with nothing inside. `bareFanOut` pages through the same ledger
 * query (`listExpiredHolds`, same page size, continue-as-new per page) and starts one child per hold with the
 * same options (ABANDON, id reuse, the four search attributes); `noopHold` returns at once. The product can only
 * approach this: it is what the server does for a child per hold when the child does no work.
 */
import { continueAsNew, proxyActivities, startChild } from '@temporalio/workflow';
import type { Activities } from '../src/activities/index.js';
import type { HoldCursor } from '../src/contracts/domain.js';
import type { Region } from '../src/contracts/regions.js';
import { ledgerActivity } from '../src/workflows/activity-profiles.js';
import { holdChildOptions } from '../src/workflows/sweep-expired-holds.js';

export interface BareFanOutInput {
  region: Region;
  pageSize: number;
  cutoff: string;
  after?: HoldCursor;
  started?: number;
}

const ledger = proxyActivities<Activities>(ledgerActivity);

export async function noopHold(): Promise<void> {}

export async function bareFanOut(input: BareFanOutInput): Promise<number> {
  const { region } = input;
  const page = await ledger.listExpiredHolds({ cutoff: input.cutoff, after: input.after, limit: input.pageSize });
  await Promise.all(
    page.holds.map((hold) => startChild(noopHold, { ...holdChildOptions(region, hold), workflowId: `bare-${region}-${hold.holdId}` })),
  );
  const started = (input.started ?? 0) + page.holds.length;
  if (page.next) await continueAsNew<typeof bareFanOut>({ ...input, after: page.next, started });
  return started;
}
