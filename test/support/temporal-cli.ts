/**
 * The real `temporal` CLI the global setup obtained, run against the shared dev server as an operator (or an attacker)
 * would.
 */
import { execFile } from 'node:child_process';
import { inject } from 'vitest';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `temporal <args> --address <the shared server, or address>` (with `env` added: a locked cluster's
 * TEMPORAL_TLS_* and TEMPORAL_API_KEY); resolves with its exit code and output, never rejects on a non-zero exit.
 */
export function temporalCli(
  args: readonly string[],
  address = inject('temporalAddress'),
  env: Record<string, string> = {},
): Promise<CliResult> {
  const binary = inject('temporalCliPath');
  if (!binary)
    throw new Error('the global setup started the dev server through the SDK download: no `temporal` binary to run');
  return new Promise((resolve) => {
    execFile(
      binary,
      [...args, '--address', address],
      { timeout: 60_000, env: { ...process.env, ...env } },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}
