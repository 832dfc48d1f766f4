/**
 * The replay gate: every committed golden history (test/golden/histories/<release>/, recorded by
 * `npm run golden:record` from each release still supported) replays against the current workflow code. A
 * workflow change that would wedge a workflow in flight after a deploy fails here, not in production.
 */
import { describe, expect, inject, it } from 'vitest';
import { goldenHistories, replayFailures } from '../support/golden.js';

/** The states a deploy can meet a workflow in (issue 16); the newest set must have each. */
const STATES = [
  'releaseExpiredHold-waiting_for_budget',
  'releaseExpiredHold-backing_off',
  'releaseExpiredHold-honouring_retry_after',
  'releaseExpiredHold-held',
  'releaseExpiredHold-quarantined',
  'releaseExpiredHold-backing_off-run-2',
  'releaseExpiredHold-completed-discarded',
  'releaseExpiredHold-completed-abandoned',
  'releaseExpiredHold-completed-delivered',
  'releaseExpiredHold-completed-delivered-replayed',
  'sweepExpiredHolds-continued_as_new',
  'sweepExpiredHolds-completed',
  // Since `sweep-page-batches`: the workflows that start a page's children.
  'startHoldBatch-completed',
  // Since processor events (issue 20): a hold's event workflow waiting for its next event or stopped at a gap, and
  // the deliveries of the webhooks its events write.
  'applyHoldEvents-idle',
  'applyHoldEvents-stopped_for_human',
  'deliverHoldEvent-completed-delivered',
  'deliverHoldEvent-quarantined',
];

describe('golden histories', () => {
  const histories = goldenHistories();

  it('cover every waiting state a deploy can meet, in some committed release', () => {
    const states = new Set(histories.map((h) => h.file.replace(/-\d+\.json$/, '')));
    expect(STATES.filter((state) => !states.has(state))).toEqual([]);
  });

  it('every committed history of every supported release replays with the current workflow code', async () => {
    expect(histories.length).toBeGreaterThan(60);
    expect(await replayFailures({ code: inject('workflowBundleCode') }, histories)).toEqual([]);
  });
});
