/**
 * Every operator verb, once: its HTTP route on the admin API, the roles that may call it, the schema of its input
 * (validated by the API, published in its OpenAPI document), and what it does (the functions beside it in
 * src/operations/). The admin API (admin-server.ts) serves them; the operators' CLI (src/operations/cli.ts) calls them through
 * it, or runs them itself against the ledger when no API is configured (dev, and the break-glass path); its commands,
 * options and help are made from this table. Input field names are the CLI's option names in camel case, unless a
 * verb's `cli` spells one otherwise; `by` / `requestedBy` is never input on the API: it is the verified caller.
 */
import type { Client } from '@temporalio/client';
import type pg from 'pg';
import { isPool, type Queryable } from '../db/pool.js';
import { parseDuration, type RegionConfig } from '../config.js';
import { DELIVERY_STATUSES, type DeliveryStatus } from '../contracts/delivery.js';
import { QUARANTINE_REASONS, type QuarantineReason } from '../contracts/failures.js';
import type { EndpointRules } from '../delivery/endpoint.js';
import type { SecretsAtRest } from '../delivery/secret-box.js';
import { webhooksInStatus } from '../sql/deliveries.js';
import { refusedRequests, reviews } from '../sql/processor-events.js';
import { auditEntries } from '../sql/audit.js';
import { apiKeysOf } from '../sql/merchant-api.js';
import { createApiKey, revokeApiKey } from './merchant-keys.js';
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

export type VerbInput = Record<string, string | number | boolean | undefined>;

/** A JSON schema of one input field. */
type Field = Record<string, unknown>;

/** An option of the CLI that is not `--kebab-case <value>` of its field's name and type. */
interface CliSpelling {
  /** commander's syntax: `--overlap <duration>`, or a flag without a value. */
  flags: string;
  description: string;
  /** The field's input value from what was typed (undefined for a flag without a value). */
  value: (typed: string | undefined) => unknown;
}

export interface AdminVerb {
  /** e.g. `replay.approve`: the audit's and the OpenAPI operation's name. */
  id: string;
  /** The CLI command that calls it. */
  command: string;
  summary: string;
  method: 'GET' | 'POST';
  /** Fastify's syntax: `/v1/holds/:holdId`. */
  path: string;
  roles: readonly Role[];
  /** The input field the verified caller's subject fills (never sent by the caller on the API). */
  actor?: 'by' | 'requestedBy';
  /** Input fields besides the path's parameters: querystring for GET, JSON body for POST. */
  fields: Record<string, Field>;
  required?: readonly string[];
  /** Which input field names what it acts on, for the audit. */
  target?: string;
  /** Whether it needs Temporal (the rest read or write the ledger only, but for `reachesMerchant`). */
  temporal: boolean;
  /** It sends a request to a merchant's endpoint (`merchant ping`): an effect outside the ledger, like Temporal's. */
  reachesMerchant?: true;
  /**
   * The JSON schema of its answer (200), published in the OpenAPI document; an object with any properties if unsaid.
   */
  response?: Field;
  /** Where the CLI differs from the fields: the target's name in its usage, and options spelled otherwise, by field. */
  cli?: { operand?: string; options?: Record<string, CliSpelling> };
  run(ctx: AdminContext, input: VerbInput): Promise<unknown>;
}

const EVERYONE: readonly Role[] = ['viewer', 'operator', 'approver', 'merchant-admin'];
const OPERATORS: readonly Role[] = ['operator'];
const APPROVERS: readonly Role[] = ['approver'];
const MERCHANT_ADMINS: readonly Role[] = ['merchant-admin'];

const text = (description: string, extra: Field = {}): Field => ({
  type: 'string',
  minLength: 1,
  maxLength: 2000,
  description,
  ...extra,
});
const time = (description: string): Field => ({ type: 'string', format: 'date-time', description });
const id = (description: string): Field => ({
  type: 'string',
  minLength: 1,
  maxLength: 200,
  pattern: '^[A-Za-z0-9_.:-]+$',
  description,
});
const selection = {
  merchant: id('only this merchant'),
  since: time('written at or after'),
  until: time('written before'),
};
const quarantineSelection = {
  ...selection,
  reason: { type: 'string', enum: QUARANTINE_REASONS, description: 'only this quarantine reason' },
};

/** An object with these properties required (more allowed: the answer is the verb's whole result). */
const shape = (properties: Record<string, Field>, required = Object.keys(properties)): Field => ({
  type: 'object',
  additionalProperties: true,
  required,
  properties,
});
const anyObject: Field = { type: 'object', additionalProperties: true };
const list = (item: Record<string, Field> = {}): Field => shape({ items: { type: 'array', items: shape(item) } });
/** What the sweeps verbs answer: src/operations/sweep-pauses.ts `SweepsState`. */
const SWEEPS_STATE = shape({
  paused: { type: 'boolean' },
  note: { type: 'string' },
  nextSweeps: { type: 'array', items: { type: 'string' } },
  recentSweeps: { type: 'array', items: shape({ workflowId: { type: 'string' }, startedAt: { type: 'string' } }) },
});
const frozen = shape({
  id: { type: 'string' },
  count: { type: 'integer', minimum: 0 },
  webhookIds: { type: 'array', items: { type: 'string' } },
});
const approval = shape(
  {
    id: { type: 'string' },
    applied: { type: 'integer', minimum: 0 },
    ignored: { type: 'array', items: shape({ webhookId: { type: 'string' }, detail: { type: 'string' } }) },
    alreadyDone: { type: 'integer', minimum: 0 },
  },
  ['id', 'applied', 'ignored'],
);
const decision = shape({
  outcome: { type: 'string', enum: ['applied', 'ignored', 'rejected', 'unavailable', 'recorded'] },
});
/** Whether the decision is sent to its workflows now, or only recorded for the `temporal` CLI or the Web UI to carry. */
const SEND: Field = {
  type: 'boolean',
  default: true,
  description: 'false: record the decision only; carry it with the temporal CLI or the Web UI (docs/security.md)',
};
/** The CLI's `send: false`: a flag, as the decision is sent unless said. */
const RECORD_ONLY: Record<string, CliSpelling> = {
  send: {
    flags: '--record-only',
    description: 'record the decision only, and print the temporal CLI command that carries it (docs/security.md)',
    value: () => false,
  },
};
const merchantView = shape(
  {
    id: { type: 'string' },
    name: { type: 'string' },
    status: { type: 'string' },
    endpointUrl: { type: 'string' },
    budget: anyObject,
  },
  ['id', 'name', 'status', 'endpointUrl', 'budget'],
);
const merchantChange = shape({ changed: { type: 'boolean' }, merchant: merchantView });
const destinationView = shape(
  {
    id: { type: 'string' },
    ratePerSecond: { type: 'number' },
    maxInFlight: { type: ['integer', 'null'] },
    note: { type: ['string', 'null'] },
    merchants: { type: 'array', items: { type: 'string' } },
  },
  ['id', 'ratePerSecond', 'merchants'],
);

const str = (input: VerbInput, key: string) => input[key] as string | undefined;
const num = (input: VerbInput, key: string) => input[key] as number | undefined;
const filters = (input: VerbInput) => ({
  merchantId: str(input, 'merchant'),
  holdId: str(input, 'hold'),
  webhookId: str(input, 'webhook'),
  since: str(input, 'since'),
  until: str(input, 'until'),
  reason: str(input, 'reason') as QuarantineReason | undefined,
  limit: num(input, 'limit'),
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

export const ADMIN_VERBS: readonly AdminVerb[] = [
  {
    id: 'sweep.now',
    command: 'sweep-now',
    summary: "Trigger the region's sweep now (a running sweep is not doubled; refused while sweeps are paused).",
    method: 'POST',
    path: '/v1/sweeps',
    roles: OPERATORS,
    fields: {},
    temporal: true,
    response: shape({ workflowId: { type: 'string', minLength: 1 } }),
    run: (ctx) => sweepNowUnlessPaused(ops(ctx)),
  },
  {
    id: 'sweeps.pause',
    command: 'sweeps pause',
    summary: "Stop discovery: the region's sweep schedule paused, with who and why; what started goes on.",
    method: 'POST',
    path: '/v1/sweeps/pause',
    roles: OPERATORS,
    actor: 'by',
    fields: { reason: text('why') },
    required: ['reason'],
    temporal: true,
    response: SWEEPS_STATE,
    run: (ctx, input) => pauseSweeps(ops(ctx), str(input, 'by')!, str(input, 'reason')!),
  },
  {
    id: 'sweeps.resume',
    command: 'sweeps resume',
    summary: "Sweep again: the region's sweep schedule unpaused, with who and why.",
    method: 'POST',
    path: '/v1/sweeps/resume',
    roles: OPERATORS,
    actor: 'by',
    fields: { reason: text('why') },
    required: ['reason'],
    temporal: true,
    response: SWEEPS_STATE,
    run: (ctx, input) => resumeSweeps(ops(ctx), str(input, 'by')!, str(input, 'reason')!),
  },
  {
    id: 'sweeps.status',
    command: 'sweeps status',
    summary: 'The sweep schedule: paused or not, its note, the next and the last sweeps.',
    method: 'GET',
    path: '/v1/sweeps/status',
    roles: EVERYONE,
    fields: {},
    temporal: true,
    response: SWEEPS_STATE,
    run: (ctx) => sweepsStatus(ops(ctx)),
  },
  {
    id: 'hold.status',
    command: 'status',
    summary: 'A hold: its ledger row, webhook, attempts, decisions, workflow and why it is waiting.',
    method: 'GET',
    path: '/v1/holds/:holdId',
    roles: EVERYONE,
    fields: {},
    target: 'holdId',
    temporal: true,
    response: shape({
      hold: anyObject,
      attempts: { type: 'array' },
      decisions: { type: 'array' },
      resends: { type: 'array' },
      processorEvents: { type: 'array' },
    }),
    run: (ctx, input) => holdStatus(ops(ctx), str(input, 'holdId')!),
  },
  {
    id: 'quarantine.list',
    command: 'quarantine list',
    summary: 'Quarantined webhooks, oldest quarantine first.',
    method: 'GET',
    path: '/v1/quarantine',
    roles: EVERYONE,
    fields: { ...quarantineSelection, hold: id('only this hold'), webhook: id('only this webhook') },
    temporal: false,
    response: list(),
    run: (ctx, input) => listQuarantined(ctx.pool, filters(input)),
  },
  {
    id: 'webhooks.list',
    command: 'webhooks list',
    summary: 'Webhooks in one status, oldest first.',
    method: 'GET',
    path: '/v1/webhooks',
    roles: EVERYONE,
    fields: {
      ...selection,
      status: { type: 'string', enum: DELIVERY_STATUSES, description: 'only webhooks in this status' },
      limit: {
        type: 'integer',
        minimum: 1,
        maximum: 1000,
        default: 20,
        description: 'at most this many, oldest first',
      },
    },
    required: ['status'],
    temporal: false,
    response: list(),
    run: (ctx, input) =>
      webhooksInStatus(ctx.pool, str(input, 'status') as DeliveryStatus, {
        merchantId: str(input, 'merchant'),
        since: str(input, 'since'),
        until: str(input, 'until'),
        limit: num(input, 'limit') ?? 20,
      }),
  },
  {
    id: 'replay.preview',
    command: 'replay preview',
    summary: 'Freeze the matching quarantined webhooks into a replay request, for someone else to approve.',
    method: 'POST',
    path: '/v1/replay-requests',
    roles: OPERATORS,
    actor: 'requestedBy',
    fields: {
      ...quarantineSelection,
      hold: id('only this hold'),
      webhook: id('only this webhook'),
      limit: { type: 'integer', minimum: 1, maximum: 100_000, description: 'only the oldest N (a canary)' },
    },
    temporal: false,
    response: frozen,
    run: async (ctx, input) => {
      const request = await previewReplay(ctx.pool, filters(input), str(input, 'requestedBy')!);
      return { id: request.id, count: request.count, webhookIds: request.items.map((i) => i.webhookId) };
    },
  },
  {
    id: 'replay.approve',
    command: 'replay approve',
    summary: 'Replay exactly the frozen set of a replay request (not by its requester), paced; resumable.',
    method: 'POST',
    path: '/v1/replay-requests/:requestId/approve',
    roles: APPROVERS,
    actor: 'by',
    fields: {
      ticket: text('the change ticket'),
      rate: { type: 'number', exclusiveMinimum: 0, description: 'signals per second' },
      send: SEND,
    },
    target: 'requestId',
    temporal: true,
    response: approval,
    cli: { options: RECORD_ONLY },
    run: (ctx, input) =>
      approveReplayRequest(ops(ctx), str(input, 'requestId')!, str(input, 'by')!, {
        signalsPerSecond: num(input, 'rate'),
        ticket: str(input, 'ticket'),
        send: input.send as boolean | undefined,
      }),
  },
  {
    id: 'quarantine.approve',
    command: 'approve',
    summary: 'Replay one quarantined webhook (a hold id: its release’s). Four eyes: refused; use a replay request.',
    method: 'POST',
    path: '/v1/quarantine/:id/approve',
    roles: APPROVERS,
    actor: 'by',
    fields: { reason: text('why'), ticket: text('the change ticket') },
    required: ['reason'],
    target: 'id',
    temporal: true,
    response: decision,
    cli: { operand: 'hold id | webhook id' },
    run: (ctx, input) =>
      approveHold(ops(ctx), str(input, 'id')!, str(input, 'by')!, str(input, 'reason')!, str(input, 'ticket')),
  },
  {
    id: 'quarantine.discard',
    command: 'discard',
    summary: 'End one quarantined webhook without sending it.',
    method: 'POST',
    path: '/v1/quarantine/:id/discard',
    roles: OPERATORS,
    actor: 'by',
    fields: { reason: text('why'), send: SEND },
    required: ['reason'],
    target: 'id',
    temporal: true,
    response: decision,
    cli: { operand: 'hold id | webhook id', options: RECORD_ONLY },
    run: (ctx, input) =>
      discardHold(ops(ctx), str(input, 'id')!, str(input, 'by')!, str(input, 'reason')!, {
        send: input.send as boolean | undefined,
      }),
  },
  {
    id: 'webhook.resend',
    command: 'resend',
    summary:
      'Send a webhook at an end again (same id and payload, fresh signature). Four eyes: refused; use a resend request.',
    method: 'POST',
    path: '/v1/webhooks/:webhookId/resend',
    roles: APPROVERS,
    actor: 'by',
    fields: { reason: text('why'), ticket: text('the change ticket') },
    required: ['reason'],
    target: 'webhookId',
    temporal: true,
    response: shape({ resendId: { type: 'string' }, workflowId: { type: 'string' }, webhookId: { type: 'string' } }),
    run: (ctx, input) =>
      resendWebhookNow(
        ops(ctx),
        str(input, 'webhookId')!,
        str(input, 'by')!,
        str(input, 'reason')!,
        str(input, 'ticket'),
      ),
  },
  {
    id: 'resend.preview',
    command: 'resend preview',
    summary: 'Freeze the matching webhooks at an end into a resend request, for someone else to approve.',
    method: 'POST',
    path: '/v1/resend-requests',
    roles: OPERATORS,
    actor: 'requestedBy',
    fields: { ...selection, webhook: id('only this webhook') },
    temporal: false,
    response: frozen,
    run: async (ctx, input) => {
      const f = filters(input);
      const request = await previewResend(
        ctx.pool,
        { merchantId: f.merchantId, webhookId: f.webhookId, since: f.since, until: f.until },
        str(input, 'requestedBy')!,
      );
      return { id: request.id, count: request.count, webhookIds: request.items.map((i) => i.webhookId) };
    },
  },
  {
    id: 'resend.approve',
    command: 'resend approve',
    summary: 'Resend exactly the frozen set of a resend request (not by its requester), paced; resumable.',
    method: 'POST',
    path: '/v1/resend-requests/:requestId/approve',
    roles: APPROVERS,
    actor: 'by',
    fields: {
      ticket: text('the change ticket'),
      rate: { type: 'number', exclusiveMinimum: 0, description: 'resends started per second' },
    },
    target: 'requestId',
    temporal: true,
    response: approval,
    run: (ctx, input) =>
      approveResendRequest(ops(ctx), str(input, 'requestId')!, str(input, 'by')!, {
        startsPerSecond: num(input, 'rate'),
        ticket: str(input, 'ticket'),
      }),
  },
  {
    id: 'merchant.add',
    command: 'merchant add',
    summary: 'Add a merchant; its new signing secret is in the answer, once.',
    method: 'POST',
    path: '/v1/merchants',
    roles: MERCHANT_ADMINS,
    fields: merchantFields(true),
    required: ['merchantId', 'name', 'url'],
    target: 'merchantId',
    temporal: false,
    response: shape({ merchant: merchantView, signingSecret: { type: 'string', pattern: '^whsec_' } }),
    run: (ctx, input) =>
      addMerchant(ctx.pool, ctx.webhooks, ctx.secrets, {
        ...merchantSettings(input),
        id: str(input, 'merchantId')!,
        name: str(input, 'name')!,
        endpointUrl: str(input, 'url')!,
      }),
  },
  {
    id: 'merchant.show',
    command: 'merchant show',
    summary: 'A merchant: endpoint, limits, status, policy, budget (secrets: only whether set).',
    method: 'GET',
    path: '/v1/merchants/:merchantId',
    roles: EVERYONE,
    fields: {},
    target: 'merchantId',
    temporal: false,
    response: merchantView,
    run: (ctx, input) => showMerchant(ctx.pool, str(input, 'merchantId')!),
  },
  {
    id: 'merchant.set',
    command: 'merchant set',
    summary: 'Change the given settings, checked as delivery will read them.',
    method: 'POST',
    path: '/v1/merchants/:merchantId',
    roles: MERCHANT_ADMINS,
    fields: merchantFields(false),
    target: 'merchantId',
    temporal: false,
    response: merchantView,
    run: (ctx, input) => setMerchant(ctx.pool, ctx.webhooks, str(input, 'merchantId')!, merchantSettings(input)),
  },
  {
    id: 'merchant.pause',
    command: 'merchant pause',
    summary: 'Stop sending to a merchant; its webhooks wait, held, until resumed.',
    method: 'POST',
    path: '/v1/merchants/:merchantId/pause',
    roles: MERCHANT_ADMINS,
    fields: { reason: text('why sending stops') },
    required: ['reason'],
    target: 'merchantId',
    temporal: false,
    response: merchantChange,
    run: (ctx, input) => pauseMerchant(ctx.pool, str(input, 'merchantId')!, str(input, 'reason')!),
  },
  {
    id: 'destination.set',
    command: 'destination set',
    summary: 'Declare a destination several merchants share, with the rate it publishes for all of them, or change it.',
    method: 'POST',
    path: '/v1/destinations/:destinationId',
    roles: MERCHANT_ADMINS,
    fields: {
      rate: { type: 'number', description: 'requests per second the destination accepts, all its merchants together' },
      maxInFlight: { type: 'integer', minimum: 1, description: 'requests open at once, all its merchants together' },
      note: text('who the destination is (a platform receiving for its merchants)'),
    },
    target: 'destinationId',
    temporal: false,
    response: destinationView,
    run: (ctx, input) =>
      setDestination(ctx.pool, {
        id: str(input, 'destinationId')!,
        ratePerSecond: num(input, 'rate'),
        maxInFlight: num(input, 'maxInFlight'),
        note: str(input, 'note'),
      }),
  },
  {
    id: 'destination.show',
    command: 'destination show',
    summary: 'A declared destination: its rate, its cap on requests in flight, the merchants sharing it.',
    method: 'GET',
    path: '/v1/destinations/:destinationId',
    roles: EVERYONE,
    fields: {},
    target: 'destinationId',
    temporal: false,
    response: destinationView,
    run: (ctx, input) => showDestination(ctx.pool, str(input, 'destinationId')!),
  },
  {
    id: 'merchant.resume',
    command: 'merchant resume',
    summary: 'Send to a merchant again (also after a 410 Gone disabled it).',
    method: 'POST',
    path: '/v1/merchants/:merchantId/resume',
    roles: MERCHANT_ADMINS,
    fields: {},
    target: 'merchantId',
    temporal: false,
    response: merchantChange,
    run: (ctx, input) => resumeMerchant(ctx.pool, str(input, 'merchantId')!),
  },
  {
    id: 'merchant.rotate-secret',
    command: 'merchant rotate-secret',
    summary: 'A new signing secret (in the answer, once); the old one also signs until the overlap ends.',
    method: 'POST',
    path: '/v1/merchants/:merchantId/rotate-secret',
    roles: MERCHANT_ADMINS,
    fields: {
      overlapMs: {
        type: 'integer',
        minimum: 0,
        description: 'how long the old secret also signs, ms (24 h unless given)',
      },
    },
    target: 'merchantId',
    temporal: false,
    response: shape({
      merchant: merchantView,
      signingSecret: { type: 'string', pattern: '^whsec_' },
      previousSignsUntil: { type: 'string' },
    }),
    cli: {
      options: {
        overlapMs: {
          flags: '--overlap <duration>',
          description: 'how long the old secret also signs: 30m, 24h, 7d (24h unless given)',
          value: (typed) => parseDuration('--overlap', typed!),
        },
      },
    },
    run: (ctx, input) => rotateSigningSecret(ctx.pool, ctx.secrets, str(input, 'merchantId')!, num(input, 'overlapMs')),
  },
  {
    id: 'merchant.ping',
    command: 'merchant ping',
    summary: "One signed merchant.ping in the merchant's rate budget; the answer and what the policy would do.",
    method: 'POST',
    path: '/v1/merchants/:merchantId/ping',
    roles: MERCHANT_ADMINS,
    fields: {},
    target: 'merchantId',
    temporal: false,
    reachesMerchant: true,
    run: (ctx, input) => pingMerchant(poolOf(ctx), ctx.webhooks, ctx.secrets, str(input, 'merchantId')!),
  },
  {
    id: 'merchant.api-key.create',
    command: 'merchant api-key create',
    summary: 'A new API key for the merchant API, for this merchant; the key is in the answer, once.',
    method: 'POST',
    path: '/v1/merchants/:merchantId/api-keys',
    roles: MERCHANT_ADMINS,
    actor: 'by',
    fields: {
      label: text('what the key is for'),
      rate: {
        type: 'number',
        exclusiveMinimum: 0,
        maximum: 1000,
        description: 'requests per second the key may make (5)',
      },
      burst: { type: 'integer', minimum: 1, maximum: 10000, description: 'requests at once above the rate (10)' },
    },
    target: 'merchantId',
    temporal: false,
    response: shape({
      id: { type: 'string', pattern: '^mk_[0-9a-f]{16}$' },
      merchantId: { type: 'string' },
      apiKey: { type: 'string', pattern: '^hsk_mk_' },
      ratePerSecond: { type: 'number' },
      burst: { type: 'integer' },
    }),
    run: (ctx, input) =>
      createApiKey(ctx.pool, str(input, 'merchantId')!, str(input, 'by')!, {
        label: str(input, 'label'),
        ratePerSecond: num(input, 'rate'),
        burst: num(input, 'burst'),
      }),
  },
  {
    id: 'merchant.api-key.revoke',
    command: 'merchant api-key revoke',
    summary: 'Revoke an API key: from now on it is refused (401).',
    method: 'POST',
    path: '/v1/api-keys/:keyId/revoke',
    roles: MERCHANT_ADMINS,
    actor: 'by',
    fields: {},
    target: 'keyId',
    temporal: false,
    response: shape({ id: { type: 'string' }, revokedBy: { type: 'string' } }),
    run: (ctx, input) => revokeApiKey(ctx.pool, str(input, 'keyId')!, str(input, 'by')!),
  },
  {
    id: 'merchant.api-keys',
    command: 'merchant api-keys',
    summary: "A merchant's API keys (never their secret): label, budget, made and revoked by whom, last used.",
    method: 'GET',
    path: '/v1/merchants/:merchantId/api-keys',
    roles: EVERYONE,
    fields: {},
    target: 'merchantId',
    temporal: false,
    response: list({ id: { type: 'string' }, created_by: { type: 'string' } }),
    run: (ctx, input) => apiKeysOf(ctx.pool, str(input, 'merchantId')!),
  },
  {
    id: 'events.show',
    command: 'events show',
    summary: "A hold's processor events, skips, reviews and workflow.",
    method: 'GET',
    path: '/v1/holds/:holdId/events',
    roles: EVERYONE,
    fields: {},
    target: 'holdId',
    temporal: true,
    response: shape({
      holdId: { type: 'string' },
      events: { type: 'array' },
      skips: { type: 'array' },
      reviews: { type: 'array' },
    }),
    run: (ctx, input) => holdEvents(ops(ctx), str(input, 'holdId')!),
  },
  {
    id: 'events.skip',
    command: 'events skip',
    summary: 'A hold stopped at a gap: skip the missing event (four eyes: records a skip request for someone else).',
    method: 'POST',
    path: '/v1/holds/:holdId/skips',
    roles: OPERATORS,
    actor: 'by',
    fields: { sequence: { type: 'integer', minimum: 1, description: 'the missing sequence' }, reason: text('why') },
    required: ['sequence', 'reason'],
    target: 'holdId',
    temporal: true,
    run: async (ctx, input) => {
      const [holdId, sequence, by, reason] = [
        str(input, 'holdId')!,
        num(input, 'sequence')!,
        str(input, 'by')!,
        str(input, 'reason')!,
      ];
      if (ctx.fourEyes) return { requested: await requestSkip(ops(ctx), holdId, sequence, by, reason) };
      return { skipped: await skipMissingEvent(ops(ctx), holdId, sequence, by, reason) };
    },
  },
  {
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
    run: (ctx, input) => approveSkip(ops(ctx), str(input, 'requestId')!, str(input, 'by')!),
  },
  {
    id: 'events.redeliver',
    command: 'events redeliver',
    summary: "A new delivery run for an event's webhook whose workflow ended without finishing it.",
    method: 'POST',
    path: '/v1/webhooks/:webhookId/redeliver',
    roles: OPERATORS,
    fields: {},
    target: 'webhookId',
    temporal: true,
    run: (ctx, input) => redeliverEventWebhook(ops(ctx), str(input, 'webhookId')!),
  },
  {
    id: 'events.refused',
    command: 'events refused',
    summary: 'Signed processor requests the receiver refused, newest first.',
    method: 'GET',
    path: '/v1/refused-requests',
    roles: EVERYONE,
    fields: { since: time('refused at or after') },
    temporal: false,
    response: list(),
    run: (ctx, input) => refusedRequests(ctx.pool, str(input, 'since')),
  },
  {
    id: 'sends.pause',
    command: 'sends pause',
    summary: 'Stop every send of the region: deliveries wait, held; releases go on.',
    method: 'POST',
    path: '/v1/sends/pause',
    roles: OPERATORS,
    actor: 'by',
    fields: { reason: text('why') },
    required: ['reason'],
    temporal: true,
    response: shape({ pausedAt: {}, pausedBy: { type: 'string' } }),
    run: (ctx, input) => pauseSends(ops(ctx), str(input, 'by')!, str(input, 'reason')!),
  },
  {
    id: 'sends.resume',
    command: 'sends resume',
    summary: 'Send again; every held delivery re-checks at once.',
    method: 'POST',
    path: '/v1/sends/resume',
    roles: OPERATORS,
    actor: 'by',
    fields: { reason: text('why') },
    required: ['reason'],
    temporal: true,
    response: shape({
      pause: anyObject,
      signalled: { type: 'integer', minimum: 0 },
      ended: { type: 'integer', minimum: 0 },
      notSignalled: { type: 'array', items: shape({ workflowId: { type: 'string' }, error: { type: 'string' } }) },
    }),
    run: (ctx, input) => resumeSends(ops(ctx), str(input, 'by')!, str(input, 'reason')!),
  },
  {
    id: 'sends.status',
    command: 'sends status',
    summary: 'Paused or not, by whom and why, and the last pauses.',
    method: 'GET',
    path: '/v1/sends',
    roles: EVERYONE,
    fields: {},
    temporal: true,
    response: shape({ paused: { type: 'boolean' }, held: { type: 'integer', minimum: 0 }, pauses: { type: 'array' } }),
    run: (ctx) => sendsStatus(ops(ctx)),
  },
  {
    id: 'reviews.list',
    command: 'reviews list',
    summary: 'Ledger entries flagged for a human (open ones unless all).',
    method: 'GET',
    path: '/v1/reviews',
    roles: EVERYONE,
    fields: { all: { type: 'boolean', default: false, description: 'the resolved ones too' } },
    temporal: false,
    response: list(),
    run: (ctx, input) => reviews(ctx.pool, { all: input.all === true }),
  },
  {
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
    run: (ctx, input) => resolveReview(ops(ctx), str(input, 'eventId')!, str(input, 'by')!),
  },
  {
    id: 'audit.list',
    command: 'audit',
    summary: "The admin API's audit: every call, who made it (verified), what it did, newest first.",
    method: 'GET',
    path: '/v1/audit',
    roles: EVERYONE,
    fields: {
      since: time('at or after'),
      subject: text('only this caller'),
      limit: {
        type: 'integer',
        minimum: 1,
        maximum: 1000,
        default: 50,
        description: 'at most this many, newest first',
      },
    },
    temporal: false,
    // In the order of the query's columns: the CLI's table prints them in the order they come.
    response: list({
      id: { type: 'string' },
      at: {},
      subject: { type: ['string', 'null'] },
      roles: { type: 'string' },
      verb: { type: 'string' },
      target: { type: ['string', 'null'] },
      outcome: { type: 'string', enum: ['ok', 'refused', 'rejected', 'failed'] },
      status: { type: 'integer' },
    }),
    run: (ctx, input) =>
      auditEntries(ctx.pool, {
        since: str(input, 'since'),
        subject: str(input, 'subject'),
        limit: num(input, 'limit') ?? 50,
      }),
  },
];

function merchantFields(adding: boolean): Record<string, Field> {
  return {
    ...(adding ? { merchantId: id('the new merchant’s id') } : {}),
    name: text('display name'),
    url: text('the webhook endpoint (https in production)'),
    rate: { type: 'number', description: 'requests per second the merchant accepts' },
    burst: { type: 'integer', description: 'requests it accepts at once above the rate' },
    policy: { type: 'object', description: 'delivery policy overrides (docs/webhooks.md)' },
    destination: id('a declared destination whose budget it shares, or "none" (its own)'),
  };
}

function merchantSettings(input: VerbInput) {
  return {
    name: str(input, 'name'),
    endpointUrl: str(input, 'url'),
    ratePerSecond: num(input, 'rate'),
    burst: num(input, 'burst'),
    deliveryPolicy: input.policy as unknown as Record<string, unknown> | undefined,
    destinationId: destinationOf(str(input, 'destination')),
  };
}

/** `none` leaves a shared destination; absent changes nothing. */
const destinationOf = (given: string | undefined) => (given === 'none' ? null : given);

export const verbById = (verbId: string): AdminVerb => {
  const verb = ADMIN_VERBS.find((v) => v.id === verbId);
  if (!verb) throw new Error(`no admin verb ${verbId}`);
  return verb;
};

/** The path's parameter names, in order (`/v1/holds/:holdId` → holdId). */
export const pathParams = (verb: AdminVerb): string[] => [...verb.path.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1]!);
