/**
 * Every operator verb, once: its HTTP route on the admin API, the roles that may call it, its input and its answer
 * (zod schemas: the API validates the input with their JSON Schema and publishes both in its OpenAPI document, the CLI
 * parses its options with them and prints the answer typed), and what it does (the functions beside it in
 * src/operations/). The admin API (admin-server.ts) serves them; the operators' CLI (src/operations/cli.ts) calls them through
 * it, or runs them itself against the ledger when no API is configured (dev, and the break-glass path); its commands,
 * options and help are made from this table. Input field names are the CLI's option names in camel case, unless a
 * verb's `cli` spells one otherwise; `by` / `requestedBy` is never input on the API: it is the verified caller.
 */
import type { Client } from '@temporalio/client';
import type pg from 'pg';
import { z } from 'zod';
import { isPool, type Queryable } from '../db/pool.js';
import { jsonSchema } from '../doors.js';
import { parseDuration, type RegionConfig } from '../config.js';
import { DELIVERY_STATUSES } from '../contracts/delivery.js';
import { QUARANTINE_REASONS } from '../contracts/failures.js';
import { InvalidEndpointUrl, type EndpointRules } from '../delivery/endpoint.js';
import { InvalidDeliveryPolicyError } from '../delivery/policy.js';
import { MissingSigningSecret } from '../delivery/standard-webhooks.js';
import { ConfigError, InvalidMerchantSetting, OperatorError } from '../errors.js';
import type { SecretsAtRest } from '../delivery/secret-box.js';
import { webhooksInStatus } from '../sql/deliveries.js';
import { refusedRequests, reviews } from '../sql/processor-events.js';
import { auditEntries } from '../sql/audit.js';
import { apiKeysOf } from '../sql/merchant-api.js';
import { createApiKey, mintPortalLink, revokeApiKey } from './merchant-keys.js';
import {
  addMerchant,
  pauseMerchant,
  pingMerchant,
  resumeMerchant,
  rotateSigningSecret,
  setDestination,
  setMerchant,
  showDestination,
  showMerchant,
} from './merchants.js';
import {
  approveHold,
  approveReplayRequest,
  discardHold,
  holdStatus,
  listQuarantined,
  previewReplay,
  redeliverEventWebhook,
  type OpsContext,
} from './operations.js';
import { approveSkip, holdEvents, requestSkip, resolveReview, skipMissingEvent } from './processor-events.js';
import { approveResendRequest, previewResend, resendWebhookNow } from './resends.js';
import { pauseSends, resumeSends, sendsStatus } from './send-pauses.js';
import { pauseSweeps, resumeSweeps, sweepNowUnlessPaused, sweepsStatus } from './sweep-pauses.js';
import type { Role } from '../contracts/identity.js';

/**
 * What a verb runs with: the region's ledger (the operators' role), its Temporal client, and the merchant secrets'
 * keys.
 */
export interface AdminContext {
  region: RegionConfig;
  /**
   * The ledger: the pool, or, for a verb whose whole effect is ledger rows (`effect: 'ledger'`), the transaction its
   * audit row is written in (src/api/admin-server.ts).
   */
  pool: Queryable;
  /** Absent where only the ledger is reached (the CLI's merchant verbs, run locally). */
  client?: Client;
  fourEyes?: boolean;
  /**
   * Where a merchant endpoint may point (WEBHOOK_* of the configuration): `merchant add`, `set` and `ping` check it.
   */
  webhooks: EndpointRules;
  secrets: SecretsAtRest;
}

/**
 * Errors that say what was wrong with a verb's input or what the ledger refused: the caller reads their name and
 * message (the API answers them 4xx, the CLI prints them and exits 2).
 */
export const REJECTIONS = [
  OperatorError,
  ConfigError,
  InvalidMerchantSetting,
  InvalidEndpointUrl,
  InvalidDeliveryPolicyError,
  MissingSigningSecret,
];

/** A verb's input as the CLI and the API hand it over: its fields, its path's parameters, and who acts. */
export type VerbInput = Record<string, unknown>;

/** An option of the CLI that is not `--kebab-case <value>` of its field's name and type. */
interface CliSpelling {
  /** commander's syntax: `--overlap <duration>`, or a flag without a value. */
  flags: string;
  description: string;
  /** The field's input value from what was typed (undefined for a flag without a value). */
  value: (typed: string | undefined) => unknown;
}

/** The path's parameter names (`/v1/holds/:holdId/events` → `holdId`). */
type ParamsOf<P extends string> = P extends `${string}:${infer Name}/${infer Rest}`
  ? Name | ParamsOf<Rest>
  : P extends `${string}:${infer Name}`
    ? Name
    : never;

/** A path parameter: what it names, as Fastify takes it. */
const PARAM = z.string().min(1).max(200);

/** The whole input of a verb: its path's parameters and its fields, nothing else. */
type Request<P extends string, F extends z.ZodRawShape> = z.ZodObject<
  F & Record<ParamsOf<P>, typeof PARAM>,
  z.core.$strict
>;

/** A verb as the table declares it. */
interface VerbSpec<Id extends string, P extends string, F extends z.ZodRawShape, A extends z.ZodType> {
  /** e.g. `replay.approve`: the audit's and the OpenAPI operation's name. */
  id: Id;
  /** The CLI command that calls it. */
  command: string;
  summary: string;
  method: 'GET' | 'POST';
  /** Fastify's syntax: `/v1/holds/:holdId`. */
  path: P;
  roles: readonly Role[];
  /** Who acts, by the input's name for them: the verified caller's subject (never sent by the caller on the API). */
  actor?: 'by' | 'requestedBy';
  /** Input fields besides the path's parameters: querystring for GET, JSON body for POST. */
  fields: F;
  /** Which input field names what it acts on, for the audit. */
  target?: (ParamsOf<P> | keyof F) & string;
  /** It needs Temporal (the rest read or write the ledger only, but for `reachesMerchant`). */
  temporal?: true;
  /** It sends a request to a merchant's endpoint (`merchant ping`): an effect outside the ledger, like Temporal's. */
  reachesMerchant?: true;
  /** Its answer (200) as JSON: published in the OpenAPI document, read by the CLI. */
  answer: A;
  /** Where the CLI differs from the fields: the target's name in its usage, and options spelled otherwise, by field. */
  cli?: { operand?: string; options?: Record<string, CliSpelling> };
  /** What it does, with its input parsed, and who acts (the empty string for a verb without an actor). */
  run(ctx: AdminContext, input: z.output<Request<P, F>>, actor: string): Promise<unknown>;
}

/** A verb of the table, with the schema of its whole input, the names of its required fields, and its runner. */
type Verb<Id extends string, P extends string, F extends z.ZodRawShape, A extends z.ZodType> = Omit<
  VerbSpec<Id, P, F, A>,
  'run'
> & {
  request: Request<P, F>;
  required: readonly string[];
  /** Runs it: the input (and who acts, by the actor's name) parsed by `request`. */
  invoke(ctx: AdminContext, input: VerbInput): Promise<unknown>;
};

/** Any verb of the table. */
export type AdminVerb = Verb<string, string, z.ZodRawShape, z.ZodType>;

function verb<const Id extends string, const P extends string, F extends z.ZodRawShape, A extends z.ZodType>(
  spec: VerbSpec<Id, P, F, A>,
): Verb<Id, P, F, A> {
  const params = Object.fromEntries(pathParams(spec).map((name) => [name, PARAM]));
  // The parameters' names are the path's, which the type reads from it too.
  const request = z.strictObject({ ...params, ...spec.fields }) as Request<P, F>;
  const { run, ...declared } = spec;
  return {
    ...declared,
    request,
    required: jsonSchema(z.strictObject(spec.fields)).required ?? [],
    invoke: (ctx, input) => {
      const actor = spec.actor === undefined ? '' : input[spec.actor];
      if (typeof actor !== 'string') throw new Error(`${spec.id} needs who acts (${spec.actor})`);
      return run(
        ctx,
        request.parse(Object.fromEntries(Object.entries(input).filter(([k]) => k !== spec.actor))),
        actor,
      );
    },
  };
}

const EVERYONE: readonly Role[] = ['viewer', 'operator', 'approver', 'merchant-admin'];
const OPERATORS: readonly Role[] = ['operator'];
const APPROVERS: readonly Role[] = ['approver'];
const MERCHANT_ADMINS: readonly Role[] = ['merchant-admin'];

const text = (description: string) => z.string().min(1).max(2000).describe(description);
const time = (description: string) =>
  z
    .string()
    .refine((s) => !Number.isNaN(Date.parse(s)))
    .meta({ format: 'date-time', description });
const id = (description: string) =>
  z
    .string()
    .min(1)
    .max(200)
    .regex(/^[A-Za-z0-9_.:-]+$/)
    .describe(description);
const count = z.number().int().min(0);
const selection = {
  merchant: id('only this merchant').optional(),
  since: time('written at or after').optional(),
  until: time('written before').optional(),
};
const quarantineSelection = {
  ...selection,
  reason: z.enum(QUARANTINE_REASONS).describe('only this quarantine reason').optional(),
  hold: id('only this hold').optional(),
  webhook: id('only this webhook').optional(),
};

/** A row of a list, or an object the answer carries as the ledger has it. */
const row = z.looseObject({});
/** A list: wrapped in an object (`{ items }`), as every answer is one. */
const list = <S extends z.ZodRawShape>(item: S) => z.looseObject({ items: z.array(z.looseObject(item)) });
/** What the sweeps verbs answer: src/operations/sweep-pauses.ts `SweepsState`. */
const SWEEPS_STATE = z.looseObject({
  paused: z.boolean(),
  note: z.string(),
  nextSweeps: z.array(z.string()),
  recentSweeps: z.array(z.looseObject({ workflowId: z.string(), startedAt: z.string() })),
});
const frozen = z.looseObject({ id: z.string(), count, webhookIds: z.array(z.string()) });
const frozenAnswer = (r: { id: string; count: number; items: { webhookId: string }[] }) => ({
  id: r.id,
  count: r.count,
  webhookIds: r.items.map((i) => i.webhookId),
});
const ignored = z.array(z.looseObject({ webhookId: z.string(), detail: z.string() }));
const approval = z.looseObject({
  id: z.string(),
  applied: count,
  ignored,
  alreadyDone: count.optional(),
  /** `send: false`: what carries the approval to its workflows. */
  recordOnly: z
    .looseObject({ namespace: z.string(), workflowIds: z.array(z.string()), signal: z.string(), input: row })
    .optional(),
});
/** What the workflow answered to a decision, or the decision recorded and not sent. */
const decision = z.union([
  z.looseObject({
    outcome: z.literal('applied'),
    answer: z.looseObject({ decision: z.string(), policyRun: z.number(), stage: z.string() }),
  }),
  z.looseObject({ outcome: z.enum(['ignored', 'rejected', 'unavailable']), detail: z.string() }),
  z.looseObject({
    outcome: z.literal('recorded'),
    namespace: z.string(),
    workflowId: z.string(),
    signal: z.string(),
    input: z.looseObject({ decisionId: z.string().optional() }),
  }),
]);
/** Whether the decision is sent to its workflows now, or only recorded for the `temporal` CLI or the Web UI to carry. */
const SEND = z
  .boolean()
  .default(true)
  .describe('false: record the decision only; carry it with the temporal CLI or the Web UI (docs/security.md)');
/** The CLI's `send: false`: a flag, as the decision is sent unless said. */
const RECORD_ONLY: Record<string, CliSpelling> = {
  send: {
    flags: '--record-only',
    description: 'record the decision only, and print the temporal CLI command that carries it (docs/security.md)',
    value: () => false,
  },
};
const nullable = z.string().nullable();
/** src/sql/merchants.ts `MerchantView`. */
const merchantView = z.looseObject({
  id: z.string(),
  name: z.string(),
  status: z.string(),
  statusReason: nullable,
  statusSince: nullable,
  endpointUrl: z.string(),
  ratePerSecond: z.number(),
  burst: z.number(),
  rateCeiling: z.number(),
  burstCeiling: z.number(),
  deliveryPolicy: z.record(z.string(), z.unknown()),
  hasSigningSecret: z.boolean(),
  hasPreviousSecret: z.boolean(),
  previousSecretSignsUntil: nullable,
  eventTypes: z.array(z.string()).nullable(),
  budget: z.looseObject({
    destination: nullable,
    sharedWith: z.number(),
    ratePerSecond: z.number(),
    nextSlotAt: nullable,
    pausedUntil: nullable,
    pauseReason: nullable,
    backlog: z.number(),
    oldestPendingSeconds: z.number().nullable(),
    drainSeconds: z.number(),
  }),
});
const merchantChange = z.looseObject({ changed: z.boolean(), merchant: merchantView });
const secret = z.string().regex(/^whsec_/);
const destinationView = z.looseObject({
  id: z.string(),
  ratePerSecond: z.number(),
  maxInFlight: z.number().int().nullable().optional(),
  note: nullable.optional(),
  merchants: z.array(z.string()),
});

/** A merchant's settings, each optional: `merchant set` changes the ones given. */
const merchantFields = {
  name: text('display name').optional(),
  url: text('the webhook endpoint (https in production)').optional(),
  rate: z.number().describe('requests per second the merchant accepts').optional(),
  burst: z.number().int().describe('requests it accepts at once above the rate').optional(),
  rateCeiling: z.number().describe('the most requests per second the merchant may declare itself (50)').optional(),
  burstCeiling: z.number().int().describe('the most burst the merchant may declare itself (50)').optional(),
  policy: z.record(z.string(), z.unknown()).describe('delivery policy overrides (docs/webhooks.md)').optional(),
  destination: id('a declared destination whose budget it shares, or "none" (its own)').optional(),
};

function merchantSettings(input: z.output<z.ZodObject<typeof merchantFields>>) {
  return {
    name: input.name,
    endpointUrl: input.url,
    ratePerSecond: input.rate,
    burst: input.burst,
    rateCeiling: input.rateCeiling,
    burstCeiling: input.burstCeiling,
    deliveryPolicy: input.policy,
    // `none` leaves a shared destination; absent changes nothing.
    destinationId: input.destination === 'none' ? null : input.destination,
  };
}

/** A quarantine or resend selection's input, as the ledger's queries name it. */
const filters = (input: z.output<z.ZodObject<typeof quarantineSelection>> & { limit?: number }) => ({
  merchantId: input.merchant,
  holdId: input.hold,
  webhookId: input.webhook,
  since: input.since,
  until: input.until,
  reason: input.reason,
  limit: input.limit,
});

/**
 * How a call of the verb is audited (src/api/admin-server.ts): a read after it answers; one whose whole effect is
 * ledger rows in the transaction that writes them; one that acts outside the ledger (Temporal, a merchant's endpoint)
 * before it acts, its outcome filled in after.
 */
export function auditOf(verb: AdminVerb): 'after' | 'in-transaction' | 'ahead' {
  if (verb.method === 'GET') return 'after';
  return verb.temporal || verb.reachesMerchant ? 'ahead' : 'in-transaction';
}

/** The ledger's pool: a verb that acts outside the ledger is never run inside the audit's transaction. */
function poolOf(ctx: AdminContext): pg.Pool {
  if (!isPool(ctx.pool)) throw new Error('a verb that acts outside the ledger runs on the pool, not in a transaction');
  return ctx.pool;
}

/** The verb's context with its Temporal client (every verb with `temporal: true`). */
function ops(ctx: AdminContext): OpsContext {
  if (!ctx.client) throw new Error('this verb needs Temporal: the context has no client');
  return { region: ctx.region, pool: poolOf(ctx), client: ctx.client, fourEyes: ctx.fourEyes };
}

/** The verbs, each with its own types: the CLI's printers read a verb's answer as its schema says. */
const TABLE = [
  verb({
    id: 'sweep.now',
    command: 'sweep-now',
    summary: "Trigger the region's sweep now (a running sweep is not doubled; refused while sweeps are paused).",
    method: 'POST',
    path: '/v1/sweeps',
    roles: OPERATORS,
    fields: {},
    temporal: true,
    answer: z.looseObject({ workflowId: z.string().min(1) }),
    run: (ctx) => sweepNowUnlessPaused(ops(ctx)),
  }),
  verb({
    id: 'sweeps.pause',
    command: 'sweeps pause',
    summary: "Stop discovery: the region's sweep schedule paused, with who and why; what started goes on.",
    method: 'POST',
    path: '/v1/sweeps/pause',
    roles: OPERATORS,
    actor: 'by',
    fields: { reason: text('why') },
    temporal: true,
    answer: SWEEPS_STATE,
    run: (ctx, { reason }, by) => pauseSweeps(ops(ctx), by, reason),
  }),
  verb({
    id: 'sweeps.resume',
    command: 'sweeps resume',
    summary: "Sweep again: the region's sweep schedule unpaused, with who and why.",
    method: 'POST',
    path: '/v1/sweeps/resume',
    roles: OPERATORS,
    actor: 'by',
    fields: { reason: text('why') },
    temporal: true,
    answer: SWEEPS_STATE,
    run: (ctx, { reason }, by) => resumeSweeps(ops(ctx), by, reason),
  }),
  verb({
    id: 'sweeps.status',
    command: 'sweeps status',
    summary: 'The sweep schedule: paused or not, its note, the next and the last sweeps.',
    method: 'GET',
    path: '/v1/sweeps/status',
    roles: EVERYONE,
    fields: {},
    temporal: true,
    answer: SWEEPS_STATE,
    run: (ctx) => sweepsStatus(ops(ctx)),
  }),
  verb({
    id: 'hold.status',
    command: 'status',
    summary: 'A hold: its ledger row, webhook, attempts, decisions, workflow and why it is waiting.',
    method: 'GET',
    path: '/v1/holds/:holdId',
    roles: EVERYONE,
    fields: {},
    target: 'holdId',
    temporal: true,
    answer: z.looseObject({
      hold: z.looseObject({ id: z.string(), state: z.string(), reject_code: nullable, merchant_id: z.string() }),
      ledgerEntry: row.nullable(),
      delivery: z.looseObject({ webhook_id: z.string(), status: z.string(), quarantine_reason: nullable }).nullable(),
      attempts: z.array(row),
      decisions: z.array(row),
      resends: z.array(row),
      processorEvents: z.array(z.looseObject({ sequence: z.number(), event_type: z.string(), outcome: nullable })),
      workflow: z
        .looseObject({
          workflowId: z.string(),
          status: z.string(),
          waiting: z.unknown(),
          retrying: z.looseObject({ attempt: z.number(), lastFailure: nullable, nextAttemptAt: nullable }).nullable(),
        })
        .nullable(),
    }),
    run: (ctx, { holdId }) => holdStatus(ops(ctx), holdId),
  }),
  verb({
    id: 'quarantine.list',
    command: 'quarantine list',
    summary: 'Quarantined webhooks, oldest quarantine first.',
    method: 'GET',
    path: '/v1/quarantine',
    roles: EVERYONE,
    fields: quarantineSelection,
    answer: list({}),
    run: (ctx, input) => listQuarantined(ctx.pool, filters(input)),
  }),
  verb({
    id: 'webhooks.list',
    command: 'webhooks list',
    summary: 'Webhooks in one status, oldest first.',
    method: 'GET',
    path: '/v1/webhooks',
    roles: EVERYONE,
    fields: {
      ...selection,
      status: z.enum(DELIVERY_STATUSES).describe('only webhooks in this status'),
      limit: z.number().int().min(1).max(1000).default(20).describe('at most this many, oldest first'),
    },
    answer: list({}),
    run: (ctx, { status, merchant, since, until, limit }) =>
      webhooksInStatus(ctx.pool, status, { merchantId: merchant, since, until, limit }),
  }),
  verb({
    id: 'replay.preview',
    command: 'replay preview',
    summary: 'Freeze the matching quarantined webhooks into a replay request, for someone else to approve.',
    method: 'POST',
    path: '/v1/replay-requests',
    roles: OPERATORS,
    actor: 'requestedBy',
    fields: {
      ...quarantineSelection,
      limit: z.number().int().min(1).max(100_000).describe('only the oldest N (a canary)').optional(),
    },
    answer: frozen,
    run: async (ctx, input, requestedBy) => frozenAnswer(await previewReplay(ctx.pool, filters(input), requestedBy)),
  }),
  verb({
    id: 'replay.approve',
    command: 'replay approve',
    summary: 'Replay exactly the frozen set of a replay request (not by its requester), paced; resumable.',
    method: 'POST',
    path: '/v1/replay-requests/:requestId/approve',
    roles: APPROVERS,
    actor: 'by',
    fields: {
      ticket: text('the change ticket').optional(),
      rate: z.number().gt(0).describe('signals per second').optional(),
      send: SEND,
    },
    target: 'requestId',
    temporal: true,
    answer: approval,
    cli: { options: RECORD_ONLY },
    run: (ctx, { requestId, rate, ticket, send }, by) =>
      approveReplayRequest(ops(ctx), requestId, by, { signalsPerSecond: rate, ticket, send }),
  }),
  verb({
    id: 'quarantine.approve',
    command: 'approve',
    summary: 'Replay one quarantined webhook (a hold id: its release’s). Four eyes: refused; use a replay request.',
    method: 'POST',
    path: '/v1/quarantine/:id/approve',
    roles: APPROVERS,
    actor: 'by',
    fields: { reason: text('why'), ticket: text('the change ticket').optional() },
    target: 'id',
    temporal: true,
    answer: decision,
    cli: { operand: 'hold id | webhook id' },
    run: (ctx, input, by) => approveHold(ops(ctx), input.id, by, input.reason, input.ticket),
  }),
  verb({
    id: 'quarantine.discard',
    command: 'discard',
    summary: 'End one quarantined webhook without sending it.',
    method: 'POST',
    path: '/v1/quarantine/:id/discard',
    roles: OPERATORS,
    actor: 'by',
    fields: { reason: text('why'), send: SEND },
    target: 'id',
    temporal: true,
    answer: decision,
    cli: { operand: 'hold id | webhook id', options: RECORD_ONLY },
    run: (ctx, input, by) => discardHold(ops(ctx), input.id, by, input.reason, { send: input.send }),
  }),
  verb({
    id: 'webhook.resend',
    command: 'resend',
    summary:
      'Send a webhook at an end again (same id and payload, fresh signature). Four eyes: refused; use a resend request.',
    method: 'POST',
    path: '/v1/webhooks/:webhookId/resend',
    roles: APPROVERS,
    actor: 'by',
    fields: { reason: text('why'), ticket: text('the change ticket').optional() },
    target: 'webhookId',
    temporal: true,
    answer: z.looseObject({
      resendId: z.string(),
      workflowId: z.string(),
      webhookId: z.string(),
      policyRun: z.number().int().nullable().optional(),
    }),
    run: (ctx, { webhookId, reason, ticket }, by) => resendWebhookNow(ops(ctx), webhookId, by, reason, ticket),
  }),
  verb({
    id: 'resend.preview',
    command: 'resend preview',
    summary: 'Freeze the matching webhooks at an end into a resend request, for someone else to approve.',
    method: 'POST',
    path: '/v1/resend-requests',
    roles: OPERATORS,
    actor: 'requestedBy',
    fields: { ...selection, webhook: id('only this webhook').optional() },
    answer: frozen,
    run: async (ctx, { merchant, webhook, since, until }, requestedBy) =>
      frozenAnswer(
        await previewResend(ctx.pool, { merchantId: merchant, webhookId: webhook, since, until }, requestedBy),
      ),
  }),
  verb({
    id: 'resend.approve',
    command: 'resend approve',
    summary: 'Resend exactly the frozen set of a resend request (not by its requester), paced; resumable.',
    method: 'POST',
    path: '/v1/resend-requests/:requestId/approve',
    roles: APPROVERS,
    actor: 'by',
    fields: {
      ticket: text('the change ticket').optional(),
      rate: z.number().gt(0).describe('resends started per second').optional(),
    },
    target: 'requestId',
    temporal: true,
    answer: approval,
    run: (ctx, { requestId, rate, ticket }, by) =>
      approveResendRequest(ops(ctx), requestId, by, { startsPerSecond: rate, ticket }),
  }),
  verb({
    id: 'merchant.add',
    command: 'merchant add',
    summary: 'Add a merchant; its new signing secret is in the answer, once.',
    method: 'POST',
    path: '/v1/merchants',
    roles: MERCHANT_ADMINS,
    fields: {
      merchantId: id('the new merchant’s id'),
      ...merchantFields,
      name: text('display name'),
      url: text('the webhook endpoint (https in production)'),
    },
    target: 'merchantId',
    answer: z.looseObject({ merchant: merchantView, signingSecret: secret }),
    run: (ctx, input) =>
      addMerchant(ctx.pool, ctx.webhooks, ctx.secrets, {
        ...merchantSettings(input),
        id: input.merchantId,
        name: input.name,
        endpointUrl: input.url,
      }),
  }),
  verb({
    id: 'merchant.show',
    command: 'merchant show',
    summary: 'A merchant: endpoint, limits, status, policy, budget (secrets: only whether set).',
    method: 'GET',
    path: '/v1/merchants/:merchantId',
    roles: EVERYONE,
    fields: {},
    target: 'merchantId',
    answer: merchantView,
    run: (ctx, { merchantId }) => showMerchant(ctx.pool, merchantId),
  }),
  verb({
    id: 'merchant.set',
    command: 'merchant set',
    summary: 'Change the given settings, checked as delivery will read them.',
    method: 'POST',
    path: '/v1/merchants/:merchantId',
    roles: MERCHANT_ADMINS,
    fields: merchantFields,
    target: 'merchantId',
    answer: merchantView,
    run: (ctx, input) => setMerchant(ctx.pool, ctx.webhooks, input.merchantId, merchantSettings(input)),
  }),
  verb({
    id: 'merchant.pause',
    command: 'merchant pause',
    summary: 'Stop sending to a merchant; its webhooks wait, held, until resumed.',
    method: 'POST',
    path: '/v1/merchants/:merchantId/pause',
    roles: MERCHANT_ADMINS,
    fields: { reason: text('why sending stops') },
    target: 'merchantId',
    answer: merchantChange,
    run: (ctx, { merchantId, reason }) => pauseMerchant(ctx.pool, merchantId, reason),
  }),
  verb({
    id: 'destination.set',
    command: 'destination set',
    summary: 'Declare a destination several merchants share, with the rate it publishes for all of them, or change it.',
    method: 'POST',
    path: '/v1/destinations/:destinationId',
    roles: MERCHANT_ADMINS,
    fields: {
      rate: z.number().describe('requests per second the destination accepts, all its merchants together').optional(),
      maxInFlight: z.number().int().min(1).describe('requests open at once, all its merchants together').optional(),
      note: text('who the destination is (a platform receiving for its merchants)').optional(),
    },
    target: 'destinationId',
    answer: destinationView,
    run: (ctx, { destinationId, rate, maxInFlight, note }) =>
      setDestination(ctx.pool, { id: destinationId, ratePerSecond: rate, maxInFlight, note }),
  }),
  verb({
    id: 'destination.show',
    command: 'destination show',
    summary: 'A declared destination: its rate, its cap on requests in flight, the merchants sharing it.',
    method: 'GET',
    path: '/v1/destinations/:destinationId',
    roles: EVERYONE,
    fields: {},
    target: 'destinationId',
    answer: destinationView,
    run: (ctx, { destinationId }) => showDestination(ctx.pool, destinationId),
  }),
  verb({
    id: 'merchant.resume',
    command: 'merchant resume',
    summary: 'Send to a merchant again (also after a 410 Gone disabled it).',
    method: 'POST',
    path: '/v1/merchants/:merchantId/resume',
    roles: MERCHANT_ADMINS,
    fields: {},
    target: 'merchantId',
    answer: merchantChange,
    run: (ctx, { merchantId }) => resumeMerchant(ctx.pool, merchantId),
  }),
  verb({
    id: 'merchant.rotate-secret',
    command: 'merchant rotate-secret',
    summary: 'A new signing secret (in the answer, once); the old one also signs until the overlap ends.',
    method: 'POST',
    path: '/v1/merchants/:merchantId/rotate-secret',
    roles: MERCHANT_ADMINS,
    fields: {
      overlapMs: z
        .number()
        .int()
        .min(0)
        .describe('how long the old secret also signs, ms (24 h unless given)')
        .optional(),
    },
    target: 'merchantId',
    answer: z.looseObject({ merchant: merchantView, signingSecret: secret, previousSignsUntil: z.string() }),
    cli: {
      options: {
        overlapMs: {
          flags: '--overlap <duration>',
          description: 'how long the old secret also signs: 30m, 24h, 7d (24h unless given)',
          value: (typed) => parseDuration('--overlap', typed ?? ''),
        },
      },
    },
    run: (ctx, { merchantId, overlapMs }) => rotateSigningSecret(ctx.pool, ctx.secrets, merchantId, overlapMs),
  }),
  verb({
    id: 'merchant.ping',
    command: 'merchant ping',
    summary: "One signed merchant.ping in the merchant's rate budget; the answer and what the policy would do.",
    method: 'POST',
    path: '/v1/merchants/:merchantId/ping',
    roles: MERCHANT_ADMINS,
    fields: {},
    target: 'merchantId',
    reachesMerchant: true,
    answer: z.looseObject({
      webhookId: z.string(),
      url: z.string(),
      signatures: z.number(),
      waitedMs: z.number(),
      statusCode: z.number().nullable(),
      errorClass: nullable,
      durationMs: z.number(),
      responseExcerpt: z.string(),
      policyAction: z.string(),
      policyRule: z.string(),
    }),
    run: (ctx, { merchantId }) => pingMerchant(poolOf(ctx), ctx.webhooks, ctx.secrets, merchantId),
  }),
  verb({
    id: 'merchant.api-key.create',
    command: 'merchant api-key create',
    summary: 'A new API key for the merchant API, for this merchant; the key is in the answer, once.',
    method: 'POST',
    path: '/v1/merchants/:merchantId/api-keys',
    roles: MERCHANT_ADMINS,
    actor: 'by',
    fields: {
      label: text('what the key is for').optional(),
      rate: z.number().gt(0).max(1000).describe('requests per second the key may make (5)').optional(),
      burst: z.number().int().min(1).max(10000).describe('requests at once above the rate (10)').optional(),
    },
    target: 'merchantId',
    answer: z.looseObject({
      id: z.string().regex(/^mk_[0-9a-f]{16}$/),
      merchantId: z.string(),
      apiKey: z.string().regex(/^hsk_mk_/),
      ratePerSecond: z.number(),
      burst: z.number().int(),
    }),
    run: (ctx, { merchantId, label, rate, burst }, by) =>
      createApiKey(ctx.pool, merchantId, by, { label, ratePerSecond: rate, burst }),
  }),
  verb({
    id: 'merchant.api-key.revoke',
    command: 'merchant api-key revoke',
    summary: 'Revoke an API key: from now on it is refused (401).',
    method: 'POST',
    path: '/v1/api-keys/:keyId/revoke',
    roles: MERCHANT_ADMINS,
    actor: 'by',
    fields: {},
    target: 'keyId',
    answer: z.looseObject({ id: z.string(), revokedBy: z.string() }),
    run: (ctx, { keyId }, by) => revokeApiKey(ctx.pool, keyId, by),
  }),
  verb({
    id: 'merchant.api-keys',
    command: 'merchant api-keys',
    summary: "A merchant's API keys (never their secret): label, budget, made and revoked by whom, last used.",
    method: 'GET',
    path: '/v1/merchants/:merchantId/api-keys',
    roles: EVERYONE,
    fields: {},
    target: 'merchantId',
    answer: list({ id: z.string(), created_by: z.string() }),
    run: (ctx, { merchantId }) => apiKeysOf(ctx.pool, merchantId),
  }),
  verb({
    id: 'merchant.portal-link',
    command: 'merchant portal-link',
    summary: 'A link that signs the merchant in to its portal (PORTAL_URL_<R>) until it expires; in the answer, once.',
    method: 'POST',
    path: '/v1/merchants/:merchantId/portal-links',
    roles: MERCHANT_ADMINS,
    actor: 'by',
    fields: {
      ttlMs: z.number().int().min(60_000).max(86_400_000).describe('how long the link works, ms (1 h)').optional(),
    },
    target: 'merchantId',
    answer: z.looseObject({
      id: z.string().regex(/^mk_[0-9a-f]{16}$/),
      merchantId: z.string(),
      link: z.url(),
      expiresAt: z.string(),
    }),
    cli: {
      options: {
        ttlMs: {
          flags: '--ttl <duration>',
          description: 'how long the link works: 15m, 1h, 24h (1h unless given)',
          value: (typed) => parseDuration('--ttl', typed ?? ''),
        },
      },
    },
    run: (ctx, { merchantId, ttlMs }, by) => mintPortalLink(ctx.pool, ctx.region.portalUrl, merchantId, by, ttlMs),
  }),
  verb({
    id: 'events.show',
    command: 'events show',
    summary: "A hold's processor events, skips, reviews and workflow.",
    method: 'GET',
    path: '/v1/holds/:holdId/events',
    roles: EVERYONE,
    fields: {},
    target: 'holdId',
    temporal: true,
    answer: z.looseObject({
      holdId: z.string(),
      events: z.array(row),
      skips: z.array(row),
      reviews: z.array(row),
      workflow: z
        .looseObject({
          workflowId: z.string(),
          status: z.string(),
          account: z.looseObject({ stage: z.unknown() }).optional(),
        })
        .nullable()
        .optional(),
    }),
    run: (ctx, { holdId }) => holdEvents(ops(ctx), holdId),
  }),
  verb({
    id: 'events.skip',
    command: 'events skip',
    summary: 'A hold stopped at a gap: skip the missing event (four eyes: records a skip request for someone else).',
    method: 'POST',
    path: '/v1/holds/:holdId/skips',
    roles: OPERATORS,
    actor: 'by',
    fields: { sequence: z.number().int().min(1).describe('the missing sequence'), reason: text('why') },
    target: 'holdId',
    temporal: true,
    answer: z.looseObject({
      requested: z.looseObject({ requestId: z.string() }).optional(),
      skipped: z.looseObject({ workflowId: z.string() }).optional(),
    }),
    run: async (ctx, { holdId, sequence, reason }, by) => {
      if (ctx.fourEyes) return { requested: await requestSkip(ops(ctx), holdId, sequence, by, reason) };
      return { skipped: await skipMissingEvent(ops(ctx), holdId, sequence, by, reason) };
    },
  }),
  verb({
    id: 'events.approve-skip',
    command: 'events approve-skip',
    summary: 'Approve a skip request (not by its requester) and carry it out.',
    method: 'POST',
    path: '/v1/skip-requests/:requestId/approve',
    roles: APPROVERS,
    actor: 'by',
    fields: {},
    target: 'requestId',
    temporal: true,
    answer: z.looseObject({ workflowId: z.string() }),
    run: (ctx, { requestId }, by) => approveSkip(ops(ctx), requestId, by),
  }),
  verb({
    id: 'events.redeliver',
    command: 'events redeliver',
    summary: "A new delivery run for an event's webhook whose workflow ended without finishing it.",
    method: 'POST',
    path: '/v1/webhooks/:webhookId/redeliver',
    roles: OPERATORS,
    fields: {},
    target: 'webhookId',
    temporal: true,
    answer: z.looseObject({ workflowId: z.string(), runId: z.string() }),
    run: (ctx, { webhookId }) => redeliverEventWebhook(ops(ctx), webhookId),
  }),
  verb({
    id: 'events.refused',
    command: 'events refused',
    summary: 'Signed processor requests the receiver refused, newest first.',
    method: 'GET',
    path: '/v1/refused-requests',
    roles: EVERYONE,
    fields: { since: time('refused at or after').optional() },
    answer: list({}),
    run: (ctx, { since }) => refusedRequests(ctx.pool, since),
  }),
  verb({
    id: 'sends.pause',
    command: 'sends pause',
    summary: 'Stop every send of the region: deliveries wait, held; releases go on.',
    method: 'POST',
    path: '/v1/sends/pause',
    roles: OPERATORS,
    actor: 'by',
    fields: { reason: text('why') },
    temporal: true,
    answer: z.looseObject({ pausedAt: z.unknown(), pausedBy: z.string() }),
    run: (ctx, { reason }, by) => pauseSends(ops(ctx), by, reason),
  }),
  verb({
    id: 'sends.resume',
    command: 'sends resume',
    summary: 'Send again; every held delivery re-checks at once.',
    method: 'POST',
    path: '/v1/sends/resume',
    roles: OPERATORS,
    actor: 'by',
    fields: { reason: text('why') },
    temporal: true,
    answer: z.looseObject({
      pause: z.looseObject({ pausedAt: z.unknown(), resumedAt: z.unknown(), resumedBy: z.unknown() }),
      signalled: count,
      ended: count,
      notSignalled: z.array(z.looseObject({ workflowId: z.string(), error: z.string() })),
    }),
    run: (ctx, { reason }, by) => resumeSends(ops(ctx), by, reason),
  }),
  verb({
    id: 'sends.status',
    command: 'sends status',
    summary: 'Paused or not, by whom and why, and the last pauses.',
    method: 'GET',
    path: '/v1/sends',
    roles: EVERYONE,
    fields: {},
    temporal: true,
    answer: z.looseObject({ paused: z.boolean(), held: count, pauses: z.array(row) }),
    run: (ctx) => sendsStatus(ops(ctx)),
  }),
  verb({
    id: 'reviews.list',
    command: 'reviews list',
    summary: 'Ledger entries flagged for a human (open ones unless all).',
    method: 'GET',
    path: '/v1/reviews',
    roles: EVERYONE,
    fields: { all: z.boolean().default(false).describe('the resolved ones too') },
    answer: list({}),
    run: (ctx, { all }) => reviews(ctx.pool, { all }),
  }),
  verb({
    id: 'reviews.resolve',
    command: 'reviews resolve',
    summary: 'Close one ledger review.',
    method: 'POST',
    path: '/v1/reviews/:eventId/resolve',
    roles: OPERATORS,
    actor: 'by',
    fields: {},
    target: 'eventId',
    temporal: true,
    answer: z.looseObject({ resolved: z.boolean() }),
    run: (ctx, { eventId }, by) => resolveReview(ops(ctx), eventId, by),
  }),
  verb({
    id: 'audit.list',
    command: 'audit',
    summary: "The admin API's audit: every call, who made it (verified), what it did, newest first.",
    method: 'GET',
    path: '/v1/audit',
    roles: EVERYONE,
    fields: {
      since: time('at or after').optional(),
      subject: text('only this caller').optional(),
      limit: z.number().int().min(1).max(1000).default(50).describe('at most this many, newest first'),
    },
    // In the order of the query's columns: the CLI's table prints them in the order they come.
    answer: list({
      id: z.string(),
      at: z.unknown(),
      subject: nullable,
      roles: z.string(),
      verb: z.string(),
      target: nullable,
      outcome: z.enum(['ok', 'refused', 'rejected', 'failed']),
      status: z.number().int(),
    }),
    run: (ctx, { since, subject, limit }) => auditEntries(ctx.pool, { since, subject, limit }),
  }),
];

/** Every verb of the table. */
export const ADMIN_VERBS: readonly AdminVerb[] = TABLE;

type Table = (typeof TABLE)[number];
type VerbId = Table['id'];

/** A verb of the table by its id, with its own input and answer types. */
export function adminVerb<Id extends VerbId>(verbId: Id): VerbOf<Id> {
  const found = TABLE.find((v): v is VerbOf<Id> => v.id === verbId);
  if (!found) throw new Error(`no admin verb ${verbId}`);
  return found;
}

/** The verb of the table with this id, with its own types. */
type VerbOf<Id extends VerbId> = Extract<Table, { id: Id }>;
/** The answer of a verb as its schema reads it. */
export type AnswerOf<Id extends VerbId> = z.output<VerbOf<Id>['answer']>;

export const verbById = (verbId: string): AdminVerb => adminVerb(verbId as VerbId);

/** The JSON Schemas the admin API validates a call of the verb with: its path's parameters (if any), and its fields. */
export function inputSchemas(verb: AdminVerb): {
  params?: z.core.JSONSchema.BaseSchema;
  fields: z.core.JSONSchema.BaseSchema;
} {
  const params = pathParams(verb);
  return {
    ...(params.length ? { params: jsonSchema(z.object(Object.fromEntries(params.map((p) => [p, PARAM])))) } : {}),
    fields: jsonSchema(z.strictObject(verb.fields)),
  };
}

/** The path's parameter names, in order (`/v1/holds/:holdId` → holdId). */
export function pathParams(verb: { path: string }): string[] {
  return [...verb.path.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1]!);
}
