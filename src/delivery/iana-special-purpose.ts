/**
 * A dated snapshot of IANA's special-purpose address registries: the data behind the SSRF guard of merchant
 * endpoints (src/delivery/endpoint.ts says the rule built from it).
 *
 *   IPv4: https://www.iana.org/assignments/iana-ipv4-special-registry/ (iana-ipv4-special-registry-1.csv)
 *   IPv6: https://www.iana.org/assignments/iana-ipv6-special-registry/ (iana-ipv6-special-registry-1.csv)
 *
 * Where each entry comes from: every row of both registries as last updated on SNAPSHOT_DATE, with the registry's
 * own name, RFC column and Globally Reachable column, transcribed on 2026-12-01 (the registries cannot be fetched
 * from where this was written) and compared row by row with a copy of both CSV exports retrieved 2026-07-27, whose
 * pages still said "Last Updated 2025-10-09". A row naming two blocks (192.0.0.170/32, 192.0.0.171/32) is two
 * entries; the entries are sorted by address, then shorter prefix first (the IPv6 registry lists ::1/128 before
 * ::/128). Each entry's `corroboratedBy` names the libraries whose own tables give the same answer for the whole
 * block: Python 3.11.7's `ipaddress` (`is_global`, from its `_private_networks`) and netaddr 1.3.0's `is_global()`
 * (from PyPI). Blocks allocated after those libraries were written (3fff::/20, 5f00::/16, 100:0:0:1::/64,
 * 2001:1::3/128) come from the registry alone.
 *
 * Two ranges that are not in these registries complete the rule: IPv4 multicast and IPv6 global unicast.
 *
 * To refresh: open both registries; if either page's "Last Updated" is later than SNAPSHOT_DATE, compare its CSV
 * export with the entries below, row by row, change what differs, set SNAPSHOT_DATE to the later date, and run
 * test/unit/delivery-policy.test.ts (its snapshot test checks the entries' form and a few known rows).
 */

/** The registries' "Last Updated" date that the entries below reproduce (both registries: 2025-10-09). */
export const SNAPSHOT_DATE = '2025-10-09';

/** A library whose classification of a block was compared with the registry's (versions in the module comment). */
type CrossCheck = 'ipaddress' | 'netaddr';

interface SpecialPurposeBlock {
  /** The Address Block, in CIDR notation. */
  readonly prefix: string;
  /** The Name column. */
  readonly name: string;
  /** The RFC column. */
  readonly rfc: string;
  /**
   * The Globally Reachable column: true or false; 'N/A' where the registry says so (6to4, Teredo: reachability is
   * that of the IPv4 address inside); null where it leaves the column empty (a terminated block).
   */
  readonly globallyReachable: boolean | 'N/A' | null;
  /** The Termination Date, for a block the registry has terminated. */
  readonly terminated?: string;
  /**
   * The libraries that classify every address of the block as the registry does: not global where the column says
   * false, 'N/A' or nothing, global where it says true.
   */
  readonly corroboratedBy: readonly CrossCheck[];
}

const both: readonly CrossCheck[] = ['ipaddress', 'netaddr'];
const netaddrOnly: readonly CrossCheck[] = ['netaddr'];
const registryOnly: readonly CrossCheck[] = [];

/** One registry row, its columns in the registry's order; `terminated` only for a terminated block. */
const block = (
  prefix: string,
  name: string,
  rfc: string,
  globallyReachable: SpecialPurposeBlock['globallyReachable'],
  corroboratedBy: readonly CrossCheck[],
  terminated?: string,
): SpecialPurposeBlock => ({ prefix, name, rfc, globallyReachable, ...(terminated && { terminated }), corroboratedBy });

export const IPV4_SPECIAL_PURPOSE: readonly SpecialPurposeBlock[] = [
  block('0.0.0.0/8', '"This network"', 'RFC791, Section 3.2', false, both),
  block('0.0.0.0/32', '"This host on this network"', 'RFC1122, Section 3.2.1.3', false, both),
  block('10.0.0.0/8', 'Private-Use', 'RFC1918', false, both),
  block('100.64.0.0/10', 'Shared Address Space', 'RFC6598', false, both),
  block('127.0.0.0/8', 'Loopback', 'RFC1122, Section 3.2.1.3', false, both),
  block('169.254.0.0/16', 'Link Local', 'RFC3927', false, both),
  block('172.16.0.0/12', 'Private-Use', 'RFC1918', false, both),
  // "Not useable unless by virtue of a more specific reservation" (the registry's footnote). Python 3.11.7 lists
  // only the /29 and the two /32s at .170, so it calls the rest of the /24 (192.0.0.8 included) global.
  block('192.0.0.0/24', 'IETF Protocol Assignments', 'RFC6890, Section 2.1', false, netaddrOnly),
  block('192.0.0.0/29', 'IPv4 Service Continuity Prefix', 'RFC7335', false, both),
  block('192.0.0.8/32', 'IPv4 dummy address', 'RFC7600', false, netaddrOnly),
  block('192.0.0.9/32', 'Port Control Protocol Anycast', 'RFC7723', true, both),
  block('192.0.0.10/32', 'Traversal Using Relays around NAT Anycast', 'RFC8155', true, both),
  block('192.0.0.170/32', 'NAT64/DNS64 Discovery', 'RFC8880; RFC7050, Section 2.2', false, both),
  block('192.0.0.171/32', 'NAT64/DNS64 Discovery', 'RFC8880; RFC7050, Section 2.2', false, both),
  block('192.0.2.0/24', 'Documentation (TEST-NET-1)', 'RFC5737', false, both),
  block('192.31.196.0/24', 'AS112-v4', 'RFC7535', true, both),
  block('192.52.193.0/24', 'AMT', 'RFC7450', true, both),
  // Neither library lists it (netaddr leaves terminated blocks out on purpose), so both call it global.
  block('192.88.99.0/24', 'Deprecated (6to4 Relay Anycast)', 'RFC7526', null, registryOnly, '2015-03'),
  block('192.88.99.2/32', '6a44-relay anycast address', 'RFC6751', false, registryOnly),
  block('192.168.0.0/16', 'Private-Use', 'RFC1918', false, both),
  block('192.175.48.0/24', 'Direct Delegation AS112 Service', 'RFC7534', true, both),
  block('198.18.0.0/15', 'Benchmarking', 'RFC2544', false, both),
  block('198.51.100.0/24', 'Documentation (TEST-NET-2)', 'RFC5737', false, both),
  block('203.0.113.0/24', 'Documentation (TEST-NET-3)', 'RFC5737', false, both),
  block('240.0.0.0/4', 'Reserved', 'RFC1112, Section 4', false, both),
  block('255.255.255.255/32', 'Limited Broadcast', 'RFC8190; RFC919, Section 7', false, both),
];

export const IPV6_SPECIAL_PURPOSE: readonly SpecialPurposeBlock[] = [
  block('::/128', 'Unspecified Address', 'RFC4291', false, both),
  block('::1/128', 'Loopback Address', 'RFC4291', false, both),
  // Python 3.11.7 classifies these by the IPv4 address inside (so ::ffff:8.8.8.8 is global to it).
  block('::ffff:0:0/96', 'IPv4-mapped Address', 'RFC4291', false, netaddrOnly),
  block('64:ff9b::/96', 'IPv4-IPv6 Translat.', 'RFC6052', true, both),
  block('64:ff9b:1::/48', 'IPv4-IPv6 Translat.', 'RFC8215', false, netaddrOnly),
  block('100::/64', 'Discard-Only Address Block', 'RFC6666', false, both),
  block('100:0:0:1::/64', 'Dummy IPv6 Prefix', 'RFC9780', false, registryOnly),
  // False "unless allowed by a more specific allocation" (the registry's footnote): the true entries below.
  // Python 3.11.7 has no such exceptions, so it calls those not global.
  block('2001::/23', 'IETF Protocol Assignments', 'RFC2928', false, both),
  block('2001::/32', 'TEREDO', 'RFC4380; RFC8190', 'N/A', both),
  block('2001:1::1/128', 'Port Control Protocol Anycast', 'RFC7723', true, netaddrOnly),
  block('2001:1::2/128', 'Traversal Using Relays around NAT Anycast', 'RFC8155', true, netaddrOnly),
  block('2001:1::3/128', 'DNS-SD Service Registration Protocol Anycast', 'RFC9665', true, registryOnly),
  block('2001:2::/48', 'Benchmarking', 'RFC5180; RFC Errata 1752', false, both),
  block('2001:3::/32', 'AMT', 'RFC7450', true, netaddrOnly),
  block('2001:4:112::/48', 'AS112-v6', 'RFC7535', true, netaddrOnly),
  block('2001:10::/28', 'Deprecated (previously ORCHID)', 'RFC4843', null, both, '2014-03'),
  block('2001:20::/28', 'ORCHIDv2', 'RFC7343', true, netaddrOnly),
  block('2001:30::/28', 'Drone Remote ID Protocol Entity Tags (DETs) Prefix', 'RFC9374', true, netaddrOnly),
  block('2001:db8::/32', 'Documentation', 'RFC3849', false, both),
  block('2002::/16', '6to4', 'RFC3056', 'N/A', netaddrOnly),
  block('2620:4f:8000::/48', 'Direct Delegation AS112 Service', 'RFC7534', true, both),
  block('3fff::/20', 'Documentation', 'RFC9637', false, registryOnly),
  block('5f00::/16', 'Segment Routing (SRv6) SIDs', 'RFC9602', false, registryOnly),
  block('fc00::/7', 'Unique-Local', 'RFC4193; RFC8190', false, both),
  block('fe80::/10', 'Link-Local Unicast', 'RFC4291', false, both),
];

/** IPv4 multicast (IANA's IPv4 Multicast Address Space registry, RFC5771): not in the registry above, not unicast. */
export const IPV4_MULTICAST = '224.0.0.0/4';

/**
 * IPv6 global unicast (IANA's IPv6 Address Space registry, RFC4291 Section 2.4, RFC3587): the only range IANA
 * allocates unicast addresses from. Everything outside it is loopback, unspecified, IPv4 embedded (::/96,
 * ::ffff:0:0/96, ::ffff:0:0:0/96, 64:ff9b::/96, 64:ff9b:1::/48), discard, SRv6 SIDs, unique-local, link-local,
 * deprecated site-local (fec0::/10), multicast, or reserved by the IETF.
 */
export const IPV6_GLOBAL_UNICAST = '2000::/3';
