/**
 * The replay gate: every committed golden history (test/golden/histories/<release>/, recorded by
 * `npm run golden:record` from each release still supported) replays against the current workflow code. A
 * workflow change that would wedge a workflow in flight after a deploy fails here, not in production. What the sets
 * cover, waiting point by waiting point, is test/unit/golden-coverage.test.ts.
 */
import { describe, expect, inject, it } from 'vitest';
import { goldenHistories, replayFailures } from '../support/golden.js';

describe('golden histories', () => {
  const histories = goldenHistories();

  it('every committed history of every supported release replays with the current workflow code', async () => {
    expect(histories.length).toBeGreaterThan(60);
    expect(await replayFailures({ code: inject('workflowBundleCode') }, histories)).toEqual([]);
  });
});
