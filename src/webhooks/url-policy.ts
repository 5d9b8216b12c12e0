import dns from 'node:dns';
import net from 'node:net';

/**
 * Where webhooks may go. A receiver address is HTTPS (the certificate is checked on every attempt by
 * the delivery client) and never a private, loopback, link-local or otherwise non-public address,
 * checked when the endpoint is written and again at every connection, on the address actually
 * dialled (so a name that later resolves somewhere private is refused too). The one exception: with
 * `sandbox_loopback` (on by default in the embedded development mode, else the operator's switch; see
 * settings.ts), a sandbox endpoint may point at this machine's loopback, over plain HTTP or HTTPS, for
 * local development. A live endpoint never may.
 */

/** Ranges that are never a public receiver (RFC 6890 special-purpose blocks and friends). */
const NON_PUBLIC = new net.BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (and cloud metadata services)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  NON_PUBLIC.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['64:ff9b:1::', 48], // local-use NAT64
  ['100::', 64], // discard
  ['2001:2::', 48], // benchmarking
  ['2001:db8::', 32], // documentation
  ['3fff::', 20], // documentation
  ['5f00::', 16], // segment routing (SRv6) identifiers
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated by RFC 3879, still routed inside some sites)
  ['ff00::', 8], // multicast
] as const) {
  NON_PUBLIC.addSubnet(network, prefix, 'ipv6');
}

const LOOPBACK = new net.BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** The 16 bytes of an IPv6 address in any textual form (compressed, expanded, dotted IPv4 tail). */
function ipv6Bytes(address: string): number[] | null {
  if (!net.isIPv6(address)) return null;
  let text = address.toLowerCase();
  const zone = text.indexOf('%');
  if (zone >= 0) text = text.slice(0, zone);
  // A dotted IPv4 tail becomes two hexadecimal groups.
  const dotted = /^(.*:)([0-9]+\.[0-9]+\.[0-9]+\.[0-9]+)$/.exec(text);
  if (dotted) {
    const octets = (dotted[2] ?? '').split('.').map(Number);
    text = `${dotted[1] ?? ''}${(((octets[0] ?? 0) << 8) | (octets[1] ?? 0)).toString(16)}:${(((octets[2] ?? 0) << 8) | (octets[3] ?? 0)).toString(16)}`;
  }
  const [head = '', tail] = text.split('::') as [string, string | undefined];
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const missing = 8 - headGroups.length - tailGroups.length;
  if (missing < 0 || (tail === undefined && missing !== 0)) return null;
  const groups = [...headGroups, ...Array<string>(tail === undefined ? 0 : missing).fill('0'), ...tailGroups];
  if (groups.length !== 8) return null;
  return groups.flatMap((group) => {
    const value = parseInt(group, 16);
    return [value >> 8, value & 255];
  });
}

function ipv4Of(bytes: number[]): string {
  return bytes.join('.');
}

/** True when `bytes` starts with `prefix`. */
function startsWith(bytes: readonly number[], prefix: readonly number[]): boolean {
  return prefix.every((byte, index) => bytes[index] === byte);
}

/**
 * The IPv4 addresses an IPv6 address carries, so that it is judged as the IPv4 addresses it reaches:
 * IPv4-mapped `::ffff:0:0/96`, IPv4-translated `::ffff:0:0:0/96` (RFC 2765, SIIT), IPv4-compatible
 * `::/96` (`::` and `::1` are non-public by themselves), the NAT64 well-known prefix `64:ff9b::/96`, 6to4
 * `2002::/16` (the relay's IPv4 in bits 16–47), Teredo `2001::/32` (the server's IPv4 in bits 32–63 and
 * the client's, inverted, in the last 32 bits) and ISATAP under any prefix (interface identifier
 * `0000:5efe` or `0200:5efe`, then the IPv4 address: a host on an ISATAP link tunnels straight to it).
 * An address may match two forms (a 6to4 prefix with an ISATAP identifier); it carries both addresses.
 * The local-use NAT64 prefix `64:ff9b:1::/48` is non-public as a whole, wherever it puts the IPv4 address.
 */
function embeddedIpv4(address: string): string[] {
  const bytes = ipv6Bytes(address);
  if (!bytes) return [];
  const zeros = (from: number, to: number) => bytes.slice(from, to).every((byte) => byte === 0);
  const last = ipv4Of(bytes.slice(12, 16));
  const carried: string[] = [];
  if (zeros(0, 10) && bytes[10] === 0xff && bytes[11] === 0xff) carried.push(last);
  if (zeros(0, 8) && bytes[8] === 0xff && bytes[9] === 0xff && zeros(10, 12)) carried.push(last);
  if (zeros(0, 12)) carried.push(last);
  if (startsWith(bytes, [0x00, 0x64, 0xff, 0x9b]) && zeros(4, 12)) carried.push(last);
  if (startsWith(bytes, [0x20, 0x02])) carried.push(ipv4Of(bytes.slice(2, 6)));
  if (startsWith(bytes, [0x20, 0x01, 0x00, 0x00])) carried.push(ipv4Of(bytes.slice(4, 8)), ipv4Of(bytes.slice(12, 16).map((byte) => byte ^ 0xff)));
  if ((bytes[8] === 0x00 || bytes[8] === 0x02) && bytes[9] === 0x00 && bytes[10] === 0x5e && bytes[11] === 0xfe) carried.push(last);
  return carried;
}

/** The IPv4 address of an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`): the one form the host itself answers as IPv4. */
function mappedIpv4(address: string): string | null {
  const bytes = ipv6Bytes(address);
  if (!bytes || !bytes.slice(0, 10).every((byte) => byte === 0) || bytes[10] !== 0xff || bytes[11] !== 0xff) return null;
  return ipv4Of(bytes.slice(12, 16));
}

function normalise(address: string): { address: string; type: 'ipv4' | 'ipv6'; embedded: string[] } | null {
  const bare = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  if (net.isIPv4(bare)) return { address: bare, type: 'ipv4', embedded: [] };
  if (!net.isIPv6(bare)) return null;
  return { address: bare, type: 'ipv6', embedded: embeddedIpv4(bare) };
}

/**
 * Loopback: `127.0.0.0/8`, `::1`, or an IPv4-mapped loopback. A translated, compatible, 6to4, Teredo,
 * NAT64 or ISATAP address that carries 127.0.0.1 is reached through a translator, relay or tunnel, not the
 * host itself: it is not loopback (and, carrying a non-public IPv4 address, it is not public either, so
 * it is refused everywhere, the sandbox's loopback allowance included).
 */
export function isLoopbackAddress(address: string): boolean {
  const parsed = normalise(address);
  if (!parsed) return false;
  if (LOOPBACK.check(parsed.address, parsed.type)) return true;
  const mapped = parsed.type === 'ipv6' ? mappedIpv4(parsed.address) : null;
  return mapped !== null && LOOPBACK.check(mapped, 'ipv4');
}

/** Public only when the address and every IPv4 address it carries are outside the non-public ranges. */
export function isPublicAddress(address: string): boolean {
  const parsed = normalise(address);
  if (!parsed) return false;
  return !NON_PUBLIC.check(parsed.address, parsed.type) && parsed.embedded.every((ipv4) => !NON_PUBLIC.check(ipv4, 'ipv4'));
}

/** Decides whether a resolved or literal address may receive a webhook of an environment. */
export interface AddressPolicy {
  allows(address: string, livemode: boolean): boolean;
}

export function defaultAddressPolicy(options: { sandbox_loopback: boolean }): AddressPolicy {
  return {
    allows(address, livemode) {
      if (isLoopbackAddress(address)) return !livemode && options.sandbox_loopback;
      return isPublicAddress(address);
    },
  };
}

/** Resolves a host name to every address it has (dns.lookup by default, as the connection will). */
export type HostResolver = (hostname: string) => Promise<string[]>;

export const systemResolver: HostResolver = async (hostname) => {
  const addresses = await dns.promises.lookup(hostname, { all: true, verbatim: true });
  return addresses.map((entry) => entry.address);
};

/** The URL's host as an address when it is a literal (IPv6 without its brackets), else null. */
export function literalAddressOf(url: URL): string | null {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return net.isIP(host) ? host : null;
}

function isLocalhostName(hostname: string): boolean {
  const lower = hostname.toLowerCase();
  return lower === 'localhost' || lower.endsWith('.localhost');
}

/** `loopback` is present (true) when the accepted URL targets this machine's loopback (sandbox only). */
export type UrlCheck = { ok: true; url: string; loopback?: true } | { ok: false; reason: string; hint: string };

export interface UrlCheckOptions {
  livemode: boolean;
  sandbox_loopback: boolean;
  policy: AddressPolicy;
  resolve: HostResolver;
}

export const MAX_URL_LENGTH = 2048;

/**
 * Checks an endpoint URL when it is written. The certificate cannot be judged here (that needs a
 * connection), so a self-signed or expired certificate shows up as failed attempts instead.
 */
export async function checkEndpointUrl(text: string, options: UrlCheckOptions): Promise<UrlCheck> {
  if (text.length > MAX_URL_LENGTH) return { ok: false, reason: 'too_long', hint: `at most ${MAX_URL_LENGTH} characters` };
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { ok: false, reason: 'invalid_url', hint: 'an absolute https:// URL' };
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return { ok: false, reason: 'must_be_https', hint: 'https:// only' };
  if (url.username || url.password) return { ok: false, reason: 'credentials_not_allowed', hint: 'no user or password in the URL' };
  if (url.hash) return { ok: false, reason: 'fragment_not_allowed', hint: 'no #fragment' };
  if (!url.hostname) return { ok: false, reason: 'invalid_url', hint: 'an absolute https:// URL' };

  const literal = literalAddressOf(url);
  let addresses: string[];
  if (literal) {
    addresses = [literal];
  } else {
    try {
      addresses = await options.resolve(url.hostname);
    } catch {
      addresses = [];
    }
    if (addresses.length === 0) return { ok: false, reason: 'host_not_resolvable', hint: 'the host name does not resolve' };
  }
  if (url.protocol === 'http:') {
    // The same rule as at connection time: a loopback literal or a localhost name, nothing that
    // merely resolves to loopback today.
    const loopbackOnly = addresses.every((address) => isLoopbackAddress(address)) && (literal !== null || isLocalhostName(url.hostname));
    const allowed = !options.livemode && options.sandbox_loopback && loopbackOnly;
    if (!allowed) {
      return {
        ok: false,
        reason: 'must_be_https',
        hint: options.livemode
          ? 'live endpoints must use https://'
          : 'plain http:// is allowed only to loopback in the sandbox, in the embedded development mode or when the operator enables it',
      };
    }
  }
  if (addresses.some((address) => !options.policy.allows(address, options.livemode))) {
    return { ok: false, reason: 'address_not_allowed', hint: 'the host must resolve to public addresses only' };
  }
  return addresses.some((address) => isLoopbackAddress(address)) ? { ok: true, url: url.href, loopback: true } : { ok: true, url: url.href };
}

/** The connection-time check of the delivery client: may this URL's scheme be used for this environment? */
export function schemeAllowed(url: URL, livemode: boolean, sandbox_loopback: boolean): boolean {
  if (url.protocol === 'https:') return true;
  if (url.protocol !== 'http:' || livemode || !sandbox_loopback) return false;
  const literal = literalAddressOf(url);
  return literal ? isLoopbackAddress(literal) : isLocalhostName(url.hostname);
}
