/**
 * The retention job's activity: the ledger's rows past their retention leave, table by table, in batches of
 * `BATCH_ROWS` (each its own short transaction, skipping rows a delivery holds), until every table is caught up or the
 * run's time is spent. The retentions themselves are the database's (src/sql/retention.ts); this decides only when.
 */
import { activityInfo, heartbeat, log } from '@temporalio/activity';
import type pg from 'pg';
import type { PruneLedgerInput, RetentionReport } from '../contracts/retention.js';
import type { Region } from '../contracts/regions.js';
import { pruneAudit, pruneExpired, RETENTION_KINDS } from '../sql/retention.js';

/**
 * Rows per batch: a webhook's batch deletes it with its attempts (a few each), so a transaction stays in the tens of
 * milliseconds and holds row locks on nothing a delivery is waiting for (rows it holds are skipped).
 */
const BATCH_ROWS = 1_000;

interface RetentionDeps {
  region: Region;
  pool: pg.Pool;
}

export function createRetentionActivities({ region, pool }: RetentionDeps) {
  return {
    /** One run of the retention job (the `pruneLedger` workflow's only step): see the module comment. */
    async pruneLedger({ budgetMs }: PruneLedgerInput): Promise<RetentionReport> {
      const startedAt = Date.now();
      // A retried attempt keeps the counts of the one before: what it deleted is gone either way.
      const pruned: Record<string, number> = { ...(activityInfo().heartbeatDetails as Record<string, number>) };
      // The clock stops a run only once it has deleted something: a backlog always shrinks, however short the budget.
      let deleted = 0;
      const stop = () => deleted > 0 && Date.now() - startedAt >= budgetMs;
      let caughtUp = false;
      kinds: for (const [i, kind] of RETENTION_KINDS.entries()) {
        for (;;) {
          const n = await pruneExpired(pool, kind, BATCH_ROWS);
          deleted += n;
          pruned[kind] = (pruned[kind] ?? 0) + n;
          heartbeat(pruned);
          if (n < BATCH_ROWS) break;
          if (stop()) break kinds;
        }
        caughtUp = i === RETENTION_KINDS.length - 1;
        if (stop()) break;
      }
      if (caughtUp) {
        pruned.api_audit =
          (pruned.api_audit ?? 0) +
          (await pruneAudit(pool, `retention job (${activityInfo().workflowExecution?.workflowId ?? 'pruneLedger'})`));
      }
      const report = { pruned, caughtUp, ms: Date.now() - startedAt };
      log.info('retention: ledger pruned', { region, ...report });
      return report;
    },
  };
}
