/**
 * A worker's health on an address of its own (HEALTH_ADDRESS): `GET /livez` answers 200 while the process runs;
 * `GET /readyz` answers 200 only when every check of what the process needs passes now (its ledger answers, Temporal
 * answers, its key rings open what the ledger holds), else 503, naming each failing check and its error. Each check is
 * run at the request, bounded by `CHECK_TIMEOUT_MS`: readiness is never a remembered answer.
 *
 * A Temporal worker takes no traffic a balancer could route away, so readiness is what an orchestrator gates a rollout
 * on and an operator asks first ("is it the ledger?"); the alerts read the gauges' freshness instead (LedgerGaugesStale).
 */
import http from 'node:http';
import { listenOn } from './metrics-listener.js';

/** One thing the process needs: resolves when it is there, rejects with why not. */
export type ReadinessCheck = () => Promise<void>;

/** How long one check may take before it counts as failed: a ledger that answers in 2 s is not one a worker can use. */
const CHECK_TIMEOUT_MS = 2_000;

interface Readiness {
  ready: boolean;
  /** Each check's name, and `ok` or its error. */
  checks: Record<string, string>;
}

async function readiness(checks: Readonly<Record<string, ReadinessCheck>>): Promise<Readiness> {
  const results = await Promise.all(
    Object.entries(checks).map(async ([name, check]) => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
      });
      try {
        await Promise.race([check(), timeout]);
        return [name, 'ok'] as const;
      } catch (err) {
        return [name, err instanceof Error ? `${err.name}: ${err.message}` : String(err)] as const;
      } finally {
        clearTimeout(timer);
      }
    }),
  );
  return { ready: results.every(([, r]) => r === 'ok'), checks: Object.fromEntries(results) };
}

export async function serveHealth(
  checks: Readonly<Record<string, ReadinessCheck>>,
  address: { host: string; port: number },
): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && path === '/livez') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"live":true}\n');
      return;
    }
    if (req.method === 'GET' && path === '/readyz') {
      void readiness(checks).then((r) => {
        res.writeHead(r.ready ? 200 : 503, { 'content-type': 'application/json' });
        res.end(`${JSON.stringify(r)}\n`);
      });
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('GET /livez, GET /readyz\n');
  });
  return listenOn(server, address);
}
