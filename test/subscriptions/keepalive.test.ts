/**
 * The gateway's WebSocket keepalive (JOBGATE_WS_KEEPALIVE_MS): every connection is pinged at that
 * interval; one that answers stays open, one that has not answered by the next ping is closed.
 * Raw `ws` clients speaking graphql-transport-ws, so the test decides whether pongs are sent.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { parseConfig } from '../../src/environment.js';
import type { RunningGateway } from '../../src/server/gateway.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { listeningGateway } from '../support/graphql.js';

let t: TestDb;
let gw: RunningGateway;
let key: string;
const KEEPALIVE_MS = 300;

beforeAll(async () => {
  t = await createTestDb();
  key = (await t.service.bootstrapKey('default', 'VIEWER', 'keepalive test')).key;
  gw = await listeningGateway(t, { keepAliveMs: KEEPALIVE_MS });
});
afterAll(async () => {
  await gw?.close();
  await t?.close();
});

/** A graphql-transport-ws connection, acknowledged; `autoPong` false: it never answers a ping. */
async function connect(autoPong: boolean) {
  const socket = new WebSocket(gw.url.replace(/^http/, 'ws'), 'graphql-transport-ws', { autoPong });
  const pings: number[] = [];
  socket.on('ping', () => pings.push(Date.now()));
  const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.once('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${key}` } })));
    socket.once('message', (data) => {
      expect(JSON.parse(String(data)).type).toBe('connection_ack');
      resolve();
    });
  });
  return { socket, pings, closed };
}

describe('the WebSocket keepalive', () => {
  it('pings each connection every JOBGATE_WS_KEEPALIVE_MS: one that answers stays open, one that does not is closed', async () => {
    const answering = await connect(true);
    const silent = await connect(false);
    // The silent one is closed after its first unanswered ping, by the next (about 2 intervals).
    const code = await Promise.race([silent.closed, new Promise((r) => setTimeout(() => r('still open'), 20 * KEEPALIVE_MS))]);
    expect(code).toBe(1006); // terminated, without a close handshake
    expect(silent.pings.length).toBeGreaterThanOrEqual(1);
    // The answering one was pinged as often, and is still open.
    await new Promise((r) => setTimeout(r, 3 * KEEPALIVE_MS));
    expect(answering.pings.length).toBeGreaterThanOrEqual(3);
    expect(answering.socket.readyState).toBe(WebSocket.OPEN);
    answering.socket.close();
    await answering.closed;
  });

  it('is 12 s unless JOBGATE_WS_KEEPALIVE_MS says otherwise, from 1 s to 10 min', () => {
    expect(parseConfig({}).wsKeepAliveMs).toBe(12_000);
    expect(parseConfig({ JOBGATE_WS_KEEPALIVE_MS: '45000' }).wsKeepAliveMs).toBe(45_000);
    expect(() => parseConfig({ JOBGATE_WS_KEEPALIVE_MS: '500' })).toThrow(/JOBGATE_WS_KEEPALIVE_MS/);
    expect(() => parseConfig({ JOBGATE_WS_KEEPALIVE_MS: '0' })).toThrow(/JOBGATE_WS_KEEPALIVE_MS/);
  });
});
