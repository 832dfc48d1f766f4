/**
 * Temporal Cloud's billing unit, counted from a workflow's own history: what a hold costs in Actions.
 *
 * The rules, as docs.temporal.io/cloud/actions states them (docs/evaluate/temporal-cloud/actions.mdx in
 * temporalio/documentation), mapped to the events that carry them:
 * - Workflow started: a client start, a Continue-As-New, a Child Workflow start: 1. A Child Workflow costs 2 (the
 *   parent's durable intent to start it, and the child's execution), counted here at the parent's
 *   StartChildWorkflowExecutionInitiated; the child's own WorkflowExecutionStarted is then not counted again.
 * - Timer started: 1 each (including the SDK's implicit timers, e.g. `condition` with a timeout).
 * - Search Attribute upsert: 1 per UpsertWorkflowSearchAttributes command (attributes set at start are free).
 * - Signal sent: 1 per signal received (whoever sent it).
 * - Activity started or retried: 1 per attempt (the ActivityTaskStarted event records the last attempt).
 * - Local Activities: every RecordMarker of one Workflow Task counts as 1 together.
 * - Workflow Execution Options updated, Update accepted: 1 each.
 * - Not in a history, so not counted here: Queries, Activity Heartbeats that reach the server, and a Schedule's
 *   own 2 per execution (the report adds the schedule's and the heartbeats' share where it knows them).
 */
import proto, { type temporal } from '@temporalio/proto';

const EventType = proto.temporal.api.enums.v1.EventType;

export interface ActionCount {
  total: number;
  byKind: Record<ActionKind, number>;
}

type ActionKind =
  'workflowStarted' | 'childWorkflow' | 'timer' | 'upsert' | 'signal' | 'activity' | 'localActivities' | 'other';

const CHANGE_VERSION = 'TemporalChangeVersion';

/** Actions a history accrued, by kind. */
export function billableActions(history: temporal.api.history.v1.IHistory): ActionCount {
  const byKind: Record<ActionKind, number> = {
    workflowStarted: 0,
    childWorkflow: 0,
    timer: 0,
    upsert: 0,
    signal: 0,
    activity: 0,
    localActivities: 0,
    other: 0,
  };
  // Markers after a WorkflowTaskCompleted belong to that task: one Action for all of them.
  let markerInThisTask = false;
  for (const event of history.events ?? []) {
    switch (event.eventType) {
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: {
        const attrs = event.workflowExecutionStartedEventAttributes;
        // A child's start was paid for by its parent (2 Actions at the parent's initiation).
        if (!attrs?.parentWorkflowExecution) byKind.workflowStarted++;
        break;
      }
      case EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
        byKind.childWorkflow += 2;
        break;
      case EventType.EVENT_TYPE_TIMER_STARTED:
        byKind.timer++;
        break;
      case EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: {
        const fields = Object.keys(
          event.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields ?? {},
        );
        if (fields.some((f) => f !== CHANGE_VERSION)) byKind.upsert++;
        break;
      }
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
        byKind.signal++;
        break;
      case EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
        byKind.activity += Math.max(1, event.activityTaskStartedEventAttributes?.attempt ?? 1);
        break;
      case EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
        markerInThisTask = false;
        break;
      case EventType.EVENT_TYPE_MARKER_RECORDED:
        if (!markerInThisTask) byKind.localActivities++;
        markerInThisTask = true;
        break;
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED:
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
        byKind.other++;
        break;
    }
  }
  return { total: Object.values(byKind).reduce((a, b) => a + b, 0), byKind };
}

/** Adds action counts (for sums and averages over many histories). */
export function addActions(a: ActionCount, b: ActionCount): ActionCount {
  const byKind = { ...a.byKind };
  for (const [kind, n] of Object.entries(b.byKind) as [ActionKind, number][]) byKind[kind] += n;
  return { total: a.total + b.total, byKind };
}

export const NO_ACTIONS: ActionCount = billableActions({ events: [] });

/** Each kind divided by `n`, rounded to two decimals. */
export function perUnit(a: ActionCount, n: number): ActionCount {
  const r = (x: number) => Math.round((x / Math.max(1, n)) * 100) / 100;
  const byKind = Object.fromEntries(Object.entries(a.byKind).map(([k, v]) => [k, r(v)])) as Record<ActionKind, number>;
  return { total: r(a.total), byKind };
}
