/**
 * What the admin and merchant APIs refuse before anyone is identified (401: no token or key, or one that does not
 * verify; the merchant API's 429: a key past its budget) costs them a counter and a log line a minute, never a row:
 * anyone on the network can send those, as many as they like (docs/security.md#the-audit). Exported on the API's
 * metrics address.
 */
import type { CounterRegistry } from '../observability/prometheus-text.js';
import { sampledLog } from '../observability/sampled-log.js';

export interface Refusals {
  /** One refusal: counted by status and name, logged by sample. */
  refused(refusal: { status: number; error: string; method: string; path: string; requestId: string }): void;
}

export function apiRefusals(
  registry: CounterRegistry,
  api: 'admin' | 'merchant',
  region: string,
  write: (fields: Record<string, unknown>) => void,
): Refusals {
  const total = registry.counter(
    'hold_sweeper_api_requests_refused_total',
    'API calls refused before anyone was identified (401; the merchant API’s 429), by API, status and error: never stored',
    ['api', 'region', 'status', 'error'],
  );
  const log = sampledLog(write);
  return {
    refused({ status, error, method, path, requestId }) {
      total.inc({ api, region, status: String(status), error });
      // The path as far as it names a route: what a caller appends is theirs to choose, and a log is no place for it.
      log(`${status} ${error}`, {
        level: 'warn',
        msg: `${api} API call refused before identification (sampled)`,
        region,
        status,
        error,
        method,
        path: path.split('?')[0]!.slice(0, 120),
        requestId,
      });
    },
  };
}
