import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { guardedLookup, isForbiddenAddress, parseEndpoint, InvalidEndpointUrl } from '../../src/delivery/endpoint.js';
import {
  classifyAttempt,
  InvalidDeliveryPolicyError,
  parseRetryAfter,
  resolveDeliveryPolicy,
  retryDelay,
  type AttemptResult,
} from '../../src/delivery/policy.js';
import { DEFAULT_DELIVERY_POLICY } from '../../src/contracts/delivery.js';
import { decodeSigningSecret, MissingSigningSecret, signature, signedHeaders } from '../../src/delivery/signing.js';

// The Standard Webhooks / Svix published test vector.
const VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};

describe('signing', () => {
  const key = decodeSigningSecret('m', VECTOR.secret);

  it('matches the published Standard Webhooks vector', () => {
    expect(signature(key, VECTOR.id, VECTOR.timestamp, VECTOR.body)).toBe(VECTOR.signature);
  });

  it('is accepted by the reference verifier, and each tampered field is refused', () => {
    const now = Math.floor(Date.now() / 1000);
    const headers = signedHeaders([key], VECTOR.id, now, VECTOR.body);
    const verifier = new Webhook(VECTOR.secret);
    expect(() => verifier.verify(VECTOR.body, { ...headers })).not.toThrow();
    expect(headers['idempotency-key']).toBe(VECTOR.id);
    expect(() => verifier.verify('{"test": 2432232315}', { ...headers })).toThrow();
    expect(() => verifier.verify(VECTOR.body, { ...headers, 'webhook-id': 'msg_other' })).toThrow();
    expect(() => verifier.verify(VECTOR.body, { ...headers, 'webhook-timestamp': String(now + 1) })).toThrow();
    // A stale timestamp (outside the verifier's 5-minute tolerance) is refused even with a valid signature.
    const stale = signedHeaders([key], VECTOR.id, now - 600, VECTOR.body);
    expect(() => verifier.verify(VECTOR.body, { ...stale })).toThrow(/timestamp/i);
  });

  it('carries two signatures during rotation, each verifiable with its own secret', () => {
    const next = 'whsec_' + Buffer.alloc(32, 7).toString('base64');
    const now = Math.floor(Date.now() / 1000);
    const headers = signedHeaders([decodeSigningSecret('m', next), key], VECTOR.id, now, VECTOR.body);
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(() => new Webhook(next).verify(VECTOR.body, { ...headers })).not.toThrow();
    expect(() => new Webhook(VECTOR.secret).verify(VECTOR.body, { ...headers })).not.toThrow();
  });

  it('refuses a missing or undecodable secret with a named error that does not print it', () => {
    for (const secret of [null, '', '   ']) expect(() => decodeSigningSecret('m_1', secret)).toThrow(MissingSigningSecret);
    for (const secret of ['whsec_not base64!', 'whsec_c2hvcnQ=', 'whsec_abc']) {
      const err = (() => {
        try {
          decodeSigningSecret('m_1', secret);
        } catch (e) {
          return e as Error;
        }
      })();
      expect(err).toBeInstanceOf(MissingSigningSecret);
      expect(err!.message).not.toContain(secret);
      expect(err!.message).toContain('m_1');
    }
  });
});

describe('policy table', () => {
  const response = (status: number): AttemptResult => ({ kind: 'response', status });
  it.each([
    [200, 'delivered'],
    [204, 'delivered'],
    [299, 'delivered'],
    [408, 'retry'],
    [425, 'retry'],
    [429, 'retry'],
    [500, 'retry'],
    [503, 'retry'],
    [599, 'retry'],
    [410, 'disable_endpoint'],
    [301, 'reject'],
    [302, 'reject'],
    [400, 'reject'],
    [401, 'reject'],
    [403, 'reject'],
    [404, 'reject'],
    [422, 'reject'],
    [600, 'reject'],
  ])('HTTP %i → %s', (status, action) => {
    expect(classifyAttempt(response(status)).action).toBe(action);
  });
  it('retries connection errors and attempt timeouts', () => {
    expect(classifyAttempt({ kind: 'error', errorClass: 'ConnectionError' }).action).toBe('retry');
    expect(classifyAttempt({ kind: 'error', errorClass: 'AttemptTimeout' }).action).toBe('retry');
  });
  it('defaults to a 15 s attempt timeout and a horizon of at least 3 days', () => {
    expect(DEFAULT_DELIVERY_POLICY.attemptTimeoutMs).toBe(15_000);
    expect(DEFAULT_DELIVERY_POLICY.retryHorizonMs).toBeGreaterThanOrEqual(3 * 86_400_000);
  });
});

describe('retry delays', () => {
  const policy = DEFAULT_DELIVERY_POLICY;
  it('back off exponentially with jitter in the upper half of each step, capped', () => {
    for (let attempt = 1; attempt <= 20; attempt++) {
      const step = Math.min(policy.maxBackoffMs, policy.initialBackoffMs * 2 ** (attempt - 1));
      expect(retryDelay(policy, attempt, () => 0).delayMs).toBe(step / 2);
      expect(retryDelay(policy, attempt, () => 0.999999).delayMs).toBeLessThanOrEqual(step);
      expect(retryDelay(policy, attempt, () => 0.999999).delayMs).toBeGreaterThan(step * 0.99);
    }
  });
  it('spread out: many retries of the same attempt do not all pick the same delay', () => {
    const delays = new Set(Array.from({ length: 50 }, () => retryDelay(policy, 4, Math.random).delayMs));
    expect(delays.size).toBeGreaterThan(40);
  });
  it('honour Retry-After as a floor, capped at 24 h', () => {
    expect(retryDelay(policy, 1, () => 0, 120_000)).toEqual({ delayMs: 120_000, reason: 'Retry-After 120 s' });
    // A short Retry-After does not shorten a longer backoff step.
    expect(retryDelay(policy, 10, () => 0, 1000).delayMs).toBe(Math.min(policy.maxBackoffMs, 5000 * 2 ** 9) / 2);
    expect(retryDelay(policy, 1, () => 0, 7 * 86_400_000)).toEqual({ delayMs: 86_400_000, reason: 'Retry-After 86400 s (asked 604800 s, capped)' });
  });
});

describe('Retry-After parsing', () => {
  const now = Date.parse('2026-11-30T12:00:00Z');
  it.each([
    ['120', 120_000],
    ['0', 0],
    ['Mon, 30 Nov 2026 12:01:30 GMT', 90_000],
    ['Mon, 30 Nov 2026 11:00:00 GMT', 0],
    ['99999999999', 99_999_999_999_000],
    ['soon', undefined],
    ['-5', undefined],
    ['1.5', undefined],
    ['', undefined],
    ['2026-11-30T12:05:00Z', undefined],
    [undefined, undefined],
  ])('%j → %j ms', (header, expected) => {
    expect(parseRetryAfter(header, now)).toBe(expected);
  });
  it('a huge value is capped by the policy', () => {
    expect(retryDelay(DEFAULT_DELIVERY_POLICY, 1, () => 0, parseRetryAfter('99999999999', now)).delayMs).toBe(86_400_000);
  });
});

describe('merchant policy overrides', () => {
  it('apply known keys and name a bad one', () => {
    expect(resolveDeliveryPolicy('m', { initialBackoffMs: 1000 }).initialBackoffMs).toBe(1000);
    expect(() => resolveDeliveryPolicy('m', { initialBackofMs: 1000 })).toThrow(/delivery_policy\.initialBackofMs/);
    expect(() => resolveDeliveryPolicy('m', { retryHorizonMs: -1 })).toThrow(InvalidDeliveryPolicyError);
    expect(() => resolveDeliveryPolicy('m', { backoffMultiplier: 0.5 })).toThrow(/backoffMultiplier/);
    expect(() => resolveDeliveryPolicy('m', [1])).toThrow(InvalidDeliveryPolicyError);
  });
});

describe('endpoint guard', () => {
  const production = { allowInsecureHttp: false, allowPrivateAddresses: false };
  const dev = { allowInsecureHttp: true, allowPrivateAddresses: true };
  it.each([
    ['not a url', /not a valid URL/],
    ['ftp://merchant.example/hook', /scheme ftp:/],
    ['http://merchant.example/hook', /scheme http:/],
    ['https://user:pw@merchant.example/hook', /credentials/],
    ['https://127.0.0.1/hook', /private/],
    ['https://10.1.2.3/hook', /private/],
    ['https://169.254.169.254/latest/meta-data', /private/],
    ['https://[::1]/hook', /private/],
    ['https://[::ffff:192.168.0.1]/hook', /private/],
    ['https://localhost:8443/hook', /private/],
  ])('refuses %s in production', (url, problem) => {
    expect(() => parseEndpoint('m_1', url, production)).toThrow(InvalidEndpointUrl);
    expect(() => parseEndpoint('m_1', url, production)).toThrow(problem);
  });
  it('accepts public https in production, and loopback http in dev', () => {
    expect(parseEndpoint('m', 'https://hooks.merchant.example/in', production).hostname).toBe('hooks.merchant.example');
    expect(parseEndpoint('m', 'http://127.0.0.1:9000/webhooks/m', dev).port).toBe('9000');
  });
  it('trusts exactly the private networks WEBHOOK_TRUSTED_NETWORKS names, still over https only', () => {
    const trusted = { ...production, trustedNetworks: ['10.20.0.0/16', '127.0.0.1/32'] };
    expect(parseEndpoint('m', 'https://10.20.3.4/in', trusted).hostname).toBe('10.20.3.4');
    expect(parseEndpoint('m', 'https://127.0.0.1:8443/in', trusted).port).toBe('8443');
    expect(() => parseEndpoint('m', 'https://10.21.0.1/in', trusted)).toThrow(/private/);
    expect(() => parseEndpoint('m', 'https://127.0.0.2/in', trusted)).toThrow(/private/);
    expect(() => parseEndpoint('m', 'https://169.254.169.254/latest/meta-data', trusted)).toThrow(/private/);
    expect(() => parseEndpoint('m', 'https://localhost:8443/in', trusted)).toThrow(/private/);
    expect(() => parseEndpoint('m', 'http://10.20.3.4/in', trusted)).toThrow(/scheme http:/);
    // At connect time too: a name resolving into a trusted network connects, anything else private is refused.
    const lookup = (rules: typeof trusted, host: string) =>
      new Promise<string>((resolve, reject) =>
        guardedLookup('m', rules)(host, {}, (err, address) => (err ? reject(err) : resolve(address as string))),
      );
    return Promise.all([
      expect(lookup(trusted, '127.0.0.1')).resolves.toBe('127.0.0.1'),
      expect(lookup({ ...trusted, trustedNetworks: ['10.20.0.0/16'] }, '127.0.0.1')).rejects.toThrow(InvalidEndpointUrl),
    ]);
  });
  it('classifies addresses', () => {
    expect(['10.0.0.1', '172.20.1.1', '192.168.1.1', '127.0.0.53', '100.64.0.1', 'fd00::1', 'fe80::1', '::1'].map(isForbiddenAddress)).toEqual(
      Array(8).fill(true),
    );
    expect(['8.8.8.8', '172.32.0.1', '2606:4700::1111'].map(isForbiddenAddress)).toEqual([false, false, false]);
  });
  it('case 9, fail closed: NAT64 and IPv4 hidden in IPv6 notation are refused too', () => {
    const disguised = [
      '64:ff9b::a00:1',
      '64:ff9b::7f00:1',
      '64:ff9b::8.8.8.8',
      '64:ff9b:1::a00:1',
      '::a00:1',
      '::127.0.0.1',
      '::ffff:a00:1',
      '::ffff:10.0.0.1',
    ];
    expect(disguised.filter((a) => !isForbiddenAddress(a))).toEqual([]);
    expect(() => parseEndpoint('m_1', 'https://[64:ff9b::a9fe:a9fe]/hooks', { allowInsecureHttp: false, allowPrivateAddresses: false })).toThrow(
      InvalidEndpointUrl,
    );
    expect(['2001:4860:4860::8888', '64:ff9a::1'].map(isForbiddenAddress)).toEqual([false, false]);
  });
});
