/**
 * The operator CLI: `npm run ops -- <command> [options]`. See HELP below, or `npm run ops -- --help`.
 * Each command calls one verb of src/operations/admin-verbs.ts: through the region's admin API when one is configured
 * (admin-client.ts: a token, nothing else), or itself against the region's ledger and Temporal namespace as
 * configured (.env.example); in dev, with nothing configured, the stack a running `npm start` advertises. Either way
 * the same answer prints the same.
 */
import { parseArgs } from 'node:util';
import { Client } from '@temporalio/client';
import { dataConverterFor } from '../codec/encryption-codec.js';
import type pg from 'pg';
import { loadConfig, parseDuration, requireExplicitMode, type Config, type RegionConfig } from '../config.js';
import { latestMigrationVersion } from '../db/migrate.js';
import { createPool } from '../db/pool.js';
import { checkServiceConnection } from '../db/roles.js';
import { localKeyRing } from '../delivery/secret-box.js';
import { DELIVERY_STATUSES, type DeliveryStatus } from '../contracts/delivery.js';
import { QUARANTINE_REASONS, type QuarantineReason } from '../contracts/failures.js';
import { ConfigError } from '../errors.js';
import { devCacheDir, readDevStackFile } from '../dev-stack.js';
import { isRegion, type Region } from '../contracts/regions.js';
import { connectClient, PLAINTEXT } from '../temporal-connection.js';
import { verbById, type AdminContext, type VerbInput } from '../operations/admin-verbs.js';
import { InvalidEndpointUrl } from '../delivery/endpoint.js';
import { InvalidDeliveryPolicyError } from '../delivery/policy.js';
import { MissingSigningSecret } from '../delivery/standard-webhooks.js';
import { InvalidMerchantSetting, OperatorError } from '../errors.js';
import { AdminApiError, adminApiFromEnv, AdminApiUnreachable, type Verbs } from './admin-client.js';
import type { MerchantView } from '../operations/merchants.js';
import type { HeldDeliveriesTold } from '../operations/send-pauses.js';
import type { SweepsState } from '../operations/sweep-pauses.js';

const HELP = `hold-sweeper operator commands

Usage: npm run ops -- <command> [options]

  sweep-now                          trigger the region's sweep now (a running sweep is not doubled; refused while
                                     sweeps are paused)
  sweeps pause --by NAME --reason TEXT
                                     stop discovery: the region's sweep schedule paused (no newly expired hold is
                                     picked up); what started goes on: releases, deliveries
  sweeps resume --by NAME --reason TEXT
                                     sweep again at the next interval (or at once: sweep-now)
  sweeps status                      paused or not, by whom and why, the next and the last sweeps
  status <hold id>                   ledger, webhook, attempt log, decisions and "why is it waiting?"
  quarantine list                    quarantined webhooks            [--merchant] [--since] [--until] [--reason]
  webhooks list --status S           webhooks in one status (pending, quarantined, delivered, discarded, abandoned),
                                     oldest first                    [--merchant] [--since] [--until] [--limit 20]
  replay preview --requested-by NAME freeze the matching quarantined webhooks into a replay request
                                     [--merchant] [--since] [--until] [--reason] [--hold ID] [--webhook ID]
                                     [--limit N: only the oldest N, a canary (docs/runbook.md#a-canary-replay)]
  replay approve <request id> --by NAME [--ticket T] [--rate 20] [--record-only]
                                     replay exactly the frozen set (not by the requester), paced; run again by
                                     the same approver, it resumes an interrupted one (each item decided once);
                                     --record-only: approve, and print the temporal CLI batch signal instead
  approve <hold id | webhook id> --by NAME --reason TEXT [--ticket T]
                                     replay one quarantined webhook (a hold id: its release's; wh_...: any);
                                     production (four eyes): refused, use replay preview --webhook, then replay approve
  discard <hold id | webhook id> --by NAME --reason TEXT [--record-only]
                                     end one quarantined webhook without sending it; --record-only: record the
                                     decision and print the temporal CLI command that carries it
  resend <webhook id> --by NAME --reason TEXT [--ticket T]
                                     send a delivered, discarded or abandoned webhook again: same webhook id and
                                     payload, a fresh signature, the replay lane; production (four eyes): refused,
                                     use resend preview --webhook, then resend approve
  resend preview --requested-by NAME [--merchant] [--since] [--until] [--webhook ID]
                                     freeze the matching webhooks at an end (written in [since, until)) into a
                                     resend request
  resend approve <request id> --by NAME [--ticket T] [--rate 20]
                                     resend exactly the frozen set (not by the requester), paced; resumable

  merchant add <id> --name NAME --url URL [--rate 5] [--burst 1] [--policy JSON] [--destination D]
                                     add a merchant; prints its new signing secret, once
  merchant show <id>                 its endpoint, limits, status, policy and budget (secrets: only whether set)
  merchant set <id> [--name] [--url] [--rate] [--burst] [--policy JSON] [--destination D|none]
                                     change what is given, checked as delivery will read it; --destination: share
                                     the budget of a declared destination (none: its own again)
  destination set <id> --rate R [--max-in-flight N] [--note TEXT]
                                     declare a destination several merchants share (a platform receiving for its
                                     merchants), with the rate it publishes for all of them; or change it
  destination show <id>              its rate, its cap on requests in flight, the merchants sharing it
  merchant pause <id> --reason TEXT  stop sending; its webhooks wait, held, until resumed
  merchant resume <id>               send again (also after a 410 Gone disabled it)
  merchant rotate-secret <id> [--overlap 24h]
                                     a new secret (printed once); the old one also signs until the overlap ends
  merchant ping <id>                 one signed merchant.ping, in the merchant's rate budget; shows the answer
  merchant api-key create <id> --by NAME [--label L] [--rate 5] [--burst 10]
                                     a key for the merchant API (printed once; stored hashed)
  merchant api-key revoke <key id> --by NAME
                                     refuse it from now on
  merchant api-keys <id>             the merchant's keys: label, budget, made and revoked by whom, last used

  events show <hold id>              the processor's events for a hold: sequence, outcome, webhook; skips; its workflow
  events skip <hold id> --sequence N --by NAME --reason TEXT
                                     a hold stopped at a gap: apply what follows without the missing event;
                                     production (four eyes): records a skip request for someone else to approve
  events approve-skip <request id> --by NAME
                                     approve a skip request (not by its requester) and carry it out
  events redeliver <webhook id>      a new delivery run for an event's webhook whose workflow ended without finishing it
                                     (terminated, timed out): still pending, nothing delivering it
  events refused [--since T]         signed requests the receiver refused (4xx), newest first; unsigned ones
                                     are only counted (hold_sweeper_processor_requests_refused_total)
  sends pause --by NAME --reason TEXT
                                     stop every send of the region (the big red button): deliveries wait, held,
                                     no attempt spent; releases go on
  sends resume --by NAME --reason TEXT
                                     send again; every held delivery re-checks at once
  sends status                       paused or not, by whom and why, and the last pauses
  reviews list [--all]               ledger entries flagged for a human (late captures, events that could not apply)
  reviews resolve <event id> --by NAME
                                     close one
  audit [--since T] [--subject S] [--limit 50]
                                     the admin API's audit: every call, by whom (verified), what it did, newest first

Through the admin API (HOLD_SWEEPER_API_URL_<REGION> and HOLD_SWEEPER_API_TOKEN or HOLD_SWEEPER_API_TOKEN_FILE set):
no database URL or key on this machine, and --by / --requested-by are not given: who acts is the token's subject.
Without them the commands run here, against the region's ledger and Temporal (dev, break-glass).
Options: --region us|eu (required when several are configured), --json (machine-readable output), --help
HOLD_SWEEPER_MODE must be set: production (four eyes, the SSRF guard) or dev (a local stack, said explicitly).
Identities (--by, --requested-by) are compared case- and width-insensitively: "Alice" and "alice" are one person.
Policy overrides: e.g. --policy '{"retryHorizonMs": 86400000}' (keys in docs/webhooks.md). Durations: 30s, 15m, 24h, 7d.
Reasons: rejected, exhausted, endpoint_gone, bad_url, missing_secret, invalid_policy. Times: ISO 8601.`;

/**
 * The help of one command (`status --help`, `merchant add --help`): its entries of HELP (a line that starts with it,
 * and the lines that continue it), then the options every command takes. A sub-command that names no entry falls back
 * to the command's.
 */
function helpFor(command: string, sub: string | undefined): string {
  const [title, , ...rest] = HELP.split('\n\n');
  const footer = rest.at(-1)!;
  const entries = rest.slice(0, -1).flatMap((block) => block.split('\n'));
  const pick = (prefix: string) => {
    const picked: string[] = [];
    let inside = false;
    for (const line of entries) {
      // An entry starts two spaces in; the lines that continue it, further in.
      if (/^ {2}\S/.test(line)) inside = `${line.slice(2)} `.startsWith(`${prefix} `);
      if (inside) picked.push(line);
    }
    return picked;
  };
  const named = sub === undefined ? [] : pick(`${command} ${sub}`);
  const usage = `Usage: npm run ops -- ${named.length > 0 ? `${command} ${sub}` : command} [options]`;
  return [title, '', usage, '', ...(named.length > 0 ? named : pick(command)), '', footer].join('\n');
}

function required(value: string | undefined, option: string): string {
  if (!value) throw new ConfigError(`--${option}`, undefined, 'a value (see --help)');
  return value;
}

function isoOption(value: string | undefined, option: string): string | undefined {
  if (value === undefined) return undefined;
  if (Number.isNaN(Date.parse(value)))
    throw new ConfigError(`--${option}`, value, 'an ISO 8601 time, e.g. 2026-11-30T00:00:00Z');
  return value;
}

/** The selection options of `quarantine list` and `replay preview`, checked. */
function filtersFrom(values: Values): VerbInput {
  const reason = values.reason as string | undefined;
  if (reason !== undefined && !QUARANTINE_REASONS.includes(reason as QuarantineReason)) {
    throw new ConfigError('--reason', reason, QUARANTINE_REASONS.join(', '));
  }
  return { ...resendFiltersFrom(values), hold: values.hold as string | undefined, reason };
}

/** The selection options of `resend preview` and `webhooks list`, checked. */
function resendFiltersFrom(values: Values): VerbInput {
  return {
    merchant: values.merchant as string | undefined,
    webhook: values.webhook as string | undefined,
    since: isoOption(values.since as string | undefined, 'since'),
    until: isoOption(values.until as string | undefined, 'until'),
  };
}

/** The region the command is for, and where its ledger and Temporal are (configured, or a running `npm start`'s). */
async function regionFor(config: Config, regionOption: string | undefined) {
  let region: Region;
  if (regionOption !== undefined) {
    if (!isRegion(regionOption) || !config.regions.some((r) => r.region === regionOption)) {
      throw new ConfigError(
        '--region',
        regionOption,
        `one of the configured regions: ${config.regions.map((r) => r.region).join(', ')}`,
      );
    }
    region = regionOption;
  } else if (config.regions.length === 1) {
    region = config.regions[0]!.region;
  } else {
    throw new ConfigError('--region', undefined, `one of ${config.regions.map((r) => r.region).join(', ')}`);
  }
  const regionConfig = config.regions.find((r) => r.region === region)!;
  const stack = config.mode === 'dev' ? await readDevStackFile(devCacheDir()) : undefined;
  const up = region.toUpperCase();
  const databaseUrl = regionConfig.databaseUrl ?? stack?.databaseUrl[region];
  if (!databaseUrl)
    throw new ConfigError(`DATABASE_URL_${up}`, undefined, 'a postgres:// URL (or a running `npm start`)');
  return { regionConfig, databaseUrl, address: regionConfig.temporalAddress ?? stack?.temporalAddress[region] };
}

/**
 * The CLI's pool on the region's ledger. In production its connection is checked first (its own role, not a superuser
 * nor the schema's owner; the schema current): an operator's URL that could do more is refused, not used.
 */
async function ledgerPool(config: Config, region: RegionConfig, databaseUrl: string, max: number): Promise<pg.Pool> {
  const pool = createPool(databaseUrl, { max });
  if (config.mode === 'production') {
    try {
      await checkServiceConnection(
        pool,
        'ops',
        `DATABASE_URL_${region.region.toUpperCase()}`,
        await latestMigrationVersion(),
      );
    } catch (err) {
      await pool.end();
      throw err;
    }
  }
  return pool;
}

/**
 * The verbs run here, against the region's ledger and Temporal (no admin API configured: dev, or break-glass). Temporal
 * is connected only for a verb that needs it; the payload and merchant-secret keys are this machine's configuration.
 */
async function localVerbs(config: Config, regionOption: string | undefined): Promise<Verbs> {
  const { regionConfig, databaseUrl, address } = await regionFor(config, regionOption);
  const pool = await ledgerPool(config, regionConfig, databaseUrl, 4);
  let connection: Awaited<ReturnType<typeof connectClient>> | undefined;
  const region = { ...regionConfig, databaseUrl, temporalAddress: address };
  const context: AdminContext = {
    region,
    pool,
    fourEyes: config.decisions.fourEyes,
    webhooks: config.webhooks,
    // The same key ring as the region's workers (MERCHANT_SECRET_KEYS_<R>): what `add` and `rotate-secret` seal, they
    // open.
    secrets: { region: regionConfig.region, sealer: localKeyRing(regionConfig.secretKeys) },
  };
  return {
    region: regionConfig.region,
    remote: false,
    async call(verbId, input) {
      const verb = verbById(verbId);
      if (verb.temporal && !context.client) {
        if (!address)
          throw new ConfigError(
            `TEMPORAL_ADDRESS_${regionConfig.region.toUpperCase()}`,
            undefined,
            'host:port (or a running `npm start`)',
          );
        connection = await connectClient(regionConfig.temporal ?? PLAINTEXT, address);
        context.client = new Client({
          connection,
          namespace: regionConfig.namespace,
          dataConverter: dataConverterFor(regionConfig),
        });
      }
      return verb.run(context, input);
    },
    async close() {
      await pool.end();
      await connection?.close();
    },
  };
}

function table(rows: Record<string, unknown>[]): string {
  if (rows.length === 0) return '(none)';
  const columns = Object.keys(rows[0]!);
  const cell = (v: unknown) => (v instanceof Date ? v.toISOString() : v === null || v === undefined ? '' : String(v));
  const widths = columns.map((c) => Math.min(60, Math.max(c.length, ...rows.map((r) => cell(r[c]).length))));
  const line = (values: string[]) => values.map((v, i) => v.slice(0, widths[i]).padEnd(widths[i]!)).join('  ');
  return [
    line(columns),
    line(widths.map((w) => '-'.repeat(w))),
    ...rows.map((r) => line(columns.map((c) => cell(r[c])))),
  ].join('\n');
}

/** The command line, parsed; what node's parser refuses (an unknown option, `--rate -5`) is a ConfigError naming it. */
function parseCommandLine(argv: string[]) {
  try {
    return parseCommandLineStrictly(argv);
  } catch (err) {
    if (!String((err as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS')) throw err;
    const why = (err as Error).message.split('\n').join(' ');
    throw new ConfigError('arguments', argv.join(' '), `options as --help lists them (${why})`);
  }
}

function parseCommandLineStrictly(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      region: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
      merchant: { type: 'string' },
      hold: { type: 'string' },
      webhook: { type: 'string' },
      since: { type: 'string' },
      until: { type: 'string' },
      reason: { type: 'string' },
      'requested-by': { type: 'string' },
      by: { type: 'string' },
      ticket: { type: 'string' },
      rate: { type: 'string' },
      name: { type: 'string' },
      url: { type: 'string' },
      burst: { type: 'string' },
      policy: { type: 'string' },
      destination: { type: 'string' },
      'max-in-flight': { type: 'string' },
      note: { type: 'string' },
      overlap: { type: 'string' },
      sequence: { type: 'string' },
      status: { type: 'string' },
      limit: { type: 'string' },
      subject: { type: 'string' },
      label: { type: 'string' },
      all: { type: 'boolean', default: false },
      'record-only': { type: 'boolean', default: false },
    },
  });
}

export async function runOps(
  argv: string[],
  out: (line: string) => void = console.log,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const { values, positionals } = parseCommandLine(argv);
  const [command, sub, arg, fourth] = positionals;
  if (!command) {
    out(HELP);
    return values.help ? 0 : 2;
  }
  // What is not a command is refused before any configuration is read: the mistake is the command, not the setup.
  if (!COMMANDS.has(command))
    throw new ConfigError('command', command, `one of ${[...COMMANDS.keys()].join(', ')} (see --help)`);
  if (values.help) {
    out(helpFor(command, sub));
    return 0;
  }
  const print = (human: string, data: unknown) => out(values.json ? JSON.stringify(data, null, 2) : human);
  // Through the admin API when one is configured: this machine then holds a token, no database URL and no key.
  let verbs = adminApiFromEnv(env, values.region);
  if (!verbs) {
    // Never dev by accident: dev means no four eyes and no SSRF guard for `merchant ping`.
    requireExplicitMode(env);
    verbs = await localVerbs(loadConfig(env), values.region);
  }
  try {
    return await runCommand(verbs, [command, sub, arg, fourth], values, print);
  } finally {
    await verbs.close();
  }
}

type Print = (human: string, data: unknown) => void;

/** What a command family's handler gets: the region's verbs, the command line, and how it prints. */
interface CommandContext {
  readonly region: Region;
  readonly call: Verbs['call'];
  readonly command: string;
  readonly sub: string | undefined;
  readonly arg: string | undefined;
  readonly fourth: string | undefined;
  readonly values: Values;
  readonly print: Print;
  /**
   * Who acts (--by, --requested-by): on the command line when the verbs run here; through the admin API the caller's
   * verified subject, so a name given there is refused rather than silently replaced.
   */
  readonly actor: (option: 'by' | 'requested-by') => string | undefined;
  /** --rate of a paced approval, checked (`what` it counts per second). */
  readonly rateOption: (what: string) => number | undefined;
}

type CommandHandler = (context: CommandContext) => Promise<number>;

/** Each command family's handler, by the command's first word. */
const COMMANDS: ReadonlyMap<string, CommandHandler> = new Map<string, CommandHandler>([
  ['sweep-now', runSweepNow],
  ['status', runStatus],
  ['quarantine', runQuarantine],
  ['replay', runReplay],
  ['resend', runResend],
  ['webhooks', runWebhooks],
  ['approve', runDecision],
  ['discard', runDecision],
  [
    'merchant',
    (context) => (context.sub === 'api-key' || context.sub === 'api-keys' ? runApiKeys(context) : runMerchant(context)),
  ],
  ['destination', runDestination],
  ['events', runEvents],
  ['sweeps', runSweeps],
  ['sends', runSends],
  ['reviews', runReviews],
  ['audit', runAudit],
]);

/** One command: its input from the command line, the verb called, its answer printed as it always was. */
async function runCommand(
  verbs: Verbs,
  [command, sub, arg, fourth]: [string, string | undefined, string | undefined, string | undefined],
  values: Values,
  print: Print,
): Promise<number> {
  const actor = (option: 'by' | 'requested-by'): string | undefined => {
    const given = values[option] as string | undefined;
    if (!verbs.remote) return required(given, option);
    if (given !== undefined)
      throw new ConfigError(`--${option}`, given, 'nothing: through the admin API, who acts is your token’s subject');
    return undefined;
  };
  const rateOption = (what: string) => {
    const rate = values.rate === undefined ? undefined : Number(values.rate);
    if (rate !== undefined && !(rate > 0))
      throw new ConfigError('--rate', values.rate as string, `${what} per second, > 0`);
    return rate;
  };
  const handler = COMMANDS.get(command)!;
  return handler({
    region: verbs.region,
    call: verbs.call,
    command,
    sub,
    arg,
    fourth,
    values,
    print,
    actor,
    rateOption,
  });
}

/** `sweep-now`. */
async function runSweepNow({ call, region, print }: CommandContext): Promise<number> {
  const { workflowId } = await call('sweep.now', {});
  print(`sweep ${workflowId} is answering for now (region ${region})`, { workflowId });
  return 0;
}

/** `status <hold id>`: ledger, webhook, attempts, decisions and why it waits. */
async function runStatus({ call, sub, print }: CommandContext): Promise<number> {
  const report = await call('hold.status', { holdId: required(sub, 'hold id') });
  const waiting = report.workflow?.waiting;
  print(
    [
      `hold ${report.hold.id}: ${report.hold.state}${report.hold.reject_code ? ` (${report.hold.reject_code})` : ''}, ` +
        `${report.hold.amount_minor} ${report.hold.currency}, merchant ${report.hold.merchant_id}`,
      `ledger entry: ${report.ledgerEntry ? `#${report.ledgerEntry.id}` : 'none'}`,
      `webhook: ${report.delivery ? `${report.delivery.webhook_id} ${report.delivery.status}${report.delivery.quarantine_reason ? ` (${report.delivery.quarantine_reason})` : ''}, ${report.delivery.attempt_count} attempt(s)` : 'none'}`,
      `workflow: ${report.workflow ? `${report.workflow.workflowId} ${report.workflow.status}` : 'none'}`,
      `why is it waiting: ${waiting ? JSON.stringify(waiting) : 'n/a'}`,
      ...(report.workflow?.retrying
        ? [
            `retrying: Temporal's attempt ${report.workflow.retrying.attempt}, next at ${report.workflow.retrying.nextAttemptAt ?? 'n/a'}` +
              ` after: ${report.workflow.retrying.lastFailure ?? 'n/a'}`,
          ]
        : []),
      `processor events: ${report.processorEvents.length === 0 ? 'none' : `${(report.processorEvents as { sequence: number; event_type: string; outcome: string | null }[]).map((e) => `${e.sequence} ${e.event_type} ${e.outcome ?? 'not applied'}`).join(', ')} (npm run ops -- events show ${report.hold.id})`}`,
      '',
      'attempts:',
      table(report.attempts),
      '',
      'decisions:',
      table(report.decisions),
      ...(report.resends.length ? ['', 'resends:', table(report.resends)] : []),
    ].join('\n'),
    report,
  );
  return 0;
}

/** `quarantine list`. */
async function runQuarantine({ call, sub, values, print }: CommandContext): Promise<number> {
  if (sub !== 'list') throw new ConfigError('quarantine', sub, '"list"');
  const rows = await call('quarantine.list', filtersFrom(values));
  print(`${table(rows)}\n${rows.length} quarantined`, rows);
  return 0;
}

/** `replay preview|approve`: quarantined webhooks replayed in bulk, four eyes. */
async function runReplay({
  call,
  region,
  sub,
  arg,
  values,
  print,
  actor,
  rateOption,
}: CommandContext): Promise<number> {
  if (sub === 'preview') {
    const limit = values.limit === undefined ? undefined : Number(values.limit);
    if (limit !== undefined && (!Number.isInteger(limit) || limit < 1))
      throw new ConfigError('--limit', values.limit as string, 'a whole number of webhooks, >= 1');
    const request = await call('replay.preview', {
      ...filtersFrom(values),
      ...(limit ? { limit } : {}),
      requestedBy: actor('requested-by'),
    });
    print(
      `replay request ${request.id}: ${request.count} quarantined webhook(s) frozen; ` +
        `approve with: npm run ops -- replay approve ${request.id} --region ${region} --by <someone else>`,
      request,
    );
    return 0;
  }
  if (sub === 'approve') {
    const result = await call('replay.approve', {
      requestId: required(arg, 'request id'),
      by: actor('by'),
      rate: rateOption('signals'),
      ticket: values.ticket as string | undefined,
      send: !values['record-only'],
    });
    if (result.recordOnly) {
      const { namespace, workflowIds, signal, input } = result.recordOnly;
      const query = `WorkflowId IN (${(workflowIds as string[]).map((w) => `'${w}'`).join(', ')})`;
      print(
        `replay request ${result.id} approved, not sent; carry it to its ${workflowIds.length} workflow(s) with:\n` +
          temporalSignalCommand(
            namespace,
            `--query "${query}" --reason 'replay request ${result.id}' --yes`,
            signal,
            input,
          ),
        result,
      );
      return 0;
    }
    print(
      `replay request ${result.id} approved: ${result.applied} replay(s) applied by their workflows, ${result.ignored.length} no longer quarantined` +
        (result.alreadyDone ? `, ${result.alreadyDone} done by an earlier run of this approval` : '') +
        ignoredLines(result.ignored),
      result,
    );
    return 0;
  }
  throw new ConfigError('replay', sub, '"preview" or "approve"');
}

/** `resend preview|approve` (in bulk, four eyes), or `resend <webhook id>` (one). */
async function runResend({
  call,
  region,
  sub,
  arg,
  values,
  print,
  actor,
  rateOption,
}: CommandContext): Promise<number> {
  if (sub === 'preview') {
    const request = await call('resend.preview', { ...resendFiltersFrom(values), requestedBy: actor('requested-by') });
    print(
      `resend request ${request.id}: ${request.count} webhook(s) at an end frozen; ` +
        `approve with: npm run ops -- resend approve ${request.id} --region ${region} --by <someone else>`,
      request,
    );
    return 0;
  }
  if (sub === 'approve') {
    const result = await call('resend.approve', {
      requestId: required(arg, 'request id'),
      by: actor('by'),
      rate: rateOption('resends started'),
      ticket: values.ticket as string | undefined,
    });
    print(
      `resend request ${result.id} approved: ${result.applied} resend(s) started, ${result.ignored.length} no longer where the preview froze them` +
        (result.alreadyDone ? `, ${result.alreadyDone} done by an earlier run of this approval` : '') +
        ignoredLines(result.ignored),
      result,
    );
    return 0;
  }
  const webhookId = required(sub, 'webhook id');
  const started = await call('webhook.resend', {
    webhookId,
    by: actor('by'),
    reason: required(values.reason as string | undefined, 'reason'),
    ticket: values.ticket as string | undefined,
  });
  print(
    started.policyRun === undefined || started.policyRun === null
      ? `resend ${started.resendId} of ${webhookId} started (${started.workflowId}); the worker has not reopened it yet: npm run ops -- status <hold id>`
      : `resend ${started.resendId} of ${webhookId}: policy run ${started.policyRun}, delivered by ${started.workflowId}`,
    started,
  );
  return 0;
}

/** `webhooks list --status S`. */
async function runWebhooks({ call, sub, values, print }: CommandContext): Promise<number> {
  if (sub !== 'list') throw new ConfigError('webhooks', sub, '"list"');
  const status = required(values.status as string | undefined, 'status');
  if (!DELIVERY_STATUSES.includes(status as DeliveryStatus))
    throw new ConfigError('--status', status, DELIVERY_STATUSES.join(', '));
  const limit = values.limit === undefined ? 20 : Number(values.limit);
  if (!Number.isInteger(limit) || limit < 1)
    throw new ConfigError('--limit', values.limit as string, 'a whole number of webhooks, >= 1');
  const f = resendFiltersFrom(values);
  const rows = await call('webhooks.list', { status, limit, merchant: f.merchant, since: f.since, until: f.until });
  print(`${table(rows)}\n${rows.length} ${status} (oldest first, at most ${limit})`, rows);
  return 0;
}

/** `approve|discard <hold id | webhook id>`: one quarantined webhook decided. */
async function runDecision({ call, command, sub, values, print, actor }: CommandContext): Promise<number> {
  const holdId = required(sub, 'hold id');
  const by = actor('by');
  const reason = required(values.reason as string | undefined, 'reason');
  if (values['record-only'] && command !== 'discard')
    throw new ConfigError('--record-only', 'true', 'only with discard or replay approve');
  const result =
    command === 'approve'
      ? await call('quarantine.approve', { id: holdId, by, reason, ticket: values.ticket as string | undefined })
      : await call('quarantine.discard', { id: holdId, by, reason, send: !values['record-only'] });
  if (result.outcome === 'recorded') {
    print(
      `discard of hold ${holdId} recorded (${result.input.decisionId}), not sent; carry it with:\n` +
        temporalSignalCommand(result.namespace, `--workflow-id ${result.workflowId}`, result.signal, result.input),
      result,
    );
    return 0;
  }
  print(
    result.outcome === 'applied'
      ? `${command} applied to hold ${holdId}: the workflow answered ${result.answer.decision} of policy run ${result.answer.policyRun}, now ${result.answer.stage}`
      : `${command} not applied to hold ${holdId}: ${result.detail}`,
    result,
  );
  return result.outcome === 'applied' ? 0 : 3;
}

/**
 * The `temporal` CLI command that carries a recorded decision (docs/security.md): through the codec endpoint, which
 * encrypts its input with the region's key for an operator's token.
 */
function temporalSignalCommand(namespace: string, target: string, signal: string, input: unknown): string {
  return (
    `  temporal workflow signal --namespace ${namespace} ${target} --name ${signal} ` +
    `--input '${JSON.stringify(input)}' --codec-endpoint <codec endpoint> --codec-auth "Bearer $ACCESS_TOKEN"`
  );
}

/** `sweeps pause|resume|status`: discovery's lever. */
async function runSweeps({ call, region, sub, values, print, actor }: CommandContext): Promise<number> {
  const show = (state: SweepsState) =>
    [
      `sweeps in region ${region}: ${state.paused ? 'PAUSED' : 'running'}${state.note ? ` (${state.note})` : ''}`,
      state.nextSweeps.length ? `next: ${state.nextSweeps.join(', ')}` : 'next: none while paused',
      state.recentSweeps.length ? table(state.recentSweeps) : 'no sweep started by the schedule yet',
    ].join('\n');
  if (sub === 'pause' || sub === 'resume') {
    const state = await call(`sweeps.${sub}`, {
      by: actor('by'),
      reason: required(values.reason as string | undefined, 'reason'),
    });
    print(show(state), state);
    return 0;
  }
  if (sub === 'status') {
    const state = await call('sweeps.status', {});
    print(show(state), state);
    return 0;
  }
  throw new ConfigError('sweeps', sub, '"pause", "resume" or "status"');
}

/** `sends pause|resume|status`: the region's big red button. */
async function runSends({ call, region, sub, values, print, actor }: CommandContext): Promise<number> {
  if (sub === 'pause') {
    const pause = await call('sends.pause', {
      by: actor('by'),
      reason: required(values.reason as string | undefined, 'reason'),
    });
    print(
      `sends in region ${region} paused at ${pause.pausedAt} by ${pause.pausedBy}: nothing is sent until ` +
        `npm run ops -- sends resume --region ${region} --by NAME --reason TEXT; deliveries wait, held, releases go on`,
      pause,
    );
    return 0;
  }
  if (sub === 'resume') {
    const result = await call('sends.resume', {
      by: actor('by'),
      reason: required(values.reason as string | undefined, 'reason'),
    });
    print(
      `sends in region ${region} resumed at ${result.pause.resumedAt} by ${result.pause.resumedBy} ` +
        `(paused since ${result.pause.pausedAt}); ${result.signalled} held deliveries told to re-check now` +
        (result.ended ? `, ${result.ended} had ended meanwhile` : '') +
        (result.notSignalled.length
          ? `; NOT told (each re-checks on its own within its back-off, at most 30 min): ` +
            (result.notSignalled as HeldDeliveriesTold['notSignalled'])
              .map((n) => `${n.workflowId} (${n.error})`)
              .join('; ')
          : ''),
      result,
    );
    return 0;
  }
  if (sub === 'status') {
    const status = await call('sends.status', {});
    print(
      [
        `sends in region ${region}: ${status.paused ? 'PAUSED' : 'running'}; ${status.held} deliveries held (by this or a merchant's pause)`,
        status.pauses.length === 0 ? 'never paused' : table(status.pauses),
      ].join('\n'),
      status,
    );
    return 0;
  }
  throw new ConfigError('sends', sub, '"pause", "resume" or "status"');
}

/** `reviews list|resolve`. */
async function runReviews({ call, sub, arg, values, print, actor }: CommandContext): Promise<number> {
  if (sub === 'list') {
    const rows = await call('reviews.list', { all: values.all === true });
    print(`${table(rows)}\n${rows.length} ${values.all ? '' : 'open '}review(s)`, rows);
    return 0;
  }
  if (sub === 'resolve') {
    const eventId = required(arg, 'event id');
    const result = await call('reviews.resolve', { eventId, by: actor('by') });
    print(`review of ${eventId} resolved`, result);
    return 0;
  }
  throw new ConfigError('reviews', sub, '"list" or "resolve"');
}

/** `audit`: the admin API's audit, newest first. */
async function runAudit({ call, values, print }: CommandContext): Promise<number> {
  const limit = values.limit === undefined ? 50 : Number(values.limit);
  if (!Number.isInteger(limit) || limit < 1)
    throw new ConfigError('--limit', values.limit as string, 'a whole number of entries, >= 1');
  const rows = await call('audit.list', {
    since: isoOption(values.since as string | undefined, 'since'),
    subject: values.subject as string | undefined,
    limit,
  });
  print(`${table(rows)}\n${rows.length} call(s), newest first`, rows);
  return 0;
}

/** `merchant api-key create <merchant id>`, `merchant api-key revoke <key id>`, `merchant api-keys <merchant id>`. */
async function runApiKeys({
  call,
  actor,
  values,
  sub,
  arg: action,
  fourth: id,
  print,
}: CommandContext): Promise<number> {
  if (sub === 'api-keys') {
    const rows = await call('merchant.api-keys', { merchantId: required(action, 'merchant id') });
    print(`${table(rows)}\n${rows.length} key(s)`, rows);
    return 0;
  }
  if (action === 'create') {
    const key = await call('merchant.api-key.create', {
      merchantId: required(id, 'merchant id'),
      by: actor('by'),
      label: values.label as string | undefined,
      rate: numberOption(values, 'rate'),
      burst: numberOption(values, 'burst'),
    });
    print(
      `API key ${key.id} for merchant ${key.merchantId} (${key.ratePerSecond}/s, burst ${key.burst}); the key (shown once, give it to the merchant): ${key.apiKey}`,
      key,
    );
    return 0;
  }
  if (action === 'revoke') {
    const result = await call('merchant.api-key.revoke', { keyId: required(id, 'key id'), by: actor('by') });
    print(`API key ${result.id} revoked by ${result.revokedBy}: it is refused from now on`, result);
    return 0;
  }
  throw new ConfigError('merchant api-key', action, '"create" or "revoke"');
}

const ignoredLines = (ignored: { webhookId: string; detail: string }[]) =>
  ignored.map((i) => `\n  ${i.webhookId}: ${i.detail}`).join('');

/** `events show|skip|approve-skip|redeliver|refused`. */
async function runEvents({ region, call, actor, values, sub, arg, print }: CommandContext): Promise<number> {
  if (sub === 'show') {
    const report = await call('events.show', { holdId: required(arg, 'hold id') });
    const account = report.workflow?.account;
    print(
      [
        `hold ${report.holdId}: ${report.events.length} processor event(s)`,
        table(
          (report.events as Record<string, unknown>[]).map(
            ({ sequence, event_id, event_type, amount_minor, outcome, webhook_id, webhook_status }) => ({
              sequence,
              event_id,
              event_type,
              amount_minor,
              outcome,
              webhook_id,
              webhook_status,
            }),
          ),
        ),
        '',
        `skipped: ${report.skips.length === 0 ? 'none' : table(report.skips)}`,
        `reviews: ${report.reviews.length === 0 ? 'none' : table(report.reviews)}`,
        `workflow: ${report.workflow ? `${report.workflow.workflowId} ${report.workflow.status}${account ? `, ${JSON.stringify(account.stage)}` : ''}` : 'none'}`,
      ].join('\n'),
      report,
    );
    return 0;
  }
  if (sub === 'skip') {
    const holdId = required(arg, 'hold id');
    const sequence = numberOption(values, 'sequence');
    if (sequence === undefined || !Number.isInteger(sequence) || sequence < 1)
      throw new ConfigError('--sequence', values.sequence as string, 'the missing sequence, a positive integer');
    const by = actor('by');
    const reason = required(values.reason as string | undefined, 'reason');
    const result = await call('events.skip', { holdId, sequence, by, reason });
    if (result.requested) {
      const { requestId } = result.requested;
      print(
        `skip request ${requestId} recorded for sequence ${sequence} of hold ${holdId}; ` +
          `approve with: npm run ops -- events approve-skip ${requestId} --region ${region} --by <someone else>`,
        { requestId, holdId, sequence },
      );
      return 0;
    }
    print(
      `sequence ${sequence} of hold ${holdId} skipped (recorded by ${result.skipped.workflowId}); what follows it applies now`,
      result.skipped,
    );
    return 0;
  }
  if (sub === 'approve-skip') {
    const requestId = required(arg, 'request id');
    const result = await call('events.approve-skip', { requestId, by: actor('by') });
    print(
      `skip request ${requestId} approved and carried out (recorded by ${result.workflowId}); what follows it applies now`,
      result,
    );
    return 0;
  }
  if (sub === 'redeliver') {
    const webhookId = required(arg, 'webhook id');
    const result = await call('events.redeliver', { webhookId });
    print(`webhook ${webhookId}: a new delivery run ${result.runId} of ${result.workflowId} started`, result);
    return 0;
  }
  if (sub === 'refused') {
    const rows = await call('events.refused', { since: isoOption(values.since as string | undefined, 'since') });
    print(`${table(rows)}\n${rows.length} refused`, rows);
    return 0;
  }
  throw new ConfigError('events', sub, '"show", "skip", "approve-skip", "redeliver" or "refused"');
}

type Values = Record<string, string | boolean | undefined>;

function numberOption(values: Values, option: string): number | undefined {
  const raw = values[option] as string | undefined;
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (raw.trim() === '' || Number.isNaN(n)) throw new ConfigError(`--${option}`, raw, 'a number');
  return n;
}

function policyOption(values: Values): Record<string, unknown> | undefined {
  const raw = values.policy as string | undefined;
  if (raw === undefined) return undefined;
  try {
    return JSON.parse(raw) as Record<string, unknown>;
  } catch {
    throw new ConfigError('--policy', raw, 'a JSON object, e.g. \'{"retryHorizonMs": 86400000}\'');
  }
}

function merchantLines(m: MerchantView): string {
  return [
    `merchant ${m.id} (${m.name}): ${m.status}${m.statusReason ? ` since ${m.statusSince}: ${m.statusReason}` : ''}`,
    `endpoint: ${m.endpointUrl}`,
    `rate: ${m.ratePerSecond}/s, burst ${m.burst}`,
    `delivery policy overrides: ${JSON.stringify(m.deliveryPolicy)}`,
    `signing secret: ${m.hasSigningSecret ? 'set' : 'NOT SET (deliveries quarantine as missing_secret)'}` +
      (m.hasPreviousSecret ? `; the previous one also signs until ${m.previousSecretSignsUntil ?? 'replaced'}` : ''),
    (m.budget.destination === null
      ? `budget: its own, at ${m.budget.ratePerSecond}/s`
      : `budget: destination ${m.budget.destination}'s, at ${m.budget.ratePerSecond}/s, shared with ${m.budget.sharedWith} other merchant(s)`) +
      `; next free slot ${m.budget.nextSlotAt ?? 'now'}` +
      (m.budget.pausedUntil
        ? `; pushed back until ${m.budget.pausedUntil} (${m.budget.pauseReason ?? 'no reason recorded'})`
        : ''),
    `backlog: ${m.budget.backlog} pending` +
      (m.budget.backlog > 0
        ? `, oldest ${m.budget.oldestPendingSeconds} s old, about ${m.budget.drainSeconds} s to drain at the destination's pace`
        : ''),
  ].join('\n');
}

/** `destination set|show <id>`: the ledger only. */
async function runDestination({ call, values, sub, arg: id, print }: CommandContext): Promise<number> {
  const destinationId = required(id, 'destination id');
  const d =
    sub === 'set'
      ? await call('destination.set', {
          destinationId,
          rate: numberOption(values, 'rate'),
          maxInFlight: numberOption(values, 'max-in-flight'),
          note: values.note as string | undefined,
        })
      : sub === 'show'
        ? await call('destination.show', { destinationId })
        : undefined;
  if (!d) throw new ConfigError('destination', sub, 'set or show (see --help)');
  print(
    [
      `destination ${d.id}: ${d.ratePerSecond}/s for all its merchants together` +
        (d.maxInFlight === null ? '' : `, at most ${d.maxInFlight} requests open at once`),
      d.note ? `note: ${d.note}` : '',
      `merchants sharing it: ${d.merchants.length ? d.merchants.join(', ') : 'none yet (merchant set <id> --destination ' + d.id + ')'}`,
    ]
      .filter(Boolean)
      .join('\n'),
    d,
  );
  return 0;
}

/** `merchant <sub> <id>`: the ledger only, no Temporal connection needed. */
async function runMerchant({ call, values, sub, arg: id, print }: CommandContext): Promise<number> {
  const merchantId = () => required(id, 'merchant id');
  const settings = () => ({
    name: values.name as string | undefined,
    url: values.url as string | undefined,
    rate: numberOption(values, 'rate'),
    burst: numberOption(values, 'burst'),
    policy: policyOption(values) as VerbInput[string],
    destination: values.destination as string | undefined,
  });
  const secretOnce = (secret: string) =>
    `signing secret (shown once, give it to the merchant; it verifies with it): ${secret}`;
  switch (sub) {
    case 'add': {
      const given = settings();
      const { merchant, signingSecret } = await call('merchant.add', {
        ...given,
        merchantId: merchantId(),
        name: required(given.name, 'name'),
        url: required(given.url, 'url'),
      });
      print(`${merchantLines(merchant)}\n${secretOnce(signingSecret)}`, { merchant, signingSecret });
      return 0;
    }
    case 'show': {
      const merchant = await call('merchant.show', { merchantId: merchantId() });
      print(merchantLines(merchant), merchant);
      return 0;
    }
    case 'set': {
      const merchant = await call('merchant.set', { merchantId: merchantId(), ...settings() });
      print(merchantLines(merchant), merchant);
      return 0;
    }
    case 'pause':
    case 'resume': {
      const result =
        sub === 'pause'
          ? await call('merchant.pause', {
              merchantId: merchantId(),
              reason: required(values.reason as string | undefined, 'reason'),
            })
          : await call('merchant.resume', { merchantId: merchantId() });
      print(
        `${result.changed ? '' : `nothing to do: already ${result.merchant.status}\n`}${merchantLines(result.merchant)}`,
        result,
      );
      return result.changed ? 0 : 3;
    }
    case 'rotate-secret': {
      const overlap = values.overlap as string | undefined;
      const result = await call('merchant.rotate-secret', {
        merchantId: merchantId(),
        overlapMs: overlap === undefined ? undefined : parseDuration('--overlap', overlap),
      });
      print(
        `${merchantLines(result.merchant)}\n${secretOnce(result.signingSecret)}\n` +
          `every webhook is signed with both secrets until ${result.previousSignsUntil}, then with the new one only`,
        result,
      );
      return 0;
    }
    case 'ping': {
      const ping = await call('merchant.ping', { merchantId: merchantId() });
      const answer = ping.statusCode === null ? ping.errorClass : `HTTP ${ping.statusCode}`;
      print(
        [
          `ping ${ping.webhookId} to ${ping.url}: ${answer} in ${ping.durationMs} ms (signed with ${ping.signatures} key(s); waited ${ping.waitedMs} ms for the merchant's budget)`,
          `the delivery policy would: ${ping.policyAction} (${ping.policyRule})`,
          ping.responseExcerpt ? `response: ${ping.responseExcerpt}` : '',
        ]
          .filter(Boolean)
          .join('\n'),
        ping,
      );
      return ping.policyAction === 'delivered' ? 0 : 3;
    }
    default:
      throw new ConfigError('merchant', sub, 'one of add, show, set, pause, resume, rotate-secret, ping (see --help)');
  }
}

/** Errors that name what was wrong with the operator's input or the ledger's row: their message is the answer. */
const NAMED = [
  OperatorError,
  ConfigError,
  InvalidMerchantSetting,
  InvalidEndpointUrl,
  InvalidDeliveryPolicyError,
  MissingSigningSecret,
  AdminApiError,
  AdminApiUnreachable,
];

/**
 * What the CLI prints for a named error (exit 2): `Name(code): message`, or with --json one JSON object (`error`,
 * `code`, `message`, and through the admin API its `status` and `requestId`). Undefined for anything else (exit 1).
 */
export function operatorErrorText(err: unknown, json: boolean): string | undefined {
  if (!NAMED.some((type) => err instanceof type)) return undefined;
  const e = err as Error;
  if (!json) return `${e.name}${err instanceof OperatorError ? `(${err.code})` : ''}: ${e.message}`;
  if (err instanceof AdminApiError) {
    return JSON.stringify({
      error: err.error,
      ...(err.code ? { code: err.code } : {}),
      message: err.detail,
      status: err.status,
      requestId: err.requestId,
    });
  }
  return JSON.stringify({
    error: e.name,
    ...(err instanceof OperatorError ? { code: err.code } : {}),
    message: e.message,
  });
}
