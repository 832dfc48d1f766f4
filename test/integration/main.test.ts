/**
 * The README's first command, end to end: `npm start` on embedded defaults (its own dev server and embedded
 * PostgreSQL, exactly as on a fresh machine), with a smaller demo night and free ports, run to its summary.
 */
import { spawn } from 'node:child_process';
import { expect, it } from 'vitest';
import { freePort } from '../../dev/embedded-postgres.js';

it('npm start releases a demo night in both regions, notifies the merchants and prints the summary and the Web UI address', async () => {
  const [port, uiPort] = [await freePort(), await freePort()];
  const child = spawn(process.execPath, ['--import', 'tsx', 'dev/bin/demo.ts', '--once'], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      XDG_CACHE_HOME: process.env.XDG_CACHE_HOME,
      HOLD_SWEEPER_CACHE_DIR: process.env.HOLD_SWEEPER_CACHE_DIR,
      TEMPORAL_CLI_PATH: process.env.TEMPORAL_CLI_PATH,
      TEMPORAL_DEV_PORT: String(port),
      TEMPORAL_UI_PORT: String(uiPort),
      DEMO_HOLDS: '100',
    } as NodeJS.ProcessEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));

  expect(output).not.toMatch(/Error:/);
  expect(code).toBe(0);
  for (const region of ['US', 'EU']) {
    expect(output).toMatch(
      new RegExp(
        `${region} sweep-${region.toLowerCase()}-\\S+: found \\d+, child workflows started \\d+, already handled 0, rejected rows 2, unreleased at end 0`,
      ),
    );
  }
  for (const region of ['US', 'EU']) {
    // The demo's merchant 4 answers 400 (quarantined), merchants 2 and 3 answer 429 and 503 before 200 (retried).
    const line = new RegExp(
      `${region} webhooks: (\\d+) delivered, (\\d+) needed retries, (\\d+) quarantined \\(rejected\\); (\\d+) requests`,
    ).exec(output);
    expect(line, output).not.toBeNull();
    const [delivered, retried, quarantined] = line!.slice(1, 4).map(Number);
    expect(delivered).toBeGreaterThan(0);
    expect(retried).toBeGreaterThan(0);
    expect(quarantined).toBeGreaterThan(0);
  }
  for (const region of ['US', 'EU']) {
    // The processor called back about some holds while the sweep ran; each event was applied once.
    const line = new RegExp(
      `${region} processor events: (\\d+) sent as (\\d+) requests \\((\\d+) duplicates, \\d+ out of order\\), applied once each: (.+)`,
    ).exec(output);
    expect(line, output).not.toBeNull();
    const applied = [...line![4]!.matchAll(/(\d+) (\w+)/g)].reduce((n, m) => n + Number(m[1]), 0);
    expect(applied).toBe(Number(line![1]));
    expect(Number(line![1])).toBeGreaterThan(0);
  }
  expect(output).toContain(`Temporal Web UI: http://127.0.0.1:${uiPort}`);
  // The admin API of each region with a local OIDC provider, and one call through it as the printed commands make it.
  expect(output).toMatch(
    /export HOLD_SWEEPER_API_URL_US=http:\/\/127\.0\.0\.1:\d+ HOLD_SWEEPER_API_URL_EU=http:\/\/127\.0\.0\.1:\d+/,
  );
  expect(output).toMatch(
    /checked: npm run ops -- quarantine list through the US admin API as operator: [1-9]\d* quarantined/,
  );
  // A portal link for one merchant, minted through the admin API as `merchant portal-link` mints it.
  expect(output).toMatch(
    /Merchant portal of \S+, for an hour[^\n]*\n {2}http:\/\/127\.0\.0\.1:\d+\/portal#key=hsk_mk_[0-9a-f]{16}_\S{43}\n/,
  );
  expect(output).toMatch(/holds released \(ledger count\) in [\d.]+ s: [\d.]+ holds\/s/);
}, 180_000);
