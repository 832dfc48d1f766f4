/**
 * One database role per service (docs/security.md#one-role-per-service): the migrator owns the schema and is the
 * only one that changes it (`npm run migrate`); the worker, the receiver and the operators' CLI each connect as their
 * own role with only what they use (./rights.ts, applied by every migrate). In production a service refuses to
 * start on a connection that could do more: a superuser, or the schema's owner. It does not migrate either: it checks
 * the schema is the one its code expects, and says to run `npm run migrate` when it is not.
 */
import type pg from 'pg';
import { ConfigError } from '../errors.js';

export const SERVICE_ROLES = {
  migrator: 'hold_sweeper_migrator',
  worker: 'hold_sweeper_worker',
  receiver: 'hold_sweeper_receiver',
  ops: 'hold_sweeper_ops',
  merchantApi: 'hold_sweeper_merchant_api',
} as const;
export type Service = Exclude<keyof typeof SERVICE_ROLES, 'migrator'>;

/** The ledger's schema is older than this code: `npm run migrate` has not run for this release. */
export class SchemaBehind extends Error {
  override readonly name = 'SchemaBehind';
  constructor(
    readonly applied: number,
    readonly expected: number,
  ) {
    super(
      `the ledger's schema is at migration ${applied}, this release needs ${expected}: run \`npm run migrate\` (as ${SERVICE_ROLES.migrator}) first`,
    );
  }
}

/**
 * A production service's connection, checked before it does anything: not a superuser, not the owner of any table
 * (the migrator), and the schema at `expectedVersion` or later (a newer schema is the next release's, migrated
 * before its rollout: this release's code still runs on it). `variable` names the URL in errors.
 */
export async function checkServiceConnection(
  pool: pg.Pool,
  service: Service,
  variable: string,
  expectedVersion: number,
): Promise<void> {
  const { rows } = await pool.query<{ role: string; superuser: boolean; owns: boolean; migrated: boolean }>(
    `SELECT current_user AS role, r.rolsuper AS superuser,
            EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = 'public' AND tableowner = current_user) AS owns,
            to_regclass('public.schema_migrations') IS NOT NULL AS migrated
       FROM pg_roles r WHERE r.rolname = current_user`,
  );
  const row = rows[0]!;
  const version = row.migrated
    ? ((await pool.query<{ version: number | null }>('SELECT max(version) AS version FROM schema_migrations')).rows[0]!
        .version ?? 0)
    : 0;
  const expected = `a role of its own without ownership or superuser rights (${SERVICE_ROLES[service]}; docs/security.md#one-role-per-service)`;
  if (row.superuser) throw new ConfigError(variable, `(redacted: connects as ${row.role}, a superuser)`, expected);
  if (row.owns)
    throw new ConfigError(variable, `(redacted: connects as ${row.role}, which owns the schema's tables)`, expected);
  if (version < expectedVersion) throw new SchemaBehind(version, expectedVersion);
}
