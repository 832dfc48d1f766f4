/**
 * One Standard Webhooks module, checked against the reference library (`standardwebhooks`) both ways: what we sign
 * it verifies, what it signs we verify, and both refuse the same tampering.
 */
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import {
  checkWebhookHeaders,
  decodeSigningSecret,
  generateSigningSecret,
  signedHeaders,
  TIMESTAMP_TOLERANCE_SECONDS,
  verifySignature,
  WebhookUnverified,
} from '../../src/delivery/standard-webhooks.js';

const secret = generateSigningSecret();
const key = decodeSigningSecret('m_1', secret);
const reference = new Webhook(secret);
const body = JSON.stringify({ type: 'hold.released', data: { hold_id: 'h_1', amount_minor: '1200', currency: 'EUR' } });
const now = Math.floor(Date.now() / 1000);

/** Our verification of a request as the receiver runs it: the headers, then the signature over the body. */
function weVerify(headers: Record<string, string>, requestBody: string, at = now): void {
  const signed = checkWebhookHeaders(
    headers['webhook-id'],
    headers['webhook-timestamp'],
    headers['webhook-signature'],
    at,
  );
  verifySignature(key, signed, requestBody, 'the secret');
}

const reasonOf = (f: () => void) => {
  try {
    f();
  } catch (err) {
    if (err instanceof WebhookUnverified) return err.reason;
    throw err;
  }
  return 'verified';
};

describe('signed by us, verified by the reference library', () => {
  it('accepts our headers over the exact bytes', () => {
    const headers = signedHeaders([key], 'wh_1', now, body);
    expect(reference.verify(body, { ...headers })).toEqual(JSON.parse(body));
  });

  it('refuses a changed body or a changed id, as we do', () => {
    const headers = { ...signedHeaders([key], 'wh_1', now, body) };
    expect(() => reference.verify(`${body} `, headers)).toThrow();
    expect(() => reference.verify(body, { ...headers, 'webhook-id': 'wh_2' })).toThrow();
    expect(reasonOf(() => weVerify(headers, `${body} `))).toBe('BadSignature');
    expect(reasonOf(() => weVerify({ ...headers, 'webhook-id': 'wh_2' }, body))).toBe('BadSignature');
  });
});

describe('signed by the reference library, verified by us', () => {
  const referenceHeaders = (id: string, at: number, payload: string) => ({
    'webhook-id': id,
    'webhook-timestamp': String(at),
    'webhook-signature': reference.sign(id, new Date(at * 1000), payload),
  });

  it('accepts its signature, and one of several during a rotation', () => {
    const headers = referenceHeaders('evt_1', now, body);
    expect(reasonOf(() => weVerify(headers, body))).toBe('verified');
    const other = new Webhook(generateSigningSecret()).sign('evt_1', new Date(now * 1000), body);
    expect(
      reasonOf(() => weVerify({ ...headers, 'webhook-signature': `${other} ${headers['webhook-signature']}` }, body)),
    ).toBe('verified');
    expect(reasonOf(() => weVerify({ ...headers, 'webhook-signature': other }, body))).toBe('BadSignature');
  });

  it('refuses what the reference refuses: a missing header, a timestamp not in seconds, one outside the tolerance', () => {
    const headers = referenceHeaders('evt_1', now, body);
    expect(reasonOf(() => weVerify({ ...headers, 'webhook-signature': '' }, body))).toBe('MissingSignature');
    expect(reasonOf(() => weVerify({ ...headers, 'webhook-timestamp': `${now}.5` }, body))).toBe('InvalidTimestamp');
    const stale = now - TIMESTAMP_TOLERANCE_SECONDS - 1;
    const staleHeaders = referenceHeaders('evt_1', stale, body);
    expect(reasonOf(() => weVerify(staleHeaders, body))).toBe('StaleTimestamp');
    expect(() => reference.verify(body, staleHeaders)).toThrow(/too old/i);
    // At the edge of the tolerance both still accept.
    const edge = referenceHeaders('evt_1', now - TIMESTAMP_TOLERANCE_SECONDS + 1, body);
    expect(reasonOf(() => weVerify(edge, body))).toBe('verified');
    expect(() => reference.verify(body, edge)).not.toThrow();
  });
});
