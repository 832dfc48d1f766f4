/**
 * A real Prometheus server (the compose version, built once by dev/prometheus-tools.ts) on a configuration of the
 * caller's: the live alert test runs one against a worker, the night benchmark one against its whole stack, to draw
 * the on-call dashboard from what it scraped. Its data lives in a temporary directory removed on stop.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { freePort } from './embedded-postgres.js';

export interface PrometheusServer {
  /** The HTTP API's base, e.g. http://127.0.0.1:41234/api/v1. */
  readonly api: string;
  stop(): Promise<void>;
}

interface PrometheusServerOptions {
  /** The `prometheus` binary (obtainPrometheus). */
  binary: string;
  /** prometheus.yml, as an object; `rule_files` is set when `rules` is given. */
  config: Record<string, unknown>;
  /** A rule file's content (`{ groups: [...] }`), written beside the configuration. */
  rules?: Record<string, unknown>;
  /** How long to wait for the server to say it is ready. */
  readyTimeoutMs?: number;
}

/** Starts Prometheus and returns once `/-/ready` answers; fails with the server's exit if it dies first. */
export async function startPrometheus({
  binary,
  config,
  rules,
  readyTimeoutMs = 60_000,
}: PrometheusServerOptions): Promise<PrometheusServer> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-prometheus-'));
  if (rules) await fs.writeFile(path.join(dir, 'rules.yml'), stringify(rules));
  await fs.writeFile(
    path.join(dir, 'prometheus.yml'),
    stringify(rules ? { ...config, rule_files: ['rules.yml'] } : config),
  );
  const port = await freePort();
  const child = spawn(
    binary,
    [
      `--config.file=${path.join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const exited = new Promise<string>((resolve) =>
    child.once('exit', (code, signal) => resolve(`exited (${signal ?? code})`)),
  );
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    await fs.rm(dir, { recursive: true, force: true });
  };
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + readyTimeoutMs;
  let failure: string | undefined;
  void exited.then((why) => (failure = why));
  for (;;) {
    const ready = await fetch(`${base}/-/ready`, { signal: AbortSignal.timeout(2_000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) return { api: `${base}/api/v1`, stop };
    if (failure !== undefined || Date.now() > deadline) {
      await stop();
      throw new Error(
        `Prometheus (${binary}) did not become ready: ${failure ?? `no answer within ${readyTimeoutMs} ms`}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
