/**
 * A region's processor-event receiver as its own OS process (the production entry point, src/bin/receiver.ts): what
 * the tests and the chaos run kill -9 between recording an event and handing it over.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { RegionConfig } from '../src/config.js';
import { freePort } from './embedded-postgres.js';
import { keyRingVariable } from './worker-processes.js';

const RECEIVER_ENTRY = fileURLToPath(new URL('../src/bin/receiver.ts', import.meta.url));

export interface ReceiverProcess {
  /** `http://127.0.0.1:<port>/processor/events`; the same across restarts. */
  url: string;
  /** Its counters' own address (PROCESSOR_RECEIVER_METRICS_ADDRESS). */
  metricsUrl: string;
  /** Everything it wrote (restarts included). */
  output(): string;
  /** SIGKILL: no drain, no goodbye; resolves when it is gone. */
  kill(): Promise<void>;
  /** Starts it again on the same port; resolves when it listens. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

interface ReceiverProcessOptions {
  region: RegionConfig;
  databaseUrl: string;
  temporalAddress: string;
  /** whsec_...: the processor's signing secret. */
  secret: string;
  gapWait?: string;
  /**
   * More of the receiver's environment, e.g. `HOLD_SWEEPER_MODE: 'production'` and `PAYLOAD_KEYS_US` (dev mode
   * otherwise).
   */
  env?: Record<string, string>;
  /**
   * Its entry point: the source through tsx unless said, or the compiled `dist/bin/receiver.js` (npm run build), run as
   * it is.
   */
  entry?: string;
}

export async function startReceiverProcess(options: ReceiverProcessOptions): Promise<ReceiverProcess> {
  const port = await freePort();
  const metricsPort = await freePort();
  const up = options.region.region.toUpperCase();
  const env = {
    ...process.env,
    HOLD_SWEEPER_MODE: 'dev',
    HOLD_SWEEPER_REGIONS: options.region.region,
    [`DATABASE_URL_${up}`]: options.databaseUrl,
    TEMPORAL_ADDRESS: options.temporalAddress,
    [`TEMPORAL_NAMESPACE_${up}`]: options.region.namespace,
    [`TASK_QUEUE_${up}`]: options.region.taskQueue,
    [`PROCESSOR_SIGNING_SECRET_${up}`]: options.secret,
    // Its migrations end with sealing the merchants' secrets: the region's ring, as its workers have it.
    [`MERCHANT_SECRET_KEYS_${up}`]: keyRingVariable(options.region.secretKeys),
    PROCESSOR_RECEIVER_ADDRESS: `127.0.0.1:${port}`,
    PROCESSOR_RECEIVER_METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
    ...(options.gapWait ? { PROCESSOR_GAP_WAIT: options.gapWait } : {}),
    ...options.env,
  };
  const { entry = RECEIVER_ENTRY } = options;
  let output = '';
  let child: ChildProcess;
  const start = async () => {
    const started = output.length;
    child = spawn(process.execPath, [...(entry.endsWith('.ts') ? ['--import', 'tsx'] : []), entry], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d) => (output += d));
    child.stderr!.on('data', (d) => (output += d));
    const deadline = Date.now() + 60_000;
    while (!output.slice(started).includes('processor receiver listening')) {
      if (child.exitCode !== null) throw new Error(`the receiver exited (${child.exitCode}): ${output.slice(started)}`);
      if (Date.now() > deadline) throw new Error(`the receiver did not listen within 60 s: ${output.slice(started)}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  // SIGTERM lets it finish what it answers; one still there 15 s later is SIGKILLed, so a stop always ends.
  const gone = (signal: NodeJS.Signals) =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      const late = signal === 'SIGKILL' ? undefined : setTimeout(() => child.kill('SIGKILL'), 15_000);
      child.once('exit', () => {
        clearTimeout(late);
        resolve();
      });
      child.kill(signal);
    });
  await start();
  return {
    url: `http://127.0.0.1:${port}/processor/events`,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    output: () => output,
    kill: () => gone('SIGKILL'),
    restart: start,
    stop: () => gone('SIGTERM'),
  };
}
