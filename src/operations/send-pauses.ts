/**
 * The region's big red button: `npm run ops -- sends pause|resume|status`. A pause is a row in the region's ledger
 * (src/sql/send-pauses.ts), read by every admission to a merchant's budget in the admission's own statement: from the
 * moment `pause` returns, no webhook of the region is sent. Deliveries wait as for a paused merchant (DeliveryStatus
 * `held`, durable re-checks, no attempt spent); releases go on. `resume` closes the pause and tells every held delivery
 * to re-check at once (`merchantResumed`), so the backlog drains at each merchant's rate instead of at the next
 * re-check.
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { merchantResumedSignal } from '../contracts/messages.js';
import { DeliveryStatusKey, MerchantIdKey } from '../contracts/search-attributes.js';
import { OperatorError } from '../errors.js';
import * as pauses from '../sql/send-pauses.js';
import type { OpsContext } from './operations.js';

/** Held deliveries signalled at once when sends resume (the server's own limits stay far away). */
const SIGNAL_CONCURRENCY = 20;
/** A signal the server did not take (a timeout, an overloaded frontend) is sent again, this often, this far apart. */
const SIGNAL_ATTEMPTS = 4;
const SIGNAL_RETRY_MS = [250, 1_000, 4_000] as const;

/** What `resume` told the held deliveries: each one listed is told, found ended, or named with why it was not told. */
interface HeldDeliveriesTold {
  signalled: number;
  /** Listed as held, ended before the signal (delivered or decided meanwhile): nothing to tell. */
  ended: number;
  /** Not told after every attempt; each re-checks on its own within its back-off (at most 30 min). */
  notSignalled: { workflowId: string; error: string }[];
}

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
): Promise<{ pause: pauses.SendPause } & HeldDeliveriesTold> {
  const pause = await pauses.closeSendPause(ctx.pool, by.trim(), reason.trim());
  if (!pause) throw new OperatorError('SendsNotPaused', `sends in region ${ctx.region.region} are not paused`);
  return { pause, ...(await signalHeldDeliveries(ctx.client)) };
}

export async function sendsStatus(
  ctx: OpsContext,
): Promise<{ paused: boolean; pauses: pauses.SendPause[]; held: number }> {
  const recent = await pauses.recentSendPauses(ctx.pool);
  const { count } = await ctx.client.workflow.count(HELD_QUERY);
  return { paused: recent[0]?.resumedAt === null, pauses: recent, held: count };
}

/**
 * `merchantResumed` to every running delivery that is held (of one merchant, if given): each re-checks now (one still held by its own merchant's
 * pause just waits again). Each is signalled by workflow id (its current run: one that continued as new since the list
 * is still told); a signal the server did not take is sent again, and one that ended meanwhile is counted, not an
 * error. None is skipped silently: what could not be told is named with why (it re-checks on its own within its
 * back-off, at most 30 min).
 */
export async function signalHeldDeliveries(client: Client, merchantId?: string): Promise<HeldDeliveriesTold> {
  const told: HeldDeliveriesTold = { signalled: 0, ended: 0, notSignalled: [] };
  const query =
    merchantId === undefined ? HELD_QUERY : `${HELD_QUERY} AND ${MerchantIdKey.name} = ${JSON.stringify(merchantId)}`;
  const tell = async (workflowId: string): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      try {
        await client.workflow.getHandle(workflowId).signal(merchantResumedSignal);
        told.signalled++;
        return;
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) {
          told.ended++;
          return;
        }
        if (attempt >= SIGNAL_ATTEMPTS) {
          told.notSignalled.push({ workflowId, error: err instanceof Error ? err.message : String(err) });
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, SIGNAL_RETRY_MS[attempt - 1]));
      }
    }
  };
  const inFlight = new Set<Promise<void>>();
  for await (const workflow of client.workflow.list({ query })) {
    const sent = tell(workflow.workflowId).finally(() => inFlight.delete(sent));
    inFlight.add(sent);
    if (inFlight.size >= SIGNAL_CONCURRENCY) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  return told;
}
