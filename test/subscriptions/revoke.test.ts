/**
 * A revoked key stops everything it had open at once, live streams included (Invariant 10):
 * graphql-ws sockets close with 4403, SSE streams end with an UNAUTHENTICATED error, on every
 * gateway replica (the revocation's NOTIFY reaches each one), and a key that lapses without a
 * notification (a missed NOTIFY, a role changed in the database) is caught by the periodic
 * re-check. Real gateways, real graphql-ws clients, real Postgres.
 */
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createJobService } from '../../src/service/index.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/engine.js';
import { startLiveGateway, type LiveGateway } from '../support/live.js';

let t: TestDb;
let a: LiveGateway;
let b: LiveGateway;
let adminKey: string;
let endpointId: string;

const JOBS = `subscription { jobEvents { cursor jobId status } }`;

beforeAll(async () => {
  t = await createTestDb();
  // The periodic re-check is set far off: what ends these streams must be the revocation's NOTIFY.
  a = await startLiveGateway(t, { live: { keyRecheckMs: 3_600_000 } });
  b = await startLiveGateway(t, { live: { keyRecheckMs: 3_600_000 } });
  adminKey = (await t.service.bootstrapKey('default', 'ADMIN', 'admin')).key;
  endpointId = (await t.service.registerEndpoint(t.actor, { name: 'revoke.target', kind: 'HANDLER', handlerName: 'noop' })).id;
});
afterAll(async () => {
  await a.close();
  await b.close();
  await t.close();
});

async function newKey(role: 'ADMIN' | 'OPERATOR' | 'VIEWER' = 'VIEWER') {
  const admin = await t.service.authenticate(adminKey);
  return t.service.createApiKey(admin, { name: `streamer ${Math.random()}`, role });
}

async function revokeOverHttp(gateway: LiveGateway, id: string) {
  const res = await fetch(gateway.httpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${adminKey}` },
    body: JSON.stringify({ query: 'mutation ($id: ID!) { revokeApiKey(id: $id) { revokedAt } }', variables: { id } }),
  });
  const body = (await res.json()) as { data?: { revokeApiKey: { revokedAt: string } } };
  expect(body.data?.revokeApiKey.revokedAt).toEqual(expect.any(String));
}

const createJob = async () =>
  (await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt: new Date('2999-01-01T00:00:00Z') })).job.id;

/** A graphql-ws subscription, with how its socket closed. */
function wsSubscription(gateway: LiveGateway, key: string) {
  const state = {
    items: [] as any[],
    errors: [] as any[],
    closed: undefined as { code: number; reason: string } | undefined,
    completed: false,
  };
  const client = createClient({
    url: gateway.wsUrl,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    connectionParams: { authorization: `Bearer ${key}` },
    on: { closed: (event) => (state.closed = { code: (event as CloseEvent).code, reason: (event as CloseEvent).reason }) },
  });
  client.subscribe<{ jobEvents: unknown }>(
    { query: JOBS },
    {
      next: (m) => (m.data ? state.items.push(m.data.jobEvents) : state.errors.push(...(m.errors ?? []))),
      error: (e) => state.errors.push(e),
      complete: () => (state.completed = true),
    },
  );
  return { state, dispose: () => client.dispose() };
}

/** An SSE subscription: every frame as `event` and parsed `data`, and whether the stream ended. */
function sseSubscription(gateway: LiveGateway, key: string) {
  const state = { frames: [] as { event: string; data: any }[], ended: false };
  const controller = new AbortController();
  void (async () => {
    const response = await fetch(gateway.httpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${key}` },
      body: JSON.stringify({ query: JOBS }),
      signal: controller.signal,
    });
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      for (let i = buffer.indexOf('\n\n'); i >= 0; i = buffer.indexOf('\n\n')) {
        const frame = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        const event = /^event: (.*)$/m.exec(frame)?.[1];
        const data = /^data: (.*)$/m.exec(frame)?.[1];
        if (event) state.frames.push({ event, data: data ? JSON.parse(data) : undefined });
      }
    }
    state.ended = true;
  })().catch(() => {});
  return { state, abort: () => controller.abort() };
}

const liveStreams = (gateway: LiveGateway) => gateway.hub.stats().events;

describe('revoking a key', () => {
  it('closes its graphql-ws subscriptions with 4403 at once, on this gateway and on another replica', async () => {
    const { key, apiKey } = await newKey();
    const before = [liveStreams(a), liveStreams(b)];
    const onA = wsSubscription(a, key);
    const onB = wsSubscription(b, key);
    await eventually(
      async () => liveStreams(a) === before[0]! + 1 && liveStreams(b) === before[1]! + 1,
      10_000,
      'both subscriptions to go live',
    );
    const first = await createJob();
    await eventually(
      async () => onA.state.items.some((x) => x.jobId === first) && onB.state.items.some((x) => x.jobId === first),
      10_000,
      'both to deliver',
    );

    await revokeOverHttp(a, apiKey.id);
    await eventually(async () => onA.state.closed !== undefined && onB.state.closed !== undefined, 10_000, 'both sockets to close');
    for (const { state } of [onA, onB]) {
      expect(state.closed!.code).toBe(4403);
      expect(state.closed!.reason).toMatch(/revoked/i);
    }
    const after = await createJob();
    await eventually(async () => liveStreams(a) === before[0] && liveStreams(b) === before[1], 10_000, 'the hubs to let the streams go');
    expect([...onA.state.items, ...onB.state.items].some((x) => x.jobId === after)).toBe(false);
    await onA.dispose();
    await onB.dispose();
  });

  it('ends its Server-Sent Events streams with an UNAUTHENTICATED error, on every replica', async () => {
    const { key, apiKey } = await newKey();
    const before = [liveStreams(a), liveStreams(b)];
    const onA = sseSubscription(a, key);
    const onB = sseSubscription(b, key);
    await eventually(async () => liveStreams(a) === before[0]! + 1 && liveStreams(b) === before[1]! + 1, 10_000, 'both streams to go live');
    const first = await createJob();
    const delivered = (s: typeof onA, id: string) =>
      s.state.frames.some((f) => f.event === 'next' && f.data?.data?.jobEvents?.jobId === id);
    await eventually(async () => delivered(onA, first) && delivered(onB, first), 10_000, 'both to deliver');

    await revokeOverHttp(b, apiKey.id);
    await eventually(async () => onA.state.ended && onB.state.ended, 10_000, 'both streams to end');
    for (const s of [onA, onB]) {
      const codes = s.state.frames.flatMap((f) =>
        (f.data?.errors ?? []).map((e: { extensions?: { code?: string } }) => e.extensions?.code),
      );
      expect(codes).toContain('UNAUTHENTICATED');
    }
    const after = await createJob();
    await eventually(async () => liveStreams(a) === before[0] && liveStreams(b) === before[1], 10_000, 'the hubs to let the streams go');
    expect(delivered(onA, after) || delivered(onB, after)).toBe(false);
  });

  it('leaves the streams of other keys open', async () => {
    const { key: kept } = await newKey();
    const { key: doomed, apiKey } = await newKey();
    const before = liveStreams(a);
    const keep = wsSubscription(a, kept);
    const lose = wsSubscription(a, doomed);
    await eventually(async () => liveStreams(a) === before + 2, 10_000, 'both subscriptions to go live');
    await revokeOverHttp(a, apiKey.id);
    await eventually(async () => lose.state.closed !== undefined, 10_000, 'the revoked key to be cut');
    const job = await createJob();
    await eventually(async () => keep.state.items.some((x) => x.jobId === job), 10_000, 'the other key to go on receiving');
    expect(keep.state.closed).toBeUndefined();
    await keep.dispose();
    await lose.dispose();
  });

  it('is refused at once by a replica that remembered the key, when its notification arrives', async () => {
    // The replica remembers an authenticated key for an hour: only the revocation's notification
    // can make it forget the key before the test gives up.
    const replicaService = createJobService({ db: t.db, defaultMaxAttempts: 5, keyCacheMs: 3_600_000 });
    const replica = await startLiveGateway(t, { service: replicaService });
    try {
      const { key, apiKey } = await newKey();
      const viewer = async () => {
        const res = await fetch(replica.httpUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
          body: JSON.stringify({ query: '{ viewer { role } }' }),
        });
        return (await res.json()) as { data?: { viewer: { role: string } }; errors?: { extensions?: { code?: string } }[] };
      };
      expect((await viewer()).data?.viewer.role).toBe('VIEWER');
      await revokeOverHttp(a, apiKey.id);
      await eventually(
        async () => (await viewer()).errors?.[0]?.extensions?.code === 'UNAUTHENTICATED',
        10_000,
        'the replica to refuse the key',
      );
    } finally {
      await replica.close();
    }
  });
});

describe('the periodic re-check', () => {
  let c: LiveGateway;
  beforeAll(async () => {
    c = await startLiveGateway(t, { live: { keyRecheckMs: 200 } });
  });
  afterAll(() => c.close());

  it('ends the streams of a key revoked without a notification (a NOTIFY missed)', async () => {
    const { key, apiKey } = await newKey();
    const before = liveStreams(c);
    const ws = wsSubscription(c, key);
    const sse = sseSubscription(c, key);
    await eventually(async () => liveStreams(c) === before + 2, 10_000, 'both to go live');
    await t.query('update api_keys set revoked_at = now() where id = $1', [apiKey.id]);
    await eventually(async () => ws.state.closed !== undefined && sse.state.ended, 10_000, 'the re-check to end both');
    expect(ws.state.closed!.code).toBe(4403);
    await ws.dispose();
  });

  it('ends the streams of a key whose role was lowered', async () => {
    const { key, apiKey } = await newKey('OPERATOR');
    const before = liveStreams(c);
    const ws = wsSubscription(c, key);
    await eventually(async () => liveStreams(c) === before + 1, 10_000, 'the subscription to go live');
    await t.query(`update api_keys set role = 'VIEWER' where id = $1`, [apiKey.id]);
    await eventually(async () => ws.state.closed !== undefined, 10_000, 'the re-check to end it');
    expect(ws.state.closed!.code).toBe(4403);
    await ws.dispose();
  });
});
