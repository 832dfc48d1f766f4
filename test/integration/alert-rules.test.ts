/**
 * The alert rules, proven by Prometheus's own tools: `promtool check rules` accepts deploy/prometheus/alerts.yml,
 * `promtool test rules` runs deploy/prometheus/alerts.test.yml (each alert once firing, with its labels and text, and
 * once kept quiet), every alert has both cases, and the tests bite: a rule loosened in a copy fails them.
 * Alertmanager's routing passes `amtool check-config`, and pages and tickets go where it says. Both tools are built
 * once from the Go module proxy at compose's versions and cached (dev/prometheus-tools.ts). promtool also parses every
 * query of the on-call dashboard (deploy/perses/provisioning/dashboard-on-call.json).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { parse, stringify } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { interpolate, readDashboard } from '../../bench/dashboard.js';
import { loadDevConfig } from '../../dev/dev-config.js';
import { obtainAmtool, obtainPromtool } from '../../dev/prometheus-tools.js';

const exec = promisify(execFile);
const DEPLOY = path.resolve(import.meta.dirname, '../../deploy/prometheus');

let promtool: string;
let amtool: string;
beforeAll(async () => {
  const { cacheDir } = loadDevConfig();
  promtool = await obtainPromtool(cacheDir, (line) => console.log(line));
  amtool = await obtainAmtool(cacheDir, (line) => console.log(line));
}, 900_000);

interface RuleTests {
  tests: { name: string; alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[];
}

describe('alert rules, by promtool', () => {
  it('check rules accepts alerts.yml', async () => {
    const { stdout } = await exec(promtool, ['check', 'rules', path.join(DEPLOY, 'alerts.yml')]);
    expect(stdout).toMatch(/SUCCESS: \d+ rules found/);
  });

  it('test rules passes: every alert fires where it should and stays quiet where it should', async () => {
    const { stdout } = await exec(promtool, ['test', 'rules', path.join(DEPLOY, 'alerts.test.yml')], { cwd: DEPLOY });
    expect(stdout).toMatch(/SUCCESS/);
    const alerts = (
      parse(await fs.readFile(path.join(DEPLOY, 'alerts.yml'), 'utf8')) as { groups: { rules: { alert: string }[] }[] }
    ).groups
      .flatMap((g) => g.rules)
      .map((r) => r.alert);
    const cases = (parse(await fs.readFile(path.join(DEPLOY, 'alerts.test.yml'), 'utf8')) as RuleTests).tests.flatMap(
      (t) => t.alert_rule_test ?? [],
    );
    for (const alert of alerts) {
      const mine = cases.filter((c) => c.alertname === alert);
      expect(
        mine.some((c) => c.exp_alerts.length > 0),
        `${alert} has a case that fires it`,
      ).toBe(true);
      expect(
        mine.some((c) => c.exp_alerts.length === 0),
        `${alert} has a case that keeps it quiet`,
      ).toBe(true);
    }
  });

  it('the tests bite: a rule loosened in a copy (WorkersDown waiting 20 min) fails them', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-alerts-'));
    try {
      const rules = await fs.readFile(path.join(DEPLOY, 'alerts.yml'), 'utf8');
      const loosened = rules.replace(/(- alert: WorkersDown[\s\S]*?for: )2m/, '$120m');
      expect(loosened).not.toBe(rules);
      await fs.writeFile(path.join(dir, 'alerts.yml'), loosened);
      await fs.copyFile(path.join(DEPLOY, 'alerts.test.yml'), path.join(dir, 'alerts.test.yml'));
      const failed = await exec(promtool, ['test', 'rules', 'alerts.test.yml'], { cwd: dir }).then(
        () => undefined,
        (err: { code?: number; stdout?: string; stderr?: string }) => err,
      );
      expect(failed?.code).toBe(1);
      expect(`${failed?.stdout}${failed?.stderr}`).toMatch(/alertname: WorkersDown/);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('amtool accepts the Alertmanager config, and routes a page and a ticket to their receivers', async () => {
    const config = path.resolve(DEPLOY, '../alertmanager/alertmanager.yml');
    const { stdout } = await exec(amtool, ['check-config', config]);
    expect(stdout).toMatch(/SUCCESS/);
    const route = async (...labels: string[]) =>
      (await exec(amtool, ['config', 'routes', 'test', '--config.file', config, ...labels])).stdout.trim();
    expect(await route('alertname=WorkersDown', 'severity=page', 'region=us')).toBe('page');
    expect(await route('alertname=WebhooksQuarantined', 'severity=ticket', 'region=us')).toBe('ticket');
  });
});

describe('the on-call dashboard, by promtool', () => {
  it('check rules parses every panel query (as a recording rule, its variables filled as Perses fills them)', async () => {
    const dashboard = await readDashboard();
    const rules = Object.entries(dashboard.spec.panels).flatMap(([id, panel]) =>
      panel.spec.queries.map((q, i) => ({
        record: `dashboard:${id}:${i}`,
        expr: interpolate(q.spec.plugin.spec.query, '1m'),
      })),
    );
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-dashboard-'));
    try {
      await fs.writeFile(path.join(dir, 'dashboard.yml'), stringify({ groups: [{ name: 'dashboard', rules }] }));
      const { stdout } = await exec(promtool, ['check', 'rules', path.join(dir, 'dashboard.yml')]);
      expect(stdout).toContain(`SUCCESS: ${rules.length} rules found`);
      // promtool bites: a query with a syntax error is refused.
      await fs.writeFile(
        path.join(dir, 'broken.yml'),
        stringify({ groups: [{ name: 'broken', rules: [{ ...rules[0]!, expr: `${rules[0]!.expr})` }] }] }),
      );
      await expect(exec(promtool, ['check', 'rules', path.join(dir, 'broken.yml')])).rejects.toMatchObject({ code: 1 });
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
