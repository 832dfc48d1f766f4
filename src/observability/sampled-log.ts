/**
 * A log line per kind at most once a period, with how many of that kind went unlogged since: for what anyone on the
 * internet can make a service say (refused callbacks and API calls), so a flood costs a line a minute, not a line each.
 */

/** One kind is logged at most this often, unless said. */
export const SAMPLED_LOG_EVERY_MS = 60_000;

export function sampledLog(
  write: (fields: Record<string, unknown>) => void,
  everyMs = SAMPLED_LOG_EVERY_MS,
  now: () => number = Date.now,
): (kind: string, fields: Record<string, unknown>) => void {
  const logged = new Map<string, { at: number; unlogged: number }>();
  return (kind, fields) => {
    const t = now();
    const last = logged.get(kind);
    if (last && t - last.at < everyMs) {
      last.unlogged++;
      return;
    }
    write({ ...fields, notLoggedSinceLast: last?.unlogged ?? 0 });
    logged.set(kind, { at: t, unlogged: 0 });
  };
}
