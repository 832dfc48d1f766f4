import type { Client } from '@temporalio/client';

/** Awaits a condition (for hooks, where expect.poll is not available): polls until true or fails loudly. */
export async function waitUntil(
  check: () => Promise<boolean>,
  what: string,
  timeoutMs = 60_000,
  intervalMs = 200,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Waits until each workflow runs; the run each one has. */
export async function onceRunning(client: Client, workflowIds: readonly string[]): Promise<Map<string, string>> {
  const runs = new Map<string, string>();
  for (const workflowId of workflowIds) {
    const handle = client.workflow.getHandle(workflowId);
    await waitUntil(
      () =>
        handle.describe().then(
          (d) => d.status.name === 'RUNNING',
          () => false,
        ),
      `${workflowId} running`,
    );
    runs.set(workflowId, (await handle.describe()).runId);
  }
  return runs;
}

/**
 * Terminates each workflow once they all run, as an operator would strand what they were driving; returns the run each
 * one had.
 */
export async function terminateOnceRunning(
  client: Client,
  workflowIds: readonly string[],
  why: string,
): Promise<Map<string, string>> {
  const runs = await onceRunning(client, workflowIds);
  for (const workflowId of workflowIds) await client.workflow.getHandle(workflowId).terminate(why);
  return runs;
}

/** `n` calls, `concurrency` at a time; how many got each status. */
export async function flood(
  n: number,
  concurrency: number,
  call: (i: number) => Promise<number>,
): Promise<Record<number, number>> {
  const statuses: Record<number, number> = {};
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < n; i = next++) {
        const status = await call(i);
        statuses[status] = (statuses[status] ?? 0) + 1;
      }
    }),
  );
  return statuses;
}
