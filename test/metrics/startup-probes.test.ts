/**
 * While a process waits for its database at start-up, orchestrators can already probe it:
 * `/healthz` answers 200 (do not restart it) and `/readyz` 503 "waiting for database" (send it
 * nothing), on the metrics port and on the gateway's, which the gateway then takes over.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startApp } from '../../src/app.js';
import { parseConfig } from '../../src/environment.js';
import type { Logger } from '../../src/log.js';
import { eventually } from '../support/eventually.js';

function recordingLogger(lines: string[]): Logger {
  const at = (msg: string) => void lines.push(msg);
  const log: Logger = { debug: at, info: at, warn: at, error: at, child: () => log };
  return log;
}

/** A port nothing listens on: the database "not reachable yet". */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

async function freePort(): Promise<number> {
  return closedPort();
}

const stoppers: (() => void)[] = [];
afterEach(() => {
  for (const stop of stoppers.splice(0)) stop();
});

describe('probes during the start-up wait for the database', () => {
  it('/healthz is 200 and /readyz 503 "waiting for database" on the metrics port and the gateway port', async () => {
    const lines: string[] = [];
    const gatewayPort = await freePort();
    const config = parseConfig({
      DATABASE_URL: `postgres://postgres@127.0.0.1:${await closedPort()}/postgres`,
      PORT: String(gatewayPort),
      JOBGATE_METRICS_PORT: '0',
      JOBGATE_METRICS_TOKEN: 'startup-probes-token-0123456789',
    });
    const abort = new AbortController();
    stoppers.push(() => abort.abort(new Error('test over')));
    const starting = startApp({ config, log: recordingLogger(lines), startupSignal: abort.signal });
    starting.catch(() => {});
    const opsUrl = await eventually(
      async () => lines.map((l) => /at (http:\/\/\S+)$/.exec(l)?.[1]).find(Boolean),
      10_000,
      'the metrics address',
    );
    for (const base of [opsUrl, `http://127.0.0.1:${gatewayPort}`]) {
      await eventually(async () => lines.some((l) => /database/.test(l)), 10_000, 'the wait to be said');
      const healthz = await fetch(new URL('/healthz', base));
      expect([healthz.status, await healthz.json()]).toEqual([200, { status: 'up' }]);
      const readyz = await fetch(new URL('/readyz', base));
      expect([readyz.status, await readyz.json()]).toEqual([503, { status: 'not ready', reasons: ['waiting for database'] }]);
      const metrics = await fetch(new URL('/metrics', base), { headers: { authorization: 'Bearer startup-probes-token-0123456789' } });
      expect(metrics.status).toBe(503);
    }
    // Nothing else is served on the gateway's port yet.
    expect((await fetch(`http://127.0.0.1:${gatewayPort}/graphql`, { method: 'POST' })).status).toBe(503);
    abort.abort(new Error('stop waiting'));
    await expect(starting).rejects.toThrow('stop waiting');
    // Stopped: both ports closed.
    await expect(fetch(new URL('/healthz', opsUrl))).rejects.toThrow();
    await expect(fetch(`http://127.0.0.1:${gatewayPort}/healthz`)).rejects.toThrow();
  });

  it("bounds the gateway port's connections per address during the wait too", async () => {
    const gatewayPort = await freePort();
    const config = parseConfig({
      DATABASE_URL: `postgres://postgres@127.0.0.1:${await closedPort()}/postgres`,
      PORT: String(gatewayPort),
      JOBGATE_MAX_CONNECTIONS_PER_ADDRESS: '2',
    });
    const lines: string[] = [];
    const abort = new AbortController();
    const held: net.Socket[] = [];
    stoppers.push(() => {
      abort.abort(new Error('test over'));
      held.forEach((s) => s.destroy());
    });
    // /healthz on a connection of its own: its status line, or `closed` when the server closed it first.
    const health = async () => {
      const socket = net.connect(gatewayPort, '127.0.0.1');
      let data = '';
      socket.on('error', () => {});
      socket.setEncoding('utf8').on('data', (chunk: string) => (data += chunk));
      socket.once('connect', () => socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
      await new Promise((r) => socket.once('close', r));
      return data === '' ? 'closed' : data.split('\r\n')[0];
    };
    const starting = startApp({ config, log: recordingLogger(lines), startupSignal: abort.signal });
    starting.catch(() => {});
    await eventually(async () => (await health()) === 'HTTP/1.1 200 OK', 10_000, 'the probes');
    for (let i = 0; i < 2; i++) {
      const socket = net.connect(gatewayPort, '127.0.0.1');
      socket.on('error', () => {});
      await new Promise<void>((r) => socket.once('connect', () => r()));
      socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
      held.push(socket);
    }
    expect(await health()).toBe('closed');
    held.splice(0).forEach((s) => s.destroy());
    await eventually(async () => (await health()) === 'HTTP/1.1 200 OK', 10_000, 'a place freed');
    abort.abort(new Error('stop waiting'));
    await expect(starting).rejects.toThrow('stop waiting');
  });
});
