/**
 * Operator identities (`--by`, `approvedBy`, a request's requester) as the four-eyes rules compare them. Pure and
 * sandbox-safe. Until identities are verified tokens, they are text a person types: `alice`, ` Alice ` and `ａｌｉｃｅ`
 * (full width) must be one person, or anyone could approve their own request by changing case.
 */

import type { Region } from './regions.js';

/** The default audience of a region's admin API, and of the codec endpoint: each its own, so no token opens another. */
export const adminAudience = (region: Region): string => `hold-sweeper-admin-${region}`;
export const CODEC_AUDIENCE = 'hold-sweeper-codec';

/** The roles a token may carry (in every region, `operator`, or in one, `us:operator`): the verbs say which they need. */
export const ROLES = ['viewer', 'operator', 'approver', 'merchant-admin'] as const;
export type Role = (typeof ROLES)[number];

/** What `trim` removes: ASCII whitespace and the Unicode spaces NFKC does not already turn into U+0020. */
const SURROUNDING_SPACE =
  /^[ \t\n\v\f\r\u0085\u1680\u2028\u2029\ufeff]+|[ \t\n\v\f\r\u0085\u1680\u2028\u2029\ufeff]+$/g;

/**
 * The comparison key of an identity: Unicode NFKC, surrounding whitespace removed, lower case. The ledger's
 * `identity_key()` (src/db/migrations/001_baseline.sql) computes the same, so the database constraint and the CLI
 * agree.
 */
export function identityKey(who: string): string {
  return who.normalize('NFKC').replace(SURROUNDING_SPACE, '').toLowerCase();
}

/** Whether two identities are the same person by that key. */
export function samePerson(a: string, b: string): boolean {
  return identityKey(a) === identityKey(b);
}
