/**
 * The bounds on live load, through a real gateway with small bounds, real graphql-ws clients over
 * real sockets and real SSE streams: subscriptions per connection and per key, connections
 * (WebSockets and SSE streams) per key, a key's operations per second, failed authentications at
 * connection_init, and places given back when streams end, a revoked key's included.
 */
import { createClient, type Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/eventually.js';
import { collect, startLiveGateway, type Collected, type LiveGateway } from '../support/live.js';

let t: TestDb;
let live: LiveGateway;
let adminKey: string;
const clients: Client[] = [];

const JOBS = 'subscription { jobEvents { cursor jobId status } }';

beforeAll(async () => {
  t = await createTestDb();
  live = await startLiveGateway(t, {
    gateway: { bounds: { connectionsPerKey: 2, subscriptionsPerKey: 3, subscriptionsPerConnection: 2 } },
    live: { keyRecheckMs: 3_600_000 },
  });
  adminKey = (await t.service.bootstrapKey('default', 'ADMIN', 'bounds admin')).key;
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.dispose()));
  await live.close();
  await t.close();
});

async function newKey() {
  const admin = await t.service.authenticate(adminKey);
  return t.service.createApiKey(admin, { name: `bounds ${Math.random()}`, role: 'VIEWER' });
}

/** A connected graphql-ws client (connection_init acknowledged), or the code its socket was closed with. */
function connect(url: string, key: string): Promise<{ client: Client; closed: Promise<number> } | { refused: number }> {
  return new Promise((resolve) => {
    let closedWith: (code: number) => void;
    const closed = new Promise<number>((r) => (closedWith = r));
    const client = createClient({
      url,
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      lazy: false,
      connectionParams: { authorization: `Bearer ${key}` },
      onNonLazyError: () => {},
      on: {
        connected: () => resolve({ client, closed }),
        closed: (e) => {
          const code = (e as { code: number }).code;
          closedWith(code);
          resolve({ refused: code });
        },
      },
    });
    clients.push(client);
  });
}

async function connected(key: string, url = live.wsUrl) {
  const c = await connect(url, key);
  if ('refused' in c) throw new Error(`connection refused with ${c.refused}`);
  return c;
}

/** The first error a subscription got, flattened from graphql-ws's error array. */
const firstError = async (s: Collected<unknown>) =>
  eventually(() => (s.errors.flat() as { extensions?: Record<string, unknown> }[])[0], { what: 'the refusal' });

const streams = () => live.hub.stats().events;

function expectRefusal(error: { extensions?: Record<string, unknown> }, limit: string) {
  expect(error.extensions).toMatchObject({ code: 'RATE_LIMITED', limit });
  expect(error.extensions!.retryAfterMs).toBeGreaterThan(0);
}

/** An SSE stream of `query` with `key`: its status, and the frames it got. */
function eventStream(key: string, query: string) {
  const state = { status: 0, text: '', ended: false };
  const controller = new AbortController();
  void (async () => {
    const res = await fetch(live.httpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${key}` },
      body: JSON.stringify({ query }),
      signal: controller.signal,
    });
    state.status = res.status;
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) state.text += Buffer.from(chunk).toString();
    state.ended = true;
  })().catch(() => {});
  return { state, close: () => controller.abort() };
}

describe('live bounds', () => {
  it("refuse a subscription past its connection's bound with RATE_LIMITED, and take one again once another completes", async () => {
    const { key } = await newKey();
    const { client } = await connected(key);
    const before = streams();
    const first = collect(client, JOBS);
    collect(client, JOBS);
    await eventually(() => streams() === before + 2, { what: 'two live subscriptions' });
    expectRefusal(await firstError(collect(client, JOBS)), 'SUBSCRIPTIONS_PER_CONNECTION');
    first.stop();
    await eventually(() => streams() === before + 1, { what: 'the first subscription to end' });
    const again = collect(client, JOBS);
    await eventually(() => streams() === before + 2, { what: 'a subscription in the freed place' });
    expect(again.errors).toEqual([]);
  });

  it("refuse a subscription past the key's bound across its connections, and not another key's", async () => {
    const { key } = await newKey();
    const [a, b] = [(await connected(key)).client, (await connected(key)).client];
    const before = streams();
    collect(a, JOBS);
    collect(a, JOBS);
    collect(b, JOBS);
    await eventually(() => streams() === before + 3, { what: 'three live subscriptions' });
    expectRefusal(await firstError(collect(b, JOBS)), 'SUBSCRIPTIONS_PER_KEY');
    const other = collect((await connected((await newKey()).key)).client, JOBS);
    await eventually(() => streams() === before + 4, { what: "another key's subscription" });
    expect(other.errors).toEqual([]);
  });

  it("close a connection past the key's bound with 4429, count SSE streams as connections, and admit another key", async () => {
    const { key } = await newKey();
    const first = await connected(key);
    const second = await connected(key);
    expect(await connect(live.wsUrl, key)).toEqual({ refused: 4429 });
    const sse = eventStream(key, JOBS);
    await eventually(() => sse.state.ended, { what: 'the SSE stream to be refused' });
    expect(sse.state.status).toBe(429);
    expect(sse.state.text).toContain('RATE_LIMITED');
    expect(sse.state.text).toContain('CONNECTIONS_PER_KEY');
    await connected((await newKey()).key);
    await second.client.dispose();
    await second.closed;
    await eventually(async () => 'client' in (await connect(live.wsUrl, key)), { what: 'a connection in the freed place' });
    expect(first.client).toBeDefined();
  });

  it('give every place back when a key is revoked: its sockets and streams end, and its counts go to zero', async () => {
    const { key, apiKey } = await newKey();
    const held = () => live.gw.bounds.stats();
    const base = held();
    const c = await connected(key);
    const before = streams();
    collect(c.client, JOBS);
    const sse = eventStream(key, JOBS);
    await eventually(() => streams() === before + 2, { what: 'a WebSocket and an SSE subscription' });
    expect(held()).toMatchObject({ connections: base.connections + 2, subscriptions: base.subscriptions + 2 });
    const admin = await t.service.authenticate(adminKey);
    await t.service.revokeApiKey(admin, apiKey.id);
    await c.closed;
    await eventually(() => sse.state.ended, { what: 'the SSE stream to end' });
    await eventually(() => held().connections === base.connections && held().subscriptions === base.subscriptions, {
      what: 'the places to be given back',
    });
  });
});

describe('live bounds on requests and authentication', () => {
  let strict: LiveGateway;
  beforeAll(async () => {
    strict = await startLiveGateway(t, { gateway: { bounds: { requestsPerSecond: 0.5, requestBurst: 2, failedAuthPerMinute: 2 } } });
  });
  afterAll(() => strict.close());

  it("refuse a key's operations past its rate with RATE_LIMITED on the open socket, and serve another key", async () => {
    const { key } = await newKey();
    const { client } = await connected(key, strict.wsUrl);
    const results: Collected<unknown>[] = [];
    while (results.length < 20 && results.every((r) => r.errors.length === 0)) {
      const r = collect(client, '{ workspace { slug } }');
      await eventually(() => r.completed || r.errors.length > 0, { what: 'the operation to end' });
      results.push(r);
    }
    expect(results.length).toBeGreaterThan(2);
    expectRefusal(await firstError(results.at(-1)!), 'REQUESTS_PER_KEY');
    const other = collect((await connected((await newKey()).key, strict.wsUrl)).client, '{ workspace { slug } }');
    await eventually(() => other.completed, { what: "another key's operation" });
    expect(other.items).toEqual([{ slug: 'default' }]);
  });

  it('close connections past the failed authentications of their address with 4429 instead of 4403', async () => {
    const bad = (i: number) => `jg_unknownunknownunknown${String(i).padStart(6, '0')}`;
    expect(await connect(strict.wsUrl, bad(1))).toEqual({ refused: 4403 });
    expect(await connect(strict.wsUrl, bad(2))).toEqual({ refused: 4403 });
    expect(await connect(strict.wsUrl, bad(3))).toEqual({ refused: 4429 });
  });
});
