/**
 * Which calls anyone may make without a credential, on the servers that ask for one before routing (the admin and
 * merchant APIs, the processor receiver): a GET or HEAD of a route declared open (`OPEN`: the health check, the
 * OpenAPI document), and nothing else. Open is a property of the route, never of a path: `POST /healthz` is a call
 * like any other, asked for the server's credential first and refused without one before anything is written
 * (counted, logged by sample). So no door lets a caller nobody identified add a row, and a route or method that
 * nothing serves is 404 to whoever the server identified, a refusal to anyone else; a body Fastify cannot read is the
 * 4xx it names, never a 500. (The codec endpoint asks on its two routes themselves and opens nothing else but its
 * document and its CORS preflight.)
 */
import type { FastifyError, FastifyRequest } from 'fastify';

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
