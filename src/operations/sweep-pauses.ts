/**
 * Discovery's lever: `npm run ops -- sweeps pause|resume|status`. The region's sweep schedule is paused with a note
 * that names who and why (Temporal keeps it with the schedule: the Web UI and `temporal schedule describe` show it, and
 * a worker's start-up keeps it), so no sweep starts and no newly expired hold is picked up, while everything already
 * started goes on: releases, deliveries, decisions. `sweep-now` is refused while paused. Resume unpauses it; the next
 * sweep starts at the next interval, or at once with `sweep-now`. Sends have their own lever
 * (src/operations/send-pauses.ts).
 */
import { OperatorError } from '../errors.js';
import { sweepNow } from '../schedules.js';
import type { OpsContext } from './operations.js';

interface SweepsState {
  paused: boolean;
  /** The schedule's note: `paused by <who>: <why>` while paused, `resumed by <who>: <why>` after. */
  note: string;
  /** When the schedule starts the next sweeps (none while paused). */
  nextSweeps: string[];
  /** The last sweeps it started, newest first. */
  recentSweeps: { workflowId: string; startedAt: string }[];
}

export async function sweepsStatus(ctx: OpsContext): Promise<SweepsState> {
  const { state, info } = await ctx.client.schedule.getHandle(ctx.region.scheduleId).describe();
  return {
    paused: state.paused,
    note: state.note ?? '',
    nextSweeps: state.paused ? [] : info.nextActionTimes.slice(0, 3).map((t) => t.toISOString()),
    recentSweeps: info.recentActions
      .slice(-5)
      .reverse()
      .map((a) => ({ workflowId: a.action.workflow.workflowId, startedAt: a.takenAt.toISOString() })),
  };
}

export async function pauseSweeps(ctx: OpsContext, by: string, reason: string): Promise<SweepsState> {
  const before = await sweepsStatus(ctx);
  if (before.paused)
    throw new OperatorError('SweepsAlreadyPaused', `sweeps in region ${ctx.region.region} are already ${before.note}`);
  await ctx.client.schedule.getHandle(ctx.region.scheduleId).pause(`paused by ${by.trim()}: ${reason.trim()}`);
  return sweepsStatus(ctx);
}

export async function resumeSweeps(ctx: OpsContext, by: string, reason: string): Promise<SweepsState> {
  const before = await sweepsStatus(ctx);
  if (!before.paused)
    throw new OperatorError('SweepsNotPaused', `sweeps in region ${ctx.region.region} are not paused`);
  await ctx.client.schedule.getHandle(ctx.region.scheduleId).unpause(`resumed by ${by.trim()}: ${reason.trim()}`);
  return sweepsStatus(ctx);
}

/** "Sweep now", refused while an operator has paused the region's sweeps: a pause of intake holds for every start. */
export async function sweepNowUnlessPaused(ctx: OpsContext): Promise<{ workflowId: string }> {
  const { paused, note } = await sweepsStatus(ctx);
  if (paused)
    throw new OperatorError('SweepsPaused', `sweeps in region ${ctx.region.region} are ${note}: resume them first`);
  return { workflowId: await sweepNow(ctx.client, ctx.region) };
}
