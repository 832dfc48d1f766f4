import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import {
  guardedLookup,
  isForbiddenAddress,
  parseEndpoint,
  parseNetwork,
  InvalidEndpointUrl,
  type EndpointRules,
} from '../../src/delivery/endpoint.js';
import {
  IPV4_MULTICAST,
  IPV4_SPECIAL_PURPOSE,
  IPV6_GLOBAL_UNICAST,
  IPV6_SPECIAL_PURPOSE,
  SNAPSHOT_DATE,
} from '../../src/delivery/iana-special-purpose.js';
import {
  classifyAttempt,
  InvalidDeliveryPolicyError,
  parseRetryAfter,
  resolveDeliveryPolicy,
  retryDelay,
  type AttemptResult,
} from '../../src/delivery/policy.js';
import { DEFAULT_DELIVERY_POLICY } from '../../src/contracts/delivery.js';
import {
  decodeSigningSecret,
  MissingSigningSecret,
  signature,
  signedHeaders,
} from '../../src/delivery/standard-webhooks.js';

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
    for (const secret of [null, '', '   '])
      expect(() => decodeSigningSecret('m_1', secret)).toThrow(MissingSigningSecret);
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
    expect(retryDelay(policy, 1, () => 0, 7 * 86_400_000)).toEqual({
      delayMs: 86_400_000,
      reason: 'Retry-After 86400 s (asked 604800 s, capped)',
    });
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
    expect(retryDelay(DEFAULT_DELIVERY_POLICY, 1, () => 0, parseRetryAfter('99999999999', now)).delayMs).toBe(
      86_400_000,
    );
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

/** What the worker's connect-time lookup answers for `host` under `rules`: the address, or the refusal. */
const lookup = (rules: EndpointRules, host: string) =>
  new Promise<string>((resolve, reject) =>
    guardedLookup('m', rules)(host, {}, (err, address) => (err ? reject(err) : resolve(address as string))),
  );

describe('endpoint guard', () => {
  // As loadConfig builds them in production mode (WEBHOOK_ALLOWED_PORTS unset).
  const production = { allowInsecureHttp: false, allowPrivateAddresses: false, allowedPorts: [443] };
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
    const trusted = { ...production, trustedNetworks: ['10.20.0.0/16', '127.0.0.1/32'], allowedPorts: [443, 8443] };
    expect(parseEndpoint('m', 'https://10.20.3.4/in', trusted).hostname).toBe('10.20.3.4');
    expect(parseEndpoint('m', 'https://127.0.0.1:8443/in', trusted).port).toBe('8443');
    expect(() => parseEndpoint('m', 'https://10.21.0.1/in', trusted)).toThrow(/private/);
    expect(() => parseEndpoint('m', 'https://127.0.0.2/in', trusted)).toThrow(/private/);
    expect(() => parseEndpoint('m', 'https://169.254.169.254/latest/meta-data', trusted)).toThrow(/private/);
    expect(() => parseEndpoint('m', 'https://localhost:8443/in', trusted)).toThrow(/private/);
    expect(() => parseEndpoint('m', 'http://10.20.3.4/in', trusted)).toThrow(/scheme http:/);
    // A network is trusted for its addresses as written, not for the same address in an IPv6 form.
    expect(() => parseEndpoint('m', 'https://[::ffff:10.20.3.4]/in', trusted)).toThrow(/private/);
    // Trusting a network does not open a port.
    expect(() => parseEndpoint('m', 'https://10.20.3.4:22/in', trusted)).toThrow(/port 22 is not allowed/);
    // At connect time too: a name resolving into a trusted network connects, anything else private is refused.
    return Promise.all([
      expect(lookup(trusted, '127.0.0.1')).resolves.toBe('127.0.0.1'),
      expect(lookup({ ...trusted, trustedNetworks: ['10.20.0.0/16'] }, '127.0.0.1')).rejects.toThrow(
        InvalidEndpointUrl,
      ),
    ]);
  });
  it('classifies addresses', () => {
    expect(
      ['10.0.0.1', '172.20.1.1', '192.168.1.1', '127.0.0.53', '100.64.0.1', 'fd00::1', 'fe80::1', '::1'].map(
        isForbiddenAddress,
      ),
    ).toEqual(Array(8).fill(true));
    expect(['8.8.8.8', '172.32.0.1', '2606:4700::1111'].map(isForbiddenAddress)).toEqual([false, false, false]);
  });
  it('fail closed: NAT64 and IPv4 hidden in IPv6 notation are refused too', () => {
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
    expect(() =>
      parseEndpoint('m_1', 'https://[64:ff9b::a9fe:a9fe]/hooks', {
        allowInsecureHttp: false,
        allowPrivateAddresses: false,
      }),
    ).toThrow(InvalidEndpointUrl);
    // 64:ff9a::1 is next to NAT64 but no part of it; it is refused all the same, being outside global unicast
    // (2000::/3).
    expect(['2001:4860:4860::8888', '64:ff9a::1'].map(isForbiddenAddress)).toEqual([false, true]);
  });
});

describe('endpoint guard: global unicast only, and port 443 unless the operator allows more', () => {
  const production = {
    allowInsecureHttp: false,
    allowPrivateAddresses: false,
    trustedNetworks: [],
    allowedPorts: [443],
  };
  const dev = { allowInsecureHttp: true, allowPrivateAddresses: true };

  // The URL, and its host as the WHATWG URL parser leaves it (what parseEndpoint judges, and what a name could resolve
  // to).
  it.each([
    ['https://[2002:a9fe:a9fe::1]/', '2002:a9fe:a9fe::1'], // 6to4, embedding 169.254.169.254
    ['https://[2001:0:a9fe:a9fe::1]/', '2001:0:a9fe:a9fe::1'], // Teredo
    ['https://[fec0::1]/', 'fec0::1'], // site-local (deprecated)
    ['https://[::ffff:0:a9fe:a9fe]/', '::ffff:0:a9fe:a9fe'], // IPv4-translated (RFC 2765)
    ['https://[100::1]/', '100::1'], // discard-only
    ['https://[::ffff:169.254.169.254]/', '::ffff:a9fe:a9fe'], // IPv4-mapped
    ['https://[::a9fe:a9fe]/', '::a9fe:a9fe'], // IPv4-compatible
    ['https://[64:ff9b::a9fe:a9fe]/', '64:ff9b::a9fe:a9fe'], // NAT64, well-known prefix
    ['https://[64:ff9b:1::a9fe:a9fe]/', '64:ff9b:1::a9fe:a9fe'], // NAT64, local-use prefix
    ['https://[2001:db8::1]/', '2001:db8::1'], // documentation
    ['https://[3fff::1]/', '3fff::1'], // documentation (RFC 9637)
    ['https://[5f00::1]/', '5f00::1'], // SRv6 SIDs
    ['https://[2001:1::1]/', '2001:1::1'], // PCP anycast: globally reachable to the registry, refused here
    ['https://[fe80::1]/', 'fe80::1'], // link-local
    ['https://[ff02::1]/', 'ff02::1'], // multicast
    ['https://2852039166/', '169.254.169.254'], // decimal
    ['https://0xa9fea9fe/', '169.254.169.254'], // hexadecimal
    ['https://0251.0376.0251.0376/', '169.254.169.254'], // octal
    ['https://169.254.169.254./', '169.254.169.254'], // a trailing dot
    ['https://192.0.0.9/', '192.0.0.9'], // PCP anycast: globally reachable to the registry, refused here
    ['https://192.88.99.1/', '192.88.99.1'], // 6to4 relay anycast (terminated)
    ['https://224.0.0.1/', '224.0.0.1'], // multicast
  ])('refuses %s in production, as a literal and as a resolved address', async (url, address) => {
    expect(new URL(url).hostname.replace(/^\[|\]$/g, '')).toBe(address);
    expect(() => parseEndpoint('m_1', url, production)).toThrow(InvalidEndpointUrl);
    expect(() => parseEndpoint('m_1', url, production)).toThrow(
      `${address} is a private, loopback or reserved address, not global unicast`,
    );
    await expect(lookup(production, address)).rejects.toThrow(
      `resolves to ${address}, a private, loopback or reserved address`,
    );
    // Dev mode allows them (the fake merchants live on loopback).
    expect(parseEndpoint('m_1', url, { ...dev, allowInsecureHttp: false }).protocol).toBe('https:');
  });

  it('refuses an IPv6 zone id: the URL parser does not take one, and a resolved one is judged by its address', async () => {
    expect(() => parseEndpoint('m', 'https://[fe80::1%25eth0]/', production)).toThrow(/not a valid URL/);
    await expect(lookup(production, 'fe80::1%eth0')).rejects.toThrow(InvalidEndpointUrl);
  });

  it('refuses a name that resolves to loopback at connect time', async () => {
    await expect(lookup(production, 'localhost')).rejects.toThrow(
      /localhost resolves to .*, a private, loopback or reserved address/,
    );
  });

  it('accepts global unicast addresses and names in production', async () => {
    for (const url of [
      'https://[2606:4700::1111]/',
      'https://1.1.1.1/',
      'https://[2001:4860:4860::8888]/in',
      'https://hooks.merchant.example/in',
    ]) {
      expect(parseEndpoint('m', url, production).href).toBe(url);
    }
    await expect(lookup(production, '2606:4700::1111')).resolves.toBe('2606:4700::1111');
    await expect(lookup(production, '1.1.1.1')).resolves.toBe('1.1.1.1');
  });

  it('refuses every block of the snapshot, whatever the registry says of its reach, and nothing just outside them', () => {
    for (const { prefix } of [...IPV4_SPECIAL_PURPOSE, ...IPV6_SPECIAL_PURPOSE])
      expect(isForbiddenAddress(prefix.split('/')[0]!), prefix).toBe(true);
    const lastOfBlocks = [
      '10.255.255.255',
      '100.127.255.255',
      '172.31.255.255',
      '192.0.0.255',
      '192.168.255.255',
      '198.19.255.255',
      '239.255.255.255',
      '255.255.255.255',
      '1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
      '2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff',
      '2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
      '3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff',
      '4000::',
    ];
    expect(lastOfBlocks.filter((a) => !isForbiddenAddress(a))).toEqual([]);
    const justOutside = [
      '9.255.255.255',
      '11.0.0.0',
      '100.63.255.255',
      '100.128.0.0',
      '172.15.255.255',
      '172.32.0.0',
      '192.0.1.0',
      '192.88.98.255',
      '192.88.100.0',
      '198.17.255.255',
      '198.20.0.0',
      '223.255.255.255',
      '2000::',
      '2001:200::',
      '2003::',
      '2620:4f:7fff:ffff:ffff:ffff:ffff:ffff',
      '2620:4f:8001::',
      '3fff:1000::',
      '3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
    ];
    expect(justOutside.filter(isForbiddenAddress)).toEqual([]);
  });

  it('allows port 443 (an https URL without a port) alone, unless allowedPorts names more; dev mode any port', () => {
    expect(parseEndpoint('m', 'https://merchant.example/in', production).port).toBe('');
    expect(parseEndpoint('m', 'https://merchant.example:443/in', production).port).toBe('');
    expect(() => parseEndpoint('m', 'https://merchant.example:22/in', production)).toThrow(
      'port 22 is not allowed (allowed: 443; the operator allows more with WEBHOOK_ALLOWED_PORTS)',
    );
    expect(() => parseEndpoint('m', 'https://merchant.example:8443/in', production)).toThrow(InvalidEndpointUrl);
    expect(
      parseEndpoint('m', 'https://merchant.example:8443/in', { ...production, allowedPorts: [443, 8443] }).port,
    ).toBe('8443');
    expect(() => parseEndpoint('m', 'https://merchant.example/in', { ...production, allowedPorts: [8443] })).toThrow(
      /port 443 is not allowed/,
    );
    // Plain http without a port is port 80.
    expect(() => parseEndpoint('m', 'http://127.0.0.1/in', { ...dev, allowedPorts: [9000] })).toThrow(
      /port 80 is not allowed/,
    );
    expect(parseEndpoint('m', 'http://127.0.0.1:9000/in', { ...dev, allowedPorts: [9000] }).port).toBe('9000');
    expect(parseEndpoint('m', 'http://127.0.0.1:22/in', dev).port).toBe('22');
  });
});

describe('the IANA special-purpose snapshot', () => {
  it('is dated, and its prefixes are networks in canonical form, sorted by address, unique', () => {
    expect(SNAPSHOT_DATE).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(new Date(`${SNAPSHOT_DATE}T00:00:00Z`).toISOString().slice(0, 10)).toBe(SNAPSHOT_DATE);
    for (const [family, blocks] of [
      [4, IPV4_SPECIAL_PURPOSE],
      [6, IPV6_SPECIAL_PURPOSE],
    ] as const) {
      const networks = blocks.map(({ prefix }) => ({ prefix, ...parseNetwork(prefix) }));
      for (const [i, network] of networks.entries()) {
        const [address] = network.prefix.split('/') as [string];
        expect(network.family, network.prefix).toBe(family);
        // The URL parser writes each address in its one canonical form (RFC 5952 for IPv6).
        expect(
          new URL(`https://${family === 6 ? `[${address}]` : address}/`).hostname.replace(/^\[|\]$/g, ''),
          network.prefix,
        ).toBe(address);
        const hostBits = BigInt((family === 4 ? 32 : 128) - network.bits);
        expect((network.value >> hostBits) << hostBits, `${network.prefix} has host bits set`).toBe(network.value);
        const previous = networks[i - 1];
        if (previous) {
          expect(
            previous.value < network.value || (previous.value === network.value && previous.bits < network.bits),
            network.prefix,
          ).toBe(true);
        }
      }
    }
    expect([IPV4_SPECIAL_PURPOSE.length, IPV6_SPECIAL_PURPOSE.length]).toEqual([26, 25]);
    expect(parseNetwork(IPV4_MULTICAST)).toMatchObject({ family: 4, bits: 4 });
    expect(parseNetwork(IPV6_GLOBAL_UNICAST)).toMatchObject({ family: 6, bits: 3 });
  });

  it('holds known rows as the registries give them', () => {
    expect([...IPV4_SPECIAL_PURPOSE, ...IPV6_SPECIAL_PURPOSE]).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          prefix: '169.254.0.0/16',
          name: 'Link Local',
          rfc: 'RFC3927',
          globallyReachable: false,
        }),
        expect.objectContaining({ prefix: '100.64.0.0/10', name: 'Shared Address Space', globallyReachable: false }),
        expect.objectContaining({
          prefix: '192.0.0.9/32',
          name: 'Port Control Protocol Anycast',
          globallyReachable: true,
        }),
        expect.objectContaining({ prefix: '192.88.99.0/24', globallyReachable: null, terminated: '2015-03' }),
        expect.objectContaining({ prefix: '255.255.255.255/32', name: 'Limited Broadcast', globallyReachable: false }),
        expect.objectContaining({ prefix: '2001::/32', name: 'TEREDO', globallyReachable: 'N/A' }),
        expect.objectContaining({ prefix: '2002::/16', name: '6to4', globallyReachable: 'N/A' }),
        expect.objectContaining({ prefix: '2001:1::3/128', rfc: 'RFC9665', globallyReachable: true }),
        expect.objectContaining({
          prefix: '3fff::/20',
          name: 'Documentation',
          rfc: 'RFC9637',
          globallyReachable: false,
        }),
        expect.objectContaining({ prefix: '5f00::/16', name: 'Segment Routing (SRv6) SIDs', globallyReachable: false }),
        expect.objectContaining({ prefix: '100:0:0:1::/64', name: 'Dummy IPv6 Prefix', rfc: 'RFC9780' }),
        expect.objectContaining({ prefix: 'fc00::/7', name: 'Unique-Local', globallyReachable: false }),
      ]),
    );
  });
});
