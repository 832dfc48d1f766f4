/**
 * The region's big red button: `npm run ops -- sends pause|resume|status`. A pause is a row in the region's ledger
 * (src/sql/send-pauses.ts), read by every admission to a merchant's budget in the admission's own statement: from the
 * moment `pause` returns, no webhook of the region is sent. Deliveries wait as for a paused merchant (DeliveryStatus
 * `held`, durable re-checks, no attempt spent); releases go on. `resume` closes the pause and tells every held delivery
 * to re-check at once (`merchantResumed`), so the backlog drains at each merchant's rate instead of at the next
 * re-check.
 */
import { merchantResumedSignal } from '../contracts/messages.js';
import { DeliveryStatusKey } from '../contracts/search-attributes.js';
import { OperatorError } from '../errors.js';
import * as pauses from '../sql/send-pauses.js';
import type { OpsContext } from './operations.js';

/** Held deliveries signalled at once when sends resume (the server's own limits stay far away). */
const SIGNAL_CONCURRENCY = 20;

const HELD_QUERY = `${DeliveryStatusKey.name} = "held" AND ExecutionStatus = "Running"`;

export async function pauseSends(ctx: OpsContext, by: string, reason: string): Promise<pauses.SendPause> {
  const opened = await pauses.openSendPause(ctx.pool, by.trim(), reason.trim());
  if (!opened) {
    const [open] = await pauses.recentSendPauses(ctx.pool, 1);
    throw new OperatorError(
      'SendsAlreadyPaused',
      `sends in region ${ctx.region.region} are already paused${open ? ` (since ${open.pausedAt} by ${open.pausedBy}: ${open.reason})` : ''}`,
    );
  }
  return opened;
}

export async function resumeSends(
  ctx: OpsContext,
  by: string,
  reason: string,
): Promise<{ pause: pauses.SendPause; signalled: number }> {
  const pause = await pauses.closeSendPause(ctx.pool, by.trim(), reason.trim());
  if (!pause) throw new OperatorError('SendsNotPaused', `sends in region ${ctx.region.region} are not paused`);
  return { pause, signalled: await signalHeldDeliveries(ctx) };
}

export async function sendsStatus(
  ctx: OpsContext,
): Promise<{ paused: boolean; pauses: pauses.SendPause[]; held: number }> {
  const recent = await pauses.recentSendPauses(ctx.pool);
  const { count } = await ctx.client.workflow.count(HELD_QUERY);
  return { paused: recent[0]?.resumedAt === null, pauses: recent, held: count };
}

/**
 * `merchantResumed` to every running delivery that is held: each re-checks now (one still held by its own merchant's
 * pause just waits again). Best effort per workflow: one that ended meanwhile is skipped; a delivery not signalled
 * re-checks on its own within its back-off (at most 30 min).
 */
async function signalHeldDeliveries(ctx: OpsContext): Promise<number> {
  let signalled = 0;
  const inFlight = new Set<Promise<void>>();
  for await (const workflow of ctx.client.workflow.list({ query: HELD_QUERY })) {
    const sent = ctx.client.workflow
      .getHandle(workflow.workflowId, workflow.runId)
      .signal(merchantResumedSignal)
      .then(
        () => void signalled++,
        () => undefined,
      )
      .finally(() => inFlight.delete(sent));
    inFlight.add(sent);
    if (inFlight.size >= SIGNAL_CONCURRENCY) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  return signalled;
}
