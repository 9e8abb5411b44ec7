/**
 * The address a request comes from, for the bounds counted per client address
 * (src/service/access/load-bounds.ts). The socket's peer, unless that peer is a proxy the operator
 * declared (JOBGATE_TRUSTED_PROXIES): then the right-most address of X-Forwarded-For that is not
 * itself a trusted proxy. Any client can write X-Forwarded-For, so it is read only from a
 * trusted peer, and only from the right (the entries a trusted proxy appended); without the
 * setting it is never read, and every client behind one proxy shares its address.
 */
import type { IncomingMessage } from 'node:http';
import net from 'node:net';

export type ClientAddressOf = (request: IncomingMessage) => string | undefined;

function blockList(entries: readonly string[]): net.BlockList {
  const list = new net.BlockList();
  for (const entry of entries) {
    const [address = '', prefix] = entry.split('/');
    const family = net.isIPv6(address) ? 'ipv6' : 'ipv4';
    if (prefix === undefined) list.addAddress(address, family);
    else list.addSubnet(address, Number(prefix), family);
  }
  return list;
}

/** An IPv4 address mapped into IPv6 (`::ffff:10.0.0.1`, as a dual-stack socket reports it) as IPv4. */
const unmapped = (address: string) => /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1] ?? address;

/** Whether a peer's address is one of `trustedProxies` (IPv4 mapped into IPv6 read as IPv4). */
export function trustedProxyCheck(trustedProxies: readonly string[] = []): (address: string) => boolean {
  if (trustedProxies.length === 0) return () => false;
  const trusted = blockList(trustedProxies);
  return (peer) => {
    const address = unmapped(peer);
    const family = net.isIP(address);
    return family !== 0 && trusted.check(address, family === 6 ? 'ipv6' : 'ipv4');
  };
}

export function clientAddressOf(trustedProxies: readonly string[] = []): ClientAddressOf {
  const trusted = trustedProxies.length > 0;
  const isTrusted = trustedProxyCheck(trustedProxies);
  return (request) => {
    const peer = request.socket.remoteAddress;
    if (peer === undefined) return undefined;
    const address = unmapped(peer);
    if (!trusted || !isTrusted(address)) return address;
    const header = request.headers['x-forwarded-for'];
    const hops = (Array.isArray(header) ? header.join(',') : (header ?? ''))
      .split(',')
      .map((hop) => unmapped(hop.trim()))
      .filter(Boolean);
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i]!;
      // Not an address: what a trusted hop received as the client's; the hop after it (or the
      // peer) is the nearest to the client that can be believed.
      if (net.isIP(hop) === 0) return hops[i + 1] ?? address;
      if (!isTrusted(hop)) return hop;
    }
    // Every hop is a trusted proxy: the left-most is as near the client as anything says.
    return hops[0] ?? address;
  };
}
