/**
 * Every place a workflow of this product waits, and every way it leaves it: the list the golden-history gate holds the
 * recordings to (test/unit/golden-coverage.test.ts). A deploy meets a workflow at one of these points, and the
 * new code then replays what the old code wrote up to there and past it; a change to what happens at a point is safe
 * only when a recording of an earlier build, at that point and leaving it that way, replays on the new code.
 *
 * A point is named `<workflow>.<point>` and is one of: a timer (a `sleep` or a `condition` with a timeout, found in a
 * history by its summary, one of the labels in src/contracts/story.ts), a timer-less wait (found by what the workflow
 * did on entering it), an activity or local activity (by its type), a child workflow start, the end of a run by
 * continue-as-new, or a run's start. Its exits are keyed on the values that choose the workflow's next rulebook row:
 * `timer` (fired), `signal:<name>` and `update:<name>` (received while waiting and ending the wait), `kept-waiting:<name>`
 * (a signal received that did not end it), `completed:<status>` (an activity's result by its `status`, or by the
 * answer test/support/coverage.ts reads for an activity without one: the ledger's word on a decision, the quarantine's
 * rule), `completed`, `failed`, `failed:<type>` (a delivery's failure by its Temporal failure type, src/contracts/
 * failures.ts; `failed:unexpected` for any other), `started` / `already-started` (a child), `one-per-run` /
 * `several-per-run` (how many children of the point one run waits for), `continued` (continue-as-new), `resumed` (a
 * run started by one), `traced` / `untraced` (a start with a trace context in its header or without). Every point
 * also has the cell `entered`: some recording waits there (a deploy can meet a workflow in it).
 *
 * Data only: no workflow imports this. The gate's test checks, as far as it can tell from the source, that every label
 * and every activity the workflows use is declared here, and that every declared exit has a recording, or says why it
 * cannot have one (`unrecordable`), or is workflow code the newest release does not have (`unreleased`).
 */

export type WorkflowType =
  | 'sweepExpiredHolds'
  | 'startHoldBatch'
  | 'releaseExpiredHold'
  | 'applyHoldEvents'
  | 'deliverHoldEvent'
  | 'reconcileOutbox'
  | 'resendWebhook'
  | 'pruneLedger';

/**
 * `delivery`: the points of `deliverUntilDecided`, one function `releaseExpiredHold`, `deliverHoldEvent` and
 * `resendWebhook` run (a release's webhook, a processor event's, a resend's): a recording of any of them covers the
 * cell.
 */
export type PointOwner = WorkflowType | 'delivery';

/** The workflows whose histories show a point of `owner`. */
export const WORKFLOWS_OF: Readonly<Record<PointOwner, readonly WorkflowType[]>> = {
  sweepExpiredHolds: ['sweepExpiredHolds'],
  startHoldBatch: ['startHoldBatch'],
  releaseExpiredHold: ['releaseExpiredHold'],
  applyHoldEvents: ['applyHoldEvents'],
  deliverHoldEvent: ['deliverHoldEvent'],
  reconcileOutbox: ['reconcileOutbox'],
  resendWebhook: ['resendWebhook'],
  pruneLedger: ['pruneLedger'],
  delivery: ['releaseExpiredHold', 'deliverHoldEvent', 'resendWebhook'],
};

export type WaitOn =
  | { timer: `holdLabels.${string}` | `holdEventsLabels.${string}` }
  /**
   * A wait with no timer: recognised by the search attribute the workflow sets as it enters it (its label names no
   * timer).
   */
  | { untimed: { deliveryStatus: string }; labels?: readonly string[] }
  | { activity: string; labels?: readonly string[] }
  | { localActivity: string; labels?: readonly string[] }
  /** `counted`: the run waits for all of the point's children together, so their number chooses what follows. */
  | { child: WorkflowType; counted?: true }
  | { continueAsNew: true }
  /** A run's start, by whether its header carries a trace context (src/workflows/tracing.cjs acts on it). */
  | { start: true }
  /** A run started by continue-as-new, carrying where its story stood (`resume` or `pending` in its input). */
  | { resumedRun: true };

export interface WaitingPoint {
  workflow: PointOwner;
  point: string;
  on: WaitOn;
  exits: readonly string[];
  /** Exits no recording can show, each with why. */
  unrecordable?: Readonly<Record<string, string>>;
  /**
   * Cells of workflow code added after the newest release (`in`: a file of it that the release's tree lacks, which
   * test/unit/golden-coverage.test.ts checks): no released build can have written them yet. `exits`: only these;
   * otherwise the whole point.
   */
  unreleased?: { in: string; exits?: readonly string[] };
}

/**
 * The delivery of one webhook (src/workflows/webhook-delivery.ts, `deliverUntilDecided`), in each workflow that runs
 * it: the steps of the rulebook (src/workflows/delivery-rules.ts), each a point.
 */
function deliveryPoints(): WaitingPoint[] {
  const workflow = 'delivery';
  const answers = ['completed:delivered', 'completed:wait', 'completed:held', 'completed:already_terminal'];
  // Each named failure quarantines with its own reason (DELIVERY_FAILURE_TYPES).
  const named = [
    'failed:WebhookRejected',
    'failed:EndpointGone',
    'failed:InvalidEndpointUrl',
    'failed:MissingSigningSecret',
    'failed:InvalidDeliveryPolicyError',
  ];
  return [
    {
      workflow,
      point: 'deliver-fast',
      on: { localActivity: 'deliverWebhook', labels: ['holdLabels.deliver'] },
      // The retryable failure waits, then the regular activity; any other unnamed one hands over to it.
      exits: [...answers, 'completed:hand_over', 'failed:WebhookAttemptFailed', ...named, 'failed:unexpected'],
    },
    {
      workflow,
      point: 'deliver',
      on: { activity: 'deliverWebhook', labels: ['holdLabels.deliverWithRetries'] },
      // `WebhookAttemptFailed`: its retries ran out within the horizon (quarantined as exhausted).
      exits: [...answers, 'failed:WebhookAttemptFailed', ...named],
      unrecordable: {
        'completed:already_terminal':
          "a retry of the regular activity finding its own earlier attempt's end in the ledger: an attempt lost after the ledger recorded it and before Temporal did, which a golden night cannot arrange",
      },
    },
    // Timers nothing cancels: each ends by firing (a run that then continues as new does so at `run`).
    { workflow, point: 'budget', on: { timer: 'holdLabels.budget' }, exits: ['timer'] },
    { workflow, point: 'in-flight', on: { timer: 'holdLabels.inFlight' }, exits: ['timer'] },
    { workflow, point: 'after-earlier', on: { timer: 'holdLabels.afterEarlier' }, exits: ['timer'] },
    { workflow, point: 'retry-wait', on: { timer: 'holdLabels.retryWait' }, exits: ['timer'] },
    {
      workflow,
      point: 'held',
      on: { timer: 'holdLabels.held' },
      exits: ['timer', 'signal:merchantResumed', 'continued'],
    },
    {
      workflow,
      point: 'quarantine',
      on: { activity: 'quarantineDelivery', labels: ['holdLabels.quarantine'] },
      // The worker's rule for deciding it (QUARANTINE_FOUR_EYES): what the wait for a human takes.
      exits: ['completed:four-eyes', 'completed:one-approver'],
    },
    {
      workflow,
      point: 'human',
      on: { timer: 'holdLabels.human' },
      exits: [
        'timer',
        'signal:approveReplay',
        'signal:discard',
        'update:approveReplay',
        'update:discard',
        'kept-waiting:approveReplay',
        // The wait's history grew long (a flood of signals that did not apply): the next run waits on.
        'continued',
      ],
    },
    {
      workflow,
      point: 'decide',
      on: { activity: 'decideQuarantine', labels: ['holdLabels.decision'] },
      // The ledger's word: refused (wait for a human again), recorded as asked (its decision chooses the row), or
      // recorded, but the ledger holds another decision for the run, which stands.
      exits: [
        'completed:refused',
        'completed:recorded:replay',
        'completed:recorded:discard',
        'completed:recorded:abandon',
        'completed:overruled',
      ],
    },
    { workflow, point: 'run', on: { continueAsNew: true }, exits: ['continued'] },
    { workflow, point: 'resumed', on: { resumedRun: true }, exits: ['resumed'] },
  ];
}

/** A hold's release, by its answer's `status`. */
const RELEASE_ANSWERS = [
  'completed:released',
  'completed:already_released',
  'completed:not_expired',
  'completed:not_found',
  'completed:rejected',
  'completed:settled',
];

export const WAITING_POINTS: readonly WaitingPoint[] = [
  {
    workflow: 'sweepExpiredHolds',
    point: 'list',
    on: { activity: 'listExpiredHolds' },
    exits: ['completed:more-pages', 'completed:last-page'],
  },
  {
    workflow: 'sweepExpiredHolds',
    point: 'batches',
    on: { child: 'startHoldBatch', counted: true },
    exits: ['started', 'one-per-run', 'several-per-run'],
  },
  { workflow: 'sweepExpiredHolds', point: 'finish', on: { activity: 'finishSweep' }, exits: ['completed'] },
  { workflow: 'sweepExpiredHolds', point: 'run', on: { continueAsNew: true }, exits: ['continued'] },
  { workflow: 'sweepExpiredHolds', point: 'resumed', on: { resumedRun: true }, exits: ['resumed'] },
  {
    workflow: 'startHoldBatch',
    point: 'start-holds',
    on: { child: 'releaseExpiredHold' },
    exits: ['started', 'already-started'],
  },
  {
    workflow: 'releaseExpiredHold',
    point: 'release',
    on: { localActivity: 'releaseHold', labels: ['holdLabels.release'] },
    // The ledger down (`failed`): the release retries on durable timers (activity-profiles.ts, ledgerLocalActivity),
    // the SDK's own, unlabelled, each right after the failed attempt's marker.
    exits: [...RELEASE_ANSWERS, 'failed'],
  },
  {
    workflow: 'releaseExpiredHold',
    point: 'release-and-deliver',
    on: { localActivity: 'releaseAndDeliver', labels: ['holdLabels.releaseAndDeliver'] },
    // By the release's answer; a released hold's first attempt then leaves as `delivery.deliver-fast` does. A failure
    // sends the workflow to `release`.
    exits: [...RELEASE_ANSWERS, 'failed'],
    unreleased: { in: 'src/activities/release-and-deliver.ts' },
  },
  ...deliveryPoints(),
  {
    workflow: 'applyHoldEvents',
    point: 'idle',
    on: { timer: 'holdEventsLabels.idle' },
    exits: ['timer', 'signal:processorEvent'],
  },
  {
    workflow: 'applyHoldEvents',
    point: 'apply',
    on: { activity: 'applyProcessorEvent', labels: ['holdEventsLabels.apply'] },
    exits: ['completed:applied', 'completed:already_applied', 'completed:waiting', 'completed:unknown_event'],
    unrecordable: {
      'completed:already_applied':
        "an event applied by an earlier attempt of the same activity (a retry after the commit): the workflow does with it what it does with `applied`, and a golden night cannot make the activity's answer get lost",
    },
  },
  {
    workflow: 'applyHoldEvents',
    point: 'gap',
    on: { timer: 'holdEventsLabels.predecessor' },
    exits: ['timer', 'signal:processorEvent', 'signal:skipMissingEvent', 'update:skipMissingEvent'],
  },
  {
    workflow: 'applyHoldEvents',
    point: 'stopped',
    on: { untimed: { deliveryStatus: 'event_gap' } },
    exits: ['signal:processorEvent', 'signal:skipMissingEvent', 'update:skipMissingEvent'],
  },
  {
    workflow: 'applyHoldEvents',
    point: 'skip',
    on: { activity: 'skipProcessorSequence', labels: ['holdEventsLabels.skip'] },
    exits: ['completed'],
  },
  { workflow: 'applyHoldEvents', point: 'deliveries', on: { child: 'deliverHoldEvent' }, exits: ['started'] },
  { workflow: 'applyHoldEvents', point: 'run', on: { continueAsNew: true }, exits: ['continued'] },
  { workflow: 'applyHoldEvents', point: 'resumed', on: { resumedRun: true }, exits: ['resumed'] },
  {
    workflow: 'reconcileOutbox',
    point: 'reconcile',
    on: { activity: 'reconcileStrandedWebhooks' },
    exits: ['completed'],
  },
  {
    workflow: 'pruneLedger',
    point: 'prune',
    on: { activity: 'pruneLedger' },
    exits: ['completed'],
    unreleased: { in: 'src/workflows/prune-ledger.ts' },
  },
  {
    workflow: 'resendWebhook',
    point: 'reopen',
    on: { activity: 'reopenForResend', labels: ['resendLabels.reopen'] },
    exits: ['completed:reopened', 'completed:refused'],
  },
  ...startPoints(),
];

/**
 * Each workflow's start, traced or not (`start` below: the exits of each). A trace reaches a hold's event workflow from
 * the receiver's signal-with-start, and the deliveries, releases and resends started by a traced workflow or by the
 * worker's own client (the outbox reconciler); the sweep, its batches and the scheduled jobs start untraced. A released
 * build's receiver never traced, and a worker's client starts on the build it belongs to: only a newer receiver's
 * signal-with-start reaches a released build's event workflow with a trace, and the rest are tracing's own cells.
 */
function startPoints(): WaitingPoint[] {
  const newlyTraced = { in: 'src/workflows/tracing.cjs', exits: ['traced'] };
  const start: Record<WorkflowType, Pick<WaitingPoint, 'exits' | 'unreleased'>> = {
    sweepExpiredHolds: { exits: ['untraced'] },
    startHoldBatch: { exits: ['untraced'] },
    reconcileOutbox: { exits: ['untraced'] },
    pruneLedger: { exits: ['untraced'], unreleased: { in: 'src/workflows/prune-ledger.ts' } },
    applyHoldEvents: { exits: ['untraced', 'traced'] },
    deliverHoldEvent: { exits: ['untraced', 'traced'], unreleased: newlyTraced },
    releaseExpiredHold: { exits: ['untraced', 'traced'], unreleased: newlyTraced },
    resendWebhook: { exits: ['untraced', 'traced'], unreleased: newlyTraced },
  };
  return Object.entries(start).map(([workflow, cells]) => ({
    workflow: workflow as WorkflowType,
    point: 'start',
    on: { start: true },
    ...cells,
  }));
}

/** `<workflow>.<point>.<exit>`: one cell of the coverage matrix. */
export const coverageKey = (workflow: string, point: string, exit: string) => `${workflow}.${point}.${exit}`;

/** Signals and Updates a workflow takes that end no wait, each with why (every other one is an exit above). */
export const NON_WAKING_MESSAGES: Readonly<Record<string, string>> = {};
