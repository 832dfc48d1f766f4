/**
 * A service that starts while its database or Temporal restarts waits for them (up to 2 min) instead of dying, saying
 * so each second. What no wait fixes stops it at once, by its name: a connection its role may not use in production
 * (a superuser, the schema's owner: a ConfigError naming the variable) or a password the database refuses. A schema
 * behind the code is waited for: `npm run migrate` may be running.
 */
import type pg from 'pg';
import type { Mode, RegionConfig } from '../config.js';
import { readyLedger } from '../db/migrate.js';
import type { Service } from '../db/roles.js';
import { localKeyRing } from '../delivery/secret-box.js';
import { ConfigError } from '../errors.js';

const STARTUP_RETRY_MS = 120_000;

/** PostgreSQL's invalid_password: the URL's password is wrong now, and a minute will not change it. */
const LASTING_POSTGRES_CODES = new Set(['28P01']);

function isLastingRefusal(err: unknown): boolean {
  if (err instanceof ConfigError) return true;
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && LASTING_POSTGRES_CODES.has(code);
}

/** Past its wait: what was not reachable, for how long, and the last error (its `cause`). */
export class NotReachableError extends Error {
  override readonly name = 'NotReachableError';
}

export async function whenReachable<T>(
  what: string,
  attempt: () => Promise<T>,
  options: { warn: (message: string, error: string) => void; retryMs?: number; pauseMs?: number },
): Promise<T> {
  const { warn, retryMs = STARTUP_RETRY_MS, pauseMs = 1_000 } = options;
  const deadline = Date.now() + retryMs;
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      if (isLastingRefusal(err)) throw err;
      if (Date.now() + pauseMs > deadline)
        throw new NotReachableError(
          `${what} not reachable within ${Math.round(retryMs / 1000)} s: ${(err as Error).message}`,
          { cause: err },
        );
      warn(`${what} not reachable yet; retrying`, (err as Error).message);
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  }
}

/** `whenReachable` saying each retry on `log` as a warning. */
export const waitingOn =
  (log: { warn: (fields: object, message: string) => void }, retryMs?: number) =>
  <T>(what: string, attempt: () => Promise<T>) =>
    whenReachable(what, attempt, { warn: (message, error) => log.warn({ error }, message), retryMs });

/**
 * Waits for the region's ledger, then readies it for `service` (db/migrate.ts `readyLedger`): in production its role
 * checked and the schema current; in dev migrated, the region's merchant-secret ring read only then.
 */
export function ledgerReady(
  log: Parameters<typeof waitingOn>[0],
  pool: pg.Pool,
  mode: Mode,
  service: Service,
  region: Pick<RegionConfig, 'region' | 'secretKeys'>,
) {
  return waitingOn(log)('ledger database', () =>
    readyLedger(pool, {
      mode,
      service,
      variable: `DATABASE_URL_${region.region.toUpperCase()}`,
      secrets: () => ({ region: region.region, sealer: localKeyRing(region.secretKeys) }),
    }),
  );
}
