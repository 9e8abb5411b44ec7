/**
 * The bounds on load as the service keeps them (src/service/access/load-bounds.ts), on a clock the test
 * moves: what each refusal says, and that the state shrinks back as clients go quiet.
 */
import { describe, expect, it } from 'vitest';
import type { Actor } from '../../src/service/kernel/actor.js';
import { UnauthenticatedError } from '../../src/service/access/authenticate.js';
import { RateLimitedError } from '../../src/service/kernel/errors.js';
import { addressGroup, createLoadBounds } from '../../src/service/access/load-bounds.js';
import { KeySlots } from '../../src/service/access/key-slots.js';
import { TokenBuckets } from '../../src/service/access/token-buckets.js';

const actor = (keyId: string | undefined): Actor => ({ workspaceId: 'w', kind: 'user', role: 'VIEWER', keyId });

function refusal(fn: () => unknown): RateLimitedError {
  try {
    fn();
  } catch (error) {
    if (error instanceof RateLimitedError) return error;
    throw error;
  }
  throw new Error('expected a RATE_LIMITED refusal');
}

describe('load bounds', () => {
  it("refuse a key's request past its burst with the time until its next token, and never another key's", () => {
    let now = 0;
    const bounds = createLoadBounds({ requestsPerSecond: 10, requestBurst: 3 }, () => now);
    for (let i = 0; i < 3; i++) bounds.request(actor('a'));
    const refused = refusal(() => bounds.request(actor('a')));
    expect(refused).toMatchObject({ code: 'RATE_LIMITED', limit: 'REQUESTS_PER_KEY', retryAfterMs: 100 });
    expect(refused.details).toEqual({ limit: 'REQUESTS_PER_KEY', retryAfterMs: 100 });
    bounds.request(actor('b'));
    now += 100;
    bounds.request(actor('a'));
    // No key, no bound: the embedding application in process.
    for (let i = 0; i < 10; i++) bounds.request(actor(undefined));
  });

  it('forget a bucket once it has filled up again, so idle and revoked keys cost nothing', () => {
    let now = 0;
    const bounds = createLoadBounds({ requestsPerSecond: 10, requestBurst: 5 }, () => now);
    for (let k = 0; k < 1000; k++) bounds.request(actor(`key-${k}`));
    expect(bounds.stats().keyBuckets).toBe(1000);
    now += 10_000; // refilled long since; the sweep runs on the next use
    bounds.request(actor('last'));
    expect(bounds.stats().keyBuckets).toBe(1);
  });

  it('hold at most maxEntries buckets however many names flood in', () => {
    const buckets = new TokenBuckets({ capacity: 2, perSecond: 1, maxEntries: 100, now: () => 0 });
    for (let i = 0; i < 10_000; i++) buckets.take(`name-${i}`);
    expect(buckets.size).toBe(100);
  });

  it('count connections and subscriptions per key and per connection, and give each place back once', () => {
    const bounds = createLoadBounds({ connectionsPerKey: 2, subscriptionsPerKey: 3, subscriptionsPerConnection: 2 });
    const c1 = bounds.openConnection(actor('a'));
    bounds.openConnection(actor('a'));
    expect(refusal(() => bounds.openConnection(actor('a')))).toMatchObject({ limit: 'CONNECTIONS_PER_KEY' });
    c1();
    c1(); // twice: still one place
    const c3 = bounds.openConnection(actor('a'));
    expect(refusal(() => bounds.openConnection(actor('a'))).retryAfterMs).toBeGreaterThan(0);
    bounds.openConnection(actor('b'));

    const first = bounds.connectionStreams();
    const s1 = first.open(actor('a'));
    first.open(actor('a'));
    expect(refusal(() => first.open(actor('a')))).toMatchObject({ limit: 'SUBSCRIPTIONS_PER_CONNECTION' });
    const second = bounds.connectionStreams();
    second.open(actor('a'));
    expect(refusal(() => second.open(actor('a')))).toMatchObject({ limit: 'SUBSCRIPTIONS_PER_KEY' });
    s1();
    second.open(actor('a'));
    // An SSE stream is a connection and a subscription: this key has neither to spare.
    expect(refusal(() => bounds.ownStreams.open(actor('a')))).toMatchObject({ limit: 'CONNECTIONS_PER_KEY' });
    c3();
    expect(refusal(() => bounds.ownStreams.open(actor('a')))).toMatchObject({ limit: 'SUBSCRIPTIONS_PER_KEY' });
    // The refused stream gave its connection back.
    bounds.openConnection(actor('a'));
    expect(bounds.stats()).toMatchObject({ connections: 3, subscriptions: 3 });
  });

  it('throttle failed authentications per address before the lookup, let a key that authenticated lately through, and count no request without a key', async () => {
    let now = 0;
    const bounds = createLoadBounds({ failedAuthPerMinute: 2 }, () => now);
    let lookups = 0;
    const good = () => (lookups++, Promise.resolve(actor('a')));
    const bad = () => (lookups++, Promise.reject(new UnauthenticatedError()));
    await bounds.authenticate('10.0.0.1', 'Bearer jg_good', good);
    for (let i = 0; i < 5; i++)
      await expect(bounds.authenticate('10.0.0.1', undefined, bad)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    lookups = 0;
    for (let i = 0; i < 2; i++)
      await expect(bounds.authenticate('10.0.0.1', 'Bearer jg_x', bad)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    await expect(bounds.authenticate('10.0.0.1', 'Bearer jg_y', bad)).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      limit: 'FAILED_AUTHENTICATIONS_PER_ADDRESS',
      retryAfterMs: 30_000,
    });
    expect(lookups).toBe(2);
    await expect(bounds.authenticate('10.0.0.1', 'Bearer jg_good', good)).resolves.toMatchObject({ keyId: 'a' });
    await expect(bounds.authenticate('10.0.0.2', 'Bearer jg_y', bad)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    now += 30_000;
    await expect(bounds.authenticate('10.0.0.1', 'Bearer jg_z', bad)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
  });

  it('count an IPv6 client by its /64 and an IPv4 address mapped into IPv6 as IPv4', () => {
    expect(addressGroup('2001:db8:1:2:aaaa::1')).toBe('2001:db8:1:2::/64');
    expect(addressGroup('2001:db8:1:2:bbbb:cccc:dddd:eeee')).toBe('2001:db8:1:2::/64');
    expect(addressGroup('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(addressGroup('::ffff:192.0.2.1')).toBe('192.0.2.1');
    expect(addressGroup('192.0.2.1')).toBe('192.0.2.1');
  });

  it("run a key's requests a few at a time, first come first served, give each place once, and refuse past the waiting bound", () => {
    const slots = new KeySlots({ inFlight: 2, waiting: 2 });
    const ran: string[] = [];
    const enter = (key: string, name: string) => slots.enter(key, () => ran.push(name));
    const a1 = enter('a', 'a1')!;
    const a2 = enter('a', 'a2')!;
    const a3 = enter('a', 'a3')!;
    const a4 = enter('a', 'a4')!;
    expect(ran).toEqual(['a1', 'a2']);
    // Waiting is full: refused, nothing taken; another key runs at once.
    expect(enter('a', 'a5')).toBeUndefined();
    const b1 = enter('b', 'b1')!;
    expect(ran).toEqual(['a1', 'a2', 'b1']);
    // A waiting client that goes is dropped from the queue; its place goes to nobody.
    a3();
    a1();
    a1();
    expect(ran).toEqual(['a1', 'a2', 'b1', 'a4']);
    // Places passed on, not freed: a newcomer waits behind the running two.
    const a6 = enter('a', 'a6')!;
    expect(ran).toEqual(['a1', 'a2', 'b1', 'a4']);
    a2();
    expect(ran).toEqual(['a1', 'a2', 'b1', 'a4', 'a6']);
    for (const release of [a4, a6, b1]) release();
    expect(slots.size).toBe(0);
  });

  it("admit a key seen lately by its places, a key not seen lately by its address's, and an event stream or a key with the bound off at once without one", async () => {
    const bounds = createLoadBounds({ requestsPerSecond: 1000, requestBurst: 1, requestsInFlightPerKey: 1 });
    const ran: string[] = [];
    const admit = (credential: string, name: string, holdsPlace?: boolean) =>
      bounds.admit('10.0.0.1', credential, () => ran.push(name), holdsPlace);
    // Not seen lately: a place of its address, released once its lookup's request is done.
    const first = admit('secret-a', 'first');
    expect(first).toBeInstanceOf(Function);
    expect(bounds.stats()).toMatchObject({ addressesWithRequests: 1, keysWithRequests: 0 });
    (first as () => void)();
    expect(bounds.stats().addressesWithRequests).toBe(0);
    await bounds.authenticate('10.0.0.1', 'secret-a', async () => actor('a'));
    const held = admit('secret-a', 'held');
    expect(held).toBeInstanceOf(Function);
    expect(admit('secret-a', 'stream', false)).toBeUndefined();
    await new Promise((r) => setTimeout(r, 5)); // a token again
    const waiting = admit('secret-a', 'waiting');
    expect(waiting).toBeInstanceOf(Function);
    await new Promise((r) => setTimeout(r, 5));
    const refused = admit('secret-a', 'refused');
    expect(refused).toBeInstanceOf(RateLimitedError);
    expect(refused).toMatchObject({ code: 'RATE_LIMITED', limit: 'REQUESTS_IN_FLIGHT_PER_KEY' });
    expect(ran).toEqual(['first', 'held', 'stream']);
    (held as () => void)();
    expect(ran).toEqual(['first', 'held', 'stream', 'waiting']);
    (waiting as () => void)();
    expect(bounds.stats().keysWithRequests).toBe(0);
    const off = createLoadBounds({ requestsInFlightPerKey: 0 });
    await off.authenticate('10.0.0.1', 'secret-b', async () => actor('b'));
    expect(off.admit('10.0.0.1', 'secret-b', () => ran.push('off'))).toBeUndefined();
    expect(off.admit('10.0.0.1', 'never-seen', () => ran.push('off, new'))).toBeUndefined();
    expect(ran.slice(-2)).toEqual(['off', 'off, new']);
  });

  it('run the requests of keys not known yet a few at a time per address, whatever the keys, and refuse past the waiting bound', () => {
    const bounds = createLoadBounds({ requestsPerSecond: 1000, requestBurst: 2, requestsInFlightPerKey: 2 });
    const ran: string[] = [];
    const admit = (address: string, credential: string) => bounds.admit(address, credential, () => ran.push(credential));
    // One key's first burst, and made-up keys, from one address: two run, two wait, the next is refused.
    const places = ['k1', 'k1', 'made-up-1', 'made-up-2'].map((c) => admit('10.0.0.1', c));
    expect(places.every((p) => p instanceof Function)).toBe(true);
    expect(ran).toEqual(['k1', 'k1']);
    expect(admit('10.0.0.1', 'made-up-3')).toMatchObject({ code: 'RATE_LIMITED', limit: 'NEW_KEY_REQUESTS_IN_FLIGHT_PER_ADDRESS' });
    // Another address, and an IPv6 address in another /64, have places of their own; one in the same /64 shares them.
    expect(admit('10.0.0.2', 'k2')).toBeInstanceOf(Function);
    expect(admit('2001:db8:0:1::1', 'k3')).toBeInstanceOf(Function);
    expect(admit('2001:db8:0:1::2', 'k4')).toBeInstanceOf(Function);
    expect(admit('2001:db8:0:2::1', 'k5')).toBeInstanceOf(Function);
    expect(ran).toEqual(['k1', 'k1', 'k2', 'k3', 'k4', 'k5']);
    // A place freed passes to the first waiter.
    (places[0] as () => void)();
    expect(ran.at(-1)).toBe('made-up-1');
    // No address (an in-process request): nothing to hold.
    expect(bounds.admit(undefined, 'k6', () => ran.push('k6'))).toBeUndefined();
    expect(ran.at(-1)).toBe('k6');
  });
});
