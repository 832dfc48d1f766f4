/**
 * The operator CLI: `npm run ops -- <command> [options]`; `--help` lists the commands, `<command> --help` one's
 * options. Its commands are made from the verb table (src/operations/admin-verbs.ts) by commander: each verb's command,
 * its target the operand, its input fields the options, its summary and the fields' descriptions the help. A command
 * calls its verb through the region's admin API when one is configured (admin-client.ts: a token, nothing else), or
 * itself against the region's ledger and Temporal namespace as configured (.env.example); in dev, with nothing
 * configured, the stack a running `npm start` advertises. Either way the same answer prints the same.
 */
import { Command, CommanderError, Help, Option } from 'commander';
import { Client } from '@temporalio/client';
import { dataConverterFor } from '../codec/encryption-codec.js';
import type pg from 'pg';
import { loadConfig, requireExplicitMode, type Config, type RegionConfig } from '../config.js';
import { latestMigrationVersion } from '../db/migrate.js';
import { createPool } from '../db/pool.js';
import { checkServiceConnection } from '../db/roles.js';
import { localKeyRing } from '../delivery/secret-box.js';
import { ConfigError, OperatorError } from '../errors.js';
import { addressesIn } from '../dev-stack.js';
import type { Region } from '../contracts/regions.js';
import { connectClient, PLAINTEXT } from '../temporal-connection.js';
import { z } from 'zod';
import { jsonSchema } from '../doors.js';
import {
  ADMIN_VERBS,
  adminVerb,
  REJECTIONS,
  verbById,
  type AdminContext,
  type AdminVerb,
  type AnswerOf,
  type VerbInput,
} from './admin-verbs.js';
import { inert, inertLines } from '../delivery/inert-text.js';
import { AdminApiError, adminApiFromEnv, AdminApiUnreachable, type Verbs } from './admin-client.js';

/** The region the command is for, and where its ledger and Temporal are (configured, or a running `npm start`'s). */
async function regionFor(config: Config, regionOption: string | undefined) {
  const names = config.regions.map((r) => r.region).join(', ');
  if (regionOption === undefined && config.regions.length !== 1)
    throw new ConfigError('--region', undefined, `one of ${names}`);
  const regionConfig = config.regions.find((r) => r.region === (regionOption ?? config.regions[0]!.region));
  if (!regionConfig) throw new ConfigError('--region', regionOption, `one of the configured regions: ${names}`);
  const { databaseUrl, temporalAddress } = (await addressesIn(config.mode))(regionConfig);
  if (!databaseUrl)
    throw new ConfigError(
      `DATABASE_URL_${regionConfig.region.toUpperCase()}`,
      undefined,
      'a postgres:// URL (or a running `npm start`)',
    );
  return { regionConfig, databaseUrl, address: temporalAddress };
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
      return verb.invoke(context, input);
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
  const cell = (v: unknown) =>
    v instanceof Date ? v.toISOString() : v === null || v === undefined ? '' : inert(String(v));
  const widths = columns.map((c) => Math.min(60, Math.max(c.length, ...rows.map((r) => cell(r[c]).length))));
  const line = (values: string[]) => values.map((v, i) => v.slice(0, widths[i]).padEnd(widths[i]!)).join('  ');
  return [
    line(columns),
    line(widths.map((w) => '-'.repeat(w))),
    ...rows.map((r) => line(columns.map((c) => cell(r[c])))),
  ].join('\n');
}

export async function runOps(
  argv: string[],
  out: (line: string) => void = console.log,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  let code = 0;
  const program = commandLine(out, async (verb, operand, given) => {
    code = await runVerb(verb, operand, given, program.opts(), out, env);
  });
  refuseOptionsAsValues(program, argv);
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    // Help asked for is an answer; help shown because no command was given, a mistake.
    if (err.code === 'commander.helpDisplayed') return 0;
    if (err.code === 'commander.help') return 2;
    throw new ConfigError('arguments', argv.join(' '), `what --help lists (${err.message.replace(/^error: /, '')})`);
  }
  return code;
}

/** A verb's command line, read: its operand, and its options' values by input field (and by `by` / `requestedBy`). */
type Run = (verb: AdminVerb, operand: string | undefined, given: VerbInput) => Promise<void>;

/**
 * The commands of the verb table: each verb's command (`replay approve`) a path of sub-commands, its target the
 * operand, its fields the options. A command that is also a group (`resend <webhook id>`, `resend preview`) is the
 * group's default sub-command: the group itself takes no option, which its sub-commands would then not see. Made anew
 * for each call (commander keeps what it parsed); it never exits nor writes by itself: help goes to `out`, the rest is
 * thrown.
 */
function commandLine(out: (line: string) => void, run: Run): Command {
  const verbs = new Map<Command, AdminVerb>();
  const defaults = new Map<Command, Command>();
  const pathOf = (cmd: Command): string => {
    const parent = cmd.parent;
    if (!parent) return '';
    if (defaults.get(parent) === cmd) return pathOf(parent);
    return parent.parent ? `${pathOf(parent)} ${cmd.name()}` : cmd.name();
  };
  const leaves = (cmd: Command): Command[] => cmd.commands.flatMap((c) => [...(verbs.has(c) ? [c] : []), ...leaves(c)]);
  const help = new Help();
  const program = new Command('npm run ops --')
    .usage('<command> [options]')
    .description(
      "Each command calls one verb of the region's admin API when one is configured (HOLD_SWEEPER_API_URL_<REGION>, " +
        "HOLD_SWEEPER_API_TOKEN or its _FILE): who acts is the token's subject. Without, it runs the verb here, " +
        "against the region's ledger and Temporal (dev, break-glass); HOLD_SWEEPER_MODE says which: production " +
        '(four eyes) or dev.',
    )
    .option('--region <region>', 'us or eu (required when several are configured)')
    .option('--json', 'print the answer as JSON')
    .exitOverride()
    .showSuggestionAfterError(false)
    .configureOutput({
      writeOut: (text) => out(text.trimEnd()),
      writeErr: (text) => out(text.trimEnd()),
      outputError: () => undefined,
    })
    .configureHelp({
      showGlobalOptions: true,
      // Every command under this one by its whole path (`replay approve <request id>`); a group with a default shows
      // the default's options as its own.
      visibleCommands: (cmd) => leaves(cmd).filter((c) => c !== defaults.get(cmd)),
      subcommandTerm: (cmd) => [pathOf(cmd), ...cmd.registeredArguments.map((a) => `<${a.name()}>`)].join(' '),
      visibleOptions: (cmd) => help.visibleOptions(defaults.get(cmd) ?? cmd),
    });
  const refuseUnknown = (cmd: Command) =>
    // A word that is no command is refused before any configuration is read: the mistake is the command.
    cmd.on('command:*', ([word]: string[]) => {
      const expected = `one of ${cmd.commands.map((c) => c.name()).join(', ')} (see --help)`;
      throw new ConfigError(cmd.parent ? pathOf(cmd) : 'command', word, expected);
    });
  const subcommand = (parent: Command, name: string): Command =>
    parent.commands.find((c) => c.name() === name) ?? refuseUnknown(parent.command(name).usage('<command> [options]'));
  refuseUnknown(program);
  /** Every command path another one continues (`resend`, `merchant api-key`). */
  const groups = new Set(
    ADMIN_VERBS.flatMap(({ command }) => command.split(' ').map((_, i, words) => words.slice(0, i).join(' '))),
  );
  for (const verb of ADMIN_VERBS) {
    const operand = verb.target && (verb.cli?.operand ?? verb.target.replace(/[A-Z]/g, (c) => ` ${c.toLowerCase()}`));
    const usage = `${operand ? `<${operand}> ` : ''}[options]`;
    let cmd = verb.command.split(' ').reduce(subcommand, program);
    if (groups.has(verb.command)) {
      cmd.description(verb.summary).usage(usage);
      const group = cmd;
      cmd = group.command(group.name(), { isDefault: true });
      defaults.set(group, cmd);
    }
    verbs.set(cmd, verb);
    if (operand) cmd.argument(`<${operand}>`);
    const options = optionsOf(verb);
    for (const option of options.values()) cmd.addOption(option);
    cmd.description(verb.summary).usage(usage);
    const values = () =>
      Object.fromEntries([...options].map(([name, o]) => [name, cmd.getOptionValue(o.attributeName())]));
    cmd.action(() => {
      const [operand] = cmd.processedArgs;
      return run(verb, typeof operand === 'string' ? operand : undefined, values());
    });
  }
  return program;
}

/**
 * A verb's options by input field: the table's spelling, or `--kebab-case <value>` checked against the field's schema
 * as the admin API would; and who acts (`--by`, `--requested-by`), which through the API is the token's subject.
 */
function optionsOf(verb: AdminVerb): Map<string, Option> {
  const flagOf = (name: string) => `--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
  const options = new Map<string, Option>();
  if (verb.actor) {
    const who = `who ${verb.actor === 'by' ? 'acts' : 'asks'} (names compare case- and width-insensitively)`;
    const remote = "not given through the admin API: the token's subject";
    options.set(verb.actor, new Option(`${flagOf(verb.actor)} <name>`, `${who}; ${remote}`));
  }
  for (const [name, schema] of Object.entries(verb.fields)) {
    const spelled = verb.cli?.options?.[name];
    if (name === verb.target) continue;
    if (spelled) {
      options.set(name, new Option(spelled.flags, spelled.description).argParser(spelled.value));
      continue;
    }
    const flag = flagOf(name);
    const field = jsonSchema(schema);
    const time = field.format === 'date-time';
    // What the value is, in the usage: `--since <time>`, `--merchant <id>`, `--reason <reason>`; none: a flag.
    const types: Record<string, string> = {
      string: field.pattern ? 'id' : 'text',
      object: 'json',
      number: 'n',
      integer: 'n',
    };
    const kind = field.enum ? name : time ? 'time' : types[String(field.type)];
    const about = [
      field.description,
      field.enum && `one of ${field.enum.join(', ')}`,
      time && 'ISO 8601',
      verb.required.includes(name) && 'required',
    ];
    const option = new Option(kind ? `${flag} <${kind}>` : flag, about.filter(Boolean).join('; '));
    if (kind) option.argParser((typed: string) => valueOf(flag, schema, typed));
    if (kind && field.default !== undefined) option.default(field.default);
    options.set(name, option);
  }
  return options;
}

/** A field's value as typed, parsed by its schema as the admin API checks it. */
function valueOf(flag: string, schema: z.core.$ZodType, typed: string): unknown {
  const field = jsonSchema(schema);
  const numeric = field.type === 'number' || field.type === 'integer';
  const json = () => {
    try {
      const value: unknown = JSON.parse(typed);
      return value;
    } catch {
      return typed; // not JSON: refused as not an object
    }
  };
  const parsed = z.safeParse(
    schema,
    numeric ? (typed.trim() === '' ? NaN : Number(typed)) : field.type === 'object' ? json() : typed,
  );
  if (parsed.success) return parsed.data;
  const expected = expectedOf(field, parsed.error.issues[0]?.code);
  throw new ConfigError(flag, typed, field.description ? `${field.description}: ${expected}` : expected);
}

/** What a field takes, in words, for the option whose value it refused (a string's: the check that refused it). */
function expectedOf(field: z.core.JSONSchema.BaseSchema, refused: string | undefined): string {
  const { minimum: min, exclusiveMinimum: above, maximum: max } = field;
  if (field.type === 'number' || field.type === 'integer') {
    const bounds =
      min !== undefined && max !== undefined
        ? [`from ${min} to ${max}`]
        : [
            min !== undefined && `>= ${min}`,
            above !== undefined && `> ${String(above)}`,
            max !== undefined && `<= ${max}`,
          ];
    return [field.type === 'integer' ? 'a whole number' : 'a number', ...bounds].filter(Boolean).join(', ');
  }
  if (field.type === 'object') return 'a JSON object';
  if (field.enum) return field.enum.join(', ');
  if (field.format === 'date-time') return 'an ISO 8601 time, e.g. 2026-11-30T00:00:00Z';
  if (refused === 'invalid_format') return `matching ${field.pattern}`;
  return `${field.minLength ?? 0} to ${field.maxLength ?? Infinity} characters`;
}

/**
 * A value that reads as an option is refused, not taken: `--by --reason x` forgot a name, it does not name "--reason";
 * `--rate=-5` says a dash is meant.
 */
function refuseOptionsAsValues(program: Command, argv: string[]): void {
  const all = (cmd: Command): Command[] => [cmd, ...cmd.commands.flatMap(all)];
  const taking = new Set(all(program).flatMap((cmd) => cmd.options.filter((o) => o.required).map((o) => o.long)));
  argv.forEach((arg, i) => {
    const next = argv[i + 1];
    if (taking.has(arg) && next?.startsWith('-'))
      throw new ConfigError(arg, next, `a value (a dash-led one as ${arg}=${next})`);
  });
}

/**
 * The verb's input, parsed by its schema: its target the operand, each field its option (or its default); and who acts,
 * as `remote` wants it.
 */
function inputOf(
  verb: AdminVerb,
  operand: string | undefined,
  given: VerbInput,
  remote: boolean,
): { input: VerbInput; actor?: string } {
  const input: VerbInput = verb.target ? { [verb.target]: operand } : {};
  const flagOf = (name: string) => optionsOf(verb).get(name)!.long!;
  for (const name of Object.keys(verb.fields)) {
    if (name === verb.target) continue;
    input[name] = given[name];
    if (input[name] === undefined && verb.required.includes(name))
      throw new ConfigError(flagOf(name), undefined, 'a value (see --help)');
  }
  const parsed = verb.request.safeParse(input);
  if (!parsed.success) {
    const [name = 'arguments'] = parsed.error.issues[0]?.path.map(String) ?? [];
    throw new ConfigError(name === verb.target ? `<${name}>` : flagOf(name), String(input[name]), 'see --help');
  }
  if (!verb.actor) return { input: parsed.data };
  const named = given[verb.actor];
  const actor = typeof named === 'string' ? named : undefined;
  // Through the API, a name given would be refused by it or silently replaced: refused here, saying why.
  if (remote && actor !== undefined)
    throw new ConfigError(
      flagOf(verb.actor),
      actor,
      'nothing: through the admin API, who acts is your token’s subject',
    );
  if (!remote && !actor) throw new ConfigError(flagOf(verb.actor), undefined, 'a value (see --help)');
  return { input: parsed.data, actor };
}

/** One command: the verb's input checked, the verb called (through the admin API, or here), its answer printed. */
async function runVerb(
  verb: AdminVerb,
  operand: string | undefined,
  given: VerbInput,
  global: { region?: string; json?: boolean },
  out: (line: string) => void,
  env: NodeJS.ProcessEnv,
): Promise<number> {
  // Through the admin API when one is configured: this machine then holds a token, no database URL and no key.
  const api = adminApiFromEnv(env, global.region);
  const { input, actor } = inputOf(verb, operand, given, api !== undefined);
  // Never dev by accident: dev means no four eyes and no SSRF guard for `merchant ping`.
  if (!api) requireExplicitMode(env);
  const verbs = api ?? (await localVerbs(loadConfig(env), global.region));
  try {
    const answer = await verbs.call(verb.id, verb.actor ? { ...input, [verb.actor]: actor } : input);
    // Read as JSON, as it crosses the admin API: what prints here prints the same through it.
    const read: unknown = answer === undefined ? undefined : JSON.parse(JSON.stringify(answer));
    const shown = SHOWN.get(verb.id)?.(read, input, verbs.region) ?? JSON.stringify(answer, null, 2);
    const { human, json = answer, code = 0 } = typeof shown === 'string' ? { human: shown } : shown;
    // What the ledger stored from outside (a merchant's answer) prints inert, here and in every verb's text.
    out(inertLines(global.json ? JSON.stringify(json, null, 2) : human));
    return code;
  } finally {
    await verbs.close();
  }
}

/** What a command prints: its human text; with --json its answer, or `json` where that differs; its exit code. */
type Shown = string | { human: string; json?: unknown; code?: number };

/** How a verb's answer prints: undefined when it is not what its schema says (it then prints as JSON). */
type Printer = (answer: unknown, input: VerbInput, region: Region) => Shown | undefined;

/** A verb's printer, reading its answer (a list comes unwrapped from the client) and its input by their schemas. */
function show<A extends z.ZodType, R extends z.ZodType>(
  verb: { id: string; answer: A; request: R },
  print: (answer: z.output<A>, input: z.output<R>, region: Region) => Shown,
): [string, Printer] {
  return [
    verb.id,
    (answer, input, region) => {
      const read = verb.answer.safeParse(Array.isArray(answer) ? { items: answer } : answer);
      return read.success ? print(read.data, verb.request.parse(input), region) : undefined;
    },
  ];
}

/** How each verb's answer prints for a human (a verb without one prints its answer as JSON), by verb id. */
const SHOWN = new Map<string, Printer>([
  show(adminVerb('sweep.now'), ({ workflowId }, _, region) => ({
    human: `sweep ${workflowId} is answering for now (region ${region})`,
    json: { workflowId },
  })),
  show(adminVerb('sweeps.pause'), (state, _, region) => sweepsLines(state, region)),
  show(adminVerb('sweeps.resume'), (state, _, region) => sweepsLines(state, region)),
  show(adminVerb('sweeps.status'), (state, _, region) => sweepsLines(state, region)),
  show(adminVerb('hold.status'), ({ hold, ledgerEntry, delivery, workflow, processorEvents, ...report }) =>
    [
      `hold ${hold.id}: ${hold.state}${hold.reject_code ? ` (${hold.reject_code})` : ''}, ` +
        `${String(hold.amount_minor)} ${String(hold.currency)}, merchant ${hold.merchant_id}`,
      `ledger entry: ${ledgerEntry ? `#${String(ledgerEntry.id)}` : 'none'}`,
      `webhook: ${delivery ? `${delivery.webhook_id} ${delivery.status}${delivery.quarantine_reason ? ` (${delivery.quarantine_reason})` : ''}, ${String(delivery.attempt_count)} attempt(s)` : 'none'}`,
      `workflow: ${workflow ? `${workflow.workflowId} ${workflow.status}` : 'none'}`,
      `why is it waiting: ${workflow?.waiting ? JSON.stringify(workflow.waiting) : 'n/a'}`,
      ...(workflow?.retrying
        ? [
            `retrying: Temporal's attempt ${workflow.retrying.attempt}, next at ${workflow.retrying.nextAttemptAt ?? 'n/a'}` +
              ` after: ${workflow.retrying.lastFailure ?? 'n/a'}`,
          ]
        : []),
      `processor events: ${processorEvents.length === 0 ? 'none' : `${processorEvents.map((e) => `${e.sequence} ${e.event_type} ${e.outcome ?? 'not applied'}`).join(', ')} (npm run ops -- events show ${hold.id})`}`,
      '',
      'attempts:',
      table(report.attempts),
      '',
      'decisions:',
      table(report.decisions),
      ...(report.resends.length ? ['', 'resends:', table(report.resends)] : []),
    ].join('\n'),
  ),
  show(adminVerb('quarantine.list'), ({ items }) => `${table(items)}\n${items.length} quarantined`),
  show(
    adminVerb('webhooks.list'),
    ({ items }, { status, limit }) => `${table(items)}\n${items.length} ${status} (oldest first, at most ${limit})`,
  ),
  show(
    adminVerb('replay.preview'),
    (request, _, region) =>
      `replay request ${request.id}: ${request.count} quarantined webhook(s) frozen; ` +
      `approve with: npm run ops -- replay approve ${request.id} --region ${region} --by <someone else>`,
  ),
  show(adminVerb('replay.approve'), (result) => {
    if (!result.recordOnly) {
      return (
        `replay request ${result.id} approved: ${result.applied} replay(s) applied by their workflows, ${result.ignored.length} no longer quarantined` +
        (result.alreadyDone ? `, ${result.alreadyDone} done by an earlier run of this approval` : '') +
        ignoredLines(result.ignored)
      );
    }
    const { namespace, workflowIds, signal, input } = result.recordOnly;
    const query = `WorkflowId IN (${workflowIds.map((w) => `'${w}'`).join(', ')})`;
    return (
      `replay request ${result.id} approved, not sent; carry it to its ${workflowIds.length} workflow(s) with:\n` +
      temporalSignalCommand(namespace, `--query "${query}" --reason 'replay request ${result.id}' --yes`, signal, input)
    );
  }),
  show(adminVerb('quarantine.approve'), (result, { id }) => decisionLines('approve', id, result)),
  show(adminVerb('quarantine.discard'), (result, { id }) => decisionLines('discard', id, result)),
  show(adminVerb('webhook.resend'), (started, { webhookId }) =>
    started.policyRun === undefined || started.policyRun === null
      ? `resend ${started.resendId} of ${webhookId} started (${started.workflowId}); the worker has not reopened it yet: npm run ops -- status <hold id>`
      : `resend ${started.resendId} of ${webhookId}: policy run ${started.policyRun}, delivered by ${started.workflowId}`,
  ),
  show(
    adminVerb('resend.preview'),
    (request, _, region) =>
      `resend request ${request.id}: ${request.count} webhook(s) at an end frozen; ` +
      `approve with: npm run ops -- resend approve ${request.id} --region ${region} --by <someone else>`,
  ),
  show(
    adminVerb('resend.approve'),
    (result) =>
      `resend request ${result.id} approved: ${result.applied} resend(s) started, ${result.ignored.length} no longer where the preview froze them` +
      (result.alreadyDone ? `, ${result.alreadyDone} done by an earlier run of this approval` : '') +
      ignoredLines(result.ignored),
  ),
  show(
    adminVerb('merchant.add'),
    ({ merchant, signingSecret }) => `${merchantLines(merchant)}\n${secretOnce(signingSecret)}`,
  ),
  show(adminVerb('merchant.show'), (merchant) => merchantLines(merchant)),
  show(adminVerb('merchant.set'), (merchant) => merchantLines(merchant)),
  show(adminVerb('merchant.pause'), (result) => merchantChange(result)),
  show(adminVerb('merchant.resume'), (result) => merchantChange(result)),
  show(
    adminVerb('merchant.rotate-secret'),
    (result) =>
      `${merchantLines(result.merchant)}\n${secretOnce(result.signingSecret)}\n` +
      `every webhook is signed with both secrets until ${result.previousSignsUntil}, then with the new one only`,
  ),
  show(adminVerb('merchant.ping'), (ping) => ({
    human: [
      `ping ${ping.webhookId} to ${ping.url}: ${ping.statusCode === null ? ping.errorClass : `HTTP ${ping.statusCode}`} in ${ping.durationMs} ms (signed with ${ping.signatures} key(s); waited ${ping.waitedMs} ms for the merchant's budget)`,
      `the delivery policy would: ${ping.policyAction} (${ping.policyRule})`,
      ping.responseExcerpt ? `response: ${ping.responseExcerpt}` : '',
    ]
      .filter(Boolean)
      .join('\n'),
    code: ping.policyAction === 'delivered' ? 0 : 3,
  })),
  show(adminVerb('destination.set'), (d) => destinationLines(d)),
  show(adminVerb('destination.show'), (d) => destinationLines(d)),
  show(
    adminVerb('merchant.api-key.create'),
    (key) =>
      `API key ${key.id} for merchant ${key.merchantId} (${key.ratePerSecond}/s, burst ${key.burst}); the key (shown once, give it to the merchant): ${key.apiKey}`,
  ),
  show(
    adminVerb('merchant.api-key.revoke'),
    (result) => `API key ${result.id} revoked by ${result.revokedBy}: it is refused from now on`,
  ),
  show(adminVerb('merchant.api-keys'), ({ items }) => `${table(items)}\n${items.length} key(s)`),
  show(adminVerb('events.show'), (report) => {
    const account = report.workflow?.account;
    return [
      `hold ${report.holdId}: ${report.events.length} processor event(s)`,
      table(
        report.events.map(({ sequence, event_id, event_type, amount_minor, outcome, webhook_id, webhook_status }) => ({
          sequence,
          event_id,
          event_type,
          amount_minor,
          outcome,
          webhook_id,
          webhook_status,
        })),
      ),
      '',
      `skipped: ${report.skips.length === 0 ? 'none' : table(report.skips)}`,
      `reviews: ${report.reviews.length === 0 ? 'none' : table(report.reviews)}`,
      `workflow: ${report.workflow ? `${report.workflow.workflowId} ${report.workflow.status}${account ? `, ${JSON.stringify(account.stage)}` : ''}` : 'none'}`,
    ].join('\n');
  }),
  show(adminVerb('events.skip'), ({ requested, skipped }, { holdId, sequence }, region) => {
    if (!requested) {
      return {
        human: `sequence ${sequence} of hold ${holdId} skipped (recorded by ${skipped?.workflowId}); what follows it applies now`,
        json: skipped,
      };
    }
    const { requestId } = requested;
    return {
      human:
        `skip request ${requestId} recorded for sequence ${sequence} of hold ${holdId}; ` +
        `approve with: npm run ops -- events approve-skip ${requestId} --region ${region} --by <someone else>`,
      json: { requestId, holdId, sequence },
    };
  }),
  show(
    adminVerb('events.approve-skip'),
    (result, { requestId }) =>
      `skip request ${requestId} approved and carried out (recorded by ${result.workflowId}); what follows it applies now`,
  ),
  show(
    adminVerb('events.redeliver'),
    (result, { webhookId }) =>
      `webhook ${webhookId}: a new delivery run ${result.runId} of ${result.workflowId} started`,
  ),
  show(adminVerb('events.refused'), ({ items }) => `${table(items)}\n${items.length} refused`),
  show(
    adminVerb('sends.pause'),
    (pause, _, region) =>
      `sends in region ${region} paused at ${String(pause.pausedAt)} by ${pause.pausedBy}: nothing is sent until ` +
      `npm run ops -- sends resume --region ${region} --by NAME --reason TEXT; deliveries wait, held, releases go on`,
  ),
  show(
    adminVerb('sends.resume'),
    (result, _, region) =>
      `sends in region ${region} resumed at ${String(result.pause.resumedAt)} by ${String(result.pause.resumedBy)} ` +
      `(paused since ${String(result.pause.pausedAt)}); ${result.signalled} held deliveries told to re-check now` +
      (result.ended ? `, ${result.ended} had ended meanwhile` : '') +
      (result.notSignalled.length
        ? `; NOT told (each re-checks on its own within its back-off, at most 30 min): ` +
          result.notSignalled.map((n) => `${n.workflowId} (${n.error})`).join('; ')
        : ''),
  ),
  show(adminVerb('sends.status'), (status, _, region) =>
    [
      `sends in region ${region}: ${status.paused ? 'PAUSED' : 'running'}; ${status.held} deliveries held (by this or a merchant's pause)`,
      status.pauses.length === 0 ? 'never paused' : table(status.pauses),
    ].join('\n'),
  ),
  show(
    adminVerb('reviews.list'),
    ({ items }, { all }) => `${table(items)}\n${items.length} ${all ? '' : 'open '}review(s)`,
  ),
  show(adminVerb('reviews.resolve'), (_, { eventId }) => `review of ${eventId} resolved`),
  show(adminVerb('audit.list'), ({ items }) => `${table(items)}\n${items.length} call(s), newest first`),
]);

function sweepsLines(state: AnswerOf<'sweeps.status'>, region: Region): string {
  return [
    `sweeps in region ${region}: ${state.paused ? 'PAUSED' : 'running'}${state.note ? ` (${state.note})` : ''}`,
    state.nextSweeps.length ? `next: ${state.nextSweeps.join(', ')}` : 'next: none while paused',
    state.recentSweeps.length ? table(state.recentSweeps) : 'no sweep started by the schedule yet',
  ].join('\n');
}

/** `approve|discard <hold id | webhook id>`: what the workflow answered, or the decision recorded for the CLI. */
function decisionLines(command: string, holdId: string, result: AnswerOf<'quarantine.approve'>): Shown {
  if (result.outcome === 'recorded') {
    return (
      `discard of hold ${holdId} recorded (${result.input.decisionId}), not sent; carry it with:\n` +
      temporalSignalCommand(result.namespace, `--workflow-id ${result.workflowId}`, result.signal, result.input)
    );
  }
  return {
    human:
      result.outcome === 'applied'
        ? `${command} applied to hold ${holdId}: the workflow answered ${result.answer.decision} of policy run ${result.answer.policyRun}, now ${result.answer.stage}`
        : `${command} not applied to hold ${holdId}: ${result.detail}`,
    code: result.outcome === 'applied' ? 0 : 3,
  };
}

const secretOnce = (secret: string) =>
  `signing secret (shown once, give it to the merchant; it verifies with it): ${secret}`;

/** `merchant pause|resume`: exit 3 when there was nothing to do. */
const merchantChange = (result: AnswerOf<'merchant.pause'>): Shown => ({
  human: `${result.changed ? '' : `nothing to do: already ${result.merchant.status}\n`}${merchantLines(result.merchant)}`,
  code: result.changed ? 0 : 3,
});

function destinationLines(d: AnswerOf<'destination.show'>): string {
  return [
    `destination ${d.id}: ${d.ratePerSecond}/s for all its merchants together` +
      (d.maxInFlight === null ? '' : `, at most ${d.maxInFlight} requests open at once`),
    d.note ? `note: ${d.note}` : '',
    `merchants sharing it: ${d.merchants.length ? d.merchants.join(', ') : 'none yet (merchant set <id> --destination ' + d.id + ')'}`,
  ]
    .filter(Boolean)
    .join('\n');
}

const ignoredLines = (ignored: { webhookId: string; detail: string }[]) =>
  ignored.map((i) => `\n  ${i.webhookId}: ${i.detail}`).join('');

function merchantLines(m: AnswerOf<'merchant.show'>): string {
  return [
    `merchant ${m.id} (${m.name}): ${m.status}${m.statusReason ? ` since ${m.statusSince}: ${m.statusReason}` : ''}`,
    `endpoint: ${m.endpointUrl}`,
    `rate: ${m.ratePerSecond}/s, burst ${m.burst} (the merchant may declare up to ${m.rateCeiling}/s, burst ${m.burstCeiling})`,
    `event types: ${m.eventTypes?.join(', ') ?? 'every type'}`,
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

/** Errors whose message is the answer: a rejection, and what the admin API answered or why it did not. */
const NAMED = [...REJECTIONS, AdminApiError, AdminApiUnreachable];

/**
 * What the CLI prints for a named error (exit 2): `Name(code): message`, or with --json one JSON object (`error`,
 * `code`, `message`, and through the admin API its `status` and `requestId`). Undefined for anything else (exit 1).
 */
export function operatorErrorText(err: unknown, json: boolean): string | undefined {
  if (!(err instanceof Error) || !NAMED.some((type) => err instanceof type)) return undefined;
  // A message may quote what a caller or the admin API said: printed inert, as every answer is.
  return inertLines(namedErrorText(err, json));
}

function namedErrorText(e: Error, json: boolean): string {
  if (!json) return `${e.name}${e instanceof OperatorError ? `(${e.code})` : ''}: ${e.message}`;
  if (e instanceof AdminApiError) {
    return JSON.stringify({
      error: e.error,
      ...(e.code ? { code: e.code } : {}),
      message: e.detail,
      status: e.status,
      requestId: e.requestId,
    });
  }
  return JSON.stringify({
    error: e.name,
    ...(e instanceof OperatorError ? { code: e.code } : {}),
    message: e.message,
  });
}
