/**
 * When a long-lived workflow's run continues as new: at 2,000 events, far below Temporal's 51,200-event limit, or
 * when the server suggests it. A hold's event workflow sees a handful of events and a webhook's delivery ~6 per paused
 * re-check or ~4 per ignored signal: a run that somehow takes in thousands ends long before the limit could matter.
 */
import { workflowInfo } from '@temporalio/workflow';

export const RUN_HISTORY_BUDGET = 2_000;

/** The run's history is long enough that it should end (its budget, or the server's suggestion). */
export function runHistoryIsLong(): boolean {
  const { historyLength, continueAsNewSuggested } = workflowInfo();
  return historyLength >= RUN_HISTORY_BUDGET || continueAsNewSuggested;
}
