/**
 * The fake merchants in a process of their own, for the benchmark: receiving tens of thousands of webhooks
 * (verifying each signature) must not share an event loop or a CPU account with whatever measures it.
 *
 * Parent side: `FakeMerchantsProcess` (start, script, summary, dump, stop) over Node's IPC channel.
 * Child side: this file run as a script (`node --import tsx bench/fake-merchants-process.ts`).
 */
import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { maxInAnyWindow } from './invariants.js';
import { FakeMerchants, type MerchantScript, type ReceivedWebhook } from '../dev/fake-merchants.js';

interface MerchantTraffic {
  requests: number;
  /** Most requests received in any 1-second window (sliding). */
  maxPerSecond: number;
  /** Answers given, by status code (or hang / close). */
  answers: Record<string, number>;
}

export interface TrafficSummary {
  requests: number;
  unverified: number;
  /** Webhook ids answered 2xx more than once (a duplicate delivery the merchant saw). */
  deliveredTwice: number;
  answers: Record<string, number>;
  byMerchant: Record<string, MerchantTraffic>;
}

type Request =
  | { op: 'start' }
  | { op: 'script'; scripts: [string, MerchantScript][] }
  | { op: 'endpoints'; merchantIds: string[]; sharedOrigin: string[] }
  | { op: 'summary' }
  | { op: 'dump'; path: string };

function summarise(received: readonly ReceivedWebhook[]): TrafficSummary {
  const byMerchant: Record<string, MerchantTraffic & { times: number[] }> = {};
  const answers: Record<string, number> = {};
  const delivered = new Map<string, number>();
  let unverified = 0;
  for (const r of received) {
    const m = (byMerchant[r.merchantId] ??= { requests: 0, maxPerSecond: 0, answers: {}, times: [] });
    m.requests++;
    m.times.push(r.receivedAt);
    const answer = String(r.answer);
    m.answers[answer] = (m.answers[answer] ?? 0) + 1;
    answers[answer] = (answers[answer] ?? 0) + 1;
    if (!r.verified) unverified++;
    if (typeof r.answer === 'number' && r.answer >= 200 && r.answer < 300)
      delivered.set(r.webhookId ?? '', (delivered.get(r.webhookId ?? '') ?? 0) + 1);
  }
  const merchants: Record<string, MerchantTraffic> = {};
  for (const [id, { times, ...traffic }] of Object.entries(byMerchant))
    merchants[id] = { ...traffic, maxPerSecond: maxInAnyWindow(times) };
  return {
    requests: received.length,
    unverified,
    deliveredTwice: [...delivered.values()].filter((n) => n > 1).length,
    answers,
    byMerchant: merchants,
  };
}

const SCRIPT = fileURLToPath(import.meta.url);

export class FakeMerchantsProcess {
  private child: ChildProcess | undefined;
  private base = '';
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (err: Error) => void }>();

  get pid(): number | undefined {
    return this.child?.pid;
  }

  async start(): Promise<string> {
    const child = fork(SCRIPT, [], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'advanced',
    });
    this.child = child;
    child.on('message', (message: { id?: number; base?: string; result?: unknown; error?: string }) => {
      if (message.id === undefined) return;
      const waiter = this.pending.get(message.id);
      this.pending.delete(message.id);
      if (message.error !== undefined) waiter?.reject(new Error(`fake merchants: ${message.error}`));
      else waiter?.resolve(message.result);
    });
    child.on('exit', (code) => {
      for (const waiter of this.pending.values()) waiter.reject(new Error(`fake merchants process exited (${code})`));
      this.pending.clear();
    });
    this.base = (await this.call({ op: 'start' })) as string;
    return this.base;
  }

  /**
   * Each merchant's endpoint, on a loopback address of its own (its own destination), listened on before this answers;
   * those in `sharedOrigin` on the process's main address, one host:port for all of them, as a platform receiving
   * webhooks for its merchants.
   */
  async endpointsFor(
    merchantIds: readonly string[],
    sharedOrigin: readonly string[] = [],
  ): Promise<Map<string, string>> {
    return new Map(
      (await this.call({ op: 'endpoints', merchantIds: [...merchantIds], sharedOrigin: [...sharedOrigin] })) as [
        string,
        string,
      ][],
    );
  }

  async script(scripts: ReadonlyMap<string, MerchantScript>): Promise<void> {
    await this.call({ op: 'script', scripts: [...scripts] });
  }

  summary(): Promise<TrafficSummary> {
    return this.call({ op: 'summary' }) as Promise<TrafficSummary>;
  }

  /** Writes every request received so far to `path` (JSON) and reads it back: for the invariant checks. */
  async requests(path: string): Promise<ReceivedWebhook[]> {
    await this.call({ op: 'dump', path });
    return JSON.parse(await fs.readFile(path, 'utf8')) as ReceivedWebhook[];
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
  }

  private call(request: Request): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child!.send({ id, ...request });
    });
  }
}

/** The child side: one FakeMerchants server, driven by the parent's messages. */
async function serve() {
  const merchants = new FakeMerchants();
  const reply = (id: number, result: unknown, error?: unknown) =>
    process.send!(
      error === undefined ? { id, result } : { id, error: error instanceof Error ? error.message : String(error) },
    );
  const answer = async (message: Request & { id: number }) => {
    try {
      switch (message.op) {
        case 'start':
          return reply(message.id, await merchants.start());
        case 'script':
          for (const [id, script] of message.scripts) merchants.script(id, script);
          return reply(message.id, undefined);
        case 'endpoints': {
          const shared = new Set(message.sharedOrigin);
          return reply(
            message.id,
            message.merchantIds.map((id) => [id, merchants.endpointFor(id, { sharedOrigin: shared.has(id) })]),
          );
        }
        case 'summary':
          return reply(message.id, summarise(merchants.requests()));
        case 'dump':
          await fs.writeFile(message.path, JSON.stringify(merchants.requests()));
          return reply(message.id, undefined);
      }
    } catch (err) {
      reply(message.id, undefined, err);
    }
  };
  // Every failure is answered to the parent inside `answer`; nothing is left to await here.
  process.on('message', (message: Request & { id: number }) => void answer(message));
  process.on('SIGTERM', () => void merchants.stop().then(() => process.exit(0)));
  process.on('disconnect', () => void merchants.stop().then(() => process.exit(0)));
}

if (process.argv[1] === SCRIPT) await serve();
