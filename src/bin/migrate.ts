/**
 * `npm run migrate`: the ledger's schema, brought to this release's, for each configured region, as the schema's
 * owner (hold_sweeper_migrator), before the release's services start: the SQL migrations, the merchant secrets sealed
 * with the region's current key (MERCHANT_SECRET_KEYS_<R>), every service role's privileges (src/db/rights.ts).
 * Production services never migrate: they check the schema is current and refuse to start otherwise.
 *
 *   HOLD_SWEEPER_MODE=production HOLD_SWEEPER_REGIONS=us
 *   DATABASE_URL_US=postgres://hold_sweeper_migrator:...@.../hold_sweeper_us \
 *   MERCHANT_SECRET_KEYS_US=k1:<base64> npm run migrate            (in the image: node dist/bin/migrate.js)
 *
 * It waits for each ledger to accept connections, for at most `--wait-for-database <duration>` (default 60s), as
 * every service does at its start (src/workers/startup.ts): run right after the database's container starts, it meets a server still initialising or restarting.
 *
 * Exit codes: 0 done (or nothing to do), 2 a configuration error, 1 a migration failed (nothing of it applied) or a
 * ledger did not accept connections in time.
 */
import '../node-version.js';
import { parseArgs } from 'node:util';
import { ENTRY_POINTS, loadConfig, parseDuration, requireExplicitMode } from '../config.js';
import { migrate } from '../db/migrate.js';
import { createPool } from '../db/pool.js';
import { localKeyRing } from '../delivery/secret-box.js';
import { ConfigError } from '../errors.js';
import { exitWith, nameProcess } from '../observability/logger.js';
import { addressesIn } from '../dev-stack.js';
import { waitingOn } from '../workers/startup.js';

const log = nameProcess('migrate');

/** How long it waits for a ledger to accept connections unless `--wait-for-database` says otherwise. */
const DEFAULT_DATABASE_WAIT = '60s';

async function main(): Promise<number> {
  requireExplicitMode();
  // It opens no Temporal connection and holds no payload key; the ledger is all it touches.
  const config = loadConfig(process.env, ENTRY_POINTS.migrate);
  log.level = config.observability.logLevel.toLowerCase();
  const { values } = parseArgs({ options: { 'wait-for-database': { type: 'string' } } });
  const whenReachable = waitingOn(
    log,
    parseDuration('--wait-for-database', values['wait-for-database'] ?? DEFAULT_DATABASE_WAIT),
  );
  const addresses = await addressesIn(config.mode);
  for (const region of config.regions) {
    const up = region.region.toUpperCase();
    const { databaseUrl } = addresses(region);
    if (!databaseUrl)
      throw new ConfigError(
        `DATABASE_URL_${up}`,
        undefined,
        'a postgres:// URL of the schema owner (hold_sweeper_migrator)',
      );
    const pool = createPool(databaseUrl, { max: 1 });
    try {
      await whenReachable(`the ${region.region} ledger`, () => pool.query('SELECT 1'));
      if (config.mode === 'production') {
        const { rows } = await pool.query<{ superuser: boolean }>(
          'SELECT rolsuper AS superuser FROM pg_roles WHERE rolname = current_user',
        );
        if (rows[0]?.superuser) {
          throw new ConfigError(
            `DATABASE_URL_${up}`,
            '(redacted: a superuser)',
            'the schema owner, hold_sweeper_migrator, which is no superuser',
          );
        }
      }
      const applied = await migrate(pool, { region: region.region, sealer: localKeyRing(region.secretKeys) });
      log.info({ region: region.region, applied }, 'ledger migrated');
    } finally {
      await pool.end();
    }
  }
  return 0;
}

exitWith(main());
