/**
 * The doors of every server anyone on the network reaches (the admin and merchant APIs, the processor receiver, the
 * codec endpoint), in one place below them all.
 *
 * Which calls anyone may make without a credential, on the servers that ask for one before routing (the APIs, the
 * receiver): a GET or HEAD of a route declared open (`OPEN`: the health check, the OpenAPI document), and nothing
 * else. Open is a property of the route, never of a path: `POST /healthz` is a call like any other, asked for the
 * server's credential first and refused without one before anything is written (counted, logged by sample). So no
 * door lets a caller nobody identified add a row. (The codec endpoint asks on its two routes themselves and opens
 * nothing else but its document and its CORS preflight.)
 *
 * What no route serves is answered alike on every server (`notServed`): a method the path is served with others is 405
 * with their `Allow`, a path nothing serves 404. A request Fastify cannot read (`requestErrorStatus`) is the 4xx it
 * names. Neither is ever a 500.
 *
 * What a route takes and answers is declared once, with zod: Fastify's validator and the OpenAPI document read the
 * JSON Schema `jsonSchema` writes of it, and the code parses with the same declaration.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Anyone may GET (and HEAD) this route: no credential is asked for. */
    open?: boolean;
  }
}

/** The config of a route anyone may GET and HEAD. */
export const OPEN = { open: true } as const;

/** Whether `request` is a GET or HEAD of a route declared open: the one call answered without a credential. */
export function isOpen(request: FastifyRequest): boolean {
  return (request.method === 'GET' || request.method === 'HEAD') && request.routeOptions.config.open === true;
}

/**
 * The 4xx Fastify names for a request it cannot take (a body that is not JSON, a content type nothing parses, a body
 * over the limit), or undefined for any other error: what a caller sent wrong is theirs to fix, never the server's
 * failure.
 */
export function requestErrorStatus(err: unknown): number | undefined {
  const status = (err as FastifyError).statusCode;
  return typeof status === 'number' && status >= 400 && status < 500 ? status : undefined;
}

/** The methods the servers' routes are declared with: a path's `Allow` is those of them it is served with. */
const ROUTE_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

interface NotServed {
  status: 404 | 405;
  error: 'NotFound' | 'MethodNotAllowed';
  message: string;
}

/**
 * The answer to a request no route took, each server sending it in its own words: 405 when the server serves the path
 * with other methods (listed in the reply's `Allow`), 404 when it serves nothing there.
 */
export function notServed(request: FastifyRequest, reply: FastifyReply): NotServed {
  const path = request.url.split('?')[0]!;
  const allow = ROUTE_METHODS.filter((method) => request.server.findRoute({ method, url: path }) !== null);
  if (allow.length === 0) return { status: 404, error: 'NotFound', message: `no route ${request.method} ${path}` };
  void reply.header('allow', allow.join(', '));
  return {
    status: 405,
    error: 'MethodNotAllowed',
    message: `${request.method} is not served on ${path}; it is served with ${allow.join(', ')}`,
  };
}

/**
 * The JSON Schema of a zod schema, as Fastify's validator and the OpenAPI document take it (draft 7, which OpenAPI
 * 3.1's dialect reads alike): a whole number is unbounded unless it says so.
 */
export function jsonSchema(schema: z.core.$ZodType, io: 'input' | 'output' = 'input'): z.core.JSONSchema.BaseSchema {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, {
    io,
    target: 'draft-7',
    override: ({ jsonSchema: s }) => {
      if (s.minimum === Number.MIN_SAFE_INTEGER) delete s.minimum;
      if (s.maximum === Number.MAX_SAFE_INTEGER) delete s.maximum;
    },
  });
  return rest;
}
