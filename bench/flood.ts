/**
 * An attacker without the processor's secret, as its own process at the lowest CPU priority (so its CPU is not the
 * receiver's or the test's):
 * unsigned POSTs to `FLOOD_URL` over `FLOOD_CONNECTIONS` kept-alive connections, paced at `FLOOD_RATE` per second, in
 * bursts: each line `<n>` on its stdin sends n more, and it answers each burst with a line `{ statuses, ms }`. Half
 * the requests carry no signature headers; half a fresh timestamp and a made-up signature over a 1,000-character
 * body, which costs the receiver the body and an HMAC.
 */
import { spawn } from 'node:child_process';
import http from 'node:http';
import os from 'node:os';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

interface FloodResult {
  statuses: Record<string, number>;
  ms: number;
}

interface Flood {
  /** Sends `n` more requests at the flood's rate; resolves when every answer is in. */
  burst(n: number): Promise<FloodResult>;
  stop(): Promise<void>;
}

/** Starts the flood's process, idle until the first burst. */
export function startFlood(url: string, connections: number, rate: number): Flood {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url)], {
    env: { ...process.env, FLOOD_URL: url, FLOOD_CONNECTIONS: String(connections), FLOOD_RATE: String(rate) },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  // The attacker's CPU is not ours: on a 2-core test machine it would otherwise compete with the receiver, the database
  // and the test's own client for the same cores, and the test would measure the machine rather than the receiver.
  // Lowest priority keeps it from taking their turns; it still sends at its rate whenever a core is free.
  os.setPriority(child.pid!, 19);
  const answers = readline.createInterface({ input: child.stdout });
  const waiting: ((result: FloodResult) => void)[] = [];
  answers.on('line', (line) => waiting.shift()?.(JSON.parse(line) as FloodResult));
  return {
    burst(n) {
      return new Promise((resolve, reject) => {
        waiting.push(resolve);
        child.once('exit', (code) => reject(new Error(`the flood exited (${code}) during a burst`)));
        child.stdin.write(`${n}\n`);
      });
    },
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', () => resolve());
        child.stdin.end();
      }),
  };
}

async function burst(
  url: URL,
  agent: http.Agent,
  connections: number,
  rate: number,
  total: number,
): Promise<FloodResult> {
  const junk = 'A'.repeat(1000);
  const statuses: Record<string, number> = {};
  const started = Date.now();
  let next = 0;
  const post = (i: number) =>
    new Promise<void>((resolve) => {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (i % 2) {
        headers['webhook-id'] = `evt_flood_${i}`;
        headers['webhook-timestamp'] = String(Math.floor(Date.now() / 1000));
        headers['webhook-signature'] = `v1,${Buffer.from(junk.slice(0, 32)).toString('base64')}`;
      }
      const req = http.request(url, { method: 'POST', agent, headers }, (res) => {
        res.resume();
        res.on('end', () => {
          statuses[res.statusCode!] = (statuses[res.statusCode!] ?? 0) + 1;
          resolve();
        });
      });
      req.on('error', () => {
        statuses.error = (statuses.error ?? 0) + 1;
        resolve();
      });
      req.end(junk);
    });
  const connection = async () => {
    for (let i = next++; i < total; i = next++) {
      const due = started + (i * 1000) / rate;
      if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
      await post(i);
    }
  };
  await Promise.all(Array.from({ length: connections }, connection));
  return { statuses, ms: Date.now() - started };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const url = new URL(process.env.FLOOD_URL!);
  const connections = Number(process.env.FLOOD_CONNECTIONS);
  const rate = Number(process.env.FLOOD_RATE);
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const lines = readline.createInterface({ input: process.stdin });
  let queue = Promise.resolve();
  lines.on('line', (line) => {
    queue = queue.then(async () =>
      console.log(JSON.stringify(await burst(url, agent, connections, rate, Number(line)))),
    );
  });
  lines.on('close', () => void queue.then(() => agent.destroy()));
}
