/**
 * Bounds on what one API key, one connection and one client address may hold and send, so that
 * no client can take the gateway from the others. The transports (HTTP, graphql-ws, SSE) call
 * these; each refusal is a RateLimitedError (RATE_LIMITED, with `retryAfterMs`).
 *
 * - Requests per key: a token bucket (`requestsPerSecond`, bursts of `requestBurst`) per API key.
 *   An HTTP request and a WebSocket operation take one token each.
 * - Requests in flight per key: an HTTP request of a key that authenticated lately runs when fewer
 *   than `requestsInFlightPerKey` of the key's run, else waits its turn (./key-slots.ts). A
 *   request whose credential has not authenticated lately (so its key is not known before its
 *   lookup) takes a place of its client address instead, with the same bound: one key's first
 *   burst, or a flood of made-up keys arriving at once before any of them has failed, is looked up
 *   and run a few at a time, instead of all together in the database pool other keys need.
 * - Connections per key: WebSockets plus Server-Sent Events streams open at once.
 * - Subscriptions per key, and per WebSocket connection.
 * - Failed authentications per client address: a bucket of `failedAuthPerMinute`, checked before
 *   the key is looked up, so a flood of made-up keys stops reaching the database. A request that
 *   names no key is refused without a lookup and is not counted; a key that authenticated lately
 *   (kept as a SHA-256, never as sent) is let through a throttled address, so clients sharing one
 *   address (a NAT, a proxy not declared trusted) keep working while a neighbour guesses keys.
 *
 * All of it is this process's memory: with N gateway replicas a key may send N times the rate
 * and hold N times the connections. A bucket shared in Postgres would cost a write per request,
 * more than most requests cost; per replica is the honest, cheap bound. Counts are dropped when
 * they reach zero and buckets when they fill up again, so the state is as large as the set of
 * keys and addresses active in the last minute or so, whatever was revoked or forgotten since.
 *
 * 0 turns a bound off. Actors without a key (the embedding application) are not bounded.
 */
import { createHash } from 'node:crypto';
import net from 'node:net';
import type { Actor } from '../kernel/actor.js';
import { RateLimitedError, type LoadBound } from '../kernel/errors.js';
import { KeySlots, type SlotRelease } from './key-slots.js';
import { TokenBuckets } from './token-buckets.js';

export interface LoadBoundSettings {
  /** Requests (HTTP requests and WebSocket operations) a second per API key; 0: unbounded. */
  requestsPerSecond: number;
  /** How many requests a key may send at once after a quiet spell. */
  requestBurst: number;
  /**
   * HTTP requests of one key running at once; the next ones wait their turn (at most
   * `requestBurst` of them, then they are refused). 0: unbounded.
   */
  requestsInFlightPerKey: number;
  /** WebSocket connections plus SSE streams open at once per API key. */
  connectionsPerKey: number;
  /** Subscriptions open at once per API key, over every transport. */
  subscriptionsPerKey: number;
  /** Subscriptions open at once on one WebSocket connection. */
  subscriptionsPerConnection: number;
  /** Failed authentications a minute per client address (IPv6: per /64). */
  failedAuthPerMinute: number;
  /**
   * TCP connections open at once per client address (IPv6: per /64), whatever they carry; the
   * gateway closes the ones past it before reading them (src/server/connection-bounds.ts).
   * Declared reverse proxies are not bounded.
   */
  connectionsPerAddress: number;
}

/**
 * Generous for a console and a busy frontend, small for a flood. The console keeps one WebSocket
 * per tab with a handful of subscriptions, and a screen loads with a few queries; a frontend that
 * shares one key across its users is the heaviest honest client, and 50 requests a second
 * (4 million a day) with bursts of 200 covers a busy one. 50 connections are 50 tabs or browsers
 * on one key; 100 subscriptions on one socket and 500 per key are well past any screen's needs
 * and still cost a few MB at most. 20 failed authentications a minute allow a person's typos and
 * a client's retries, and hold a random-key flood to one lookup every 3 s per address. 4 requests
 * of one key at once leave a key hundreds of requests a second (far past its rate) and another
 * key waiting behind at most 4 of its queries; the next wait, not refused (measured: bench/bounds.ts).
 * 512 connections from one address are some 80 browsers behind one NAT (a browser opens up to 6
 * to a host), and a few percent of a typical descriptor limit of 20,000 or more.
 */
export const LOAD_BOUND_DEFAULTS: Readonly<LoadBoundSettings> = Object.freeze({
  requestsPerSecond: 50,
  requestBurst: 200,
  requestsInFlightPerKey: 4,
  connectionsPerKey: 50,
  subscriptionsPerKey: 500,
  subscriptionsPerConnection: 100,
  failedAuthPerMinute: 20,
  connectionsPerAddress: 512,
});

/** A count-bound refusal frees up only when the client closes something: retrying sooner is noise. */
const COUNT_RETRY_MS = 5_000;
/** How long, and how many, keys that authenticated are let through a throttled address. */
const RECENT_KEY_MS = 10 * 60_000;
const RECENT_KEYS_MAX = 10_000;

/** Opens a subscription within its bounds, or throws RATE_LIMITED; returns its release (idempotent). */
export interface StreamBudget {
  open(actor: Actor): () => void;
}

export interface LoadBounds {
  readonly settings: Readonly<LoadBoundSettings>;
  /**
   * Runs `attempt` (the key's or ticket's lookup) unless `address` has failed too often lately
   * (RATE_LIMITED, nothing looked up); counts its UNAUTHENTICATED against the address. Without an
   * address (an in-process request) nothing is counted.
   */
  authenticate<T>(address: string | undefined, credential: string | undefined, attempt: () => Promise<T>): Promise<T>;
  /**
   * The refusal `authenticate` and `request` would give this credential from this address, when
   * it can be known without a lookup, else undefined; takes nothing. A transport asks it before
   * reading a request at all, so a flood's refusals cost microseconds, not a parse and a lookup:
   * the address is throttled and the credential is not a key that authenticated lately, or the
   * credential authenticated lately as a key whose request bucket is empty. It never admits: a
   * request it lets through meets the full checks.
   */
  refusal(address: string | undefined, credential: string | undefined): RateLimitedError | undefined;
  /**
   * An HTTP request's admission, before it is read: its refusal (as `refusal` gives it, or the
   * key's waiting requests are full), else `run` is called, at once or when the key has a place
   * free (./key-slots.ts), and the place's release is returned, to call when the request is done
   * or its client gone (undefined: nothing held). `holdsPlace` false (a stream open for long, an
   * SSE subscription) runs at once and holds none.
   */
  admit(
    address: string | undefined,
    credential: string | undefined,
    run: () => void,
    holdsPlace?: boolean,
  ): RateLimitedError | SlotRelease | undefined;
  /** Takes the key's token for one request, or throws RATE_LIMITED. */
  request(actor: Actor): void;
  /** Holds one of the key's connections (a WebSocket), or throws RATE_LIMITED; returns its release. */
  openConnection(actor: Actor): () => void;
  /** The budget of one WebSocket connection's subscriptions. */
  connectionStreams(): StreamBudget;
  /** The budget of streams that are connections of their own (SSE): each holds a connection and a subscription. */
  readonly ownStreams: StreamBudget;
  /** What is held, for tests: names with state, open connections and subscriptions. */
  stats(): {
    keyBuckets: number;
    addressBuckets: number;
    recentKeys: number;
    connections: number;
    subscriptions: number;
    /** Keys with HTTP requests running or waiting for a place. */
    keysWithRequests: number;
    /** Addresses with requests of keys not known yet running or waiting for a place. */
    addressesWithRequests: number;
  };
}

const once = (fn: () => void) => {
  let done = false;
  return () => void (done || ((done = true), fn()));
};

/** Counts by name; a name at zero is dropped. */
class Counts {
  private readonly counts = new Map<string, number>();
  total = 0;
  get(name: string): number {
    return this.counts.get(name) ?? 0;
  }
  add(name: string): () => void {
    this.counts.set(name, this.get(name) + 1);
    this.total++;
    return once(() => {
      const left = this.get(name) - 1;
      if (left > 0) this.counts.set(name, left);
      else this.counts.delete(name);
      this.total--;
    });
  }
}

/**
 * The name an address is counted under: an IPv4 address (also when mapped into IPv6) as it is,
 * an IPv6 address by its /64, which one subscriber usually holds whole.
 */
export function addressGroup(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  if (net.isIPv6(address)) {
    const [head = '', tail = ''] = address.split('::');
    const left = head ? head.split(':') : [];
    const right = tail ? tail.split(':') : [];
    const groups = address.includes('::') ? [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right] : left;
    return `${groups
      .slice(0, 4)
      .map((g) => parseInt(g, 16).toString(16))
      .join(':')}::/64`;
  }
  return address;
}

const fingerprint = (credential: string) => createHash('sha256').update(credential).digest('base64');

/**
 * Failed authentications per address, and the keys that authenticated lately (which a throttled
 * address may still use).
 */
function authenticationGuard(settings: Readonly<LoadBoundSettings>, now: () => number) {
  const failures = new TokenBuckets({ capacity: settings.failedAuthPerMinute, perSecond: settings.failedAuthPerMinute / 60, now });
  // Keys that authenticated lately, by fingerprint: when each was last seen (oldest first), and
  // the key's id (a subscription ticket has none).
  const recentKeys = new Map<string, { at: number; keyId: string | undefined }>();
  const recent = (print: string) => {
    const seen = recentKeys.get(print);
    return seen !== undefined && now() - seen.at < RECENT_KEY_MS ? seen : undefined;
  };
  const remember = (print: string, keyId: string | undefined) => {
    recentKeys.delete(print);
    recentKeys.set(print, { at: now(), keyId });
    if (recentKeys.size > RECENT_KEYS_MAX) recentKeys.delete(recentKeys.keys().next().value!);
  };
  const throttled = (waitMs: number) =>
    new RateLimitedError(
      'FAILED_AUTHENTICATIONS_PER_ADDRESS',
      waitMs,
      `too many failed authentications from this address (${settings.failedAuthPerMinute} a minute)`,
    );
  return {
    failures,
    recentKeys,
    async authenticate<T>(address: string | undefined, credential: string | undefined, attempt: () => Promise<T>): Promise<T> {
      if (!credential) return attempt();
      const print = fingerprint(credential);
      // Without an address (an in-process request) or with the bound off, nothing is counted.
      const group = address !== undefined && settings.failedAuthPerMinute > 0 ? addressGroup(address) : undefined;
      const waitMs = group === undefined ? 0 : failures.check(group);
      if (waitMs > 0 && !recent(print)) throw throttled(waitMs);
      try {
        const actor = await attempt();
        remember(print, keyIdOf(actor));
        return actor;
      } catch (error) {
        if (group !== undefined && (error as { code?: unknown })?.code === 'UNAUTHENTICATED') failures.debit(group);
        throw error;
      }
    },
    /** A credential's recent key, and the address's refusal (for `refusal`); nothing taken. */
    early(address: string | undefined, credential: string) {
      const key = recent(fingerprint(credential));
      if (key || address === undefined || settings.failedAuthPerMinute <= 0) return { keyId: key?.keyId };
      const waitMs = failures.check(addressGroup(address));
      return { keyId: undefined, refusal: waitMs > 0 ? throttled(waitMs) : undefined };
    },
  };
}

const keyIdOf = (actor: unknown): string | undefined => {
  const keyId = (actor as { keyId?: unknown } | null | undefined)?.keyId;
  return typeof keyId === 'string' ? keyId : undefined;
};

/** Connections and subscriptions open per key (and per connection). */
function holdings(settings: Readonly<LoadBoundSettings>) {
  const connections = new Counts();
  const subscriptions = new Counts();
  const refuse = (limit: LoadBound, message: string): never => {
    throw new RateLimitedError(limit, COUNT_RETRY_MS, message);
  };
  const openSubscription = (key: string, perConnection?: Counts): (() => void) => {
    const { subscriptionsPerConnection: perSocket, subscriptionsPerKey: perKey } = settings;
    if (perConnection && perSocket > 0 && perConnection.total >= perSocket)
      refuse('SUBSCRIPTIONS_PER_CONNECTION', `this connection already has ${perSocket} subscriptions open; complete one first`);
    if (perKey > 0 && subscriptions.get(key) >= perKey)
      refuse('SUBSCRIPTIONS_PER_KEY', `this API key already has ${perKey} subscriptions open on this gateway; complete one first`);
    const releases = [subscriptions.add(key), ...(perConnection ? [perConnection.add(key)] : [])];
    return once(() => releases.forEach((r) => r()));
  };
  const openConnection = (key: string): (() => void) => {
    const max = settings.connectionsPerKey;
    if (max > 0 && connections.get(key) >= max)
      refuse(
        'CONNECTIONS_PER_KEY',
        `this API key already has ${max} connections (WebSockets and event streams) open on this gateway; close one first`,
      );
    return connections.add(key);
  };
  return { connections, subscriptions, openSubscription, openConnection };
}

const unbounded = () => () => {};

/**
 * The places of HTTP requests: a key's (when it authenticated lately), else its client address's
 * (its key is not known before its lookup; an in-process request has no address and holds none).
 * `enter` runs `run` at once or when a place is free and returns the place's release, or the
 * refusal when the waiting are full; undefined when the bound is off.
 */
function requestPlaces(settings: Readonly<LoadBoundSettings>) {
  const slots = { inFlight: settings.requestsInFlightPerKey, waiting: settings.requestBurst };
  const keys = new KeySlots(slots);
  const addresses = new KeySlots(slots);
  const bounds = `${settings.requestsInFlightPerKey} run at once, ${settings.requestBurst} may wait, per gateway`;
  return {
    keys,
    addresses,
    enter(keyId: string | undefined, address: string | undefined, run: () => void): RateLimitedError | SlotRelease | undefined {
      if (settings.requestsInFlightPerKey <= 0) return void run();
      if (keyId !== undefined)
        return (
          keys.enter(keyId, run) ??
          new RateLimitedError('REQUESTS_IN_FLIGHT_PER_KEY', 1000, `too many requests of this API key waiting (${bounds})`)
        );
      if (address === undefined) return void run();
      return (
        addresses.enter(addressGroup(address), run) ??
        new RateLimitedError(
          'NEW_KEY_REQUESTS_IN_FLIGHT_PER_ADDRESS',
          1000,
          `too many requests from this address waiting with keys not yet authenticated (${bounds})`,
        )
      );
    },
  };
}

export function createLoadBounds(overrides: Partial<LoadBoundSettings> = {}, now: () => number = () => performance.now()): LoadBounds {
  const settings = Object.freeze({ ...LOAD_BOUND_DEFAULTS, ...overrides });
  const requests = new TokenBuckets({ capacity: settings.requestBurst, perSecond: settings.requestsPerSecond, now });
  const guard = authenticationGuard(settings, now);
  const held = holdings(settings);
  const places = requestPlaces(settings);
  const overRate = (waitMs: number) =>
    new RateLimitedError(
      'REQUESTS_PER_KEY',
      waitMs,
      `too many requests for this API key (${settings.requestsPerSecond} a second, bursts of ${settings.requestBurst}, per gateway)`,
    );
  const early = (address: string | undefined, credential: string | undefined) => {
    if (!credential) return { keyId: undefined, refusal: undefined };
    const { keyId, refusal } = guard.early(address, credential);
    if (refusal || keyId === undefined || settings.requestsPerSecond <= 0) return { keyId, refusal };
    const waitMs = requests.check(keyId);
    return { keyId, refusal: waitMs > 0 ? overRate(waitMs) : undefined };
  };
  return {
    settings,
    authenticate: guard.authenticate,
    refusal: (address, credential) => early(address, credential).refusal,
    admit(address, credential, run, holdsPlace = true) {
      const { keyId, refusal } = early(address, credential);
      if (refusal) return refusal;
      if (!credential || !holdsPlace) return void run();
      return places.enter(keyId, address, run);
    },
    request(actor) {
      if (!actor.keyId || settings.requestsPerSecond <= 0) return;
      const waitMs = requests.take(actor.keyId);
      if (waitMs > 0) throw overRate(waitMs);
    },
    openConnection: (actor) => (actor.keyId ? held.openConnection(actor.keyId) : unbounded()),
    connectionStreams() {
      const mine = new Counts();
      return { open: (actor) => (actor.keyId ? held.openSubscription(actor.keyId, mine) : unbounded()) };
    },
    ownStreams: {
      open(actor) {
        if (!actor.keyId) return unbounded();
        const connection = held.openConnection(actor.keyId);
        try {
          const subscription = held.openSubscription(actor.keyId);
          return once(() => (subscription(), connection()));
        } catch (error) {
          connection();
          throw error;
        }
      },
    },
    stats: () => ({
      keyBuckets: requests.size,
      addressBuckets: guard.failures.size,
      recentKeys: guard.recentKeys.size,
      connections: held.connections.total,
      subscriptions: held.subscriptions.total,
      keysWithRequests: places.keys.size,
      addressesWithRequests: places.addresses.size,
    }),
  };
}
