/**
 * Prometheus's own tools, at the versions docker-compose.yml runs: `promtool` (deploy/prometheus/prometheus-version),
 * which checks and unit-tests the alert rules (`promtool test rules`), and Alertmanager's `amtool`
 * (deploy/alertmanager/alertmanager-version), which checks its routing. Built once from the Go module proxy into the
 * cache directory, outside the clone, and reused.
 *
 * `go install github.com/prometheus/prometheus/cmd/promtool@v0.3xx` is refused (the module's go.mod has exclude and
 * replace directives), so it is built inside the downloaded module, with GOWORK off (the module's go.work names a
 * directory the module does not ship). Prometheus 3.X.Y is Go module version v0.3XX.Y.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { goCommand } from './go-tools.js';

const DEPLOY_DIR = path.resolve(import.meta.dirname, '../deploy/prometheus');
const ALERTMANAGER_DIR = path.resolve(import.meta.dirname, '../deploy/alertmanager');

/** The Prometheus version compose runs (its image tag), which the tools are built at. */
export async function prometheusVersion(): Promise<string> {
  return (await fs.readFile(path.join(DEPLOY_DIR, 'prometheus-version'), 'utf8')).trim();
}

/** Prometheus 3.14.0 is the Go module github.com/prometheus/prometheus v0.314.0. */
export function prometheusModuleVersion(version: string): string {
  const [major, minor, patch] = version.split('.').map(Number) as [number, number, number];
  return `v0.${major * 100 + minor}.${patch}`;
}

const exists = (file: string) =>
  fs.access(file).then(
    () => true,
    () => false,
  );

/** promtool of the compose version, from the cache or built once (minutes on 2 cores). */
export function obtainPromtool(cacheDir: string, log: (line: string) => void = () => undefined): Promise<string> {
  return obtainPrometheusCommand('promtool', cacheDir, log);
}

/** The Prometheus server of the compose version (for the live alert test), from the cache or built once. */
export function obtainPrometheus(cacheDir: string, log: (line: string) => void = () => undefined): Promise<string> {
  return obtainPrometheusCommand('prometheus', cacheDir, log);
}

async function obtainPrometheusCommand(
  command: 'promtool' | 'prometheus',
  cacheDir: string,
  log: (line: string) => void,
): Promise<string> {
  const version = await prometheusVersion();
  const dir = path.join(cacheDir, 'prometheus', version);
  const binary = path.join(dir, command);
  if (await exists(binary)) return binary;
  log(`Building ${command} ${version} from the Go module proxy (once; cached in ${dir})...`);
  await fs.mkdir(dir, { recursive: true });
  const building = `${binary}.building-${process.pid}`;
  // The server and promtool build from one module: one build at a time, the second from Go's cache.
  const go = (args: string[], cwd?: string) =>
    goCommand(command, args, { cwd, GOBIN: dir, env: { GOWORK: 'off' }, lock: 'prometheus' });
  const module = JSON.parse(
    await go(['mod', 'download', '-json', `github.com/prometheus/prometheus@${prometheusModuleVersion(version)}`]),
  ) as {
    Dir: string;
  };
  // The server's web UI is not built: without the `builtinassets` tag it serves its pages from disk, and the tests
  // use only its API.
  await go(['build', '-o', building, `./cmd/${command}`], module.Dir);
  await fs.rename(building, binary);
  return binary;
}

/**
 * amtool of compose's Alertmanager version, from the cache or built once. `go install` works for it up to v0.31.x
 * (v0.32.0 on embeds a UI bundle the module does not ship).
 */
export async function obtainAmtool(cacheDir: string, log: (line: string) => void = () => undefined): Promise<string> {
  const version = (await fs.readFile(path.join(ALERTMANAGER_DIR, 'alertmanager-version'), 'utf8')).trim();
  const dir = path.join(cacheDir, 'alertmanager', version);
  const binary = path.join(dir, 'amtool');
  if (await exists(binary)) return binary;
  log(`Building amtool ${version} from the Go module proxy (once; cached in ${dir})...`);
  const building = `${dir}.building-${process.pid}`;
  await fs.rm(building, { recursive: true, force: true });
  await fs.mkdir(building, { recursive: true });
  await goCommand('amtool', ['install', `github.com/prometheus/alertmanager/cmd/amtool@v${version}`], {
    GOBIN: building,
  });
  await fs.rm(dir, { recursive: true, force: true });
  await fs.rename(building, dir);
  return binary;
}
