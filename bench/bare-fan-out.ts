/**
 * The benchmark's ceiling: the sweep's fan-out with nothing inside. `bareFanOut` pages through the same ledger
 * query (`listExpiredHolds`, same page size, continue-as-new per page) and starts one child per hold with the
 * same options (ABANDON, id reuse, the four search attributes); `noopHold` returns at once. Like the sweep, a page's
 * children are started by batch workflows of `batchSize` holds. The product can only approach this: it is what the
 * server does for a child per hold when the child does no work.
 */
import { continueAsNew, executeChild, proxyActivities, startChild, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../src/activities/index.js';
import type { HoldCursor, HoldRef } from '../src/contracts/domain.js';
import type { Region } from '../src/contracts/regions.js';
import { deliveryStartBasics } from '../src/contracts/starts.js';
import { ledgerActivity } from '../src/workflows/activity-profiles.js';
import { batchesOf, holdChildOptions } from '../src/workflows/sweep-expired-holds.js';

interface BareFanOutInput {
  region: Region;
  pageSize: number;
  batchSize: number;
  cutoff: string;
  after?: HoldCursor;
  started?: number;
}

const ledger = proxyActivities<Activities>(ledgerActivity);

export async function noopHold(): Promise<void> {}

export async function bareBatch(region: Region, holds: HoldRef[]): Promise<void> {
  await Promise.all(
    holds.map((hold) =>
      startChild(noopHold, {
        ...deliveryStartBasics(region, hold.holdId, hold.merchantId),
        ...holdChildOptions(hold),
        workflowId: `bare-${region}-${hold.holdId}`,
      }),
    ),
  );
}

export async function bareFanOut(input: BareFanOutInput): Promise<number> {
  const { region } = input;
  const page = await ledger.listExpiredHolds({ cutoff: input.cutoff, after: input.after, limit: input.pageSize });
  const pageNumber = Math.floor((input.started ?? 0) / input.pageSize) + 1;
  await Promise.all(
    batchesOf(page.holds, input.batchSize).map((holds, i) =>
      executeChild(bareBatch, {
        workflowId: `${workflowInfo().workflowId}/page-${pageNumber}/batch-${i + 1}`,
        args: [region, holds],
      }),
    ),
  );
  const started = (input.started ?? 0) + page.holds.length;
  if (page.next) await continueAsNew<typeof bareFanOut>({ ...input, after: page.next, started });
  return started;
}
