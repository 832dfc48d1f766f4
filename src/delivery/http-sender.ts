/**
 * One HTTP attempt: POST the body with its headers, never follow a redirect, give up after the attempt timeout
 * (enforced here, not by Temporal, so the timeout is classified and gets jittered backoff like any other retryable
 * failure), keep at most 16 KiB of the response and drain the rest. On the timeout, and when the caller's signal aborts
 * (the activity cancelled), the request is destroyed: the merchant sees its connection close, and never one webhook's
 * attempt still open while the next one is sent.
 */
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import { inert } from './inert-text.js';
import { InvalidEndpointUrl } from './endpoint.js';
import type { AttemptResult } from './policy.js';

/** What the attempt log keeps of a response body. */
const RESPONSE_EXCERPT_BYTES = 16 * 1024;

export interface HttpAttempt {
  result: AttemptResult;
  durationMs: number;
  /** The body's start, made inert (./inert-text.ts): the merchant's words, stored in the ledger only. */
  responseExcerpt?: string;
  /** How many bytes of the body were read (at most RESPONSE_EXCERPT_BYTES): what spans and logs say of it. */
  responseBytes?: number;
  /** Low-level detail of a connection error (code), never the request. */
  errorDetail?: string;
}

interface SendOptions {
  url: URL;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  lookup: net.LookupFunction;
  agents: { http: http.Agent; https: https.Agent };
  /** Aborts the request (the activity's cancellation): answered as `Cancelled`. */
  signal?: AbortSignal;
}

export function createAgents() {
  // Keep-alive: a merchant receiving thousands of webhooks a night gets a handful of connections, not thousands.
  return { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };
}

export function sendWebhookRequest(options: SendOptions): Promise<HttpAttempt> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const isHttps = options.url.protocol === 'https:';
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (attempt: HttpAttempt) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      resolve(attempt);
    };
    const onAbort = () => {
      finish({ result: { kind: 'error', errorClass: 'Cancelled' }, durationMs: elapsed() });
      request.destroy();
    };
    const request = (isHttps ? https : http).request(options.url, {
      method: 'POST',
      agent: isHttps ? options.agents.https : options.agents.http,
      lookup: options.lookup,
      headers: {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(options.body),
        'user-agent': 'hold-sweeper-webhooks/1',
        ...options.headers,
      },
    });
    const timer = setTimeout(() => {
      finish({ result: { kind: 'error', errorClass: 'AttemptTimeout' }, durationMs: elapsed() });
      request.destroy();
    }, options.timeoutMs);
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener('abort', onAbort, { once: true });

    request.on('response', (response) => {
      const chunks: Buffer[] = [];
      let kept = 0;
      const done = () =>
        finish({
          result: {
            kind: 'response',
            status: response.statusCode ?? 0,
            retryAfter:
              typeof response.headers['retry-after'] === 'string' ? response.headers['retry-after'] : undefined,
          },
          durationMs: elapsed(),
          responseExcerpt: inert(Buffer.concat(chunks).toString('utf8')),
          responseBytes: kept,
        });
      response.on('data', (chunk: Buffer) => {
        if (kept < RESPONSE_EXCERPT_BYTES) {
          const part = chunk.subarray(0, RESPONSE_EXCERPT_BYTES - kept);
          chunks.push(part);
          kept += part.length;
          // Enough for the log: answer now and let the rest drain in the background, within a bound.
          if (kept >= RESPONSE_EXCERPT_BYTES) {
            done();
            const drainLimit = setTimeout(() => response.destroy(), options.timeoutMs);
            drainLimit.unref();
            response.once('close', () => clearTimeout(drainLimit));
          }
        }
      });
      response.on('end', done);
      response.on('error', () => done());
    });
    request.on('error', (err: NodeJS.ErrnoException) => {
      if (settled) return;
      if (err instanceof InvalidEndpointUrl) {
        settled = true;
        clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        reject(err);
        return;
      }
      finish({
        result: { kind: 'error', errorClass: 'ConnectionError' },
        durationMs: elapsed(),
        errorDetail: err.code ?? err.message,
      });
    });
    request.end(options.body);
  });
}
