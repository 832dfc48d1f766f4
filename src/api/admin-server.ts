/**
 * The admin API of one region (`npm run api`, src/bin/api.ts): every operator verb of admin-verbs.ts as an HTTP
 * endpoint, on Fastify, its input validated by the JSON Schema of the verb's zod schema and described in an OpenAPI document
 * (`GET /openapi.json`, by @fastify/swagger). It holds what operators no longer need on their machines: the ledger's
 * operator role and the payload and merchant-secret keys.
 *
 * Every call but a GET of the health check or the OpenAPI document (doors.ts) carries an OIDC access token
 * (identity.ts) for this region's API: no token, or one that does not verify, is 401, counted and logged by sample
 * (refusals.ts), never stored; a verified caller without one of the verb's roles in the region is 403. The verb's
 * actor (`by`, `requestedBy`) is the token's subject: four eyes compare subjects the issuer vouches for, and the API
 * refuses a body that names one. Every authenticated call is in the audit (api_audit): who, what, on what, the
 * outcome, the request id (also the `x-request-id` response header), written with the action (`auditOf`): a verb whose
 * whole effect is ledger rows writes its row in their transaction, one that acts outside the ledger writes it before
 * it acts; either way a call whose row cannot be written does nothing and fails.
 */
import fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import swagger from '@fastify/swagger';
import type pg from 'pg';
import { OperatorError } from '../errors.js';
import { inTransaction } from '../db/pool.js';
import { Registry } from 'prom-client';
import { finishAudit, insertAudit, insertAuditAhead, type AuditRecord } from '../sql/audit.js';
import {
  ADMIN_VERBS,
  auditOf,
  inputSchemas,
  REJECTIONS,
  type AdminContext,
  type AdminVerb,
  type VerbInput,
} from '../operations/admin-verbs.js';
import { apiRefusals } from './refusals.js';
import { isOpen, jsonSchema, notServed, OPEN, requestErrorStatus } from '../doors.js';
import { fastifyLogging, log, type Logger } from '../observability/logger.js';
import { Forbidden, rolesIn, Unauthenticated, type Identity, type TokenVerifier } from './identity.js';

interface AdminServerOptions {
  /** Its ledger pool (the operators' role: it may insert into api_audit, and fill in a started row's outcome). */
  context: AdminContext & { pool: pg.Pool };
  verifier: TokenVerifier;
  /** Where its refusals are counted (its metrics address serves it); its own when not given. */
  metrics?: Registry;
  /** TLS for the listener; absent behind a TLS-terminating proxy, or in dev. */
  https?: { cert: string | Buffer; key: string | Buffer };
  /** Its access log and errors; the process's logger unless given. */
  logger?: Logger;
}

/** An OperatorError's answer: what does not exist is 404, a decision the state refuses is 409. */
function statusOf(err: unknown): number {
  if (err instanceof Unauthenticated) return 401;
  if (err instanceof Forbidden) return 403;
  if (err instanceof OperatorError) {
    if (/NotFound$/.test(err.code)) return 404;
    if (err.code === 'SelfApprovalRefused' || err.code === 'FourEyesRequired') return 403;
    return 409;
  }
  if (REJECTIONS.some((type) => err instanceof type)) return 400;
  return requestErrorStatus(err) ?? 500;
}

/** The JSON error body: the error's name (an OperatorError's code beside it) and message; a 5xx says only that. */
function errorBody(err: FastifyError, status: number, requestId: string) {
  if (status >= 500)
    return { error: 'InternalError', message: `the request failed; its request id is ${requestId}`, requestId };
  const name = err.validation ? 'InvalidRequest' : err.name;
  return { error: name, ...(err instanceof OperatorError ? { code: err.code } : {}), message: err.message, requestId };
}

const outcomeOf = (status: number): AuditRecord['outcome'] =>
  status < 400 ? 'ok' : status === 401 || status === 403 ? 'refused' : status < 500 ? 'rejected' : 'failed';

declare module 'fastify' {
  interface FastifyRequest {
    identity?: Identity;
    verb?: AdminVerb;
    /** The call's audit row written before it acted (`auditOf` says `ahead`), whose outcome is still to be filled in. */
    auditId?: string;
  }
  interface FastifyContextConfig {
    verb?: AdminVerb;
  }
}

export async function buildAdminServer(options: AdminServerOptions): Promise<FastifyInstance> {
  const { context, verifier } = options;
  const { pool } = context;
  const app = fastify({
    ...(options.https ? { https: options.https } : {}),
    ...fastifyLogging(options.logger ?? log),
    // Bodies are small JSON objects; nothing an operator sends is large.
    bodyLimit: 64 * 1024,
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', useDefaults: true, allErrors: false } },
  });
  // Answers are serialized as they are (JSON.stringify): the response schemas document them (OpenAPI) and the tests
  // validate real answers against them, rather than a schema-driven serializer reshaping or dropping fields to fit.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  const refusals = apiRefusals(app, options.metrics ?? new Registry(), 'admin', context.region.region);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: `hold-sweeper admin API (${context.region.region})`,
        version: '1',
        description:
          'Every operator verb of one region. Bearer tokens: OIDC access tokens of the configured issuer and audience.',
      },
      components: { securitySchemes: { oidc: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } } },
      security: [{ oidc: [] }],
    },
  });

  /** The audit row of an authenticated call. */
  const record = (request: FastifyRequest, status: number, detail?: string): AuditRecord => {
    const verb = request.verb;
    const target = verb?.target ? inputOf(request)[verb.target] : undefined;
    return {
      requestId: request.id,
      subject: request.identity!.subject,
      roles: rolesIn(request.identity!, context.region.region),
      verb: verb?.id ?? 'unknown',
      method: request.method,
      path: request.url.split('?')[0]!,
      target: typeof target === 'string' ? target : undefined,
      outcome: outcomeOf(status),
      status,
      detail,
    };
  };

  app.addSchema({
    $id: 'AdminError',
    type: 'object',
    required: ['error', 'message', 'requestId'],
    properties: {
      error: { type: 'string' },
      code: { type: 'string' },
      message: { type: 'string' },
      requestId: { type: 'string' },
    },
  });

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    request.verb = request.routeOptions.config.verb;
    if (isOpen(request)) return;
    request.identity = await verifier.verify(request.headers.authorization);
  });

  app.setErrorHandler(async (err: FastifyError, request, reply) => {
    const status = statusOf(err);
    const body = errorBody(err, status, request.id);
    if (!request.identity) {
      refusals.refused(request, status, body.error);
    } else {
      // The call did nothing, or (written ahead) its row says how it ended; a row that cannot be written is logged.
      const detail = `${body.error}: ${err.message}`;
      const written = request.auditId
        ? finishAudit(pool, request.auditId, { outcome: outcomeOf(status), status, detail })
        : insertAudit(pool, record(request, status, detail));
      await written.catch((auditErr: unknown) => request.log.error({ error: auditErr }, 'audit write failed'));
    }
    if (status >= 500) request.log.error({ verb: request.verb?.id, err }, 'admin API request failed');
    return reply.status(status).send(body);
  });

  app.setNotFoundHandler(async (request, reply) => {
    // Authenticated by the hook before it reached here: an unknown route is audited like any call, its path bounded.
    const { status, error, message } = notServed(request, reply);
    await insertAudit(pool, record(request, status, error));
    return reply.status(status).send({ error, message, requestId: request.id });
  });

  app.get('/healthz', { config: OPEN, schema: { hide: true } }, async () => ({ ok: true }));
  app.get('/openapi.json', { config: OPEN, schema: { hide: true } }, async () => app.swagger());

  for (const verb of ADMIN_VERBS) {
    const { params, fields } = inputSchemas(verb);
    app.route({
      method: verb.method,
      url: verb.path,
      config: { verb },
      schema: {
        operationId: verb.id,
        summary: verb.summary,
        description: `Roles: ${verb.roles.join(', ')}. CLI: npm run ops -- ${verb.command}.${verb.actor ? ` The ${verb.actor} is the caller's verified subject.` : ''}`,
        tags: [verb.id.split('.')[0]!],
        ...(params ? { params } : {}),
        ...(verb.method === 'GET' ? { querystring: fields } : { body: fields }),
        response: {
          200: {
            description: 'Done: what the verb returned.',
            ...jsonSchema(verb.answer, 'output'),
          },
          ...Object.fromEntries(
            [
              [400, 'The input is invalid, or names a setting that cannot be used.'],
              [401, 'No token, or one that does not verify (issuer, audience, expiry, signature).'],
              [403, 'The caller lacks the role, or four eyes refuse (the requester approving).'],
              [404, 'What it names does not exist.'],
              [409, 'The state refuses it (already approved, not quarantined, sends already paused, ...).'],
              [
                500,
                'It failed (the request id names it in the logs); a call whose audit could not be written did nothing.',
              ],
            ].map(([status, description]) => [status, { description, $ref: 'AdminError#' }]),
          ),
        },
      },
      preValidation: async (request) => {
        // A POST's input is its body: a query string beside it would skip the body's schema.
        if (verb.method === 'POST' && request.url.includes('?')) {
          throw Object.assign(
            new Error(`${verb.method} ${verb.path} takes its input in the JSON body, not the query string`),
            {
              statusCode: 400,
              validation: [],
            },
          );
        }
        const identity = request.identity!;
        const held = rolesIn(identity, context.region.region);
        if (!verb.roles.some((role) => held.includes(role))) {
          throw new Forbidden(
            `${verb.id} needs one of the roles ${verb.roles.join(', ')} in region ${context.region.region}; ${identity.subject} has ${held.join(', ') || 'none'}`,
          );
        }
      },
      handler: async (request: FastifyRequest, reply: FastifyReply) => {
        const input = inputOf(request);
        if (verb.actor) input[verb.actor] = request.identity!.subject;
        const result = await runAudited(request, verb, input);
        // Every answer is an object (arrays are wrapped): the OpenAPI document says so, and a client reads `.items`.
        return reply.send(Array.isArray(result) ? { items: result } : result);
      },
    });
  }
  /** Runs the verb with its audit row written as `auditOf` says: with the action, or the call does nothing. */
  async function runAudited(request: FastifyRequest, verb: AdminVerb, input: VerbInput): Promise<unknown> {
    switch (auditOf(verb)) {
      case 'in-transaction':
        return inTransaction(pool, async (tx) => {
          const result = await verb.invoke({ ...context, pool: tx }, input);
          await insertAudit(tx, record(request, 200));
          return result;
        });
      case 'ahead': {
        request.auditId = await insertAuditAhead(pool, record(request, 200));
        const result = await verb.invoke(context, input);
        // It acted: its answer goes back even if the outcome is not filled in (the row then says `started`).
        await finishAudit(pool, request.auditId, { outcome: 'ok', status: 200, detail: undefined }).catch(
          (err: unknown) => request.log.error({ error: err }, 'audit outcome not written'),
        );
        return result;
      }
      case 'after': {
        const result = await verb.invoke(context, input);
        await insertAudit(pool, record(request, 200));
        return result;
      }
    }
  }

  return app;
}

/** A call's input as the route validated it: its query (a GET's) or its body (a POST's), and its path's parameters. */
function inputOf(request: FastifyRequest): VerbInput {
  const entries = (part: unknown) => (typeof part === 'object' && part !== null ? Object.entries(part) : []);
  return Object.fromEntries([request.query, request.body, request.params].flatMap(entries));
}
