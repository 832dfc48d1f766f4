/**
 * The compose stack, end to end, on a host with Docker (.github/workflows/compose.yml), after `npm run credentials` and
 * `docker compose up --wait --build`:
 *
 *   NODE_EXTRA_CA_CERTS=deploy/secrets/pki/ca.pem npx tsx test/compose-smoke.ts
 *
 * As the demo users, with tokens Dex issues by the password grant (docs/api.md): a merchant added and an expired hold of
 * its seeded in the US ledger, a sweep started through the admin API, the hold's release webhook delivered to the
 * merchant's endpoint (SMOKE_WEBHOOK_URL: an https endpoint on the internet answering 2xx, as production's endpoint
 * rules require), and the quarantine listed with a token and refused without one. The admin API's paths are its verb
 * table's (src/operations/admin-verbs.ts). Exits 0, or 1 saying which step failed.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { COMPOSE_DEX } from '../dev/credentials.js';
import { ADMIN_VERBS } from '../src/operations/admin-verbs.js';

const REPO = path.resolve(import.meta.dirname, '..');
/** The US admin API, as compose publishes it (plain HTTP on loopback: it runs behind a TLS proxy). */
const API = process.env.SMOKE_API_URL ?? 'http://127.0.0.1:8443';
const WEBHOOK_URL = process.env.SMOKE_WEBHOOK_URL ?? 'https://postman-echo.com/post';
/** A sweep, its release and the webhook's send: seconds on a free host; minutes allowed. */
const DEADLINE_MS = Number(process.env.SMOKE_TIMEOUT_MS ?? 300_000);
const run = Date.now().toString(36);
const merchantId = `m_smoke_${run}`;
const holdId = `h_smoke_${run}`;

const compose = parse(fs.readFileSync(path.join(REPO, 'docker-compose.yml'), 'utf8')) as {
  secrets: Record<string, { file: string }>;
};
const secret = (name: string) => fs.readFileSync(path.join(REPO, compose.secrets[name]!.file), 'utf8').trim();

function step(what: string): void {
  console.log(`compose smoke: ${what}`);
}

/** An access token for the US admin API, as the demo user `name` (deploy/secrets/dex/demo-users.txt). */
async function tokenOf(name: string): Promise<string> {
  const users = fs.readFileSync(path.join(REPO, 'deploy/secrets/dex/demo-users.txt'), 'utf8');
  const [email, password] = users
    .trim()
    .split('\n')
    .map((line) => line.split(' '))
    .find(([email]) => email === `${name}@hold-sweeper.localhost`)!;
  const response = await fetch(`${COMPOSE_DEX.issuer}/token`, {
    method: 'POST',
    body: new URLSearchParams({
      grant_type: 'password',
      client_id: COMPOSE_DEX.cliClient,
      username: email!,
      password: password!,
      scope: `openid ${COMPOSE_DEX.groupsClaim} audience:server:client_id:hold-sweeper-admin-us`,
    }),
  });
  if (!response.ok)
    throw new Error(`Dex refused ${name}'s password grant: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { access_token: string }).access_token;
}

/** Calls the admin API's verb `id` (its path's `:name` filled from `params`) with `token`; the answer and status. */
async function call(
  id: string,
  token: string | undefined,
  { params = {}, query, body }: { params?: Record<string, string>; query?: Record<string, string>; body?: object } = {},
): Promise<{ status: number; body: unknown }> {
  const verb = ADMIN_VERBS.find((v) => v.id === id)!;
  const route = verb.path.replace(/:([A-Za-z]+)/g, (_, name: string) => encodeURIComponent(params[name]!));
  const response = await fetch(`${API}${route}${query ? `?${new URLSearchParams(query)}` : ''}`, {
    method: verb.method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body ? { 'content-type': 'application/json' } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as unknown) : undefined };
}

/** `got` answered `status`, or any 2xx for 'ok'. */
function expectStatus(what: string, got: { status: number; body: unknown }, status: number | 'ok'): void {
  if (status === 'ok' ? got.status < 200 || got.status > 299 : got.status !== status)
    throw new Error(`${what}: expected ${status}, got ${got.status} ${JSON.stringify(got.body)}`);
}

/** Runs SQL on the US ledger as its superuser, inside ledger-db, over TLS as its pg_hba.conf requires. */
function ledgerSql(sql: string): void {
  execFileSync(
    'docker',
    [
      'compose',
      'exec',
      '-T',
      '-e',
      `PGPASSWORD=${secret('ledger-admin-password')}`,
      'ledger-db',
      'psql',
      'host=127.0.0.1 dbname=hold_sweeper_us user=postgres sslmode=require',
      '-v',
      'ON_ERROR_STOP=1',
      '-c',
      sql,
    ],
    { cwd: REPO, stdio: ['ignore', 'inherit', 'inherit'] },
  );
}

async function main(): Promise<void> {
  const operator = await tokenOf('operator');
  const merchantAdmin = await tokenOf('merchant-admin');
  step('tokens from Dex for the operator and the merchant admin');

  expectStatus(
    'merchant add',
    await call('merchant.add', merchantAdmin, { body: { merchantId, name: 'Compose smoke', url: WEBHOOK_URL } }),
    'ok',
  );
  step(`merchant ${merchantId} added, its endpoint ${WEBHOOK_URL}`);

  // Seeded as the processor's feed would leave it: an account holding the hold's amount, the hold expired a minute ago.
  ledgerSql(
    `BEGIN;
     INSERT INTO accounts (id, currency, available_minor, held_minor) VALUES ('acct_smoke_${run}', 'USD', 0, 1000);
     INSERT INTO auth_holds (id, account_id, merchant_id, amount_minor, currency, expires_at)
       VALUES ('${holdId}', 'acct_smoke_${run}', '${merchantId}', 1000, 'USD', now() - interval '1 minute');
     COMMIT;`,
  );
  step(`hold ${holdId} seeded, expired`);

  const sweep = await call('sweep.now', operator);
  expectStatus('sweep now', sweep, 'ok');
  step(`sweep started through the admin API: ${(sweep.body as { workflowId: string }).workflowId}`);

  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    const delivered = await call('webhooks.list', operator, { query: { status: 'delivered', merchant: merchantId } });
    expectStatus('webhooks list', delivered, 'ok');
    if (JSON.stringify((delivered.body as { items: unknown[] }).items).includes(holdId)) break;
    if (Date.now() > deadline) {
      const hold = await call('hold.status', operator, { params: { holdId } });
      throw new Error(
        `no delivered webhook for ${holdId} within ${DEADLINE_MS / 1000} s: ${JSON.stringify(hold.body)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
  step(`the release webhook of ${holdId} delivered`);

  const quarantine = await call('quarantine.list', operator);
  expectStatus('quarantine list', quarantine, 'ok');
  if (!Array.isArray((quarantine.body as { items?: unknown }).items))
    throw new Error(`quarantine list: no items in ${JSON.stringify(quarantine.body)}`);
  expectStatus('quarantine list without a token', await call('quarantine.list', undefined), 401);
  step('the quarantine listed with a token, refused without one');
}

main().then(
  () => {
    step('passed');
    process.exit(0);
  },
  (err: unknown) => {
    console.error(`compose smoke: FAILED: ${(err as Error).message}`);
    process.exit(1);
  },
);
