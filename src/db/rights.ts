/**
 * What each service's database role may do in the ledger, the one allowlist (docs/security.md#the-ledgers-rights):
 * `npm run migrate` (as the schema's owner, after every migration) revokes every privilege of every service role and
 * grants exactly this, in one transaction, so a new table is reachable by no role until it is listed here and a right
 * dropped here is gone at the next migrate. A role that does not exist is skipped (a development database, where
 * everything connects as one superuser). test/integration/ledger-roles.test.ts tries every verb on every column as
 * every role and compares what PostgreSQL allowed with this table.
 *
 * Column lists are what the service's SQL reads and writes (src/sql/*.ts, src/db/secrets-at-rest.ts). None is an owner
 * and none may create anything: DDL is the migrator's. None may delete or truncate ledger rows: the worker's leases are
 * its own, the receiver's refusals are its own, and the rest leaves only through the retention functions, which decide
 * what is old by the ledger's clock (RETENTION_CLOCK), never by a time a service wrote.
 */
import type pg from 'pg';
import { SERVICE_ROLES, type Service } from './roles.js';

type TableVerb = 'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE';
export const TABLE_VERBS: readonly TableVerb[] = ['SELECT', 'INSERT', 'UPDATE', 'DELETE'];
/** Every column of the table (a table-level grant, which covers columns added later), or these. */
type Columns = 'all' | readonly string[];
type TableRights = Readonly<Partial<Record<TableVerb, Columns>>>;

interface ServiceRights {
  tables: Readonly<Record<string, TableRights>>;
  /**
   * The SECURITY DEFINER functions it may call, as `name(argument types)`. They act with the owner's rights, so no
   * role calls one it is not given. Every other function of the schema runs with its caller's own rights and is
   * everyone's to call.
   */
  execute: readonly string[];
}

/**
 * The timestamps retention reads, written by the ledger's clock (defaults, and migration 005's triggers) and by no
 * role. An attempt's `started_at` is the one the worker writes, when it records the attempt: no role may change it
 * after, and an attempt recorded as old takes nothing with it when it leaves.
 */
export const RETENTION_CLOCK: Readonly<Record<string, readonly string[]>> = {
  webhook_deliveries: ['updated_at'],
  processor_events: ['applied_at'],
  ledger_reviews: ['resolved_at'],
  sweep_runs: ['finished_at'],
  outbox_reconciliations: ['finished_at'],
  api_audit: ['at'],
  endpoint_checks: ['requested_at'],
};

/** A column list as the SQL names it, separated by spaces. */
const columns = (names: string): readonly string[] => names.split(' ');

const PRUNE_EXPIRED = 'prune_expired(text, integer)';
const PRUNE_API_AUDIT = 'prune_api_audit(timestamp with time zone, text)';

const SEND_BUDGET_WRITES = {
  INSERT: columns('key paused_until pause_reason'),
  UPDATE: columns('tat gate_tat paused_until pause_reason'),
};

const AUDIT_ROW = columns('request_id subject roles verb method path target outcome status detail');

export const LEDGER_RIGHTS: Readonly<Record<Service, ServiceRights>> = {
  // Releases holds, writes and sends webhooks (it opens merchant secrets to sign), applies processor events, records
  // sweeps and reconciliations, reads what its gauges export, erases previous secrets past their overlap, disables a
  // merchant on 410 Gone, sends the endpoint checks merchants ask for (a new URL or a re-enabled endpoint takes
  // effect on their 2xx), runs the retention job. Never the receiver's refusals or the audit.
  worker: {
    tables: {
      accounts: { SELECT: 'all', UPDATE: columns('held_minor available_minor updated_at') },
      auth_holds: {
        SELECT: 'all',
        UPDATE: columns('state released_at ledger_entry_id reject_code rejected_at settled_at amount_minor event_seq'),
      },
      ledger_entries: {
        SELECT: 'all',
        INSERT: columns('idempotency_key kind account_id hold_id amount_minor currency processor_event_id'),
      },
      // Its own effects on a merchant: a 410 disables it, a previous secret past its overlap is erased, and the checks a
      // merchant asks for apply (a verified URL, a rotated secret).
      merchants: {
        SELECT: 'all',
        UPDATE: columns(
          'status disabled_reason disabled_at signing_secret signing_secret_id signing_secret_created_at previous_signing_secret previous_signing_secret_id previous_signing_secret_created_at previous_signing_secret_until endpoint_url updated_at',
        ),
      },
      // The merchants' checks of their endpoints: claimed, sent, and their result and effect written.
      endpoint_checks: { SELECT: 'all', UPDATE: columns('finished_at result applied') },
      destinations: { SELECT: 'all' },
      webhook_deliveries: {
        SELECT: 'all',
        INSERT: columns('webhook_id hold_id merchant_id event_type payload hold_ordinal status'),
        UPDATE: columns(
          'status attempt_count last_status_code last_error quarantine_reason delivered_at quarantined_at awaited_until',
        ),
      },
      delivery_attempts: {
        SELECT: 'all',
        INSERT: columns(
          'webhook_id attempt_number policy_run scheduled_at started_at duration_ms status_code error_class response_excerpt outcome next_retry_delay_ms retry_reason',
        ),
      },
      delivery_decisions: {
        SELECT: 'all',
        INSERT: columns('webhook_id policy_run decision decided_by reason ticket'),
      },
      replay_requests: { SELECT: 'all' },
      replay_request_items: { SELECT: 'all' },
      operator_decisions: { SELECT: 'all' },
      sweep_runs: {
        SELECT: 'all',
        INSERT: columns('sweep_id cutoff pages found started already_started rejected unreleased_at_end'),
        UPDATE: columns('unreleased_at_end'),
      },
      processor_events: {
        SELECT: 'all',
        UPDATE: columns('outcome outcome_detail ledger_entry_id webhook_id'),
      },
      processor_sequence_skips: { SELECT: 'all', INSERT: columns('hold_id sequence skipped_by reason') },
      processor_skip_requests: { SELECT: 'all' },
      ledger_reviews: { SELECT: 'all', INSERT: columns('event_id hold_id reason') },
      // Its leases on a merchant's requests in flight: taken at admission, given back when the attempt is recorded.
      merchant_requests_in_flight: {
        SELECT: 'all',
        INSERT: columns('webhook_id merchant_id expires_at attempt_number'),
        UPDATE: columns('expires_at attempt_number'),
        DELETE: 'all',
      },
      // Whether the region's sends are paused (every admission reads it; operators write it).
      send_pauses: { SELECT: 'all' },
      outbox_reconciliations: {
        SELECT: 'all',
        INSERT: columns('grace_ms checked running restarted unfixable details'),
      },
      // A resend is recorded by its workflow's first activity, with the row it reopens.
      webhook_resends: {
        SELECT: 'all',
        INSERT: columns(
          'id webhook_id policy_run from_status from_delivered_at requested_by reason ticket request_id approved_by workflow_id',
        ),
      },
      // Each merchant's (or shared destination's) budget: made by the first admission, written by every one.
      send_budgets: { SELECT: 'all', ...SEND_BUDGET_WRITES },
      // Merchants' resend requests: the reconciler starts them; a resend's first step checks the request and whether
      // its key was live. Never a key's secret hash.
      merchant_resend_requests: { SELECT: 'all', UPDATE: columns('started_at') },
      merchant_api_keys: { SELECT: columns('id merchant_id revoked_at') },
      schema_migrations: { SELECT: 'all' },
    },
    // The retention job (docs/data-retention.md).
    execute: [PRUNE_EXPIRED, PRUNE_API_AUDIT],
  },

  // Faces the internet. Records events and hands them over, writes and prunes its signed refusals, reads which
  // merchant a hold is for. Nothing of merchants (their secrets), accounts or the ledger.
  receiver: {
    tables: {
      processor_events: {
        SELECT: columns('event_id hold_id sequence body_sha256 dispatched_at received_at'),
        INSERT: columns('event_id hold_id sequence event_type amount_minor currency occurred_at body body_sha256'),
        UPDATE: columns('dispatched_at'),
      },
      processor_requests_refused: {
        SELECT: columns('id received_at'),
        INSERT: columns('status_code error_code message event_id body_excerpt'),
        DELETE: 'all',
      },
      auth_holds: { SELECT: columns('id merchant_id') },
      schema_migrations: { SELECT: 'all' },
    },
    execute: [],
  },

  // The operators' CLI and the admin API: reads everything it reports, manages merchants (their secrets included:
  // add, rotate, ping), records replay and skip requests and their approvals, resolves ledger reviews, appends the
  // admin API's audit. Decisions on a hold go through its workflow, so it writes no delivery, hold or ledger row.
  ops: {
    tables: {
      accounts: { SELECT: 'all' },
      auth_holds: { SELECT: 'all' },
      ledger_entries: { SELECT: 'all' },
      merchants: {
        SELECT: 'all',
        INSERT: columns('id name endpoint_url signing_secret rate_per_second burst delivery_policy destination_id'),
        UPDATE: columns(
          'name endpoint_url rate_per_second burst rate_ceiling burst_ceiling delivery_policy destination_id status disabled_reason disabled_at signing_secret signing_secret_id signing_secret_created_at previous_signing_secret previous_signing_secret_id previous_signing_secret_created_at previous_signing_secret_until updated_at',
        ),
      },
      destinations: {
        SELECT: 'all',
        INSERT: columns('id rate_per_second max_in_flight note'),
        UPDATE: columns('rate_per_second max_in_flight note updated_at'),
      },
      webhook_deliveries: { SELECT: 'all' },
      delivery_attempts: { SELECT: 'all' },
      delivery_decisions: { SELECT: 'all' },
      replay_requests: {
        SELECT: 'all',
        INSERT: columns('id requested_by filters item_count kind'),
        UPDATE: columns('status approved_by approved_at'),
      },
      replay_request_items: {
        SELECT: 'all',
        INSERT: columns('request_id webhook_id policy_run'),
        UPDATE: columns('outcome signalled_at'),
      },
      // A decision is recorded before it is sent, and keeps what the workflow answered; what it decides never changes.
      operator_decisions: {
        SELECT: 'all',
        INSERT: columns('decision_id webhook_id policy_run signal sent_by reason ticket outcome detail'),
        UPDATE: columns('outcome detail'),
      },
      sweep_runs: { SELECT: 'all' },
      processor_events: { SELECT: 'all' },
      processor_requests_refused: { SELECT: 'all' },
      processor_sequence_skips: { SELECT: 'all' },
      processor_skip_requests: {
        SELECT: 'all',
        INSERT: columns('id hold_id sequence requested_by reason'),
        UPDATE: columns('status approved_by approved_at'),
      },
      ledger_reviews: { SELECT: 'all', UPDATE: columns('resolved_by') },
      merchant_requests_in_flight: { SELECT: 'all' },
      send_pauses: {
        SELECT: 'all',
        INSERT: columns('paused_by reason'),
        UPDATE: columns('resumed_at resumed_by resume_reason'),
      },
      outbox_reconciliations: { SELECT: 'all' },
      webhook_resends: { SELECT: 'all' },
      // `merchant ping` takes a turn in the merchant's budget like a delivery (and a 429 pushes it back).
      send_budgets: { SELECT: 'all', ...SEND_BUDGET_WRITES },
      // Appended and read back; a call acting outside the ledger fills in the outcome of the row it wrote first
      // (`started`); rows past the audit's retention leave only through prune_api_audit, which records itself.
      api_audit: { SELECT: 'all', INSERT: AUDIT_ROW, UPDATE: columns('outcome status detail') },
      // Made and revoked by merchant admins: the secret's hash is written once, never read back.
      merchant_api_keys: {
        SELECT: columns(
          'id merchant_id label rate_per_second burst created_at created_by expires_at revoked_at revoked_by last_used_at',
        ),
        INSERT: columns('id merchant_id secret_sha256 label rate_per_second burst created_by expires_at'),
        UPDATE: columns('revoked_at revoked_by'),
      },
      merchant_resend_requests: { SELECT: 'all' },
      schema_migrations: { SELECT: 'all' },
    },
    execute: [PRUNE_API_AUDIT],
  },

  // Faces the internet, on behalf of merchants: reads a merchant's own webhooks and their attempts (every query names
  // the merchant its key belongs to), records the resends and endpoint checks (a rotation among them) they ask for,
  // reads its endpoint and sets the event types it takes, appends its audit. Of merchant secrets only their names and
  // dates; nothing of accounts, holds or the ledger.
  merchantApi: {
    tables: {
      merchant_api_keys: {
        SELECT: columns('id merchant_id secret_sha256 rate_per_second burst expires_at revoked_at last_used_at'),
        UPDATE: columns('last_used_at'),
      },
      // Its pace within its ceiling; its secrets by name and date, never their values; the previous one may be ended
      // early, never kept longer.
      merchants: {
        SELECT: columns(
          'id status endpoint_url rate_per_second burst rate_ceiling burst_ceiling disabled_reason disabled_at event_types signing_secret_id signing_secret_created_at previous_signing_secret_id previous_signing_secret_created_at previous_signing_secret_until',
        ),
        UPDATE: columns('event_types rate_per_second burst previous_signing_secret_until updated_at'),
      },
      webhook_deliveries: {
        SELECT: columns(
          'webhook_id hold_id merchant_id event_type payload status quarantine_reason attempt_count created_at updated_at delivered_at',
        ),
      },
      delivery_attempts: { SELECT: 'all' },
      webhook_resends: { SELECT: 'all' },
      merchant_resend_requests: { SELECT: 'all', INSERT: columns('id merchant_id webhook_id key_id resend_id') },
      // A check it gave up waiting for is ended so no worker sends it; a rotation's secret is dropped once read.
      endpoint_checks: {
        SELECT: 'all',
        INSERT: columns('id merchant_id key_id kind url reply_key overlap_ms'),
        UPDATE: columns('finished_at result applied'),
      },
      api_audit: { INSERT: AUDIT_ROW },
      schema_migrations: { SELECT: 'all' },
    },
    execute: [],
  },
};

/**
 * Whether `service` may `verb` `table`'s `column` by the table above (DELETE is the table's: any column answers).
 */
export function allows(service: Service, table: string, verb: TableVerb, column: string): boolean {
  const columns = LEDGER_RIGHTS[service].tables[table]?.[verb];
  return columns === 'all' || (columns !== undefined && (verb === 'DELETE' || columns.includes(column)));
}

const SERVICES = Object.keys(LEDGER_RIGHTS) as Service[];

/**
 * The statements that make the roles in `roles` (service → role name, only those that exist) have exactly the table
 * above: every right they hold revoked, then the table's granted; the SECURITY DEFINER functions taken from PUBLIC
 * and given to the roles listed; no temporary tables in the database and no objects in its schema but the owner's.
 */
export function grantStatements(roles: Partial<Record<Service, string>>): string[] {
  const present = SERVICES.filter((s) => roles[s]).map((s) => [s, roles[s]!] as const);
  const names = present.map(([, role]) => role);
  const statements: string[] = [];
  for (const [, role] of present)
    for (const kind of ['TABLES', 'SEQUENCES', 'FUNCTIONS'])
      statements.push(`REVOKE ALL ON ALL ${kind} IN SCHEMA public FROM ${role}`);
  statements.push(
    `DO $definers$
     DECLARE f regprocedure;
     BEGIN
       FOR f IN SELECT p.oid::regprocedure FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.prosecdef
       LOOP
         EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
       END LOOP;
     END
     $definers$`,
    `DO $database$ BEGIN EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM ${['PUBLIC', ...names].join(', ')}', current_database()); END $database$`,
    `REVOKE CREATE ON SCHEMA public FROM ${['PUBLIC', ...names].join(', ')}`,
  );
  for (const [service, role] of present) {
    const { tables, execute } = LEDGER_RIGHTS[service];
    for (const [table, rights] of Object.entries(tables))
      for (const verb of TABLE_VERBS) {
        const columns = rights[verb];
        if (columns === undefined) continue;
        const list = columns === 'all' ? '' : ` (${columns.join(', ')})`;
        statements.push(`GRANT ${verb}${list} ON ${table} TO ${role}`);
      }
    for (const fn of execute) statements.push(`GRANT EXECUTE ON FUNCTION ${fn} TO ${role}`);
  }
  return statements;
}

/**
 * Grants each service role what LEDGER_RIGHTS says, revoking the rest, in one transaction; roles that do not exist are
 * skipped.
 */
export async function applyGrants(client: pg.PoolClient): Promise<void> {
  const { rows } = await client.query<{ rolname: string }>(
    'SELECT rolname FROM pg_roles WHERE rolname = ANY($1::text[])',
    [Object.values(SERVICE_ROLES)],
  );
  const existing = new Set(rows.map((r) => r.rolname));
  const roles = Object.fromEntries(
    Object.entries(SERVICE_ROLES).filter(([service, role]) => service !== 'migrator' && existing.has(role)),
  ) as Partial<Record<Service, string>>;
  await client.query('BEGIN');
  try {
    await client.query(grantStatements(roles).join(';\n'));
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  }
}
