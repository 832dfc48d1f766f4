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
 * It waits for each ledger to accept connections, for at most `--wait-for-database <duration>` (default 60s; 0 does
 * not wait): run right after the database's container starts, it meets a server still initialising or restarting.
 *
 * Exit codes: 0 done (or nothing to do), 2 a configuration error, 1 a migration failed (nothing of it applied) or a
 * ledger did not accept connections in time.
 */
import '../node-version.js';
import { ENTRY_POINTS, loadConfig, requireExplicitMode } from '../config.js';
import { durationMs } from '../config-schema.js';
import { migrate } from '../db/migrate.js';
import { createPool, waitForDatabase } from '../db/pool.js';
import { localKeyRing } from '../delivery/secret-box.js';
import { ConfigError } from '../errors.js';
import { exitOnFatal, nameProcess } from '../observability/logger.js';
import { devCacheDir, readDevStackFile } from '../dev-stack.js';

const log = nameProcess('migrate');

/** How long it waits for a ledger to accept connections unless `--wait-for-database` says otherwise. */
const DEFAULT_DATABASE_WAIT = '60s';

/** `--wait-for-database <duration>` (or `=<duration>`) in `args`, in ms; `0` does not wait. */
function databaseWaitMs(args: readonly string[]): number {
  const at = args.findIndex((a) => a === '--wait-for-database' || a.startsWith('--wait-for-database='));
  const raw = at < 0 ? DEFAULT_DATABASE_WAIT : args[at]!.includes('=') ? args[at]!.split('=')[1]! : args[at + 1];
  const ms = raw === '0' ? 0 : durationMs(raw ?? '');
  if (ms === undefined)
    throw new ConfigError('--wait-for-database', raw, 'a duration such as 30s, 2m or 0 (do not wait)');
  return ms;
}

async function main(): Promise<number> {
  requireExplicitMode();
  // It opens no Temporal connection and holds no payload key; the ledger is all it touches.
  const config = loadConfig(process.env, ENTRY_POINTS.migrate);
  log.level = config.observability.logLevel.toLowerCase();
  const waitMs = databaseWaitMs(process.argv.slice(2));
  const devStack = config.mode === 'dev' ? await readDevStackFile(devCacheDir()) : undefined;
  for (const region of config.regions) {
    const up = region.region.toUpperCase();
    const databaseUrl = region.databaseUrl ?? devStack?.databaseUrl[region.region];
    if (!databaseUrl)
      throw new ConfigError(
        `DATABASE_URL_${up}`,
        undefined,
        'a postgres:// URL of the schema owner (hold_sweeper_migrator)',
      );
    const pool = createPool(databaseUrl, { max: 1 });
    try {
      await waitForDatabase(pool, {
        timeoutMs: waitMs,
        what: `the ${region.region} ledger`,
        onRetry: (err, attempt) =>
          log.info(
            { region: region.region, attempt, error: err.message },
            'waiting for the ledger to accept connections',
          ),
      });
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

main().then(
  (code) => process.exit(code),
  (err: unknown) => exitOnFatal(err, err instanceof ConfigError ? 2 : 1),
);
