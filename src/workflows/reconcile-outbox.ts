/**
 * The outbox reconciler, one run per region on its own schedule (src/schedules.ts): pending webhooks whose delivery
 * workflow ended without finishing them are delivered again, with their original ids, and quarantined ones wait for
 * their decision again. All of its work is one activity (src/activities/outbox.ts); this workflow is where it runs on
 * a schedule, retries, and shows its report (its result and current details, in the Web UI and `temporal workflow
 * describe`).
 *
 * Every change to what this sends Temporal goes behind `patched()`; the golden-history gate replays its recordings.
 */
import { proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { OutboxReport, ReconcileOutboxWorkflowInput } from '../contracts/outbox.js';
import { outboxActivity } from './activity-profiles.js';

const { reconcileStrandedWebhooks } = proxyActivities<Activities>(outboxActivity);

export async function reconcileOutbox({ region, graceMs }: ReconcileOutboxWorkflowInput): Promise<OutboxReport> {
  const report = await reconcileStrandedWebhooks({ graceMs });
  setCurrentDetails(
    [
      `**Outbox of region ${region}**: pending and quarantined webhooks older than ${Math.round(graceMs / 1000)} s`,
      `- checked ${report.checked}, driven by a running workflow ${report.running}`,
      `- delivery started again: ${report.restarted}${report.restartedWebhooks.length ? ` (${report.restartedWebhooks.join(', ')})` : ''}`,
      `- not fixed: ${report.unfixable}${report.unfixableWebhooks.map((u) => `\n  - ${u.webhookId}: ${u.why}`).join('')}`,
    ].join('\n'),
  );
  return report;
}
