/**
 * Connections per client address, through a real gateway on loopback: past the bound a new TCP
 * connection is closed before anything is read, whatever it would have asked, and a place frees when one of the address's connections closes. A declared reverse
 * proxy is not bounded. (An outside attack held every descriptor of the gateway with half-sent
 * requests from one address.)
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { startLiveGateway, type LiveGateway } from '../support/live.js';

let t: TestDb;
const gateways: LiveGateway[] = [];
const sockets: net.Socket[] = [];

beforeAll(async () => {
  t = await createTestDb();
});
afterAll(async () => {
  sockets.forEach((s) => s.destroy());
  await Promise.all(gateways.map((g) => g.close()));
  await t.close();
});

async function gateway(options: { trustedProxies?: string[] } = {}): Promise<number> {
  const live = await startLiveGateway(t, { gateway: { bounds: { connectionsPerAddress: 3 }, ...options } });
  gateways.push(live);
  return Number(new URL(live.httpUrl).port);
}

/** A connection that sends half a request head and waits. Resolves once it is connected. */
async function halfRequest(port: number): Promise<net.Socket> {
  const socket = net.connect(port, '127.0.0.1');
  sockets.push(socket);
  socket.on('error', () => {});
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write('POST /graphql HTTP/1.1\r\nHost: x\r\n');
  return socket;
}

/** What a request on a new connection is answered (this gateway serves no /healthz: a 404 is an answer): its status line, or `closed` when the server closed it first. */
async function health(port: number): Promise<string> {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  let data = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => (data += chunk));
  socket.once('connect', () => socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
  await new Promise((resolve) => socket.once('close', resolve));
  return data === '' ? 'closed' : data.split('\r\n')[0]!;
}

describe('connections per client address', () => {
  it('closes connections past the bound before reading them, and takes one again once a place frees', async () => {
    const port = await gateway();
    const held = [await halfRequest(port), await halfRequest(port), await halfRequest(port)];
    expect(await health(port)).toBe('closed');
    held[0]!.destroy();
    // The server sees the close a moment later.
    let answer = 'closed';
    for (let i = 0; i < 50 && answer === 'closed'; i++) {
      answer = await health(port);
      if (answer === 'closed') await new Promise((r) => setTimeout(r, 20));
    }
    expect(answer).toMatch(/^HTTP\/1\.1 \d{3} /);
    // The two still held were not touched by the refusals.
    expect(held[1]!.destroyed || held[1]!.readyState !== 'open').toBe(false);
  });

  it('does not bound a declared reverse proxy', async () => {
    const port = await gateway({ trustedProxies: ['127.0.0.1'] });
    for (let i = 0; i < 5; i++) await halfRequest(port);
    expect(await health(port)).toMatch(/^HTTP\/1\.1 \d{3} /);
  });
});
