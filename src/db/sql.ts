/**
 * A timestamp column as microsecond ISO-8601 in UTC: Postgres precision survives the trip through Temporal and
 * back, so keyset cursors and workflow ids built from an expiry are exact.
 */
export const isoUtc = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
