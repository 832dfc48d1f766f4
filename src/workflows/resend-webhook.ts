/**
 * A resend: a webhook that reached an end (delivered, discarded, abandoned) sent again, with its original id and
 * payload and a fresh signature, as a new policy run in the merchant's replay lane. Started by `npm run ops -- resend`
 * (src/operations/resends.ts), one workflow per resend (`resendWorkflowId`).
 *
 * Its first step reopens the webhook in the ledger (`reopenForResend`): the worker checks the claim (who, why, and a
 * request approved by a second person where one is needed) and records the resend, with this workflow as the one that
 * delivers it, in the statement that moves the row back to pending; a refused claim ends the workflow with why, and
 * nothing is sent. From there it is a delivery like any other (`deliverUntilDecided`): the budget, retries, a
 * quarantine and its decisions, continue-as-new.
 */
import { continueAsNew, log, proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { ResendWebhookInput, ResendWebhookResult } from '../contracts/domain.js';
import { resendLabels, resendRefusedDetails } from '../contracts/story.js';
import { ledgerActivity } from './activity-profiles.js';
import { deliverUntilDecided, DeliveryState } from './webhook-delivery.js';

export async function resendWebhook(input: ResendWebhookInput): Promise<ResendWebhookResult> {
  const { webhookId, claim } = input;
  const { resendId } = claim;
  let reopened = input.resume ? input.reopened : undefined;
  if (!reopened) {
    const outcome = await proxyActivities<Activities>({
      ...ledgerActivity,
      summary: resendLabels.reopen(webhookId),
    }).reopenForResend({
      ...claim,
      webhookId,
    });
    if (outcome.status === 'refused') {
      log.warn('resend refused', { webhookId, resendId, why: outcome.why });
      setCurrentDetails(resendRefusedDetails(webhookId, outcome.why));
      return { webhookId, resendId, status: 'refused', why: outcome.why };
    }
    reopened = { holdId: outcome.holdId, policyRun: outcome.policyRun, retryHorizonMs: outcome.retryHorizonMs };
  }
  const { holdId, policyRun, retryHorizonMs } = reopened;
  const stage = { stage: 'delivering', policyRun: input.resume?.facts.policyRun ?? policyRun } as const;
  const state = new DeliveryState(holdId, stage, input.resume).registerHandlers();
  const delivery = await deliverUntilDecided(
    {
      webhookId,
      policyRun,
      retryHorizonMs,
      ctx: { region: input.region, holdId, webhookId, resendId },
      continueAs: (carry) => continueAsNew<typeof resendWebhook>({ ...input, reopened, resume: carry }),
    },
    state,
  );
  return { webhookId, resendId, status: 'resent', policyRun, delivery };
}
