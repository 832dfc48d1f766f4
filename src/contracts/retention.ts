/** The retention job's input and report (src/workflows/prune-ledger.ts, src/activities/retention.ts). */
import type { Region } from './regions.js';

export interface PruneLedgerInput {
  /** How long the run may delete for; what is left is the next run's. */
  budgetMs: number;
}

export interface PruneLedgerWorkflowInput extends PruneLedgerInput {
  region: Region;
}

export interface RetentionReport {
  /** Rows deleted, by table (`api_audit`: through prune_api_audit). */
  pruned: Record<string, number>;
  /** Every table got to rows still inside their retention; false when the budget ran out first. */
  caughtUp: boolean;
  ms: number;
}
