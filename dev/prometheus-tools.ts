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
import { goCommand, obtainTool, type GoTool } from './go-tools.js';

const DEPLOY_DIR = path.resolve(import.meta.dirname, '../deploy/prometheus');
const ALERTMANAGER_DIR = path.resolve(import.meta.dirname, '../deploy/alertmanager');

/** The Prometheus version compose runs (its image tag), which the tools are built at. */
async function prometheusVersion(): Promise<string> {
  return (await fs.readFile(path.join(DEPLOY_DIR, 'prometheus-version'), 'utf8')).trim();
}

/** Prometheus 3.14.0 is the Go module github.com/prometheus/prometheus v0.314.0. */
function prometheusModuleVersion(version: string): string {
  const [major, minor, patch] = version.split('.').map(Number) as [number, number, number];
  return `v0.${major * 100 + minor}.${patch}`;
}

/**
 * The Prometheus server (the live alert test, the benchmark) and promtool, built together: they share most of their
 * packages.
 */
export const PROMETHEUS: GoTool = {
  id: 'prometheus',
  name: 'Prometheus and promtool',
  dir: async (cacheDir) => path.join(cacheDir, 'prometheus', await prometheusVersion()),
  files: ['prometheus', 'promtool'],
  async build(into) {
    const go = (args: string[], cwd?: string) =>
      goCommand('prometheus', args, { cwd, GOBIN: into, env: { GOWORK: 'off' } });
    const module = JSON.parse(
      await go([
        'mod',
        'download',
        '-json',
        `github.com/prometheus/prometheus@${prometheusModuleVersion(await prometheusVersion())}`,
      ]),
    ) as { Dir: string };
    // The server's web UI is not built: without the `builtinassets` tag it serves its pages from disk, and the tests
    // use only its API. Nor its service discoveries but file and http (`remove_all_sd`): compose's configuration lists
    // its targets statically, and the cloud SDKs they would pull in are most of the build. No debug symbols either.
    await go(
      ['build', '-tags', 'remove_all_sd', '-ldflags=-s -w', '-o', `${into}/`, './cmd/prometheus', './cmd/promtool'],
      module.Dir,
    );
  },
};

/** promtool of the compose version, from the cache or built once (minutes on 2 cores). */
export async function obtainPromtool(cacheDir: string, log?: (line: string) => void): Promise<string> {
  return path.join(await obtainTool(PROMETHEUS, cacheDir, log), 'promtool');
}

/** The Prometheus server of the compose version, from the cache or built once. */
export async function obtainPrometheus(cacheDir: string, log?: (line: string) => void): Promise<string> {
  return path.join(await obtainTool(PROMETHEUS, cacheDir, log), 'prometheus');
}

/**
 * amtool of compose's Alertmanager version. `go install` works for it up to v0.31.x (v0.32.0 on embeds a UI bundle the
 * module does not ship).
 */
export const AMTOOL: GoTool = {
  id: 'amtool',
  name: 'amtool',
  dir: async (cacheDir) => path.join(cacheDir, 'alertmanager', await alertmanagerVersion()),
  files: ['amtool'],
  async build(into) {
    await goCommand(
      'amtool',
      ['install', '-ldflags=-s -w', `github.com/prometheus/alertmanager/cmd/amtool@v${await alertmanagerVersion()}`],
      {
        GOBIN: into,
      },
    );
  },
};

const alertmanagerVersion = async () =>
  (await fs.readFile(path.join(ALERTMANAGER_DIR, 'alertmanager-version'), 'utf8')).trim();

/** amtool, from the cache or built once. */
export async function obtainAmtool(cacheDir: string, log?: (line: string) => void): Promise<string> {
  return path.join(await obtainTool(AMTOOL, cacheDir, log), 'amtool');
}
