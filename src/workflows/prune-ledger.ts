/**
 * The retention job, one run per region on its own schedule (src/schedules.ts): the ledger's rows past their
 * retention leave (docs/data-retention.md). All of its work is one activity (src/activities/retention.ts); this
 * workflow is where it runs on a schedule, retries, and shows what it deleted (its result and current details).
 */
import { proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { PruneLedgerWorkflowInput, RetentionReport } from '../contracts/retention.js';
import { retentionActivity } from './activity-profiles.js';

const { pruneLedger: pruneLedgerRows } = proxyActivities<Activities>(retentionActivity);

export async function pruneLedger({ region, budgetMs }: PruneLedgerWorkflowInput): Promise<RetentionReport> {
  const report = await pruneLedgerRows({ budgetMs });
  setCurrentDetails(
    [
      `**Retention of region ${region}**: ${report.caughtUp ? 'caught up' : 'budget spent, the next run goes on'} in ${Math.round(report.ms / 1000)} s`,
      ...Object.entries(report.pruned).map(([table, n]) => `- ${table}: ${n} deleted`),
    ].join('\n'),
  );
  return report;
}
