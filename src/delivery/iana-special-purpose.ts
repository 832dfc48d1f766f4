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

export const IPV4_SPECIAL_PURPOSE: readonly SpecialPurposeBlock[] = [
  {
    prefix: '0.0.0.0/8',
    name: '"This network"',
    rfc: 'RFC791, Section 3.2',
    globallyReachable: false,
    corroboratedBy: both,
  },
  {
    prefix: '0.0.0.0/32',
    name: '"This host on this network"',
    rfc: 'RFC1122, Section 3.2.1.3',
    globallyReachable: false,
    corroboratedBy: both,
  },
  { prefix: '10.0.0.0/8', name: 'Private-Use', rfc: 'RFC1918', globallyReachable: false, corroboratedBy: both },
  {
    prefix: '100.64.0.0/10',
    name: 'Shared Address Space',
    rfc: 'RFC6598',
    globallyReachable: false,
    corroboratedBy: both,
  },
  {
    prefix: '127.0.0.0/8',
    name: 'Loopback',
    rfc: 'RFC1122, Section 3.2.1.3',
    globallyReachable: false,
    corroboratedBy: both,
  },
  { prefix: '169.254.0.0/16', name: 'Link Local', rfc: 'RFC3927', globallyReachable: false, corroboratedBy: both },
  { prefix: '172.16.0.0/12', name: 'Private-Use', rfc: 'RFC1918', globallyReachable: false, corroboratedBy: both },
  // "Not useable unless by virtue of a more specific reservation" (the registry's footnote). Python 3.11.7 lists
  // only the /29 and the two /32s at .170, so it calls the rest of the /24 (192.0.0.8 included) global.
  {
    prefix: '192.0.0.0/24',
    name: 'IETF Protocol Assignments',
    rfc: 'RFC6890, Section 2.1',
    globallyReachable: false,
    corroboratedBy: netaddrOnly,
  },
  {
    prefix: '192.0.0.0/29',
    name: 'IPv4 Service Continuity Prefix',
    rfc: 'RFC7335',
    globallyReachable: false,
    corroboratedBy: both,
  },
  {
    prefix: '192.0.0.8/32',
    name: 'IPv4 dummy address',
    rfc: 'RFC7600',
    globallyReachable: false,
    corroboratedBy: netaddrOnly,
  },
  {
    prefix: '192.0.0.9/32',
    name: 'Port Control Protocol Anycast',
    rfc: 'RFC7723',
    globallyReachable: true,
    corroboratedBy: both,
  },
  {
    prefix: '192.0.0.10/32',
    name: 'Traversal Using Relays around NAT Anycast',
    rfc: 'RFC8155',
    globallyReachable: true,
    corroboratedBy: both,
  },
  {
    prefix: '192.0.0.170/32',
    name: 'NAT64/DNS64 Discovery',
    rfc: 'RFC8880; RFC7050, Section 2.2',
    globallyReachable: false,
    corroboratedBy: both,
  },
  {
    prefix: '192.0.0.171/32',
    name: 'NAT64/DNS64 Discovery',
    rfc: 'RFC8880; RFC7050, Section 2.2',
    globallyReachable: false,
    corroboratedBy: both,
  },
  {
    prefix: '192.0.2.0/24',
    name: 'Documentation (TEST-NET-1)',
    rfc: 'RFC5737',
    globallyReachable: false,
    corroboratedBy: both,
  },
  { prefix: '192.31.196.0/24', name: 'AS112-v4', rfc: 'RFC7535', globallyReachable: true, corroboratedBy: both },
  { prefix: '192.52.193.0/24', name: 'AMT', rfc: 'RFC7450', globallyReachable: true, corroboratedBy: both },
  // Neither library lists it (netaddr leaves terminated blocks out on purpose), so both call it global.
  {
    prefix: '192.88.99.0/24',
    name: 'Deprecated (6to4 Relay Anycast)',
    rfc: 'RFC7526',
    globallyReachable: null,
    terminated: '2015-03',
    corroboratedBy: registryOnly,
  },
  {
    prefix: '192.88.99.2/32',
    name: '6a44-relay anycast address',
    rfc: 'RFC6751',
    globallyReachable: false,
    corroboratedBy: registryOnly,
  },
  { prefix: '192.168.0.0/16', name: 'Private-Use', rfc: 'RFC1918', globallyReachable: false, corroboratedBy: both },
  {
    prefix: '192.175.48.0/24',
    name: 'Direct Delegation AS112 Service',
    rfc: 'RFC7534',
    globallyReachable: true,
    corroboratedBy: both,
  },
  { prefix: '198.18.0.0/15', name: 'Benchmarking', rfc: 'RFC2544', globallyReachable: false, corroboratedBy: both },
  {
    prefix: '198.51.100.0/24',
    name: 'Documentation (TEST-NET-2)',
    rfc: 'RFC5737',
    globallyReachable: false,
    corroboratedBy: both,
  },
  {
    prefix: '203.0.113.0/24',
    name: 'Documentation (TEST-NET-3)',
    rfc: 'RFC5737',
    globallyReachable: false,
    corroboratedBy: both,
  },
  {
    prefix: '240.0.0.0/4',
    name: 'Reserved',
    rfc: 'RFC1112, Section 4',
    globallyReachable: false,
    corroboratedBy: both,
  },
  {
    prefix: '255.255.255.255/32',
    name: 'Limited Broadcast',
    rfc: 'RFC8190; RFC919, Section 7',
    globallyReachable: false,
    corroboratedBy: both,
  },
];

export const IPV6_SPECIAL_PURPOSE: readonly SpecialPurposeBlock[] = [
  { prefix: '::/128', name: 'Unspecified Address', rfc: 'RFC4291', globallyReachable: false, corroboratedBy: both },
  { prefix: '::1/128', name: 'Loopback Address', rfc: 'RFC4291', globallyReachable: false, corroboratedBy: both },
  // Python 3.11.7 classifies these by the IPv4 address inside (so ::ffff:8.8.8.8 is global to it).
  {
    prefix: '::ffff:0:0/96',
    name: 'IPv4-mapped Address',
    rfc: 'RFC4291',
    globallyReachable: false,
    corroboratedBy: netaddrOnly,
  },
  {
    prefix: '64:ff9b::/96',
    name: 'IPv4-IPv6 Translat.',
    rfc: 'RFC6052',
    globallyReachable: true,
    corroboratedBy: both,
  },
  {
    prefix: '64:ff9b:1::/48',
    name: 'IPv4-IPv6 Translat.',
    rfc: 'RFC8215',
    globallyReachable: false,
    corroboratedBy: netaddrOnly,
  },
  {
    prefix: '100::/64',
    name: 'Discard-Only Address Block',
    rfc: 'RFC6666',
    globallyReachable: false,
    corroboratedBy: both,
  },
  {
    prefix: '100:0:0:1::/64',
    name: 'Dummy IPv6 Prefix',
    rfc: 'RFC9780',
    globallyReachable: false,
    corroboratedBy: registryOnly,
  },
  // False "unless allowed by a more specific allocation" (the registry's footnote): the true entries below.
  // Python 3.11.7 has no such exceptions, so it calls those not global.
  {
    prefix: '2001::/23',
    name: 'IETF Protocol Assignments',
    rfc: 'RFC2928',
    globallyReachable: false,
    corroboratedBy: both,
  },
  { prefix: '2001::/32', name: 'TEREDO', rfc: 'RFC4380; RFC8190', globallyReachable: 'N/A', corroboratedBy: both },
  {
    prefix: '2001:1::1/128',
    name: 'Port Control Protocol Anycast',
    rfc: 'RFC7723',
    globallyReachable: true,
    corroboratedBy: netaddrOnly,
  },
  {
    prefix: '2001:1::2/128',
    name: 'Traversal Using Relays around NAT Anycast',
    rfc: 'RFC8155',
    globallyReachable: true,
    corroboratedBy: netaddrOnly,
  },
  {
    prefix: '2001:1::3/128',
    name: 'DNS-SD Service Registration Protocol Anycast',
    rfc: 'RFC9665',
    globallyReachable: true,
    corroboratedBy: registryOnly,
  },
  {
    prefix: '2001:2::/48',
    name: 'Benchmarking',
    rfc: 'RFC5180; RFC Errata 1752',
    globallyReachable: false,
    corroboratedBy: both,
  },
  { prefix: '2001:3::/32', name: 'AMT', rfc: 'RFC7450', globallyReachable: true, corroboratedBy: netaddrOnly },
  { prefix: '2001:4:112::/48', name: 'AS112-v6', rfc: 'RFC7535', globallyReachable: true, corroboratedBy: netaddrOnly },
  {
    prefix: '2001:10::/28',
    name: 'Deprecated (previously ORCHID)',
    rfc: 'RFC4843',
    globallyReachable: null,
    terminated: '2014-03',
    corroboratedBy: both,
  },
  { prefix: '2001:20::/28', name: 'ORCHIDv2', rfc: 'RFC7343', globallyReachable: true, corroboratedBy: netaddrOnly },
  {
    prefix: '2001:30::/28',
    name: 'Drone Remote ID Protocol Entity Tags (DETs) Prefix',
    rfc: 'RFC9374',
    globallyReachable: true,
    corroboratedBy: netaddrOnly,
  },
  { prefix: '2001:db8::/32', name: 'Documentation', rfc: 'RFC3849', globallyReachable: false, corroboratedBy: both },
  { prefix: '2002::/16', name: '6to4', rfc: 'RFC3056', globallyReachable: 'N/A', corroboratedBy: netaddrOnly },
  {
    prefix: '2620:4f:8000::/48',
    name: 'Direct Delegation AS112 Service',
    rfc: 'RFC7534',
    globallyReachable: true,
    corroboratedBy: both,
  },
  {
    prefix: '3fff::/20',
    name: 'Documentation',
    rfc: 'RFC9637',
    globallyReachable: false,
    corroboratedBy: registryOnly,
  },
  {
    prefix: '5f00::/16',
    name: 'Segment Routing (SRv6) SIDs',
    rfc: 'RFC9602',
    globallyReachable: false,
    corroboratedBy: registryOnly,
  },
  { prefix: 'fc00::/7', name: 'Unique-Local', rfc: 'RFC4193; RFC8190', globallyReachable: false, corroboratedBy: both },
  { prefix: 'fe80::/10', name: 'Link-Local Unicast', rfc: 'RFC4291', globallyReachable: false, corroboratedBy: both },
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
