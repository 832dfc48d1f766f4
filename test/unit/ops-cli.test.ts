/**
 * The operator CLI's edges that need no stack (src/operations/cli.ts): its commands and their help are the verb table's, a
 * command or an option that does not exist is refused before any configuration is read, and an admin API that does not
 * answer is named by its URL.
 */
import { describe, expect, it } from 'vitest';
import { freePort } from '../../dev/embedded-postgres.js';
import { ConfigError } from '../../src/errors.js';
import { ADMIN_VERBS } from '../../src/operations/admin-verbs.js';
import { AdminApiError, AdminApiUnreachable } from '../../src/operations/admin-client.js';
import { operatorErrorText, runOps } from '../../src/operations/cli.js';

/** Nothing configured at all: not even HOLD_SWEEPER_MODE. */
const NOTHING = {};

/** What `npm run ops -- <args>` prints and its exit code, with nothing configured; its help's lines joined up. */
async function printed(...args: string[]): Promise<{ code: number; text: string }> {
  const lines: string[] = [];
  const code = await runOps(args, (line) => lines.push(line), NOTHING);
  return { code, text: lines.join('\n').replace(/\s+/g, ' ') };
}

describe('help, made from the verb table', () => {
  it('lists every command with its summary, and exits 2 when no command is given', async () => {
    const asked = await printed('--help');
    expect(asked.code).toBe(0);
    for (const verb of ADMIN_VERBS) expect(asked.text).toContain(verb.summary);
    expect(asked.text).toContain('replay approve <request id>');
    expect(asked.text).toContain('merchant api-key create <merchant id>');
    expect(await printed()).toEqual({ code: 2, text: asked.text });
    expect((await printed('--json')).code).toBe(2);
  });

  it("prints one command's help: its usage, its summary, its options and the ones every command takes", async () => {
    const status = await printed('status', '--help');
    expect(status.code).toBe(0);
    expect(status.text).toContain('Usage: npm run ops -- status <hold id> [options]');
    expect(status.text).toContain(ADMIN_VERBS.find((v) => v.id === 'hold.status')!.summary);
    expect(status.text).toMatch(/--region <region> us or eu/);
    expect(status.text).toContain('--json');
    for (const other of ADMIN_VERBS.filter((v) => v.id !== 'hold.status'))
      expect(status.text).not.toContain(other.summary);
    expect(status.text).not.toContain('sweep-now');

    const rotate = await printed('merchant', 'rotate-secret', '--help');
    expect(rotate.text).toContain('Usage: npm run ops -- merchant rotate-secret <merchant id> [options]');
    expect(rotate.text).toMatch(/--overlap <duration> how long the old secret also signs: 30m, 24h, 7d/);
    expect(rotate.text).not.toContain('merchant add');
  });

  it('gives every verb a command whose help names each of its fields and who acts as options', async () => {
    for (const verb of ADMIN_VERBS) {
      const { code, text } = await printed(...verb.command.split(' '), '--help');
      expect(code, verb.command).toBe(0);
      expect(text, verb.command).toContain(`Usage: npm run ops -- ${verb.command} `);
      expect(text, verb.command).toContain(verb.summary);
      const fields = Object.keys(verb.fields).filter((name) => name !== verb.target);
      const flags = [...fields, ...(verb.actor ? [verb.actor] : [])].map(
        (name) =>
          verb.cli?.options?.[name]?.flags.split(' ')[0] ?? `--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`,
      );
      for (const flag of flags) expect(text, `${verb.command} ${flag}`).toMatch(new RegExp(`(^| )${flag}( |$)`));
      if (verb.target) expect(text, verb.command).toMatch(new RegExp(`Usage: npm run ops -- ${verb.command} <[^>]+>`));
    }
  });

  it('shows a group the commands under it; a group with no command given is a mistake', async () => {
    const merchant = await printed('merchant');
    expect(merchant.code).toBe(2);
    expect(merchant.text).toContain('merchant api-key revoke <key id>');
    expect(merchant.text).not.toContain('replay approve');
    // `resend <webhook id>` is a command and a group: its options, and the commands under it.
    const resend = await printed('resend', '--help');
    expect(resend.text).toContain('Usage: npm run ops -- resend <webhook id> [options]');
    expect(resend.text).toMatch(/--reason <text> why; required/);
    expect(resend.text).toContain('resend approve <request id>');
  });
});

describe('refused before any configuration is read', () => {
  it('a command that does not exist, listing the ones that do', async () => {
    const refused = runOps(['statsu', 'h_1'], () => undefined, NOTHING);
    await expect(refused).rejects.toThrow(ConfigError);
    await expect(refused).rejects.toThrow(/command="statsu".*one of sweep-now, sweeps, status, .*audit/);
    await expect(runOps(['merchant', 'frobnicate', 'm_1'], () => undefined, NOTHING)).rejects.toThrow(
      /merchant="frobnicate".*one of add, show, set, pause, resume, rotate-secret, ping, api-key, api-keys, portal-link/,
    );
  });

  it('an option the command does not take, naming it', async () => {
    await expect(runOps(['status', 'h_1', '--bogus'], () => undefined, NOTHING)).rejects.toMatchObject({
      name: 'ConfigError',
      message: expect.stringMatching(/unknown option '--bogus'/),
    });
    // Only discard and replay approve record a decision without sending it.
    await expect(
      runOps(['approve', 'h_1', '--by', 'bob', '--reason', 'x', '--record-only'], () => undefined, NOTHING),
    ).rejects.toThrow(/unknown option '--record-only'/);
  });

  it('a value its field refuses, or one that reads as an option, naming the option', async () => {
    const refused = async (args: string[], message: RegExp) =>
      expect(runOps(args, () => undefined, NOTHING)).rejects.toMatchObject({
        name: 'ConfigError',
        message: expect.stringMatching(message),
      });
    await refused(['merchant', 'set', 'm_1', '--rate', '-5'], /^--rate="-5" is invalid/);
    await refused(['sweeps', 'pause', '--by', '--reason', 'x'], /^--by="--reason" is invalid/);
    await refused(['merchant', 'set', 'm_1', '--rate', 'fast'], /^--rate="fast" is invalid: expected .*a number/);
    await refused(['replay', 'approve', 'rr_1', '--by', 'bob', '--rate', '0'], /^--rate="0" .*signals per second/);
    await refused(['quarantine', 'list', '--reason', 'sad'], /^--reason="sad" .*rejected, exhausted/);
    await refused(['webhooks', 'list', '--status', 'pending', '--limit', '1.5'], /^--limit="1.5" .*a whole number/);
    await refused(['audit', '--since', 'yesterday'], /^--since="yesterday" .*ISO 8601/);
    await refused(['merchant', 'set', 'm_1', '--policy', '{oops'], /^--policy="\{oops" .*a JSON object/);
    await refused(['merchant', 'rotate-secret', 'm_1', '--overlap', 'a while'], /^--overlap="a while"/);
    await refused(['webhooks', 'list'], /^--status is not set/);
    await refused(['status'], /missing required argument 'hold id'/);
  });
});

it('names the URL of an admin API that does not answer, and why, instead of "fetch failed"', async () => {
  const url = `http://127.0.0.1:${await freePort()}`;
  const env = { HOLD_SWEEPER_API_URL_US: url, HOLD_SWEEPER_API_TOKEN: 'a-token' };
  const failed = runOps(['sweeps', 'status'], () => undefined, env);
  await expect(failed).rejects.toThrow(AdminApiUnreachable);
  await expect(failed).rejects.toThrow(new RegExp(`${url}/v1/sweeps/status did not answer \\(.*ECONNREFUSED`));
  await expect(failed).rejects.not.toThrow(/a-token/);
  // Through the API who acts is the token's subject: a name given is refused, before anything is sent.
  await expect(runOps(['sweeps', 'pause', '--by', 'ann', '--reason', 'x'], () => undefined, env)).rejects.toThrow(
    /--by="ann" is invalid: expected nothing/,
  );
});

describe('a named error prints inert', () => {
  it("what the admin API's message quotes reaches the terminal escaped, in text and in JSON", () => {
    const quoting = new AdminApiError(
      409,
      'InvalidMerchantSetting',
      undefined,
      'bad url \x1b]0;pwned\x07\u009b2J',
      'r1',
    );
    const text = operatorErrorText(quoting, false)!;
    expect(text).toBe('AdminApiError: InvalidMerchantSetting: bad url \\u001b]0;pwned\\u0007\\u009b2J [request r1]');
    const json = operatorErrorText(quoting, true)!;
    expect(json).not.toMatch(/\p{Cc}/u);
    expect(JSON.parse(json)).toMatchObject({ message: 'bad url \x1b]0;pwned\x07\u009b2J', status: 409 });
  });
});
