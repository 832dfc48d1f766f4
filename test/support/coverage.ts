/**
 * What a recorded history covers of test/support/waiting-points.ts: each (workflow, point, exit) it passes through,
 * read from the history alone (event types, timer summaries, activity types and results, signals and Updates), so the
 * golden sets' coverage is computed, never remembered.
 */
import type { temporal } from '@temporalio/proto';
import { DELIVERY_FAILURE_TYPES, RETRYABLE_DELIVERY_FAILURE } from '../../src/contracts/failures.js';
import { holdEventsLabels, holdLabels } from '../../src/contracts/story.js';
import { coverageKey, WAITING_POINTS, WORKFLOWS_OF, type WaitingPoint } from './waiting-points.js';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
type Payload = temporal.api.common.v1.IPayload;

/** Where the SDK's OpenTelemetry interceptors carry a trace context (src/workflows/tracing.cjs reads it too). */
const TRACE_HEADER = '_tracer-data';

const LABELS: Record<string, Record<string, (...args: never[]) => string>> = { holdLabels, holdEventsLabels };

/**
 * A label's texts as a pattern: the function called with a placeholder for each argument, the placeholders made
 * wildcards.
 */
function labelPattern(ref: string): RegExp {
  const [group, name] = ref.split('.') as [string, string];
  const label = LABELS[group]?.[name];
  if (!label) throw new Error(`waiting-points.ts names ${ref}, which src/contracts/story.ts does not export`);
  const PLACEHOLDER = '\u0000';
  const text = (label as (...args: unknown[]) => string)(...Array.from({ length: label.length }, () => PLACEHOLDER));
  const escaped = text
    .replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
    .split(PLACEHOLDER)
    .join('.*?');
  return new RegExp(`^${escaped}$`, 's');
}

const decode = (bytes: Uint8Array | null | undefined) => (bytes ? new TextDecoder().decode(bytes) : undefined);

/** A JSON payload's value; undefined for anything else (encrypted, binary/null). */
function jsonValue(payload: Payload | null | undefined): unknown {
  if (!payload || decode(payload.metadata?.encoding) !== 'json/plain') return undefined;
  try {
    return JSON.parse(decode(payload.data) ?? '');
  } catch {
    return undefined;
  }
}

const summaryOf = (event: HistoryEvent) => {
  const value = jsonValue(event.userMetadata?.summary);
  return typeof value === 'string' ? value : undefined;
};

/**
 * The answer of an activity whose result has no `status`, keyed on what chooses the workflow's next row: the ledger's
 * word on a decision (refused; recorded as asked, by decision; recorded, but another decision stands), the rule a
 * quarantine is decided under, whether a sweep's page is its last.
 */
const ANSWERS: Record<string, (result: Record<string, unknown>, input: Record<string, unknown> | undefined) => string> =
  {
    decideQuarantine: (r, input) =>
      !r.recorded ? 'refused' : r.decision === input?.decision ? `recorded:${String(r.decision)}` : 'overruled',
    quarantineDelivery: (r) => (r.fourEyes ? 'four-eyes' : 'one-approver'),
    listExpiredHolds: (r) => (r.next ? 'more-pages' : 'last-page'),
  };

/** `completed:<answer>`: the result's status, or what ANSWERS reads of it; `completed` for anything else. */
function completedExit(type: string | undefined, result: Payload | null | undefined, input?: Payload | null): string {
  const value = jsonValue(result) as Record<string, unknown> | undefined;
  const answer = type && ANSWERS[type];
  if (answer && value) return `completed:${answer(value, jsonValue(input) as Record<string, unknown> | undefined)}`;
  return typeof value?.status === 'string' ? `completed:${value.status}` : 'completed';
}

/** `failed:<type>` for a delivery's failure the rulebook names (src/contracts/failures.ts), else `failed:unexpected`. */
function failedExit(failure: temporal.api.failure.v1.IFailure | null | undefined, point: WaitingPoint): string {
  if (!point.exits.some((e) => e.startsWith('failed:'))) return 'failed';
  const type = failure?.applicationFailureInfo?.type ?? failure?.cause?.applicationFailureInfo?.type ?? '';
  return Object.hasOwn(DELIVERY_FAILURE_TYPES, type) || type === RETRYABLE_DELIVERY_FAILURE
    ? `failed:${type}`
    : 'failed:unexpected';
}

/**
 * The signals and Updates the workflow task that emitted the command at `index` was woken by: what arrived between
 * the task before it and that task, and the Updates it accepted itself.
 */
function messagesBefore(events: HistoryEvent[], index: number): { signals: string[]; updates: string[] } {
  const signals: string[] = [];
  const updates: string[] = [];
  let i = index - 1;
  // An Update the task accepted is written with the task's commands, after its WorkflowTaskCompleted.
  for (; i >= 0 && !events[i]!.workflowTaskCompletedEventAttributes; i--) {
    const accepted = events[i]!.workflowExecutionUpdateAcceptedEventAttributes;
    if (accepted) updates.push(accepted.acceptedRequest?.input?.name ?? '');
  }
  for (i--; i >= 0 && !events[i]!.workflowTaskCompletedEventAttributes; i--) {
    const e = events[i]!;
    if (e.workflowExecutionSignaledEventAttributes)
      signals.push(e.workflowExecutionSignaledEventAttributes.signalName ?? '');
    if (e.workflowExecutionUpdateAcceptedEventAttributes)
      updates.push(e.workflowExecutionUpdateAcceptedEventAttributes.acceptedRequest?.input?.name ?? '');
  }
  return { signals, updates };
}

/** Whether the workflow task that emitted the command at `index` also ended the run by continue-as-new. */
function continuesAsNew(events: HistoryEvent[], index: number): boolean {
  for (let k = index + 1; k < events.length && !events[k]!.workflowTaskScheduledEventAttributes; k++) {
    if (events[k]!.workflowExecutionContinuedAsNewEventAttributes) return true;
  }
  return false;
}

/** The commands (events) the first workflow task completed after `index` emitted. */
function nextTaskCommands(events: HistoryEvent[], index: number): HistoryEvent[] {
  let k = index + 1;
  while (k < events.length && !events[k]!.workflowTaskCompletedEventAttributes) k++;
  const commands: HistoryEvent[] = [];
  for (
    k++;
    k < events.length &&
    !events[k]!.workflowTaskScheduledEventAttributes &&
    !events[k]!.workflowTaskStartedEventAttributes;
    k++
  ) {
    commands.push(events[k]!);
  }
  return commands;
}

/** The (workflow, point, exit) keys of test/support/waiting-points.ts that `history` passes through. */
export function coverageOf(history: temporal.api.history.v1.IHistory): Set<string> {
  const events = history.events ?? [];
  const started = events[0]?.workflowExecutionStartedEventAttributes;
  const workflow = started?.workflowType?.name ?? '';
  const points = WAITING_POINTS.filter((p) => (WORKFLOWS_OF[p.workflow] as readonly string[]).includes(workflow));
  const covered = new Set<string>();
  const add = (point: WaitingPoint, exit: string) => {
    covered.add(coverageKey(point.workflow, point.point, 'entered'));
    covered.add(coverageKey(point.workflow, point.point, exit));
  };
  const enter = (point: WaitingPoint) => covered.add(coverageKey(point.workflow, point.point, 'entered'));
  const find = (test: (point: WaitingPoint) => boolean) => points.find(test);

  const input = jsonValue(started?.input?.payloads?.[0]) as Record<string, unknown> | undefined;
  const start = find((p) => 'start' in p.on);
  if (start) add(start, started?.header?.fields?.[TRACE_HEADER] ? 'traced' : 'untraced');
  const resumed = find((p) => 'resumedRun' in p.on);
  if (resumed && input && (input.resume !== undefined || input.pending !== undefined || input.progress !== undefined))
    add(resumed, 'resumed');

  const openTimers = new Map<string, WaitingPoint>();
  const activities = new Map<string, { point: WaitingPoint; input: Payload | null | undefined }>();
  const children = new Map<string, WaitingPoint>();
  const counted: WaitingPoint[] = [];
  events.forEach((e, index) => {
    const summary = summaryOf(e);
    if (e.timerStartedEventAttributes) {
      const point =
        summary === undefined ? undefined : find((p) => 'timer' in p.on && labelPattern(p.on.timer).test(summary));
      // The SDK's own timer before a failed local activity's next attempt (its backoff past the local retry
      // threshold) follows the attempt's marker: part of that point's `failed` exit, and no label of ours.
      const localBackoff = summary === undefined && events[index - 1]?.markerRecordedEventAttributes?.failure;
      if (point) {
        openTimers.set(e.timerStartedEventAttributes.timerId ?? '', point);
        enter(point);
      } else if (!localBackoff) {
        // A timer the list does not declare: a cell no declaration has, which the gate reports.
        covered.add(coverageKey(workflow, 'undeclared-timer', summary ?? '(no summary)'));
      }
    }
    if (e.timerFiredEventAttributes) {
      const id = e.timerFiredEventAttributes.timerId ?? '';
      const point = openTimers.get(id);
      if (point) add(point, 'timer');
      openTimers.delete(id);
    }
    if (e.timerCanceledEventAttributes) {
      const id = e.timerCanceledEventAttributes.timerId ?? '';
      const point = openTimers.get(id);
      // Left with the run (its history grew long): the wait, or what follows it, goes on in the next run.
      if (point && continuesAsNew(events, index)) add(point, 'continued');
      if (point) {
        const { signals, updates } = messagesBefore(events, index);
        for (const name of signals) add(point, `signal:${name}`);
        for (const name of updates) add(point, `update:${name}`);
      }
      openTimers.delete(id);
    }
    // A signal the workflow took without leaving the wait it was in (the task it woke cancelled no timer of it).
    if (e.workflowExecutionSignaledEventAttributes) {
      const waiting = [...openTimers.entries()].at(-1);
      if (
        waiting &&
        !nextTaskCommands(events, index).some((c) => c.timerCanceledEventAttributes?.timerId === waiting[0])
      ) {
        add(waiting[1], `kept-waiting:${e.workflowExecutionSignaledEventAttributes.signalName ?? ''}`);
      }
    }
    // A timer-less wait (stopped at a gap): entered by its search attribute; left by what woke the task that went on.
    if (e.upsertWorkflowSearchAttributesEventAttributes) {
      const status = jsonValue(
        e.upsertWorkflowSearchAttributesEventAttributes.searchAttributes?.indexedFields?.DeliveryStatus,
      );
      const point = find((p) => 'untimed' in p.on && p.on.untimed.deliveryStatus === status);
      if (point) enter(point);
      const wentOn = point
        ? events.findIndex(
            (later, j) =>
              j > index &&
              (later.activityTaskScheduledEventAttributes || later.upsertWorkflowSearchAttributesEventAttributes),
          )
        : -1;
      if (point && wentOn !== -1) {
        const { signals, updates } = messagesBefore(events, wentOn);
        for (const name of signals) add(point, `signal:${name}`);
        for (const name of updates) add(point, `update:${name}`);
      }
    }
    if (e.activityTaskScheduledEventAttributes) {
      const type = e.activityTaskScheduledEventAttributes.activityType?.name;
      const point = find((p) => 'activity' in p.on && p.on.activity === type);
      if (point) {
        activities.set(String(e.eventId ?? index + 1), {
          point,
          input: e.activityTaskScheduledEventAttributes.input?.payloads?.[0],
        });
        enter(point);
      }
    }
    const done =
      e.activityTaskCompletedEventAttributes ??
      e.activityTaskFailedEventAttributes ??
      e.activityTaskTimedOutEventAttributes;
    if (done) {
      const { point, input } = activities.get(String(done.scheduledEventId)) ?? {};
      if (point && e.activityTaskCompletedEventAttributes) {
        const type = 'activity' in point.on ? point.on.activity : undefined;
        add(point, completedExit(type, e.activityTaskCompletedEventAttributes.result?.payloads?.[0], input));
      } else if (point)
        add(
          point,
          failedExit(
            e.activityTaskFailedEventAttributes?.failure ?? e.activityTaskTimedOutEventAttributes?.failure,
            point,
          ),
        );
    }
    const marker = e.markerRecordedEventAttributes;
    if (marker?.markerName === 'core_local_activity') {
      const data = jsonValue(marker.details?.data?.payloads?.[0]) as { activity_type?: string } | undefined;
      const point = find((p) => 'localActivity' in p.on && p.on.localActivity === data?.activity_type);
      if (point && marker.failure) add(point, failedExit(marker.failure, point));
      else if (point) add(point, completedExit(data?.activity_type, marker.details?.result?.payloads?.[0]));
    }
    if (e.startChildWorkflowExecutionInitiatedEventAttributes) {
      const type = e.startChildWorkflowExecutionInitiatedEventAttributes.workflowType?.name;
      const point = find((p) => 'child' in p.on && p.on.child === type);
      if (point) {
        children.set(String(e.eventId ?? index + 1), point);
        enter(point);
        if ('counted' in point.on) counted.push(point);
      }
    }
    if (e.childWorkflowExecutionStartedEventAttributes) {
      const point = children.get(String(e.childWorkflowExecutionStartedEventAttributes.initiatedEventId));
      if (point) add(point, 'started');
    }
    if (e.startChildWorkflowExecutionFailedEventAttributes) {
      const point = children.get(String(e.startChildWorkflowExecutionFailedEventAttributes.initiatedEventId));
      if (point) add(point, 'already-started');
    }
    if (e.workflowExecutionContinuedAsNewEventAttributes) {
      const point = find((p) => 'continueAsNew' in p.on);
      if (point) add(point, 'continued');
    }
  });
  // How many children of a counted point the run waited for together.
  for (const point of new Set(counted)) {
    add(point, counted.filter((p) => p === point).length === 1 ? 'one-per-run' : 'several-per-run');
  }
  return covered;
}

/**
 * Every declared cell: `<workflow>.<point>.<exit>` -> why no released build can have recorded it (unrecordable, or
 * workflow code the newest release lacks), or undefined.
 */
export function declaredCells(): Map<string, string | undefined> {
  const unreleased = (p: WaitingPoint, exit: string) =>
    p.unreleased && (p.unreleased.exits ?? [exit]).includes(exit) ? `unreleased: needs ${p.unreleased.in}` : undefined;
  return new Map(
    WAITING_POINTS.flatMap((p) =>
      ['entered', ...p.exits].map(
        (exit) => [coverageKey(p.workflow, p.point, exit), p.unrecordable?.[exit] ?? unreleased(p, exit)] as const,
      ),
    ),
  );
}

export { labelPattern };

/** A JSON payload of `value`, as a history holds one. */
export function jsonPayload(value: unknown): Payload {
  return {
    metadata: { encoding: new TextEncoder().encode('json/plain') },
    data: new TextEncoder().encode(JSON.stringify(value)),
  };
}

/** A history of `workflowType` whose events after its start are `events` (ids numbered in order). */
export function syntheticHistory(workflowType: string, events: HistoryEvent[]): temporal.api.history.v1.IHistory {
  const started: HistoryEvent = { workflowExecutionStartedEventAttributes: { workflowType: { name: workflowType } } };
  // Event ids are Longs in the SDK's types; the reading above takes any number.
  return { events: [started, ...events].map((e, i) => ({ ...e, eventId: (i + 1) as never })) };
}
