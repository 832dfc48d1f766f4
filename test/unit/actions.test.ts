/**
 * Temporal Cloud Actions counted from real histories (the golden ones, recorded from the product on a real server):
 * what the benchmark reports as the cost of a hold.
 */
import { describe, expect, it } from 'vitest';
import { billableActions } from '../../bench/actions.js';
import { goldenHistories } from '../support/golden.js';

const golden = (release: string, file: string) => {
  const found = goldenHistories().find((g) => g.release === release && g.file === file);
  if (!found) throw new Error(`no golden history ${release}/${file}`);
  return found.history;
};

describe('billableActions', () => {
  it('a healthy hold: its local activities in one workflow task (1) and the delivered upsert (1)', () => {
    const actions = billableActions(golden('1.0.0', 'releaseExpiredHold-completed-delivered-105.json.gz'));
    expect(actions.byKind).toMatchObject({ workflowStarted: 0, localActivities: 1, upsert: 1, timer: 0, activity: 0 });
    expect(actions.total).toBe(2);
  });

  it('a quarantined hold a human replayed: the signal, the quarantine timer, both delivery attempts, three upserts', () => {
    const actions = billableActions(golden('1.0.0', 'releaseExpiredHold-completed-delivered-replayed-99.json.gz'));
    expect(actions.byKind).toMatchObject({ signal: 1, timer: 1, activity: 2, upsert: 3, localActivities: 2 });
    expect(actions.total).toBe(9);
  });

  it('a sweep page: 2 per child started (its batch), 1 for the run (continue-as-new), 1 for the listing activity', () => {
    const history = golden('1.0.0', 'sweepExpiredHolds-continued_as_new-104.json.gz');
    const children = history.events!.filter((e) => e.startChildWorkflowExecutionInitiatedEventAttributes).length;
    expect(children).toBe(1);
    expect(billableActions(history)).toEqual({
      total: 2 * children + 2,
      byKind: {
        workflowStarted: 1,
        childWorkflow: 2 * children,
        timer: 0,
        upsert: 0,
        signal: 0,
        activity: 1,
        localActivities: 0,
        other: 0,
      },
    });
  });

  it('counts every attempt of an activity that retried, and no Action for a child start twice', () => {
    for (const { history } of goldenHistories()) {
      const attempts = history
        .events!.filter((e) => e.activityTaskStartedEventAttributes)
        .reduce((n, e) => n + (e.activityTaskStartedEventAttributes!.attempt ?? 1), 0);
      const actions = billableActions(history);
      expect(actions.byKind.activity).toBe(attempts);
      // A child's own start is billed at its parent.
      if (history.events![0]!.workflowExecutionStartedEventAttributes?.parentWorkflowExecution)
        expect(actions.byKind.workflowStarted).toBe(0);
    }
  });
});
