/**
 * `GET /metrics` on an address of its own, for every process: the receiver, the admin and merchant APIs and the codec
 * endpoint serve their own counters there (their callers' port serves only their API, and what they count is read
 * where only Prometheus reaches); a worker serves its SDK's exporter there too. Each also exports how the process
 * itself is doing (CPU, memory, heap, GC, event-loop lag: prom-client's default metrics), labelled with the `service`
 * it is; the scrape adds its region (deploy/prometheus/prometheus.yml).
 */
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { collectDefaultMetrics, Registry } from 'prom-client';

export { Registry };

/** The processes that serve /metrics, as their `service` label reads. */
export type Service = 'worker' | 'receiver' | 'admin-api' | 'merchant-api' | 'codec';

export async function serveMetrics(
  registry: Registry,
  address: { host: string; port: number },
  service: Service,
  /** Another exporter of the same process (a worker's SDK, on loopback), whose text is served after the registry's. */
  alsoFrom?: string,
): Promise<{ url: string; close(): Promise<void> }> {
  collectDefaultMetrics({ register: registry, labels: { service } });
  const render = async () => {
    const own = await registry.metrics();
    if (!alsoFrom) return own;
    const answer = await fetch(alsoFrom, { signal: AbortSignal.timeout(5_000) });
    if (!answer.ok) throw new Error(`${alsoFrom}: ${answer.status}`);
    return `${own}${(await answer.text()).trimEnd()}\n`;
  };
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && (req.url ?? '').split('?')[0] === '/metrics') {
      // Half a scrape would read as series gone: a part that fails fails the scrape (`up` reads 0).
      render().then(
        (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
        (err: Error) => res.writeHead(503, { 'content-type': 'text/plain' }).end(`${err.message}\n`),
      );
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

/** `host:port` (METRICS_ADDRESS; a bracketed IPv6 host too) as a listener takes it. */
export function listenAddressOf(hostPort: string): { host: string; port: number } {
  const at = hostPort.lastIndexOf(':');
  return { host: hostPort.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(hostPort.slice(at + 1)) };
}

/** A loopback port free now, for a listener that cannot be asked for port 0 and say which it got (the SDK's exporter). */
export async function loopbackPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
