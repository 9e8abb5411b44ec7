/**
 * The bounds on load over HTTP, through real gateways on loopback ports with small bounds: a key
 * past its rate, an address past its failed authentications (before any lookup), and which
 * address counts when a trusted proxy forwards. Each refusal is HTTP 429 with Retry-After and a
 * GraphQL error RATE_LIMITED with `retryAfterMs`; another key (or address) is not refused.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayOptions, RunningGateway } from '../../src/server/gateway.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { listeningGateway } from '../support/graphql.js';

let t: TestDb;
const gateways: RunningGateway[] = [];
let lookups = 0;

async function gateway(options: Partial<GatewayOptions>): Promise<RunningGateway> {
  const gw = await listeningGateway(t, {
    console: false,
    // Refusals are answered at once here; the hold has its own test.
    refusalHoldMs: 0,
    authenticate: (request) => {
      lookups++;
      return t.service.authenticate(/^Bearer (\S+)$/.exec(request.headers.get('authorization') ?? '')?.[1]);
    },
    ...options,
  });
  gateways.push(gw);
  return gw;
}

beforeAll(async () => {
  t = await createTestDb();
});
afterAll(async () => {
  for (const gw of gateways) await gw.close();
  await t.close();
});

type Answer = { status: number; retryAfter: string | null; body: { data?: any; errors?: { message: string; extensions?: any }[] } };

async function post(gw: RunningGateway, key: string | undefined, query: string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(gw.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers },
    body: JSON.stringify({ query }),
  });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as Answer['body'] };
}

/**
 * A request of `key` whose body is still coming: it holds one of the key's places (in flight)
 * until it is finished (resolving with its answer's status) or abandoned.
 */
async function holdPlace(gw: RunningGateway, key: string): Promise<{ finish(): Promise<number>; abandon(): void }> {
  const body = JSON.stringify({ query: SLUG });
  const request = http.request(gw.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), authorization: `Bearer ${key}` },
  });
  const answer = new Promise<number>((resolve, reject) => {
    request.on('response', (res) => (res.resume(), res.on('end', () => resolve(res.statusCode!))));
    request.on('error', reject);
  });
  answer.catch(() => {}); // an abandoned one errs
  request.write(body.slice(0, 5));
  await until(() => gw.bounds.stats().keysWithRequests === 1);
  return {
    finish: () => (request.end(body.slice(5)), answer),
    abandon: () => void request.destroy(),
  };
}

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; !condition(); i++) {
    if (i > 500) throw new Error('condition not met in 5 s');
    await new Promise((r) => setTimeout(r, 10));
  }
}

const newKey = async (name: string) => (await t.service.bootstrapKey('default', 'ADMIN', name)).key;
const SLUG = '{ workspace { slug } }';
const BAD_KEY = (i: number) => `jg_unknownunknownunknown${String(i).padStart(6, '0')}`;

function expectRefused(answer: Answer, limit: string) {
  expect(answer.status, JSON.stringify(answer.body)).toBe(429);
  expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
  const error = answer.body.errors?.[0];
  expect(error?.extensions).toMatchObject({ code: 'RATE_LIMITED', limit });
  expect(error?.extensions?.retryAfterMs).toBeGreaterThan(0);
  expect(error?.extensions?.requestId).toEqual(expect.any(String));
  expect(Number(answer.retryAfter)).toBe(Math.ceil(error!.extensions!.retryAfterMs / 1000));
  expect(answer.body.data ?? null).toBeNull();
}

describe('requests per key', () => {
  it('refuses a key past its burst with 429, Retry-After and RATE_LIMITED, runs nothing for it, and keeps serving another key', async () => {
    // One token every 2 s: the burst is spent long before the next one comes.
    const gw = await gateway({ bounds: { requestsPerSecond: 0.5, requestBurst: 3 } });
    const [busy, other] = [await newKey('busy'), await newKey('other')];
    const answers: Answer[] = [];
    while (answers.length < 20 && answers.at(-1)?.status !== 429) answers.push(await post(gw, busy, SLUG));
    expect(answers.length).toBeGreaterThan(3);
    expect(answers.slice(0, -1).every((a) => a.status === 200)).toBe(true);
    expectRefused(answers.at(-1)!, 'REQUESTS_PER_KEY');
    // A refused mutation changes nothing.
    const refused = await post(gw, busy, 'mutation { createApiKey(input: { name: "refused by the bound", role: VIEWER }) { key } }');
    expectRefused(refused, 'REQUESTS_PER_KEY');
    expect((await t.query(`select count(*)::int as n from api_keys where name = 'refused by the bound'`)).rows[0].n).toBe(0);
    const served = await post(gw, other, SLUG);
    expect(served.status).toBe(200);
    expect(served.body.data).toEqual({ workspace: { slug: 'default' } });
  });

  it('refuses a flooding key before its request is read: no parse, no lookup, the same answer, CORS headers for an allowed origin', async () => {
    const origin = 'https://app.example';
    const gw = await gateway({ bounds: { requestsPerSecond: 0.5, requestBurst: 2 }, corsOrigins: [origin] });
    const key = await newKey('flooding');
    expect((await post(gw, key, SLUG)).status).toBe(200);
    expect((await post(gw, key, SLUG)).status).toBe(200);
    lookups = 0;
    // A body yoga would refuse as unreadable (400) is not read at all: the key's bucket is empty.
    const garbage = await fetch(gw.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, origin, accept: 'application/graphql-response+json' },
      body: '{ not json',
    });
    const answer: Answer = {
      status: garbage.status,
      retryAfter: garbage.headers.get('retry-after'),
      body: (await garbage.json()) as Answer['body'],
    };
    expectRefused(answer, 'REQUESTS_PER_KEY');
    expect(garbage.headers.get('content-type')).toMatch(/^application\/graphql-response\+json/);
    expect(garbage.headers.get('access-control-allow-origin')).toBe(origin);
    expect(garbage.headers.get('x-content-type-options')).toBe('nosniff');
    expect(answer.body.errors?.[0]?.extensions?.requestId).toBe(garbage.headers.get('x-request-id'));
    expectRefused(await post(gw, key, SLUG), 'REQUESTS_PER_KEY');
    expect(lookups).toBe(0);
    // A large body (over a TCP window) is read to its end before the answer ends: the client
    // gets the 429, not a reset connection.
    const big = await post(gw, key, `{ workspace { slug } } # ${'x'.repeat(200_000)}`);
    expectRefused(big, 'REQUESTS_PER_KEY');
    // Another origin gets no CORS header; another key is served.
    const foreign = await fetch(gw.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, origin: 'https://elsewhere.example' },
      body: JSON.stringify({ query: SLUG }),
    });
    expect(foreign.status).toBe(429);
    expect(foreign.headers.get('access-control-allow-origin')).toBeNull();
    expect((await post(gw, await newKey('not flooding'), SLUG)).status).toBe(200);
  });

  it('holds a refusal answered before the request was read, up to the hold, and lets a client that gives up go', async () => {
    const gw = await gateway({ bounds: { requestsPerSecond: 0.5, requestBurst: 1 }, refusalHoldMs: 400 });
    const key = await newKey('held');
    expect((await post(gw, key, SLUG)).status).toBe(200);
    const started = performance.now();
    expectRefused(await post(gw, key, SLUG), 'REQUESTS_PER_KEY');
    // Held between half the hold and one and a half holds.
    expect(performance.now() - started).toBeGreaterThanOrEqual(195);
    // A client that gives up while its answer is held: nothing breaks, the next one is answered.
    const gaveUp = fetch(gw.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ query: SLUG }),
      signal: AbortSignal.timeout(50),
    });
    await expect(gaveUp).rejects.toThrow();
    expectRefused(await post(gw, key, SLUG), 'REQUESTS_PER_KEY');
    expect((await post(gw, await newKey('not held'), SLUG)).status).toBe(200);
  });

  it('holds a request to /graphql/ (a trailing slash, which yoga serves too) to the same places as one to /graphql', async () => {
    const gw = await gateway({ bounds: { requestsPerSecond: 1_000_000, requestBurst: 1, requestsInFlightPerKey: 1 } });
    const key = await newKey('slash');
    expect((await post(gw, key, SLUG)).status).toBe(200); // now a key seen lately
    const slow = await holdPlace(gw, key);
    let done = false;
    const slashed = fetch(`${gw.url}/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ query: SLUG }),
    }).finally(() => (done = true));
    await new Promise((r) => setTimeout(r, 100));
    expect(done).toBe(false);
    expect(await slow.finish()).toBe(200);
    expect((await slashed).status).toBe(200);
  });

  it("runs a key's requests a few at a time: the next waits its turn, past the waiting bound it is refused, another key is not held up", async () => {
    // One place and one waiter (the burst bounds the waiting); a token comes back every microsecond,
    // so the waiter, let in the moment the slow request ends, is never refused by the rate instead.
    const gw = await gateway({ bounds: { requestsPerSecond: 1_000_000, requestBurst: 1, requestsInFlightPerKey: 1 } });
    const key = await newKey('in flight');
    expect((await post(gw, key, SLUG)).status).toBe(200); // now a key seen lately
    // A request whose body is still coming holds the key's one place.
    const slow = await holdPlace(gw, key);
    let waitingDone = false;
    const waiting = post(gw, key, SLUG).finally(() => (waitingDone = true));
    await new Promise((r) => setTimeout(r, 50));
    expect(waitingDone).toBe(false);
    expectRefused(await post(gw, key, SLUG), 'REQUESTS_IN_FLIGHT_PER_KEY');
    expect((await post(gw, await newKey('not held up'), SLUG)).status).toBe(200);
    expect(await slow.finish()).toBe(200);
    expect((await waiting).status).toBe(200);
    await until(() => gw.bounds.stats().keysWithRequests === 0);
    // A waiting client that gives up frees its turn.
    const again = await holdPlace(gw, key);
    const gaveUp = fetch(gw.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ query: SLUG }),
      signal: AbortSignal.timeout(100),
    });
    await expect(gaveUp).rejects.toThrow();
    again.abandon();
    await until(() => gw.bounds.stats().keysWithRequests === 0);
    expect((await post(gw, key, SLUG)).status).toBe(200);
  });

  it('runs the requests of keys not authenticated lately a few at a time per address: the next waits, past the waiting bound it is refused unread, a key seen lately is not held up', async () => {
    const gw = await gateway({ bounds: { requestsPerSecond: 1_000_000, requestBurst: 1, requestsInFlightPerKey: 1 } });
    const seen = await newKey('seen lately');
    expect((await post(gw, seen, SLUG)).status).toBe(200);
    const fresh = await newKey('never used');
    // A new key's first request, its body still coming, holds the address's one place.
    const body = JSON.stringify({ query: SLUG });
    const slow = http.request(gw.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), authorization: `Bearer ${fresh}` },
    });
    const slowAnswer = new Promise<number>((resolve, reject) => {
      slow.on('response', (res) => (res.resume(), res.on('end', () => resolve(res.statusCode!))));
      slow.on('error', reject);
    });
    slow.write(body.slice(0, 5));
    await until(() => gw.bounds.stats().addressesWithRequests === 1);
    // A made-up key from the same address waits its turn; the next new key's request is refused
    // before it is read or looked up.
    let waitingDone = false;
    const waiting = post(gw, BAD_KEY(900), SLUG).finally(() => (waitingDone = true));
    await new Promise((r) => setTimeout(r, 50));
    expect(waitingDone).toBe(false);
    const before = lookups;
    expectRefused(await post(gw, fresh, SLUG), 'NEW_KEY_REQUESTS_IN_FLIGHT_PER_ADDRESS');
    expect(lookups).toBe(before);
    expect((await post(gw, seen, SLUG)).status).toBe(200);
    slow.end(body.slice(5));
    expect(await slowAnswer).toBe(200);
    expect((await waiting).status).toBe(401);
    await until(() => gw.bounds.stats().addressesWithRequests === 0);
    // Authenticated now, the new key takes places of its own.
    expect((await post(gw, fresh, SLUG)).status).toBe(200);
    expect(gw.bounds.stats()).toMatchObject({ addressesWithRequests: 0, keysWithRequests: 0 });
  });

  it('serves one key 150 requests in a row with the defaults (50 a second, bursts of 200)', async () => {
    const gw = await gateway({});
    expect(gw.bounds.settings).toMatchObject({ requestsPerSecond: 50, requestBurst: 200 });
    const key = await newKey('defaults');
    for (let i = 0; i < 150; i++) expect((await post(gw, key, SLUG)).status).toBe(200);
  });
});

describe('failed authentications per address', () => {
  it('are throttled before the key is looked up, with 429 and Retry-After, while a key that authenticated lately still gets through', async () => {
    const gw = await gateway({ bounds: { failedAuthPerMinute: 3 } });
    const good = await newKey('good before the flood');
    expect((await post(gw, good, SLUG)).status).toBe(200);
    // Requests naming no key cost no lookup and are not counted.
    for (let i = 0; i < 5; i++) expect((await post(gw, undefined, SLUG)).status).toBe(401);
    for (let i = 0; i < 3; i++) expect((await post(gw, BAD_KEY(i), SLUG)).status).toBe(401);
    lookups = 0;
    const refused = await post(gw, BAD_KEY(99), SLUG);
    expectRefused(refused, 'FAILED_AUTHENTICATIONS_PER_ADDRESS');
    // Refused before the request is read: an unreadable body gets the same answer.
    const unread = await fetch(gw.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${BAD_KEY(98)}` },
      body: '{',
    });
    expect(unread.status).toBe(429);
    expect(((await unread.json()) as Answer['body']).errors?.[0]?.extensions).toMatchObject({
      code: 'RATE_LIMITED',
      limit: 'FAILED_AUTHENTICATIONS_PER_ADDRESS',
    });
    expect(lookups).toBe(0);
    expect(refused.body.errors![0]!.extensions!.retryAfterMs).toBeLessThanOrEqual(20_000);
    // The key this address used before the flood still works; a key it never used waits.
    expect((await post(gw, good, SLUG)).status).toBe(200);
    expectRefused(await post(gw, await newKey('never seen here'), SLUG), 'FAILED_AUTHENTICATIONS_PER_ADDRESS');
    // X-Forwarded-For is not believed from a peer that is not a trusted proxy.
    expectRefused(await post(gw, BAD_KEY(100), SLUG, { 'x-forwarded-for': '203.0.113.50' }), 'FAILED_AUTHENTICATIONS_PER_ADDRESS');
  });

  it('are counted against the client a trusted proxy names in X-Forwarded-For, not against the proxy', async () => {
    const gw = await gateway({ bounds: { failedAuthPerMinute: 2 }, trustedProxies: ['127.0.0.0/8'] });
    const from = (client: string) => ({ 'x-forwarded-for': `${client}, 127.0.0.2` });
    for (let i = 0; i < 2; i++) expect((await post(gw, BAD_KEY(i), SLUG, from('203.0.113.7'))).status).toBe(401);
    expectRefused(await post(gw, BAD_KEY(3), SLUG, from('203.0.113.7')), 'FAILED_AUTHENTICATIONS_PER_ADDRESS');
    expect((await post(gw, BAD_KEY(4), SLUG, from('203.0.113.8'))).status).toBe(401);
    expect((await post(gw, await newKey('behind the proxy'), SLUG, from('203.0.113.8'))).status).toBe(200);
  });
});
