/**
 * `GET /metrics` on an address of its own, for the processes that face callers (the receiver, the admin and merchant
 * APIs, the codec endpoint): their callers' port serves only their API, and what they count is read where only
 * Prometheus reaches.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { CounterRegistry } from './prometheus-text.js';

export async function serveMetrics(
  registry: CounterRegistry,
  address: { host: string; port: number },
): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && (req.url ?? '').split('?')[0] === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      res.end(registry.render());
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('GET /metrics\n');
  });
  const { url, close } = await listenOn(server, address);
  return { url: `${url}/metrics`, close };
}

/** `server` listening on `address`: its base URL (the port bound when 0 was asked) and how to close it. */
export async function listenOn(
  server: http.Server,
  address: { host: string; port: number },
): Promise<{ url: string; close(): Promise<void> }> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, resolve);
  });
  const bound = server.address() as AddressInfo;
  return {
    url: `http://${bound.address.includes(':') ? `[${bound.address}]` : bound.address}:${bound.port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
