/**
 * Fake merchants: a real HTTP server on loopback, one endpoint per merchant (`/webhooks/<merchant id>`), used
 * by the tests, `npm start`'s demo and the benchmark. Each merchant is a destination of its own, as real merchants
 * are (the workers pace each endpoint origin: docs/webhooks.md#pacing-per-destination): over plain http its endpoint
 * is on a loopback address of its own (127.1.x.y, same port), unless it is asked to share the main one. Each merchant
 * follows a script (status sequence,
 * Retry-After, latency, an answer held until the test releases it, hang, close the connection after reading the
 * request), verifies every request with
 * the Standard Webhooks reference verifier, and records it. Scripts can change mid-test.
 */
import https from 'node:https';
import http from 'node:http';
import type net from 'node:net';
import { Webhook } from 'standardwebhooks';

type ScriptedResponse =
  | { status: number; retryAfter?: string; body?: string; delayMs?: number }
  /** Read the request and answer `status` only once `release(merchantId)` is called: as slow as a test needs. */
  | { status: number; untilReleased: true }
  /** Read the request and never answer (until the server stops). */
  | { hang: true }
  /** Read the request, then close the connection without any response. */
  | { close: true };

export interface MerchantScript {
  /**
   * The n-th request gets responses[n], the last one repeating (or all of them, with `cycle`). Empty or absent: 200.
   */
  responses?: ScriptedResponse[];
  cycle?: boolean;
  /** Signing secrets the receiver accepts (whsec_...). A request verified by none is recorded as unverified. */
  secrets?: string[];
}

export interface ReceivedWebhook {
  merchantId: string;
  /** Wall-clock receive time in ms with sub-ms precision, for sliding-window rate checks. */
  receivedAt: number;
  webhookId: string | undefined;
  timestamp: string | undefined;
  signature: string | undefined;
  idempotencyKey: string | undefined;
  body: string;
  verified: boolean;
  answer: number | 'hang' | 'close';
  /** When the request ended: its response finished, or its connection closed (the sender gave up). */
  closedAt?: number;
}

/** What one merchant had open at once: the most requests, and the most for one webhook id. */
interface OpenRequestsPeak {
  requests: number;
  perWebhook: number;
}

const now = () => performance.timeOrigin + performance.now();

export class FakeMerchants {
  private readonly scripts = new Map<string, MerchantScript>();
  private readonly received: ReceivedWebhook[] = [];
  private readonly sockets = new Set<net.Socket>();
  private readonly open = new Map<
    string,
    { requests: Set<ReceivedWebhook>; perWebhook: Map<string | undefined, number> }
  >();
  private readonly peaks = new Map<string, OpenRequestsPeak>();
  /** Merchants whose `untilReleased` answers may go, and the requests waiting for that. */
  private readonly released = new Set<string>();
  private readonly waitingForRelease = new Map<string, (() => void)[]>();
  private server: http.Server | undefined;
  private base = '';
  /** Each merchant's own loopback host (plain http), and the listeners on them. */
  private readonly hosts = new Map<string, string>();
  private readonly extraServers: http.Server[] = [];
  private tls = false;

  /** Listens on loopback: plain http, or https with `tls` (production mode refuses http endpoints). */
  async start(port = 0, tls?: { key: string; cert: string }): Promise<string> {
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => void this.handle(req, res);
    const server = tls ? https.createServer(tls, handler) : http.createServer(handler);
    server.keepAliveTimeout = 30_000;
    server.on('connection', (socket: net.Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    this.server = server;
    this.tls = tls !== undefined;
    this.base = `${tls ? 'https' : 'http'}://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    return this.base;
  }

  /** The port it listens on, once started: production's endpoint rules must allow it (WEBHOOK_ALLOWED_PORTS). */
  get port(): number {
    return (this.server!.address() as net.AddressInfo).port;
  }

  /**
   * The merchant's endpoint. Plain http: on a loopback address of its own (its own origin, so its own budget), listened
   * on from this call; `sharedOrigin` (and https, whose certificate names 127.0.0.1): on the main address, one
   * destination with every other merchant there.
   */
  endpointFor(merchantId: string, { sharedOrigin = false }: { sharedOrigin?: boolean } = {}): string {
    const path = `/webhooks/${encodeURIComponent(merchantId)}`;
    if (sharedOrigin || this.tls) return `${this.base}${path}`;
    let host = this.hosts.get(merchantId);
    if (host === undefined) {
      const i = this.hosts.size;
      if (i >= 250 * 256) throw new Error('fake merchants: no loopback address left for another merchant');
      host = `127.1.${Math.floor(i / 250)}.${(i % 250) + 2}`;
      this.hosts.set(merchantId, host);
      this.listenOn(host);
    }
    return `http://${host}:${this.port}${path}`;
  }

  /** One more listener, same handler and port, on another loopback address: bound before any request can reach it. */
  private listenOn(host: string): void {
    const server = http.createServer((req, res) => void this.handle(req, res));
    server.keepAliveTimeout = 30_000;
    server.on('connection', (socket: net.Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    server.on('error', (err) => console.error(`[fake merchants] ${host}:${this.port}: ${err.message}`));
    server.listen(this.port, host);
    this.extraServers.push(server);
  }

  script(merchantId: string, script: MerchantScript): void {
    this.scripts.set(merchantId, script);
  }

  /** Lets the merchant's `untilReleased` answers go: those waiting now and every later one. */
  release(merchantId: string): void {
    this.released.add(merchantId);
    for (const answer of this.waitingForRelease.get(merchantId) ?? []) answer();
    this.waitingForRelease.delete(merchantId);
  }

  /** Requests of the merchant still open now (received, not answered, connection not closed). */
  openRequests(merchantId: string): ReceivedWebhook[] {
    return [...(this.open.get(merchantId)?.requests ?? [])];
  }

  /** The most requests the merchant had open at once, and the most for one webhook id (1: never two at once). */
  peakOpen(merchantId: string): OpenRequestsPeak {
    return { ...(this.peaks.get(merchantId) ?? { requests: 0, perWebhook: 0 }) };
  }

  /** Every request received, optionally for one merchant, in arrival order. */
  requests(merchantId?: string): ReceivedWebhook[] {
    return merchantId === undefined ? [...this.received] : this.received.filter((r) => r.merchantId === merchantId);
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await Promise.all(this.extraServers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  /** Counts the request open until its response is finished or its connection closes, whichever comes first. */
  private opened(received: ReceivedWebhook, res: http.ServerResponse) {
    const { merchantId, webhookId } = received;
    const open = this.open.get(merchantId) ?? {
      requests: new Set<ReceivedWebhook>(),
      perWebhook: new Map<string | undefined, number>(),
    };
    this.open.set(merchantId, open);
    open.requests.add(received);
    const sameWebhook = (open.perWebhook.get(webhookId) ?? 0) + 1;
    open.perWebhook.set(webhookId, sameWebhook);
    const peak = this.peaks.get(merchantId) ?? { requests: 0, perWebhook: 0 };
    if (open.requests.size > peak.requests || sameWebhook > peak.perWebhook) {
      this.peaks.set(merchantId, {
        requests: Math.max(peak.requests, open.requests.size),
        perWebhook: Math.max(peak.perWebhook, sameWebhook),
      });
    }
    res.once('close', () => {
      received.closedAt = now();
      open.requests.delete(received);
      const left = (open.perWebhook.get(webhookId) ?? 1) - 1;
      if (left === 0) open.perWebhook.delete(webhookId);
      else open.perWebhook.set(webhookId, left);
    });
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse) {
    // Arrival is when the request's head is parsed, as a merchant's rate limiter would count it.
    const receivedAt = now();
    const match = /^\/webhooks\/([^/?]+)/.exec(req.url ?? '');
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    if (!match || req.method !== 'POST') {
      res.writeHead(404).end();
      return;
    }
    const merchantId = decodeURIComponent(match[1]!);
    const body = Buffer.concat(chunks).toString('utf8');
    const script = this.scripts.get(merchantId) ?? {};
    const index = this.received.filter((r) => r.merchantId === merchantId).length;
    const responses = script.responses?.length ? script.responses : [{ status: 200 }];
    const response = responses[script.cycle ? index % responses.length : Math.min(index, responses.length - 1)]!;
    const header = (name: string) =>
      typeof req.headers[name] === 'string' ? (req.headers[name] as string) : undefined;
    const verified = (script.secrets ?? []).some((secret) => {
      try {
        new Webhook(secret).verify(body, {
          'webhook-id': header('webhook-id') ?? '',
          'webhook-timestamp': header('webhook-timestamp') ?? '',
          'webhook-signature': header('webhook-signature') ?? '',
        });
        return true;
      } catch {
        return false;
      }
    });
    const received: ReceivedWebhook = {
      merchantId,
      receivedAt,
      webhookId: header('webhook-id'),
      timestamp: header('webhook-timestamp'),
      signature: header('webhook-signature'),
      idempotencyKey: header('idempotency-key'),
      body,
      verified,
      answer: 'hang' in response ? 'hang' : 'close' in response ? 'close' : response.status,
    };
    this.received.push(received);
    this.opened(received, res);
    if ('hang' in response) return;
    if ('close' in response) {
      req.socket.destroy();
      return;
    }
    if ('untilReleased' in response && !this.released.has(merchantId))
      await new Promise<void>((resolve) =>
        this.waitingForRelease.set(merchantId, [...(this.waitingForRelease.get(merchantId) ?? []), resolve]),
      );
    if ('delayMs' in response && response.delayMs)
      await new Promise((resolve) => setTimeout(resolve, response.delayMs));
    const headers: Record<string, string> = { 'content-type': 'text/plain' };
    if ('retryAfter' in response && response.retryAfter !== undefined) headers['retry-after'] = response.retryAfter;
    res.writeHead(response.status, headers).end(('body' in response && response.body) || '');
  }
}
