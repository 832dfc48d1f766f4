/**
 * The outbox reconciler's activity: every pending or quarantined webhook is driven by a workflow (a hold's release, an
 * event's delivery, a resend), and one whose workflow ended without finishing it (terminated by an operator, timed
 * out, failed) would stay pending, or quarantined with nobody to take its decision, forever. Each run pages through the
 * region's pending and quarantined webhooks older than the grace period, asks Temporal whether each one's workflow
 * runs, and starts a new run of it where none does (same workflow id, same webhook id: src/delivery/starts.ts); a
 * quarantined one's run starts where a continued run would, waiting for the decision (reason, since and deadline as
 * the ledger recorded the quarantine). It reports what it did (a log line per webhook, a counter, its result) and what
 * it could not fix, and records the run in the ledger (outbox_reconciliations), where the workers' gauge reads it.
 *
 * It decides nothing about money: the release it restarts is idempotent and finds the hold released, and a delivery
 * re-reads its webhook's status before any request. What it is told (the grace period) only chooses which webhooks it
 * looks at.
 */
import { activityInfo, getClient, heartbeat, log } from '@temporalio/activity';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { noopMetricMeter, type MetricMeter } from '@temporalio/common';
import type pg from 'pg';
import { DEFAULT_QUARANTINE_TIMEOUT_MS } from '../contracts/delivery.js';
import type { DeliveryResume } from '../contracts/domain.js';
import type { OutboxCursor, OutboxReport, ReconcileOutboxInput } from '../contracts/outbox.js';
import { deliveryWorkflowId } from '../contracts/ids.js';
import type { Region } from '../contracts/regions.js';
import { retryHorizonFor, withRetryHorizon } from '../delivery/policy.js';
import { eventDeliveryStart, holdReleaseStart, resendStart } from '../contracts/starts.js';
import { startFromOutside } from '../delivery/starts.js';
import { HOLD_RELEASED_EVENT } from '../sql/deliveries.js';
import * as holds from '../sql/holds.js';
import * as merchantApi from '../sql/merchant-api.js';
import * as outbox from '../sql/outbox.js';

/** Pending webhooks read per page, and asked about at once (describe calls in flight). */
const PAGE_SIZE = 200;
const CONCURRENCY = 20;
/**
 * What one run may spend: 2,000 webhooks (ten pages) and 4 minutes, inside the 5-minute schedule and the activity's
 * 10-minute start-to-close, so a run always records what it did. A backlog larger than that is worked through by the
 * next runs, each going on where the last stopped.
 */
const OUTBOX_RUN_BUDGET = { webhooks: 2_000, ms: 4 * 60_000 } as const;
/**
 * Merchants' resend requests started per run, at most, for one merchant: a range of 100 takes five runs (25 minutes at
 * the 5-minute interval) while every other merchant's requests start in the first.
 */
const MERCHANT_RESENDS_PER_RUN = 20;
/** Webhooks named in a report (and the ledger's record of it); the counts are always whole. */
const LISTED_MAX = 100;

export interface OutboxDeps {
  region: Region;
  pool: pg.Pool;
  meter?: MetricMeter;
  /** A run's budget, in webhooks looked at and time (OUTBOX_RUN_BUDGET unless said). */
  outboxBudget?: { webhooks: number; ms: number };
  /** The worker's rules for a quarantine (as `quarantineDelivery` tells them): a restarted one waits by them. */
  fourEyes?: boolean;
  quarantineTimeoutMs?: number;
}

/** What a run heartbeats: how far it got and what it found, so a retried attempt goes on from there. */
interface Progress {
  cursor?: OutboxCursor;
  report: OutboxReport;
}

type Verdict = { kind: 'running' } | { kind: 'restarted'; workflowId: string } | { kind: 'unfixable'; why: string };

export function createOutboxActivities({
  region,
  pool,
  meter = noopMetricMeter,
  outboxBudget = OUTBOX_RUN_BUDGET,
  fourEyes = false,
  quarantineTimeoutMs = DEFAULT_QUARANTINE_TIMEOUT_MS,
}: OutboxDeps) {
  const restarts = meter.createCounter(
    'hold_sweeper_outbox_restarts',
    '1',
    'pending or quarantined webhooks whose delivery workflow the reconciler started again',
  );

  /**
   * Where a quarantined webhook's new run starts: as a continued run would, waiting for the decision on the policy run
   * the ledger has quarantined, by the date it recorded and this worker's deadline. The start's DeliveryStatus says
   * pending, so the carried status does too: the run's first step shows quarantined.
   */
  function waitingForDecision(c: outbox.OutboxCandidate): DeliveryResume | undefined {
    if (!c.quarantine) return undefined;
    const { reason, since, policyRun, attempts } = c.quarantine;
    const detail = `quarantined (${reason}): the ledger holds its last error; its workflow started again by the outbox reconciler`;
    const abandonsAt = Date.parse(since) + quarantineTimeoutMs;
    return {
      facts: {
        policyRun,
        horizonMs: retryHorizonFor(c.merchantId, c.deliveryPolicy),
        leftMs: 0,
        local: false,
        busy: 0,
        attempt: attempts,
        stepAt: Date.now(),
        quarantine: { reason, since, detail, fourEyes, abandonsAt },
      },
      deliveryStatus: 'pending',
      ignoredSignals: [],
    };
  }

  /** Whether the webhook's workflow runs; if not, a new run of it. */
  async function reconcileOne(client: Client, taskQueue: string, c: outbox.OutboxCandidate): Promise<Verdict> {
    const kind = c.resend ? 'resend' : c.eventType === HOLD_RELEASED_EVENT ? 'release' : 'event';
    const workflowId = deliveryWorkflowId(region, { ...c, drivenBy: c.resend?.workflowId });
    let previous = 'none';
    try {
      const { status } = await client.workflow.getHandle(workflowId).describe();
      if (status.name === 'RUNNING') return { kind: 'running' };
      previous = status.name;
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError))
        return { kind: 'unfixable', why: `Temporal did not say whether ${workflowId} runs: ${(err as Error).message}` };
    }
    try {
      const resume = waitingForDecision(c);
      const retryHorizonMs = resume?.facts.horizonMs ?? 0;
      const started = c.resend
        ? // A pending one's new run asks the worker, which finds the resend recorded by this workflow id and answers its
          // current run; a quarantined one's goes on from the quarantine, as its continued run would.
          await startFromOutside(
            client,
            taskQueue,
            'resendWebhook',
            resendStart(region, {
              ...c,
              claim: { resendId: c.resend.resendId, requestedBy: c.resend.requestedBy, reason: c.resend.reason },
            }),
            resume && { reopened: { holdId: c.holdId, policyRun: c.resend.policyRun, retryHorizonMs }, resume },
          )
        : kind === 'release'
          ? await startFromOutside(
              client,
              taskQueue,
              'releaseExpiredHold',
              holdReleaseStart(region, { holdId: c.holdId, merchantId: c.merchantId, expiresAt: c.holdExpiresAt }),
              { resume: resume && { release: await releasedOf(c.holdId, retryHorizonMs), delivery: resume } },
            )
          : await startFromOutside(
              client,
              taskQueue,
              'deliverHoldEvent',
              eventDeliveryStart(region, withRetryHorizon(c)),
              { resume },
            );
      restarts.add(1, { region, kind });
      log.info('outbox: stranded webhook, its delivery started again', {
        region,
        status: c.quarantine ? 'quarantined' : 'pending',
        holdId: c.holdId,
        webhookId: c.webhookId,
        workflowId,
        runId: started.runId,
        previous,
      });
      return { kind: 'restarted', workflowId };
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError) {
        // Started meanwhile (a sweep, an operator) and running: nothing to fix. Completed without delivering: not ours
        // to repeat (its reuse policy refuses): a human looks.
        const { status } = await client.workflow
          .getHandle(workflowId)
          .describe()
          .catch(() => ({ status: { name: 'UNKNOWN' } }));
        if (status.name === 'RUNNING') return { kind: 'running' };
        return {
          kind: 'unfixable',
          why: `${workflowId} is ${status.name} and its webhook still pending: not started again`,
        };
      }
      return { kind: 'unfixable', why: `starting ${workflowId} failed: ${(err as Error).message}` };
    }
  }

  /** The hold's release, as the ledger answers a release of a hold already released (a restarted run's first step). */
  async function releasedOf(holdId: string, retryHorizonMs: number) {
    const { deliveryPolicy: _, ...released } = await holds.releasedEntry(pool, holdId);
    return { status: 'already_released' as const, ...released, retryHorizonMs };
  }

  /**
   * Merchants' resend requests (the merchant API records them and holds no Temporal access): each one's resend
   * workflow started here, its first step checking the request. Already started (a run before this one crashed
   * between starting and marking): marked, nothing doubled.
   */
  async function startMerchantResends(client: Client, taskQueue: string): Promise<void> {
    for (const r of await merchantApi.unstartedMerchantResends(pool, PAGE_SIZE, MERCHANT_RESENDS_PER_RUN)) {
      try {
        await startFromOutside(
          client,
          taskQueue,
          'resendWebhook',
          resendStart(region, {
            webhookId: r.webhookId,
            holdId: r.holdId,
            merchantId: r.merchantId,
            claim: {
              resendId: r.resendId,
              requestedBy: `merchant ${r.merchantId} (API key ${r.keyId})`,
              reason: 'asked for by the merchant (merchant API)',
              merchantRequestId: r.id,
            },
          }),
        );
      } catch (err) {
        if (!(err instanceof WorkflowExecutionAlreadyStartedError)) {
          log.warn('outbox: a merchant resend request not started', {
            region,
            requestId: r.id,
            webhookId: r.webhookId,
            error: (err as Error).message,
          });
          continue;
        }
      }
      await merchantApi.markMerchantResendStarted(pool, r.id);
      restarts.add(1, { region, kind: 'merchant_resend' });
      log.info('outbox: merchant resend started', {
        region,
        requestId: r.id,
        webhookId: r.webhookId,
        resendId: r.resendId,
        keyId: r.keyId,
      });
    }
  }

  return {
    /** One reconcile run (the `reconcileOutbox` workflow's only step): see the module comment. */
    async reconcileStrandedWebhooks({ graceMs }: ReconcileOutboxInput): Promise<OutboxReport> {
      const client = getClient();
      const { taskQueue, heartbeatDetails } = activityInfo();
      const startedAt = Date.now();
      // A retried attempt goes on from its heartbeat; a new run from where the last one stopped, if it stopped early.
      const resumed = heartbeatDetails as Progress | undefined;
      if (!resumed) await startMerchantResends(client, taskQueue);
      const report: OutboxReport = resumed?.report ?? {
        checked: 0,
        running: 0,
        restarted: 0,
        unfixable: 0,
        restartedWebhooks: [],
        unfixableWebhooks: [],
        truncated: false,
      };
      delete report.resumeAfter;
      let cursor = resumed ? resumed.cursor : await outbox.lastStop(pool);
      for (;;) {
        const left = Math.min(PAGE_SIZE, outboxBudget.webhooks - report.checked);
        if (left <= 0 || Date.now() - startedAt >= outboxBudget.ms) {
          report.resumeAfter = cursor;
          break;
        }
        const page = await outbox.outboxCandidates(pool, graceMs, left, cursor);
        for (let i = 0; i < page.length; i += CONCURRENCY) {
          const slice = page.slice(i, i + CONCURRENCY);
          const verdicts = await Promise.all(slice.map((c) => reconcileOne(client, taskQueue, c)));
          verdicts.forEach((v, j) => {
            const { webhookId } = slice[j]!;
            report.checked++;
            if (v.kind === 'running') report.running++;
            else if (v.kind === 'restarted') {
              report.restarted++;
              if (report.restartedWebhooks.length < LISTED_MAX) report.restartedWebhooks.push(webhookId);
              else report.truncated = true;
            } else {
              report.unfixable++;
              log.warn('outbox: stranded webhook not fixed', { region, webhookId, why: v.why });
              if (report.unfixableWebhooks.length < LISTED_MAX)
                report.unfixableWebhooks.push({ webhookId, why: v.why });
              else report.truncated = true;
            }
          });
          const last = slice[slice.length - 1]!;
          cursor = { createdAt: last.createdAt, webhookId: last.webhookId };
          heartbeat({ cursor, report } satisfies Progress);
        }
        if (page.length < left) break;
      }
      await outbox.recordReconciliation(pool, {
        graceMs,
        checked: report.checked,
        running: report.running,
        restarted: report.restarted,
        unfixable: report.unfixable,
        details: {
          restarted: report.restartedWebhooks,
          unfixable: report.unfixableWebhooks,
          truncated: report.truncated,
          ...(report.resumeAfter ? { resumeAfter: report.resumeAfter } : {}),
        },
      });
      log.info('outbox reconciled', {
        region,
        checked: report.checked,
        running: report.running,
        restarted: report.restarted,
        unfixable: report.unfixable,
        resumeAfter: report.resumeAfter?.webhookId,
      });
      return report;
    },
  };
}
