/**
 * Webhook bodies checked against the event-type catalog (src/delivery/event-types.ts): each must be JSON of a type
 * the catalog lists and parse with its schema to exactly itself, so a key the catalog does not name (which parsing
 * would drop) is a mismatch too.
 */
import { isDeepStrictEqual } from 'node:util';
import { EVENT_TYPES } from '../../src/delivery/event-types.js';

/** Why each body in `bodies` is not what the catalog says of its type; empty when every one is. */
export function catalogMismatches(bodies: readonly string[]): string[] {
  return bodies.flatMap((body) => {
    const payload = JSON.parse(body) as { type?: unknown };
    const entry = EVENT_TYPES.find((e) => e.type === payload.type);
    if (!entry) return [`no catalog entry for type ${String(payload.type)}: ${body}`];
    const parsed = entry.schema.safeParse(payload);
    if (!parsed.success) return [`${entry.type}: ${parsed.error.message} in ${body}`];
    return isDeepStrictEqual(parsed.data, payload) ? [] : [`${entry.type}: keys the catalog does not name in ${body}`];
  });
}
