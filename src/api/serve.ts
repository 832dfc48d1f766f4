/**
 * How the admin API and the merchant API come up as processes (src/bin/api.ts, src/bin/merchant-api.ts): their TLS
 * read from the listener's files, listening where it says, one log line saying where and how TLS reaches them, and a
 * clean stop (the server first, then what the caller holds) on SIGTERM or SIGINT.
 */
import fs from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';
import type { ListenerConfig } from '../config.js';
import { log, stopOnSignal } from '../observability/logger.js';
import { serveMetrics, type Registry, type Service } from '../observability/metrics-listener.js';

/** The listener's certificate and key, when it has its own TLS. */
export async function tlsOf(listener: {
  tls?: { certFile: string; keyFile: string };
}): Promise<{ cert: Buffer; key: Buffer } | undefined> {
  return listener.tls
    ? { cert: await fs.readFile(listener.tls.certFile), key: await fs.readFile(listener.tls.keyFile) }
    : undefined;
}

/**
 * Listens (and serves `metrics` on the listener's metrics address, when it has one), says so (`what listening`, with
 * `fields`), and stops on a signal: the app, then `release`.
 */
export async function serveUntilSignal(
  app: FastifyInstance,
  listener: ListenerConfig,
  what: string,
  fields: Record<string, unknown>,
  release: () => Promise<void>,
  metrics?: { registry: Registry; service: Service },
): Promise<void> {
  await app.listen({ host: listener.host, port: listener.port });
  const metricsListener =
    metrics && listener.metrics ? await serveMetrics(metrics.registry, listener.metrics, metrics.service) : undefined;
  const address = app.server.address() as { address: string; port: number };
  const own = listener.tls !== undefined;
  log.info(
    {
      region: listener.region,
      url: `${own ? 'https' : 'http'}://${address.address}:${address.port}`,
      ...fields,
      tls: own ? 'own' : listener.behindTlsProxy ? 'behind a TLS proxy' : 'none (dev)',
      metrics: metricsListener?.url ?? null,
    },
    `${what} listening`,
  );
  stopOnSignal(async () => {
    await app.close();
    await metricsListener?.close();
    await release();
  });
}
