/**
 * A gateway closing (a process stopping) with a subscription streaming over SSE: the stream's
 * connection is closed at once, as WebSocket ones are, not left to the fallback that cuts every
 * connection still open after 5 s (a newcomer's Ctrl-C with the README's `curl -N` open hung so).
 * And a subscription asked for as a stream the gateway does not serve.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/engine.js';
import { startLiveGateway, type LiveGateway } from '../support/live.js';

let t: TestDb;
let live: LiveGateway;
let key: string;

beforeAll(async () => {
  t = await createTestDb();
  live = await startLiveGateway(t);
  key = (await t.service.bootstrapKey('default', 'ADMIN', 'admin')).key;
});
afterAll(async () => {
  await live.close();
  await t.close();
});

describe('subscriptions over HTTP', () => {
  it("answers a subscription asked for as multipart (Apollo's HttpLink) with 406 and a JSON error saying what is served", async () => {
    const res = await fetch(live.httpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'multipart/mixed;boundary="graphql";subscriptionSpec="1.0",application/json',
        authorization: `Bearer ${key}`,
      },
      body: JSON.stringify({ query: 'subscription { executionUpdates { status } }' }),
    });
    expect(res.status).toBe(406);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const answer = (await res.json()) as { errors?: { message: string; extensions?: { code?: string } }[] };
    expect(answer.errors?.[0]?.extensions?.code).toBe('BAD_REQUEST');
    expect(answer.errors?.[0]?.message).toMatch(/text\/event-stream.*graphql-ws/);
  });
});

describe('closing the gateway', () => {
  it('ends a subscription streaming over SSE at once, without waiting for the fallback that cuts every connection', async () => {
    const state = { status: 0, text: '', ended: false };
    void (async () => {
      const res = await fetch(live.httpUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${key}` },
        body: JSON.stringify({ query: 'subscription { executionUpdates { executionId status } }' }),
      });
      state.status = res.status;
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) state.text += Buffer.from(chunk).toString();
    })()
      .catch(() => {})
      .finally(() => (state.ended = true));
    await eventually(() => state.status === 200, { what: 'the stream to open' });
    // Keep it streaming: an event reaches it before the close.
    await t.service.registerEndpoint(t.actor, { name: 'sse.close', kind: 'HANDLER', handlerName: 'noop' });
    await t.service.createJob(t.actor, { endpointName: 'sse.close', kind: 'IMMEDIATE' });
    await eventually(() => state.text.includes('PENDING'), { what: 'an event on the stream' });

    const server = live.gw.server;
    let cutEverything = false;
    const closeAll = server.closeAllConnections.bind(server);
    server.closeAllConnections = () => {
      cutEverything = true;
      closeAll();
    };
    await live.gw.close();
    expect(cutEverything, 'the close waited for the fallback').toBe(false);
    await eventually(() => state.ended, { what: 'the stream to end' });
  });
});
