/**
 * What the admin and merchant APIs say about their requests. Each request that got past identification gets one line
 * when it is answered (`request completed`: its request id, method, path, status and time; never a body, a token or
 * a query string), on the process's logger through Fastify. What they refuse before anyone is identified (401: no
 * token or key, or one that does not verify; the merchant API's 429: a key past its budget) costs them a counter and
 * a log line a minute instead, never a row nor a line each: anyone on the network can send those, as many as they
 * like (docs/security.md#the-audit). The counter is exported on the API's metrics address. The health probe is not
 * logged: an orchestrator asks every few seconds.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Counter, type Registry } from 'prom-client';
import { sampledLog } from '../observability/sampled-log.js';

interface Refusals {
  /** One refusal of `request`: counted by status and name, logged by sample, left out of the access log. */
  refused(request: FastifyRequest, status: number, error: string): void;
}

export function apiRefusals(
  app: FastifyInstance,
  registry: Registry,
  api: 'admin' | 'merchant',
  region: string,
): Refusals {
  const total = new Counter({
    name: 'hold_sweeper_api_requests_refused_total',
    help: 'API calls refused before anyone was identified (401; the merchant API’s 429), by API, status and error: never stored',
    labelNames: ['api', 'region', 'status', 'error'],
    registers: [registry],
  });
  const log = sampledLog(({ msg, ...fields }) => app.log.warn(fields, msg as string));
  const refusedRequests = new WeakSet<FastifyRequest>();
  app.addHook('onResponse', async (request, reply) => {
    if (request.url === '/healthz' || refusedRequests.has(request)) return;
    request.log.info(
      {
        method: request.method,
        path: pathOf(request),
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime),
      },
      'request completed',
    );
  });
  return {
    refused(request, status, error) {
      refusedRequests.add(request);
      total.inc({ api, region, status: String(status), error });
      log(`${status} ${error}`, {
        msg: `${api} API call refused before identification (sampled)`,
        region,
        status,
        error,
        method: request.method,
        path: pathOf(request),
        requestId: request.id,
      });
    },
  };
}

/** The path as far as it names a route: what a caller appends is theirs to choose, and a log is no place for it. */
function pathOf(request: FastifyRequest): string {
  return request.url.split('?')[0]!.slice(0, 120);
}
