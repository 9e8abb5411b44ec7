/**
 * Outbound address policy for HTTP endpoints (SSRF defence). Loopback, private, link-local,
 * cloud-metadata, CGNAT, multicast and other special-purpose addresses are refused unless an
 * operator allows them (`JOBGATE_OUTBOUND_ALLOW`, a list of CIDRs).
 *
 * The check runs on the address actually connected to: inside the DNS lookup of the HTTP
 * agent, so a name that resolves to a private address — or that re-resolves to one after a
 * check (DNS rebinding) — is refused at connect time. IP literals are checked before the
 * request, since Node does not call `lookup` for them. URL parsing has already turned decimal,
 * octal and hex IPv4 spellings into dotted form; IPv6 forms that embed an IPv4 address
 * (IPv4-mapped, IPv4-compatible, NAT64, 6to4, Teredo) are judged by that IPv4 address.
 */
import dns from 'node:dns';
import net from 'node:net';

const V4_BLOCKED: [string, number][] = [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, including cloud metadata 169.254.169.254
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
];

const V6_BLOCKED: [string, number][] = [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['64:ff9b:1::', 48], // local-use IPv4/IPv6 translation (RFC 8215): a site's own NAT64, to any IPv4
  ['100::', 64], // discard-only
  ['2001:2::', 48], // benchmarking
  ['3fff::', 20], // documentation (RFC 9637)
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
  ['2001:db8::', 32], // documentation
  ['fd00:ec2::254', 128], // AWS metadata over IPv6 (inside fc00::/7 too; named for the record)
];

export class OutboundRefusedError extends Error {
  override name = 'OutboundRefusedError';
}

function parseCidr(cidr: string): { address: string; prefix: number; type: 'ipv4' | 'ipv6' } {
  const [address, prefixText] = cidr.trim().split('/');
  const type = net.isIPv4(address ?? '') ? 'ipv4' : net.isIPv6(address ?? '') ? 'ipv6' : undefined;
  if (!type || !address) throw new Error(`"${cidr}" is not an IP address or CIDR`);
  const prefix = prefixText === undefined ? (type === 'ipv4' ? 32 : 128) : Number(prefixText);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > (type === 'ipv4' ? 32 : 128)) throw new Error(`"${cidr}" has a bad prefix`);
  return { address, prefix, type };
}

function expandV6(address: string): number[] {
  // 8 groups of 16 bits; handles "::" and a trailing dotted IPv4.
  let text = address.toLowerCase().split('%')[0]!;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4[1]!.split('.').map(Number) as [number, number, number, number];
    text = text.slice(0, -v4[1]!.length) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const t = tail !== undefined ? (tail ? tail.split(':') : []) : [];
  const fill = tail !== undefined ? 8 - h.length - t.length : 0;
  return [...h, ...Array(fill).fill('0'), ...t].map((g) => Number.parseInt(g || '0', 16));
}

/** The IPv4 address an IPv6 address carries, for the forms that route to it. */
export function embeddedIPv4(address: string): string | undefined {
  if (!net.isIPv6(address)) return undefined;
  const g = expandV6(address);
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  const zero = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zero(0, 5) && g[5] === 0xffff) return v4(g[6]!, g[7]!); // ::ffff:a.b.c.d (mapped)
  if (zero(0, 6) && (g[6] !== 0 || g[7]! > 1)) return v4(g[6]!, g[7]!); // ::a.b.c.d (compatible)
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6)) return v4(g[6]!, g[7]!); // 64:ff9b::/96 (NAT64)
  if (g[0] === 0x2002) return v4(g[1]!, g[2]!); // 2002::/16 (6to4)
  if (g[0] === 0x2001 && g[1] === 0) return v4(g[6]! ^ 0xffff, g[7]! ^ 0xffff); // 2001::/32 (Teredo: the client, stored inverted)
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return v4(g[6]!, g[7]!); // ::ffff:0:a.b.c.d (translated)
  return undefined;
}

export interface OutboundPolicy {
  /** Why `address` may not be connected to, or undefined when it may. */
  refusal(address: string): string | undefined;
  /** A `lookup` for net/tls connect options that resolves and refuses blocked addresses. */
  lookup: net.LookupFunction;
}

export function createOutboundPolicy(allow: string[] = []): OutboundPolicy {
  const blocked = new net.BlockList();
  for (const [a, p] of V4_BLOCKED) blocked.addSubnet(a, p, 'ipv4');
  for (const [a, p] of V6_BLOCKED) blocked.addSubnet(a, p, 'ipv6');
  const allowed = new net.BlockList();
  for (const cidr of allow) {
    const c = parseCidr(cidr);
    allowed.addSubnet(c.address, c.prefix, c.type);
  }

  const refusal = (address: string): string | undefined => {
    const type: 'ipv4' | 'ipv6' | undefined = net.isIPv4(address) ? 'ipv4' : net.isIPv6(address) ? 'ipv6' : undefined;
    if (!type) return `"${address}" is not an IP address`;
    const v4 = type === 'ipv6' ? embeddedIPv4(address) : undefined;
    const [addr, t]: [string, 'ipv4' | 'ipv6'] = v4 ? [v4, 'ipv4'] : [address, type];
    if (allowed.check(addr, t) || allowed.check(address, type)) return undefined;
    if (blocked.check(addr, t) || blocked.check(address, type)) {
      return `address ${address} is loopback, private, link-local or otherwise special-purpose; set JOBGATE_OUTBOUND_ALLOW to allow it`;
    }
    return undefined;
  };

  const lookup: net.LookupFunction = (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const list = addresses as dns.LookupAddress[];
      const ok = list.filter((a) => refusal(a.address) === undefined);
      if (ok.length === 0) {
        const why = list.length ? refusal(list[0]!.address)! : `${hostname} has no address`;
        return callback(
          Object.assign(new OutboundRefusedError(`refused to connect to ${hostname}: ${why}`), { code: 'EJOBGATEREFUSED' }),
          '',
          0,
        );
      }
      if ((options as dns.LookupOptions).all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, ok);
      callback(null, ok[0]!.address, ok[0]!.family);
    });
  };

  return { refusal, lookup };
}

/** Something the outbound policy will likely refuse about a target, said before any delivery. */
export interface TargetWarning {
  code: 'TARGET_RESOLVES_TO_REFUSED_ADDRESS' | 'TARGET_DOES_NOT_RESOLVE';
  message: string;
}

/**
 * The host of an http(s) url as the policy sees it: an IP literal (brackets dropped; the URL
 * parser has already turned decimal, octal and hex IPv4 spellings into dotted form) or a name.
 * Undefined for a url that does not parse or whose host is templated (`{{config.host}}`): only a
 * delivery knows where that goes.
 */
function hostOf(url: string): { ip: string } | { name: string } | undefined {
  if (url.includes('{{')) {
    const host = /^[a-z]+:\/\/([^/?#]*)/i.exec(url)?.[1] ?? '';
    if (host.includes('{{')) return undefined;
  }
  let hostname: string;
  try {
    hostname = new URL(url.replace(/\{\{[^}]*\}\}/g, 'x')).hostname;
  } catch {
    return undefined;
  }
  const bare = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  return net.isIP(bare) ? { ip: bare } : { name: bare };
}

/**
 * Why the policy refuses `url` for certain (its host is an IP literal it refuses), or undefined.
 * A name is never refused here: what it resolves to may change.
 */
export function literalTargetRefusal(policy: OutboundPolicy, url: string): string | undefined {
  const host = hostOf(url);
  return host && 'ip' in host ? policy.refusal(host.ip) : undefined;
}

/** What a host-name lookup came to: its addresses, or the error code (ENOTFOUND, EAI_AGAIN...). */
export type HostLookup = { addresses: string[] } | { error: string };

/**
 * Host-name lookups for advice (targetWarnings), kept off libuv's thread pool as far as advice
 * allows: `dns.lookup` takes one of its 4 threads (shared with fs, crypto and the pg connections'
 * own lookups) for as long as the system resolver takes, and a caller that stops waiting does
 * not cancel it. So a list of 100 endpoints must not start 100 lookups:
 *
 * - an answer is remembered per host name for `ttlMs` (errors for `errorTtlMs`), at most
 *   `maxEntries` names, the oldest forgotten first (and at most as many queued);
 * - callers asking about a name already being looked up share that lookup;
 * - at most `maxConcurrent` lookups run at once; the others queue, and a caller whose wait ends
 *   before its lookup started gets `not-checked` (its place in the queue is given up when no one
 *   waits for it any more). A lookup that started and outlives the wait still finishes, holding
 *   its slot, and its answer is remembered.
 */
export class HostLookups {
  private readonly cache = new Map<string, { at: number; result: HostLookup }>();
  private readonly pending = new Map<string, Pending>();
  private readonly queue: Pending[] = [];
  private running = 0;
  private readonly lookupFn: (host: string) => Promise<string[]>;
  private readonly now: () => number;
  private readonly ttlMs: number;
  private readonly errorTtlMs: number;
  private readonly maxEntries: number;
  private readonly maxConcurrent: number;

  constructor(
    options: {
      lookup?: (host: string) => Promise<string[]>;
      now?: () => number;
      ttlMs?: number;
      errorTtlMs?: number;
      maxEntries?: number;
      maxConcurrent?: number;
    } = {},
  ) {
    this.lookupFn = options.lookup ?? (async (host) => (await dns.promises.lookup(host, { all: true })).map((a) => a.address));
    this.now = options.now ?? Date.now;
    this.ttlMs = options.ttlMs ?? 60_000;
    this.errorTtlMs = options.errorTtlMs ?? 10_000;
    this.maxEntries = options.maxEntries ?? 1000;
    this.maxConcurrent = options.maxConcurrent ?? 2;
  }

  /** `host`'s addresses, from memory or a lookup; `timeout` or `not-checked` when none came within `timeoutMs`. */
  async resolve(host: string, timeoutMs: number): Promise<HostLookup | 'timeout' | 'not-checked'> {
    const cached = this.cache.get(host);
    if (cached && this.now() - cached.at < ('error' in cached.result ? this.errorTtlMs : this.ttlMs)) return cached.result;
    let entry = this.pending.get(host);
    if (!entry) {
      if (this.queue.length >= this.maxEntries) return 'not-checked';
      let settle!: (result: HostLookup | undefined) => void;
      const done = new Promise<HostLookup | undefined>((resolve) => (settle = resolve));
      entry = { host, done, settle, waiters: 0, started: false };
      this.pending.set(host, entry);
      this.queue.push(entry);
    }
    const waiting = entry;
    waiting.waiters++;
    this.pump();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
    try {
      const result = await Promise.race([waiting.done, timedOut]);
      if (result === undefined) return 'not-checked';
      if (result !== 'timeout') return result;
      return waiting.started ? 'timeout' : 'not-checked';
    } finally {
      clearTimeout(timer);
      waiting.waiters--;
    }
  }

  /** Lookups now running (for tests and metrics). */
  get active(): number {
    return this.running;
  }

  private pump(): void {
    while (this.running < this.maxConcurrent && this.queue.length > 0) {
      const entry = this.queue.shift()!;
      if (entry.waiters === 0) {
        // No one waits for it any more: give its place up.
        this.pending.delete(entry.host);
        entry.settle(undefined);
        continue;
      }
      entry.started = true;
      this.running++;
      void Promise.resolve(entry.host)
        .then(this.lookupFn)
        .then(
          (addresses): HostLookup => ({ addresses }),
          (error: NodeJS.ErrnoException): HostLookup => ({ error: error.code ?? error.message }),
        )
        .then((result) => {
          this.remember(entry.host, result);
          this.pending.delete(entry.host);
          entry.settle(result);
        })
        .finally(() => {
          this.running--;
          this.pump();
        });
    }
  }

  private remember(host: string, result: HostLookup): void {
    this.cache.delete(host);
    this.cache.set(host, { at: this.now(), result });
    while (this.cache.size > this.maxEntries) this.cache.delete(this.cache.keys().next().value!);
  }
}

interface Pending {
  host: string;
  done: Promise<HostLookup | undefined>;
  settle(result: HostLookup | undefined): void;
  waiters: number;
  started: boolean;
}

/** The lookups targetWarnings uses by default: one memory and one limit per process. */
export const hostLookups = new HostLookups();

/**
 * What the policy would likely say of `url`'s host name now: every address it resolves to is
 * refused, or it resolves to none (within `timeoutMs`). Nothing for an IP literal (see
 * literalTargetRefusal) or a templated host, nor when the name could not be looked up in time
 * because other lookups held every slot (see HostLookups). Advice only: the check on the
 * address actually connected to, at each delivery, decides. The message does not list the
 * addresses: what an internal name resolves to is not the caller's to learn.
 */
export async function targetWarnings(
  policy: OutboundPolicy,
  url: string,
  timeoutMs = 2000,
  lookups: HostLookups = hostLookups,
): Promise<TargetWarning[]> {
  const host = hostOf(url);
  if (!host || 'ip' in host) return [];
  const result = await lookups.resolve(host.name, timeoutMs);
  if (result === 'not-checked') return [];
  if (result === 'timeout' || 'error' in result || result.addresses.length === 0) {
    const why = result === 'timeout' ? `no answer within ${timeoutMs} ms` : 'error' in result ? result.error : 'no address';
    return [{ code: 'TARGET_DOES_NOT_RESOLVE', message: `${host.name} does not resolve just now (${why}); deliveries fail until it does` }];
  }
  if (result.addresses.every((address) => policy.refusal(address) !== undefined)) {
    return [
      {
        code: 'TARGET_RESOLVES_TO_REFUSED_ADDRESS',
        message: `${host.name} resolves only to addresses the outbound policy refuses (loopback, private, link-local or otherwise special-purpose; JOBGATE_OUTBOUND_ALLOW can allow them): deliveries will fail unless it resolves elsewhere then`,
      },
    ];
  }
  return [];
}
