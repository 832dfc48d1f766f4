/**
 * Merchant endpoint checks, made before any byte is sent: a malformed URL, a scheme other than https, or an
 * address on a private, loopback or link-local network (an SSRF vector: a merchant row pointing the worker at
 * the metadata service or an internal admin port) is refused with a named, non-retryable error.
 *
 * Addresses are checked at connect time, in the socket's own DNS lookup, so a name that resolves to a public
 * address when validated and to a private one when connecting (DNS rebinding) is still refused. Dev mode
 * allows http and loopback, where the fake merchants live.
 */
import dns from 'node:dns';
import net from 'node:net';

export class InvalidEndpointUrl extends Error {
  override readonly name = 'InvalidEndpointUrl';
  constructor(
    readonly merchantId: string,
    readonly problem: string,
  ) {
    super(`merchant ${merchantId}'s endpoint cannot be used: ${problem}; fix merchants.endpoint_url`);
  }
}

export interface EndpointRules {
  allowInsecureHttp: boolean;
  allowPrivateAddresses: boolean;
  /**
   * Private networks (CIDRs) merchants may nevertheless be on, e.g. reached over a private link: every other
   * private, loopback or reserved address stays refused. https is still required unless `allowInsecureHttp`.
   */
  trustedNetworks?: readonly string[];
}

/** The trusted networks of a rules object, as a BlockList (built once per rules object). */
const trustedLists = new WeakMap<EndpointRules, net.BlockList>();
function trustedList(rules: EndpointRules): net.BlockList | undefined {
  if (!rules.trustedNetworks?.length) return undefined;
  let list = trustedLists.get(rules);
  if (!list) {
    list = new net.BlockList();
    for (const cidr of rules.trustedNetworks) {
      const [network, prefix] = cidr.split('/') as [string, string];
      list.addSubnet(network, Number(prefix), net.isIP(network) === 6 ? 'ipv6' : 'ipv4');
    }
    trustedLists.set(rules, list);
  }
  return list;
}

/** An address a merchant's endpoint must not be on under `rules`. */
function refused(address: string, rules: EndpointRules): boolean {
  if (rules.allowPrivateAddresses || !isForbiddenAddress(address)) return false;
  const family = net.isIP(address);
  return !trustedList(rules)?.check(address, family === 6 ? 'ipv6' : 'ipv4');
}

const forbidden = new net.BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  forbidden.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  forbidden.addSubnet(network, prefix, 'ipv6');
}

/**
 * IPv6 ranges that carry an IPv4 address: IPv4-compatible (deprecated) and IPv4-mapped in any notation
 * (::ffff:a00:1 is 10.0.0.1), and NAT64 (RFC 6052; RFC 8215's local-use prefix), which a gateway translates to
 * the IPv4 address it embeds, private ones included. A merchant has no reason to publish any of them. (A list of
 * its own: node's BlockList also applies IPv6 rules for these ranges to plain IPv4 addresses.)
 */
const ipv4InDisguise = new net.BlockList();
for (const [network, prefix] of [
  ['::', 96],
  ['::ffff:0:0', 96],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
] as const) {
  ipv4InDisguise.addSubnet(network, prefix, 'ipv6');
}

export function isForbiddenAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 0) return false;
  if (family === 4) return forbidden.check(address, 'ipv4');
  return forbidden.check(address, 'ipv6') || ipv4InDisguise.check(address, 'ipv6');
}

export function parseEndpoint(merchantId: string, raw: string, rules: EndpointRules): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new InvalidEndpointUrl(merchantId, 'not a valid URL');
  }
  const allowed = rules.allowInsecureHttp ? ['https:', 'http:'] : ['https:'];
  if (!allowed.includes(url.protocol)) throw new InvalidEndpointUrl(merchantId, `scheme ${url.protocol} is not allowed (${allowed.join(' or ')})`);
  if (url.username || url.password) throw new InvalidEndpointUrl(merchantId, 'credentials in the URL are not allowed');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (refused(host, rules) || (host === 'localhost' && !rules.allowPrivateAddresses)) {
    throw new InvalidEndpointUrl(merchantId, `${host} is a private, loopback or reserved address`);
  }
  return url;
}

/** A DNS lookup for http.request that refuses forbidden addresses at connect time. */
export function guardedLookup(merchantId: string, rules: EndpointRules): net.LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 4);
      const list = addresses as dns.LookupAddress[];
      const bad = list.find((a) => refused(a.address, rules));
      if (bad) {
        return callback(new InvalidEndpointUrl(merchantId, `${hostname} resolves to ${bad.address}, a private or reserved address`), '', 4);
      }
      if ((options as dns.LookupOptions).all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      const first = list[0]!;
      callback(null, first.address, first.family);
    });
  };
}
