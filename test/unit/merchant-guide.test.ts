/**
 * The merchant guide's verifier (docs/merchant-guide.md, step 2), run as a merchant would paste it: it accepts what
 * the product signs, with either secret during a rotation's overlap, and refuses a changed body, another secret and a
 * stale timestamp.
 */
import { readFile } from 'node:fs/promises';
import { expect, it } from 'vitest';
import { decodeSigningSecret, generateSigningSecret, signedHeaders } from '../../src/delivery/standard-webhooks.js';

type Verifier = (secret: string, headers: Record<string, string>, body: string) => boolean;

it('the guide’s verifier accepts what the product signs and refuses the rest', async () => {
  const guide = await readFile(new URL('../../docs/merchant-guide.md', import.meta.url), 'utf8');
  const code = /```js\n([\s\S]*?)```/.exec(guide)![1]!;
  const module = `data:text/javascript,${encodeURIComponent(`${code}\nexport { verified };`)}`;
  const { verified } = (await import(module)) as { verified: Verifier };

  const [old, fresh, other] = [generateSigningSecret(), generateSigningSecret(), generateSigningSecret()];
  const body = '{"type":"hold.released","data":{"hold_id":"h_1"}}';
  const now = Math.floor(Date.now() / 1000);
  const keys = [fresh, old].map((s) => decodeSigningSecret('m_1', s));
  const headers = { ...signedHeaders(keys, 'wh_h_1', now, body) };
  expect(verified(fresh, headers, body)).toBe(true);
  expect(verified(old, headers, body)).toBe(true);
  expect(verified(other, headers, body)).toBe(false);
  expect(verified(fresh, headers, body.replace('h_1', 'h_2'))).toBe(false);
  const stale = signedHeaders(keys, 'wh_h_1', now - 301, body);
  expect(verified(fresh, { ...stale }, body)).toBe(false);
});
