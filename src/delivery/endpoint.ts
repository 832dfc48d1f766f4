/**
 * Merchant endpoint checks, made before any byte is sent: a malformed URL, a scheme other than https, credentials,
 * an address that is not global unicast (an SSRF vector: a merchant row pointing the worker at the metadata
 * service or an internal admin port) or a port the operator has not allowed is refused with a named,
 * non-retryable error.
 *
 * In production only global unicast is allowed, for literals and for resolved names alike: one rule,
 * `isForbiddenAddress`, decides for the literal in the URL (`parseEndpoint`) and for every address a name resolves
 * to (`guardedLookup`). Global unicast means:
 * - IPv4: outside multicast (224.0.0.0/4) and outside every block of IANA's IPv4 special-purpose registry;
 * - IPv6: inside 2000::/3, the only range IANA allocates unicast addresses from, and outside every block of IANA's
 *   IPv6 special-purpose registry.
 * Both registries are a dated snapshot (./iana-special-purpose.ts). Every block of them is refused, including the
 * ones the registry marks globally reachable: those are anycast service addresses, answered by the nearest instance
 * and often by the network's own (PCP, TURN, AMT relays, AS112 DNS sinks, DNS-SD registration), or identifiers that
 * are not locators (ORCHIDv2, drone DETs); a merchant's web server is none of them. So every IPv6 form that carries
 * an IPv4 address is refused too: IPv4-mapped, IPv4-compatible and IPv4-translated (outside 2000::/3), NAT64
 * (64:ff9b::/96, 64:ff9b:1::/48, outside it), 6to4 (2002::/16) and Teredo (2001::/32, in 2001::/23), which a
 * gateway or relay turns into the IPv4 address inside, private ones included. IPv4 spelt otherwise (2852039166,
 * 0xa9fea9fe, 0251.0376.0251.0376, a trailing dot) reaches the check in dotted decimal: the WHATWG URL parser
 * rewrites it. It also refuses IPv6 zone ids.
 *
 * Addresses are checked at connect time, in the socket's own DNS lookup, so a name that resolves to a public
 * address when validated and to a private one when connecting (DNS rebinding) is still refused. The operator may
 * trust private networks merchants are on (WEBHOOK_TRUSTED_NETWORKS) and allow ports besides 443
 * (WEBHOOK_ALLOWED_PORTS). Dev mode allows http, any address and any port, where the fake merchants live.
 */
import dns from 'node:dns';
import net from 'node:net';
import {
  IPV4_MULTICAST,
  IPV4_SPECIAL_PURPOSE,
  IPV6_GLOBAL_UNICAST,
  IPV6_SPECIAL_PURPOSE,
} from './iana-special-purpose.js';

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
  /** The ports a merchant endpoint may use (an https URL without one uses 443); undefined = any port (dev mode). */
  allowedPorts?: readonly number[];
}

/** An IP address as a number: 32 bits for IPv4, 128 for IPv6. */
interface Address {
  family: 4 | 6;
  value: bigint;
}

/** A CIDR block: the addresses whose first `bits` bits are those of `value`. */
interface Network extends Address {
  bits: number;
}

const WIDTH = { 4: 32, 6: 128 } as const;

/**
 * The address `text` spells, or undefined when it is no IP address (a name). A zone (fe80::1%eth0) is dropped:
 * the address is judged, whatever interface it is on.
 */
function addressOf(text: string): Address | undefined {
  const address = text.split('%')[0]!;
  const family = net.isIP(address);
  if (family === 4) return { family, value: address.split('.').reduce((v, octet) => (v << 8n) | BigInt(octet), 0n) };
  if (family !== 6) return undefined;
  // A dotted IPv4 tail (::ffff:10.0.0.1) is the last two groups.
  const hex = address.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_, a: string, b: string, c: string, d: string) =>
    [(Number(a) << 8) | Number(b), (Number(c) << 8) | Number(d)].map((g) => g.toString(16)).join(':'),
  );
  const [head, tail] = hex.split('::') as [string, string | undefined];
  const groups = (part: string | undefined) => (part ? part.split(':') : []);
  const all = tail === undefined ? groups(head) : [...groups(head), ...groups(tail)];
  if (tail !== undefined) all.splice(groups(head).length, 0, ...Array<string>(8 - all.length).fill('0'));
  return { family, value: all.reduce((v, group) => (v << 16n) | BigInt(parseInt(group, 16)), 0n) };
}

/** A CIDR (`10.20.0.0/16`, `2002::/16`); throws on anything else. */
export function parseNetwork(cidr: string): Network {
  const [network, prefix] = cidr.split('/');
  const address = addressOf(network ?? '');
  const bits = Number(prefix);
  if (!address || !/^\d{1,3}$/.test(prefix ?? '') || bits > WIDTH[address.family])
    throw new Error(`not a network in CIDR notation: ${cidr}`);
  return { ...address, bits };
}

function contains(network: Network, address: Address): boolean {
  if (network.family !== address.family) return false;
  const hostBits = BigInt(WIDTH[network.family] - network.bits);
  return network.value >> hostBits === address.value >> hostBits;
}

const specialPurpose = [...IPV4_SPECIAL_PURPOSE, ...IPV6_SPECIAL_PURPOSE].map((block) => parseNetwork(block.prefix));
const ipv4Multicast = parseNetwork(IPV4_MULTICAST);
const ipv6GlobalUnicast = parseNetwork(IPV6_GLOBAL_UNICAST);

/**
 * Whether an IP address is anything but global unicast (the module comment says exactly what that is); a name is not.
 */
export function isForbiddenAddress(text: string): boolean {
  const address = addressOf(text);
  if (!address) return false;
  if (address.family === 4 && contains(ipv4Multicast, address)) return true;
  if (address.family === 6 && !contains(ipv6GlobalUnicast, address)) return true;
  return specialPurpose.some((network) => contains(network, address));
}

/**
 * The trusted networks of a rules object, parsed once per rules object. An address is trusted when a network holds it
 * as written: ::ffff:10.20.3.4 is not in 10.20.0.0/16 (a merchant has no reason to publish that form either).
 */
const trustedNetworks = new WeakMap<EndpointRules, readonly Network[]>();
function trusted(rules: EndpointRules, address: string): boolean {
  let networks = trustedNetworks.get(rules);
  if (!networks) {
    networks = (rules.trustedNetworks ?? []).map(parseNetwork);
    trustedNetworks.set(rules, networks);
  }
  const parsed = addressOf(address);
  return !!parsed && networks.some((network) => contains(network, parsed));
}

/** An address a merchant's endpoint must not be on under `rules`. */
function refused(address: string, rules: EndpointRules): boolean {
  return !rules.allowPrivateAddresses && isForbiddenAddress(address) && !trusted(rules, address);
}

export function parseEndpoint(merchantId: string, raw: string, rules: EndpointRules): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new InvalidEndpointUrl(merchantId, 'not a valid URL');
  }
  const allowed = rules.allowInsecureHttp ? ['https:', 'http:'] : ['https:'];
  if (!allowed.includes(url.protocol))
    throw new InvalidEndpointUrl(merchantId, `scheme ${url.protocol} is not allowed (${allowed.join(' or ')})`);
  if (url.username || url.password) throw new InvalidEndpointUrl(merchantId, 'credentials in the URL are not allowed');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (refused(host, rules) || (host === 'localhost' && !rules.allowPrivateAddresses)) {
    throw new InvalidEndpointUrl(merchantId, `${host} is a private, loopback or reserved address, not global unicast`);
  }
  // URL leaves the port empty when it is the scheme's default.
  const port = url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
  if (rules.allowedPorts && !rules.allowedPorts.includes(port)) {
    throw new InvalidEndpointUrl(
      merchantId,
      `port ${port} is not allowed (allowed: ${rules.allowedPorts.join(', ')}; the operator allows more with WEBHOOK_ALLOWED_PORTS)`,
    );
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
        return callback(
          new InvalidEndpointUrl(
            merchantId,
            `${hostname} resolves to ${bad.address}, a private, loopback or reserved address, not global unicast`,
          ),
          '',
          4,
        );
      }
      if ((options as dns.LookupOptions).all)
        return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      const first = list[0]!;
      callback(null, first.address, first.family);
    });
  };
}
