/**
 * What the Temporal Web UI shows of each workflow (its user metadata): the static summary and details a hold
 * workflow starts with (list view and header), its current details (the same facts as the `status` query, as
 * Markdown), the sweep's progress, and the one-line labels of every timer and activity on the timeline. Pure text
 * from ids, stages and times: workflow code calls it, tests read it. No amount and no secret ever enters it, and
 * the encryption codec covers these payloads like any other.
 */
import type { HeldBy, Lane } from './delivery.js';
import type { SweepTotals } from './domain.js';
import type { HoldStatus } from './messages.js';
import type { HoldEventsStatus } from './processor.js';
import type { Region } from './regions.js';

/** Where the runbook lives, for links in details (the repository's docs; a deployment may mirror them). */
const RUNBOOK = 'docs/runbook.md';

/** The list view's one line for a hold workflow. */
export function holdSummary(region: Region, holdId: string, merchantId: string): string {
  return `hold ${holdId} · merchant ${merchantId} · ${region}`;
}

/** The header's details for a hold workflow: what an operator runs to learn more or to act. */
export function holdDetails(region: Region, holdId: string, merchantId: string): string {
  return [
    `**Hold** \`${holdId}\` of merchant \`${merchantId}\`, region ${region}.`,
    '',
    `- Ledger, webhook, attempts and decisions: \`npm run ops -- status ${holdId} --region ${region}\``,
    `- Why is it waiting: the *Current details*, or \`temporal workflow query --type status\``,
    `- The merchant: \`npm run ops -- merchant show ${merchantId} --region ${region}\``,
    `- Quarantined: \`npm run ops -- approve ${holdId} --by <you> --reason <why>\` or \`discard\` (${RUNBOOK}#webhooksquarantined)`,
  ].join('\n');
}

/** The runbook section for a stage, where one applies. */
const RUNBOOK_FOR: Partial<Record<HoldStatus['stage'], string>> = {
  quarantined: 'webhooksquarantined',
  abandoned: 'quarantineabandoned',
  held: 'merchantendpointdisabled',
  waiting_for_budget: 'merchantratelimited',
  honouring_retry_after: 'merchantratelimited',
  backing_off: 'webhookdeliverybehind',
};

const STAGE_HEADLINE: Record<HoldStatus['stage'], string> = {
  releasing: 'Releasing the hold in the ledger',
  delivering: 'Delivering the webhook',
  waiting_for_budget: "Waiting for the merchant's rate budget",
  honouring_retry_after: "Honouring the merchant's Retry-After",
  backing_off: 'Backing off after a failed attempt',
  held: 'Held: the merchant is not accepting webhooks',
  quarantined: 'Quarantined: waiting for a human',
  delivered: 'Delivered',
  discarded: 'Discarded by an operator',
  abandoned: 'Abandoned: nobody decided in time',
  not_released: 'Nothing to deliver',
};

/** The hold's current details: the `status` query's facts as Markdown, kept true at every stage. */
export function holdCurrentDetails(s: HoldStatus): string {
  const lines = [`### ${STAGE_HEADLINE[s.stage]}`, '', `- Stage: \`${s.stage}\``];
  if ('policyRun' in s) lines.push(`- Policy run: ${s.policyRun}`);
  switch (s.stage) {
    case 'waiting_for_budget':
      lines.push(`- Lane: ${s.lane}${s.reserved ? ' (a slot is reserved)' : ''}`, `- Until: ${s.until}`);
      if (s.after) lines.push(`- After: ${s.after}, an earlier webhook of this hold, still pending (it goes first)`);
      break;
    case 'honouring_retry_after':
    case 'backing_off':
      lines.push(`- Attempt ${s.attempt} failed; next attempt at ${s.until}`, `- Why then: ${s.reason}`);
      break;
    case 'held':
      lines.push(`- Merchant: ${s.merchantStatus}`, `- Re-checks at: ${s.until} (or at once on \`merchantResumed\`)`);
      break;
    case 'quarantined':
      lines.push(
        `- Reason: **${s.reason}**`,
        `- Since: ${s.since}`,
        `- Detail: ${oneLine(s.detail)}`,
        '- Decide: `approveReplay` or `discard` (an Update or signal)',
      );
      break;
    case 'delivered':
      lines.push(`- Attempts: ${s.attempts}`);
      break;
    case 'discarded':
      lines.push(`- By: ${oneLine(s.by)}`, `- Reason: ${oneLine(s.reason)}`);
      break;
    case 'abandoned':
      lines.push(`- Reason: ${s.reason}`, `- Quarantined since: ${s.since}`);
      break;
    case 'not_released':
      lines.push(`- Release: ${s.status}`);
      break;
  }
  if (s.lastAttempt)
    lines.push(
      `- Last attempt: #${s.lastAttempt.attemptNumber}, ${oneLine(s.lastAttempt.outcome)} at ${s.lastAttempt.at}`,
    );
  if (s.ignoredSignals.length > 0) {
    lines.push(`- Ignored signals: ${s.ignoredSignals.length}`);
    for (const ignored of s.ignoredSignals.slice(-3))
      lines.push(
        `  - ${ignored.signal}${ignored.payload ? ` (${ignored.payload.type}, ${ignored.payload.bytes} bytes)` : ''} at ${ignored.at}: ${oneLine(ignored.why)}`,
      );
  }
  const runbook = RUNBOOK_FOR[s.stage];
  if (runbook) lines.push('', `Runbook: ${RUNBOOK}#${runbook}`);
  return lines.join('\n');
}

/** Labels of the hold workflow's timers and activities on the timeline. */
/** What a delivery's wait is for (src/workflows/delivery-rules.ts): its label on the timeline. */
export type WaitFor =
  | { kind: 'budget' | 'in_flight'; lane: Lane }
  | { kind: 'earlier'; after: string; lane: Lane }
  | { kind: 'retry'; reason: string; outcome: string; attempt: number }
  | { kind: 'held'; by: HeldBy };

export const holdLabels = {
  release: (holdId: string) => `release hold ${holdId}`,
  releaseAndDeliver: (holdId: string) => `release hold ${holdId}, then deliver its webhook (attempt 1)`,
  deliver: (webhookId: string, attempt: number) => `deliver ${webhookId} (attempt ${attempt})`,
  deliverWithRetries: (webhookId: string, attempt: number) =>
    `deliver ${webhookId} (attempt ${attempt} on, Temporal retries)`,
  budget: (lane: string, until: string) => `merchant budget, ${lane} lane, until ${until}`,
  afterEarlier: (earlierWebhookId: string, until: string) =>
    `after ${earlierWebhookId} (earlier webhook of this hold), re-check at ${until}`,
  retryWait: (reason: string, outcome: string, attempt: number) =>
    `retry after ${outcome} (attempt ${attempt}): ${reason}`,
  held: (merchantStatus: string, until: string) => `merchant ${merchantStatus}: re-check at ${until}`,
  inFlight: (lane: string, until: string) =>
    `merchant's requests in flight all taken, ${lane} lane, re-check at ${until}`,
  /** A delivery's wait, by what it waits for (src/workflows/delivery-rules.ts, `WaitFor`). */
  wait(waitFor: WaitFor, until: string): string {
    switch (waitFor.kind) {
      case 'budget':
        return holdLabels.budget(waitFor.lane, until);
      case 'in_flight':
        return holdLabels.inFlight(waitFor.lane, until);
      case 'earlier':
        return holdLabels.afterEarlier(waitFor.after, until);
      case 'retry':
        return holdLabels.retryWait(waitFor.reason, waitFor.outcome, waitFor.attempt);
      case 'held':
        return holdLabels.held(waitFor.by, until);
    }
  },
  human: (abandonsAt: string) => `waiting for a human: approveReplay or discard, abandons at ${abandonsAt}`,
  quarantine: (webhookId: string, reason: string) => `quarantine ${webhookId} (${reason})`,
  decision: (webhookId: string, decision: string) => `record ${decision} of ${webhookId}`,
};

/** The sweep's current details: how far it is, and how to find what it started. */
export function sweepCurrentDetails(
  sweepId: string,
  cutoff: string,
  totals: SweepTotals,
  phase: { page: number; listed?: number } | { finishing: true },
): string {
  return [
    'finishing' in phase
      ? '### Waiting for the last releases'
      : `### Page ${phase.page}${phase.listed === undefined ? '' : `: ${phase.listed} holds`}`,
    '',
    `- Cutoff: ${cutoff}`,
    `- Pages done: ${totals.pages}`,
    `- Found: ${totals.found} · started: ${totals.started} · already handled: ${totals.alreadyStarted} · rejected: ${totals.rejected}`,
    `- Its batches: \`WorkflowId STARTS_WITH "${sweepId}/"\`; the holds they started: \`ParentWorkflowId STARTS_WITH "${sweepId}/"\``,
  ].join('\n');
}

const oneLine = (text: string) => text.replace(/\s+/g, ' ').slice(0, 300);

/** The list view's one line for the delivery of a processor event's webhook. */
export function eventDeliverySummary(region: Region, eventType: string, holdId: string, merchantId: string): string {
  return `${eventType} · hold ${holdId} · merchant ${merchantId} · ${region}`;
}

/** The list view's one line for a hold's processor-event workflow. */
export function holdEventsSummary(region: Region, holdId: string): string {
  return `processor events · hold ${holdId} · ${region}`;
}

/** The header's details for a hold's processor-event workflow: what an operator runs about it. */
export function holdEventsDetails(region: Region, holdId: string): string {
  return [
    `**Processor events** of hold \`${holdId}\`, region ${region}, applied in the processor's sequence.`,
    '',
    `- The hold's events in the ledger, and this workflow's account: \`npm run ops -- events show ${holdId} --region ${region}\``,
    `- Stopped at a gap (\`DeliveryStatus = "event_gap"\`): ask the processor to resend, or \`npm run ops -- events skip ${holdId} --sequence <n> --by <you> --reason <why>\` (${RUNBOOK}#processoreventgap)`,
    `- Flagged entries (late captures): \`npm run ops -- reviews list --region ${region}\` (${RUNBOOK}#ledgerreviewsopen)`,
  ].join('\n');
}

/** The header's details for the delivery of a processor event's webhook. */
export function eventDeliveryDetails(region: Region, holdId: string, webhookId: string, merchantId: string): string {
  return [
    `**Webhook** \`${webhookId}\` about hold \`${holdId}\` to merchant \`${merchantId}\`, region ${region}.`,
    '',
    `- The hold, its events and webhooks: \`npm run ops -- status ${holdId} --region ${region}\``,
    `- Why is it waiting: the *Current details*, or \`temporal workflow query --type status\``,
    `- Quarantined: \`npm run ops -- approve ${webhookId} --by <you> --reason <why>\` or \`discard\` (${RUNBOOK}#webhooksquarantined)`,
  ].join('\n');
}

/** The hold-events workflow's current details: where its sequence stands, and what to do about a gap. */
export function holdEventsCurrentDetails(s: HoldEventsStatus): string {
  const { stage } = s;
  const lines: string[] = [];
  switch (stage.stage) {
    case 'applying':
      lines.push('### Applying a processor event', '', `- Sequence: ${stage.sequence}`);
      break;
    case 'idle':
      lines.push('### Up to date', '', `- Applied by this run: ${stage.applied}`);
      break;
    case 'waiting_for_predecessor':
      lines.push(
        '### Waiting for a missing processor event',
        '',
        `- Missing: sequence ${stage.expected}; waiting until ${stage.until}`,
        `- Waiting behind it: ${stage.pending.join(', ')}`,
      );
      break;
    case 'stopped_for_human':
      lines.push(
        '### Stopped: a processor event is missing',
        '',
        `- Missing: sequence ${stage.expected}, since ${stage.since}`,
        `- Waiting behind it: ${stage.pending.join(', ')}`,
        `- It applies by itself when the processor sends it; or skip it: \`npm run ops -- events skip ${s.holdId} --sequence ${stage.expected} --by <you> --reason <why>\``,
      );
      break;
  }
  for (const a of s.applied.slice(-5)) lines.push(`- Applied ${a.sequence} (${a.eventId}): ${a.outcome}`);
  for (const k of s.skipped) lines.push(`- Skipped ${k.sequence} by ${oneLine(k.by)}: ${oneLine(k.reason)}`);
  if (stage.stage === 'stopped_for_human') lines.push('', `Runbook: ${RUNBOOK}#processoreventgap`);
  return lines.join('\n');
}

export const holdEventsLabels = {
  apply: (eventId: string, sequence: number) => `apply ${eventId} (sequence ${sequence})`,
  idle: (until: string) => `up to date: waiting for the next event until ${until}`,
  predecessor: (expected: number, until: string) => `waiting for sequence ${expected} until ${until}`,
  skip: (sequence: number) => `record skip of sequence ${sequence}`,
};

/** The list view's one line for a resend of a webhook. */
export function resendSummary(region: Region, webhookId: string, holdId: string, merchantId: string): string {
  return `resend ${webhookId} · hold ${holdId} · merchant ${merchantId} · ${region}`;
}

/** The header's details for a resend: who asked, and what to run about it. */
export function resendDetails(
  region: Region,
  webhookId: string,
  holdId: string,
  requestedBy: string,
  reason: string,
): string {
  return [
    `**Resend** of webhook \`${webhookId}\` about hold \`${holdId}\`, region ${region}, asked by ${oneLine(requestedBy)}: ${oneLine(reason)}.`,
    '',
    `- The hold, its webhooks and their resends: \`npm run ops -- status ${holdId} --region ${region}\``,
    `- Quarantined again: \`npm run ops -- approve ${webhookId} --by <you> --reason <why>\` or \`discard\` (${RUNBOOK}#webhooksquarantined)`,
  ].join('\n');
}

/** A resend the worker refused (its current details): why, and nothing was sent. */
export function resendRefusedDetails(webhookId: string, why: string): string {
  return [
    `### Resend refused`,
    '',
    `- Webhook: \`${webhookId}\``,
    `- Why: ${oneLine(why)}`,
    '- Nothing was reopened or sent.',
  ].join('\n');
}

export const resendLabels = {
  reopen: (webhookId: string) => `reopen ${webhookId} for resend`,
};
