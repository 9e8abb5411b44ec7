/**
 * The graphql-transport-ws protocol spoken by hand over a raw WebSocket, so every close code a
 * misbehaving client can provoke is checked: 4401, 4403, 4408, 4409, 4429, 4400, and the
 * cut-off (1008) of a subscriber that stops reading.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { cursorsOf } from '../support/cursors.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/eventually.js';
import { startLiveGateway, type LiveGateway } from '../support/live.js';

let t: TestDb;
let live: LiveGateway;
let key: string;

beforeAll(async () => {
  t = await createTestDb();
  // Pings far apart: a subscriber that stops reading answers no ping either, and graphql-ws would
  // drop it after one keep-alive period (12 s) without a word; the slow-consumer cut-off under
  // test must not race that, which on a loaded machine (a burst delivered slowly) it lost.
  live = await startLiveGateway(t, {
    gateway: { connectionInitWaitMs: 300, keepAliveMs: 600_000 },
    hub: { feedLimit: 500, stallMs: 1000 },
  });
  key = (await t.service.bootstrapKey('default', 'VIEWER', 'protocol viewer')).key;
});
afterAll(async () => {
  await live.close();
  await t.close();
});

interface Raw {
  socket: WebSocket;
  messages: any[];
  closed: Promise<{ code: number; reason: string }>;
  send(message: unknown): void;
  next(type: string): Promise<any>;
}

async function open(): Promise<Raw> {
  const socket = new WebSocket(live.wsUrl, 'graphql-transport-ws');
  const messages: any[] = [];
  const closed = new Promise<{ code: number; reason: string }>((r) =>
    socket.on('close', (code, reason) => r({ code, reason: reason.toString() })),
  );
  socket.on('message', (data) => messages.push(JSON.parse(data.toString())));
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  return {
    socket,
    messages,
    closed,
    send: (m) => socket.send(typeof m === 'string' ? m : JSON.stringify(m)),
    next: (type) =>
      eventually(() => messages.find((m) => m.type === type), { timeout: 5000, interval: 10 }).catch(() => {
        throw new Error(`no ${type} message; got ${JSON.stringify(messages)}`);
      }),
  };
}

const init = (k = key) => ({ type: 'connection_init', payload: { authorization: `Bearer ${k}` } });
const subscribe = (id: string, query = 'subscription { jobEvents { cursor } }') => ({ type: 'subscribe', id, payload: { query } });

describe('graphql-transport-ws close codes', () => {
  it('4401 when a subscribe comes before connection_init is acknowledged', async () => {
    const c = await open();
    c.send(subscribe('1'));
    expect((await c.closed).code).toBe(4401);
  });

  it('4403 when connection_init carries a key that is not valid', async () => {
    const c = await open();
    c.send(init('jg_not_a_key'));
    expect(await c.closed).toEqual({
      code: 4403,
      reason: 'Forbidden: send a valid API key in connectionParams, as authorization: "Bearer <key>"',
    });
    const none = await open();
    none.send({ type: 'connection_init' });
    expect((await none.closed).reason).toMatch(/^Forbidden: send a valid API key/);
  });

  it('4408 when connection_init does not arrive in time', async () => {
    const c = await open();
    expect((await c.closed).code).toBe(4408);
  });

  it('4429 on a second connection_init', async () => {
    const c = await open();
    c.send(init());
    await c.next('connection_ack');
    c.send(init());
    expect((await c.closed).code).toBe(4429);
  });

  it('4409 when a subscription id is reused while the first is live', async () => {
    const c = await open();
    c.send(init());
    await c.next('connection_ack');
    await eventually(() => live.hub.stats().events === 0, { what: "the earlier tests' subscriptions to end" });
    c.send(subscribe('same'));
    await eventually(() => live.hub.stats().events === 1, { what: 'the first subscription to be live' });
    c.send(subscribe('same'));
    expect((await c.closed).code).toBe(4409);
  });

  it('gives a subscription id reused right after its complete a stream of its own, not the end of the first', async () => {
    // A workspace of its own, so its events are no one else's.
    const own = (await t.service.bootstrapKey('other', 'ADMIN', 'reuse admin')).key;
    const actor = await t.service.authenticate(own);
    const endpoint = await t.service.registerEndpoint(actor, { name: 'protocol.reuse', kind: 'HANDLER', handlerName: 'nobody' });
    const c = await open();
    c.send(init(own));
    await c.next('connection_ack');
    await eventually(() => live.hub.stats().events === 0, { what: "the earlier tests' subscriptions to end" });
    c.send(subscribe('again'));
    await eventually(() => live.hub.stats().events === 1, { what: 'the first subscription to be live' });
    const opened = vi.spyOn(live.hub, 'events');
    // Back to back, as the protocol allows once the first is complete.
    c.send({ type: 'complete', id: 'again' });
    c.send(subscribe('again'));
    // The job below must come after the second subscription is live (it starts from now on):
    // the second opened on the hub, the first gone, and the only one open receiving live.
    await eventually(
      () => {
        const { events, open } = live.hub.stats();
        return opened.mock.calls.length === 1 && open === 1 && events === 1;
      },
      { what: 'the second subscription, alone, to be live' },
    );
    opened.mockRestore();
    const { job } = await t.service.createJob(actor, { endpointId: endpoint.id, kind: 'DELAYED', runAt: new Date('2999-01-01T00:00:00Z') });
    await eventually(() => c.messages.some((m) => m.type === 'next'), { timeout: 5000, what: 'the job event' });
    expect(c.messages.filter((m) => m.id === 'again').map((m) => m.type)).toEqual(['next']);
    const events = (await t.query(`select id, workspace_id from events where topic = 'JOB' and subject_id = $1`, [job.id])).rows;
    const cursors = await cursorsOf(t, events[0].workspace_id);
    expect(c.messages.find((m) => m.type === 'next').payload.data.jobEvents.cursor).toBe(cursors.seal('event', events[0].id));
    c.socket.close();
  });

  it('4400 on a message that is not one of the protocol', async () => {
    const c = await open();
    c.send(init());
    await c.next('connection_ack');
    c.send({ type: 'no-such-type' });
    expect((await c.closed).code).toBe(4400);
  });

  it('closes with 1009 a message larger than the payload limit, before parsing it', async () => {
    const c = await open();
    c.send(init());
    await c.next('connection_ack');
    c.send(subscribe('big', `subscription { jobEvents(after: "0") { cursor } } # ${'x'.repeat(1_100_000)}`));
    expect((await c.closed).code).toBe(1009);
  });

  it('holds one listening connection for the whole gateway, however many subscriptions are open', async () => {
    const sockets: Raw[] = [];
    for (let i = 0; i < 20; i++) {
      const c = await open();
      c.send(init());
      await c.next('connection_ack');
      c.send(subscribe(`n${i}`));
      sockets.push(c);
    }
    await eventually(() => live.hub.stats().events >= 20, { what: 'twenty live subscriptions' });
    expect(live.hub.stats().events).toBe(20);
    const { rows } = await t.query(
      `select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = 'jobgate-live'`,
    );
    expect(rows[0].n).toBe(1);
    for (const c of sockets) c.socket.close();
  });

  // 20,000 events through the hub and two sockets: seconds on an idle machine, far longer on a
  // loaded one. Each wait allows a minute; the test, both.
  it(
    'cuts off a subscriber that stops reading, while one that keeps reading gets a burst larger than its queue in full, in order',
    { timeout: 180_000 },
    async () => {
      const endpoint = await t.service.registerEndpoint(t.actor, { name: 'protocol.target', kind: 'HANDLER', handlerName: 'nobody' });
      const stuck = await open();
      const healthy = await open();
      await eventually(() => live.hub.stats().events === 0, { what: "the earlier tests' subscriptions to end" });
      for (const c of [stuck, healthy]) {
        c.send(init());
        await c.next('connection_ack');
        c.send(
          subscribe(
            's',
            'subscription { executionUpdates(after: "0") { cursor executionId jobId endpointId status previousStatus attemptCount occurredAt } }',
          ),
        );
      }
      await eventually(() => live.hub.stats().events === 2, { what: 'both subscriptions past their replay' });
      // Stop reading: the client's socket buffers fill, then the server's.
      (stuck.socket as unknown as { _socket: import('node:net').Socket })._socket.pause();
      // Many events at once: 20,000 executions created in one statement.
      const { job } = await t.service.createJob(t.actor, {
        endpointId: endpoint.id,
        kind: 'DELAYED',
        runAt: new Date('2999-01-01T00:00:00Z'),
      });
      await t.query(
        `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, max_attempts, run_after)
       select workspace_id, id, endpoint_id, now() + make_interval(secs => g), 1, now() + interval '1000 years' from jobs, generate_series(1, 20000) g where id = $1`,
        [job.id],
      );
      await eventually(() => live.logs.some((l) => l.includes('stopped reading')), {
        timeout: 60_000,
        interval: 50,
        what: 'the stuck subscriber to be cut off',
      });
      // Once it reads again it finds its connection gone (closed, or reset before the close frame).
      (stuck.socket as unknown as { _socket: import('node:net').Socket })._socket.resume();
      const closed = await stuck.closed;
      expect([1008, 1006]).toContain(closed.code);
      await eventually(() => healthy.messages.filter((m) => m.type === 'next').length >= 20_001, {
        timeout: 60_000,
        interval: 50,
        what: 'the healthy subscriber to receive every event',
      });
      // The healthy one fell behind the burst too, caught up from the database, and got every
      // event once, in order.
      const sealed = await cursorsOf(t, t.actor.workspaceId);
      const cursors = healthy.messages
        .filter((m) => m.type === 'next')
        .map((m) => sealed.open('event', m.payload.data.executionUpdates.cursor));
      const expected = (
        await t.query(`select id from events where topic = 'EXECUTION' and workspace_id = $1 order by id`, [t.actor.workspaceId])
      ).rows.map((r) => BigInt(r.id));
      expect(cursors).toEqual(expected);
      expect(cursors.length).toBe(20_001);
      healthy.socket.close();
    },
  );
});
