/**
 * GraphQL over a real WebSocket with a real graphql-ws client: the same authentication, limits
 * and masking as HTTP, and revocation that takes effect on an open socket.
 */
import type { AddressInfo } from 'node:net';
import { createClient, type Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createLogger } from '../../src/log.js';
import { startGateway, type RunningGateway } from '../../src/server/gateway.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { QUIET, quietPeriod } from '../support/eventually.js';

let t: TestDb;
let gw: RunningGateway;
let wsUrl: string;
const clients: Client[] = [];

beforeAll(async () => {
  t = await createTestDb();
  gw = await startGateway({
    service: t.service,
    log: createLogger('silent'),
    host: '127.0.0.1',
    port: 0,
    authenticate: (request) => t.service.authenticate(/^Bearer (\S+)$/.exec(request.headers.get('authorization') ?? '')?.[1]),
  });
  wsUrl = `ws://127.0.0.1:${(gw.server.address() as AddressInfo).port}/graphql`;
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.dispose()));
  await gw.close();
  await t.close();
});

function client(key: string | undefined, onClose?: (code: number) => void): Client {
  const c = createClient({
    url: wsUrl,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    lazy: false,
    connectionParams: key ? { authorization: `Bearer ${key}` } : {},
    on: { closed: (e) => onClose?.((e as { code: number }).code) },
    onNonLazyError: () => {},
  });
  clients.push(c);
  return c;
}

function run(c: Client, query: string): Promise<{ data?: any; errors?: readonly { message: string; extensions?: any }[] }> {
  return new Promise((resolve, reject) => {
    let result: any;
    c.subscribe(
      { query },
      { next: (r) => (result = r), error: (e) => (Array.isArray(e) ? resolve({ errors: e }) : reject(e)), complete: () => resolve(result) },
    );
  });
}

describe('GraphQL over WebSocket', () => {
  it('runs operations for a valid key, and stops a revoked key at its next operation on the open socket', async () => {
    const admin = (await t.service.bootstrapKey('default', 'ADMIN', 'ws admin')).key;
    const adminActor = await t.service.authenticate(admin);
    const { key, apiKey } = await t.service.createApiKey(adminActor, { name: 'ws viewer', role: 'VIEWER' });
    const c = client(key);
    expect((await run(c, '{ workspace { slug } }')).data).toEqual({ workspace: { slug: 'default' } });
    await t.service.revokeApiKey(adminActor, apiKey.id);
    const after = await run(c, '{ workspace { slug } }');
    expect(after.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  it('gives every error a WebSocket operation is sent a request id (extensions.requestId), one per operation, as HTTP does', async () => {
    const admin = (await t.service.bootstrapKey('default', 'ADMIN', 'ws request ids')).key;
    const adminActor = await t.service.authenticate(admin);
    const { key, apiKey } = await t.service.createApiKey(adminActor, { name: 'ws request ids viewer', role: 'VIEWER' });
    const c = client(key);
    const invalid = await run(c, '{ nope }');
    const again = await run(c, '{ nope }');
    expect(invalid.errors?.[0]?.extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    expect(invalid.errors?.[0]?.extensions?.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(again.errors?.[0]?.extensions?.requestId).not.toBe(invalid.errors?.[0]?.extensions?.requestId);
    const fieldError = await run(c, '{ job(id: "not-an-id") { id } }');
    expect(fieldError.errors?.[0]?.extensions?.requestId).toMatch(/^[0-9a-f-]{36}$/);
    // A refused key is answered as over HTTP (UNAUTHENTICATED, by the same masking), with an id, and no HTTP status.
    await t.service.revokeApiKey(adminActor, apiKey.id);
    const refused = await run(c, '{ workspace { slug } }');
    expect(refused.errors?.[0]?.extensions).toEqual({ code: 'UNAUTHENTICATED', requestId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
  });

  it('gives the errors of a subscription over Server-Sent Events the request id too', async () => {
    const admin = (await t.service.bootstrapKey('default', 'ADMIN', 'sse request ids')).key;
    const res = await fetch(wsUrl.replace('ws:', 'http:'), {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'text/event-stream',
        authorization: `Bearer ${admin}`,
        'x-request-id': 'sse-req-1',
      },
      body: JSON.stringify({ query: 'subscription { executionUpdates { cursor } }' }),
    });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    expect(res.headers.get('x-request-id')).toBe('sse-req-1');
    // This gateway has no live feeds: the subscription is refused, in the stream.
    const text = await res.text();
    const event = JSON.parse(/^data: (.+)$/m.exec(text)![1]!) as { errors: { extensions: Record<string, unknown> }[] };
    expect(event.errors[0]!.extensions).toMatchObject({ code: 'UNAVAILABLE', requestId: 'sse-req-1' });
  });

  it('closes the connection with 4403 when connection_init carries no valid key', async () => {
    const code = await new Promise<number>((resolve) => client('jg_notarealkeynotarealkeynotareal', resolve));
    expect(code).toBe(4403);
  });

  it('applies the HTTP limits and masking to WebSocket operations', async () => {
    const key = (await t.service.bootstrapKey('default', 'VIEWER', 'ws limits')).key;
    const c = client(key);
    const aliases = Array.from({ length: 200 }, (_, i) => `a${i}: workspace { slug }`).join(' ');
    const res = await run(c, `{ ${aliases} }`);
    expect(res.errors?.[0]?.message).toMatch(/alias/i);
    const nf = await run(c, '{ job(id: "00000000-0000-4000-8000-000000000000") { id } }');
    expect(nf.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
  });

  it('logs errors the listening server reports (accept failing, say), keeping every connection open', async () => {
    const key = (await t.service.bootstrapKey('default', 'VIEWER', 'ws server errors')).key;
    const closed: number[] = [];
    const open = client(key, (code) => closed.push(code));
    expect((await run(open, '{ workspace { slug } }')).data).toEqual({ workspace: { slug: 'default' } });
    // What node emits when accept() fails, e.g. EMFILE with every file descriptor in use; twice.
    const emfile = () => Object.assign(new Error('accept EMFILE'), { code: 'EMFILE', syscall: 'accept' });
    expect(() => gw.server.emit('error', emfile())).not.toThrow();
    expect(() => gw.server.emit('error', emfile())).not.toThrow();
    await quietPeriod(QUIET.delivery);
    expect(closed).toEqual([]);
    expect((await run(open, '{ workspace { slug } }')).data).toEqual({ workspace: { slug: 'default' } });
    expect((await run(client(key), '{ workspace { slug } }')).data).toEqual({ workspace: { slug: 'default' } });
  });

  it('tells a client to retry (1013, UNAVAILABLE) when its key cannot be checked, and 4403 only for a bad key', async () => {
    const key = (await t.service.bootstrapKey('default', 'VIEWER', 'ws outage')).key;
    let down = false;
    const flaky = await startGateway({
      service: t.service,
      log: createLogger('silent'),
      host: '127.0.0.1',
      port: 0,
      authenticate: async (request) => {
        if (down) throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
        return t.service.authenticate(/^Bearer (\S+)$/.exec(request.headers.get('authorization') ?? '')?.[1]);
      },
    });
    try {
      const url = `ws://127.0.0.1:${(flaky.server.address() as AddressInfo).port}/graphql`;
      const connect = (k: string) =>
        new Promise<number>((resolve) => {
          const c = createClient({
            url,
            webSocketImpl: WebSocket,
            retryAttempts: 0,
            lazy: false,
            connectionParams: { authorization: `Bearer ${k}` },
            on: { closed: (e) => resolve((e as { code: number }).code) },
            onNonLazyError: () => {},
          });
          clients.push(c);
        });
      down = true;
      expect(await connect(key)).toBe(1013);
      down = false;
      expect(await connect('jg_not_a_real_key_at_all_000000')).toBe(4403);
      // Not even a valid header value: still a bad key, not a server failure.
      expect(await connect('ключ')).toBe(4403);
      expect(await connect('jg_line\nbreak')).toBe(4403);
      // Connected while the database answered; it stops answering before the next operation.
      const c = createClient({
        url,
        webSocketImpl: WebSocket,
        retryAttempts: 0,
        lazy: false,
        onNonLazyError: () => {},
        connectionParams: { authorization: `Bearer ${key}` },
      });
      clients.push(c);
      expect((await run(c, '{ workspace { slug } }')).data).toEqual({ workspace: { slug: 'default' } });
      down = true;
      expect((await run(c, '{ workspace { slug } }')).errors?.[0]?.extensions?.code).toBe('UNAVAILABLE');
    } finally {
      await flaky.close();
    }
  });

  it('refuses WebSocket upgrades on any other path (400)', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const ws = new WebSocket(wsUrl.replace('/graphql', '/other'), 'graphql-transport-ws');
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.on('open', () => reject(new Error('upgraded on /other')));
      ws.on('error', () => {});
    });
    expect(status).toBe(400);
  });

  it('closes a connection that sends a bad frame with its close code, logging one line, never a stack trace', async () => {
    const lines: string[] = [];
    const printed: unknown[][] = [];
    const consoleError = console.error;
    console.error = (...args: unknown[]) => void printed.push(args);
    const quiet = await startGateway({
      service: t.service,
      log: createLogger('info', (line) => lines.push(line)),
      host: '127.0.0.1',
      port: 0,
      maxBodyBytes: 1000,
      authenticate: (request) => t.service.authenticate(/^Bearer (\S+)$/.exec(request.headers.get('authorization') ?? '')?.[1]),
    });
    try {
      const url = `ws://127.0.0.1:${(quiet.server.address() as AddressInfo).port}/graphql`;
      const closeCode = (frame: string | Buffer) =>
        new Promise<number>((resolve) => {
          const socket = new WebSocket(url, 'graphql-transport-ws');
          socket.on('open', () => socket.send(frame, { binary: false }));
          socket.on('close', (code) => resolve(code));
          socket.on('error', () => {});
        });
      expect(await closeCode('x'.repeat(5000))).toBe(1009); // larger than the limit
      expect(await closeCode(Buffer.from([0xff, 0xfe, 0xfd]))).toBe(1007); // not UTF-8
      expect(printed).toEqual([]);
      const logged = lines.filter((l) => l.includes('socket error'));
      expect(logged).toHaveLength(2);
      expect(logged[0]).toMatch(/WS_ERR_UNSUPPORTED_MESSAGE_LENGTH/);
      expect(logged[1]).toMatch(/WS_ERR_INVALID_UTF8/);
      expect(logged.join('\n')).not.toMatch(/\n\s+at /);
      // The gateway still serves.
      const key = (await t.service.bootstrapKey('default', 'VIEWER', 'ws bad frames')).key;
      const c = createClient({
        url,
        webSocketImpl: WebSocket,
        retryAttempts: 0,
        lazy: false,
        onNonLazyError: () => {},
        connectionParams: { authorization: `Bearer ${key}` },
      });
      clients.push(c);
      expect((await run(c, '{ workspace { slug } }')).data).toEqual({ workspace: { slug: 'default' } });
    } finally {
      console.error = consoleError;
      await quiet.close();
    }
  });

  it('does not compress messages, even for a client that offers permessage-deflate', async () => {
    // The ws client offers the extension by default; the gateway must decline it.
    const socket = new WebSocket(wsUrl, 'graphql-transport-ws', { perMessageDeflate: true });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    });
    expect(socket.extensions).toBe('');
    socket.close();
  });
});
