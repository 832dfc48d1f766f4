/**
 * Go-built tools the stack needs (Temporal's server and Web UI, Prometheus's promtool and server, Alertmanager's
 * amtool), built once from the Go module proxy into the cache directory and reused: `go` with the proxy is all a fresh
 * machine needs.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { EmbeddedServiceError } from '../src/errors.js';

const exec = promisify(execFile);

/** Runs `go` for `service`, failing with a named error that says what to install. */
export async function goCommand(
  service: string,
  args: string[],
  options: { cwd?: string; GOBIN: string; env?: Record<string, string>; remedy?: string },
): Promise<string> {
  try {
    return (
      await exec('go', args, {
        cwd: options.cwd,
        env: { ...process.env, GOBIN: options.GOBIN, GOFLAGS: '-mod=mod', ...options.env },
        maxBuffer: 64 * 1024 * 1024,
      })
    ).stdout;
  } catch (err) {
    throw new EmbeddedServiceError(
      service,
      `go ${args.join(' ')}: ${(err as Error).message.split('\n').slice(0, 12).join('\n')}`,
      `install Go (https://go.dev/dl/) with access to the Go module proxy${options.remedy ? `, or ${options.remedy}` : ''}`,
      { cause: err },
    );
  }
}
