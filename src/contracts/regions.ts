/** Data-residency regions. Each has its own ledger database, Temporal namespace, task queue and schedule. */
export const REGIONS = ['us', 'eu'] as const;
export type Region = (typeof REGIONS)[number];

export function isRegion(value: unknown): value is Region {
  return typeof value === 'string' && (REGIONS as readonly string[]).includes(value);
}
