/**
 * Live delivery across processes and through hostile plumbing: a second gateway process on the
 * same database, Server-Sent Events, and a connection that swallows notifications the way a
 * transaction-mode pooler does.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/engine.js';
import { collect, startLiveGateway } from '../support/live.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
let t: TestDb;
let key: string;
let endpointId: string;
const children = new Set<ChildProcess>();
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  t = await createTestDb();
  key = (await t.service.bootstrapKey('default', 'ADMIN', 'resilience admin')).key;
  endpointId = (await t.service.registerEndpoint(t.actor, { name: 'resilience.target', kind: 'HANDLER', handlerName: 'nobody' })).id;
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  for (const close of closers.reverse()) await close();
  await t.close();
});

const JOBS = `subscription($after: String) { jobEvents(after: $after) { cursor jobId status previousStatus } }`;

/** `jobgate serve` in its own process on the test database; resolves with its GraphQL URL. */
function serveProcess(): Promise<string> {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'jobgate.mjs'), 'serve'], {
    cwd: ROOT,
    // Read as text below (JSON lines are the default off a terminal).
    env: { ...process.env, DATABASE_URL: t.url, PORT: '0', HOST: '127.0.0.1', JOBGATE_LOG_LEVEL: 'info', JOBGATE_LOG_FORMAT: 'pretty' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (b: Buffer) => {
      out += b.toString();
      const m = /GraphiQL at (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${out}`)));
    // Node, then the gateway: seconds on an idle machine, most of a minute on a loaded one.
    setTimeout(() => reject(new Error(`serve did not start: ${out}`)), 90_000).unref();
  });
}

async function gql(url: string, query: string, variables: Record<string, unknown> = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  return (await res.json()) as { data?: any; errors?: any[] };
}

describe('live delivery across processes and transports', () => {
  it('delivers to a subscriber on one gateway what a mutation through another gateway process changed', async () => {
    const live = await startLiveGateway(t);
    closers.push(live.close);
    const otherUrl = await serveProcess();
    const sub = collect(live.client(key), JOBS, { after: '0' });
    const created = await gql(
      otherUrl,
      `mutation($e: ID!) { createJob(input: { endpointId: $e, kind: DELAYED, runAt: "2999-01-01T00:00:00Z" }) { job { id } } }`,
      { e: endpointId },
    );
    const jobId = created.data.createJob.job.id as string;
    await gql(otherUrl, `mutation($id: ID!) { pauseJob(id: $id) { id } }`, { id: jobId });
    const items = await sub.until(
      (xs) => xs.some((x) => x.jobId === jobId && x.status === 'PAUSED'),
      15_000,
      'the change made in the other process',
    );
    sub.stop();
    expect(items.filter((x) => x.jobId === jobId).map((x) => x.status)).toEqual(['ACTIVE', 'PAUSED']);
  });

  it('serves the same events over Server-Sent Events, authenticated by header', async () => {
    const live = await startLiveGateway(t);
    closers.push(live.close);
    const ws = collect(live.client(key), JOBS, { after: '0' });
    const controller = new AbortController();
    const response = await fetch(live.httpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${key}` },
      body: JSON.stringify({ query: JOBS, variables: { after: '0' } }),
      signal: controller.signal,
    });
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const seen: any[] = [];
    const reading = (async () => {
      const decoder = new TextDecoder();
      let buffer = '';
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        for (let i = buffer.indexOf('\n\n'); i >= 0; i = buffer.indexOf('\n\n')) {
          const frame = buffer.slice(0, i);
          buffer = buffer.slice(i + 2);
          const data = /^data: (.*)$/m.exec(frame)?.[1];
          if (/^event: next$/m.test(frame) && data) seen.push(JSON.parse(data).data.jobEvents);
        }
      }
    })().catch(() => {});
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt: new Date('2999-01-01T00:00:00Z') });
    await t.service.cancelJob(t.actor, job.id);
    await ws.until((xs) => xs.some((x) => x.jobId === job.id && x.status === 'RETIRED'));
    await eventually(async () => seen.some((x) => x.jobId === job.id && x.status === 'RETIRED'), 10_000, 'the SSE stream');
    controller.abort();
    await reading;
    ws.stop();
    expect(seen).toEqual(ws.items.slice(0, seen.length));

    const refused = await fetch(live.httpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: JOBS }),
    });
    expect(await refused.text()).toContain('UNAUTHENTICATED');
  });

  it('says so and falls back to polling when LISTEN receives nothing (as through a transaction pooler), and still delivers', async () => {
    // A TCP proxy to Postgres that drops every NotificationResponse ('A') sent to the client.
    const target = new URL(t.url);
    const proxy = net.createServer((client) => {
      const server = net.connect(Number(target.port || 5432), target.hostname);
      client.pipe(server);
      let pending = Buffer.alloc(0);
      server.on('data', (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk]);
        const out: Buffer[] = [];
        while (pending.length >= 5) {
          const length = pending.readUInt32BE(1);
          if (pending.length < 1 + length) break;
          const message = pending.subarray(0, 1 + length);
          if (message[0] !== 0x41) out.push(message);
          pending = pending.subarray(1 + length);
        }
        if (out.length) client.write(Buffer.concat(out));
      });
      server.on('error', () => client.destroy());
      client.on('error', () => server.destroy());
      server.on('close', () => client.destroy());
      client.on('close', () => server.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    closers.push(() => new Promise((r) => proxy.close(() => r())));
    const proxied = new URL(t.url);
    proxied.hostname = '127.0.0.1';
    proxied.port = String((proxy.address() as net.AddressInfo).port);

    const live = await startLiveGateway(t, {
      connectionString: proxied.toString(),
      hub: { checkEveryMs: 300, probeTimeoutMs: 300, pollMs: 200 },
    });
    closers.push(live.close);
    await eventually(async () => live.logs.some((l) => l.includes('LISTEN on this connection receives nothing')), 10_000, 'the warning');
    expect(live.hub.listener.mode).toBe('poll');
    const sub = collect(live.client(key), JOBS, { after: '0' });
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt: new Date('2999-01-01T00:00:00Z') });
    await sub.until((xs) => xs.some((x) => x.jobId === job.id), 10_000, 'the event, by polling');
    sub.stop();
    expect(live.logs.filter((l) => l.includes('LISTEN on this connection receives nothing'))).toHaveLength(1);
  });
});
