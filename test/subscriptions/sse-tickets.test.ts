/**
 * Subscription tickets: a browser's EventSource sends no headers, so a page mints a short-lived,
 * single-use ticket with its key and opens the SSE stream with `?ticket=`. Over a real gateway on
 * HTTP, with requests shaped as EventSource sends them (a GET, `Accept: text/event-stream`, no
 * Authorization, no CSRF header), read as a stream.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/engine.js';
import { startLiveGateway, type LiveGateway } from '../support/live.js';

let t: TestDb;
let live: LiveGateway;
let adminKey: string;
let endpointId: string;

const JOBS = `subscription { jobEvents { cursor jobId status } }`;

beforeAll(async () => {
  t = await createTestDb();
  // The periodic key re-check is set far off: what ends a stream must be the revocation itself.
  live = await startLiveGateway(t, { live: { keyRecheckMs: 3_600_000 } });
  adminKey = (await t.service.bootstrapKey('default', 'ADMIN', 'admin')).key;
  endpointId = (await t.service.registerEndpoint(t.actor, { name: 'ticket.target', kind: 'HANDLER', handlerName: 'noop' })).id;
});
afterAll(async () => {
  await live.close();
  await t.close();
});

async function post(key: string, query: string, variables: Record<string, unknown> = {}) {
  const res = await fetch(live.httpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  return (await res.json()) as { data?: any; errors?: { message: string; extensions?: any }[] };
}

async function newKey(role: 'ADMIN' | 'OPERATOR' | 'VIEWER' = 'VIEWER') {
  const admin = await t.service.authenticate(adminKey);
  return t.service.createApiKey(admin, { name: `page ${Math.random()}`, role });
}

async function mint(key: string): Promise<{ ticket: string; expiresAt: string }> {
  const res = await post(key, 'mutation { createSubscriptionTicket { ticket expiresAt } }');
  expect(res.errors).toBeUndefined();
  return res.data.createSubscriptionTicket;
}

/** The URL an EventSource would open for `query` with `ticket`. */
const streamUrl = (query: string, ticket: string) => `${live.httpUrl}?${new URLSearchParams({ query, ticket })}`;

/** A GET as EventSource sends it: only `Accept: text/event-stream`. Frames as they arrive, and whether the stream ended. */
function eventSource(url: string) {
  const state = { status: 0, frames: [] as { event: string; data: any }[], ended: false };
  const controller = new AbortController();
  void (async () => {
    const response = await fetch(url, { headers: { accept: 'text/event-stream' }, signal: controller.signal });
    state.status = response.status;
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
  return { state, close: () => controller.abort() };
}

/** A one-shot request as EventSource sends it, read whole (for refusals, which end at once). */
async function refused(url: string) {
  const res = await fetch(url, { headers: { accept: 'text/event-stream' } });
  return { status: res.status, text: await res.text() };
}

const createJob = async () =>
  (await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt: new Date('2999-01-01T00:00:00Z') })).job.id;
const delivered = (s: ReturnType<typeof eventSource>, jobId: string) =>
  s.state.frames.some((f) => f.event === 'next' && f.data?.data?.jobEvents?.jobId === jobId);

describe('subscription tickets', () => {
  it('open an SSE stream from a request without any header but Accept, which then streams live events', async () => {
    const { key } = await newKey('VIEWER');
    const { ticket, expiresAt } = await mint(key);
    expect(ticket).toMatch(/^jgt_/);
    const left = new Date(expiresAt).getTime() - Date.now();
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(61_000);
    const before = live.hub.stats().events;
    const stream = eventSource(streamUrl(JOBS, ticket));
    await eventually(async () => live.hub.stats().events === before + 1, 10_000, 'the stream to go live');
    const jobId = await createJob();
    await eventually(async () => delivered(stream, jobId), 10_000, 'the event');
    expect(stream.state.status).toBe(200);
    stream.close();
  });

  it('are single-use: a second request with the same ticket is UNAUTHENTICATED', async () => {
    const { key } = await newKey('VIEWER');
    const { ticket } = await mint(key);
    const before = live.hub.stats().events;
    const first = eventSource(streamUrl(JOBS, ticket));
    await eventually(async () => live.hub.stats().events === before + 1, 10_000, 'the first stream to go live');
    const second = await refused(streamUrl(JOBS, ticket));
    expect(second.status).toBe(401);
    expect(second.text).toContain('UNAUTHENTICATED');
    first.close();
  });

  it('expire: a ticket past its time is UNAUTHENTICATED, as is one never minted', async () => {
    const { key } = await newKey('VIEWER');
    const { ticket } = await mint(key);
    const hash = createHash('sha256').update(ticket).digest();
    await t.query(`update subscription_tickets set expires_at = now() - interval '1 second' where ticket_hash = $1`, [hash]);
    for (const bad of [ticket, 'jgt_neverMintedNeverMintedNeverMinted00', 'not-a-ticket']) {
      const res = await refused(streamUrl(JOBS, bad));
      expect(res.status, bad).toBe(401);
      expect(res.text).toContain('UNAUTHENTICATED');
    }
  });

  it("die with their key: a revoked key's unused ticket is refused, and its open ticket stream ends UNAUTHENTICATED", async () => {
    const { key, apiKey } = await newKey('VIEWER');
    const unused = await mint(key);
    const opened = await mint(key);
    const before = live.hub.stats().events;
    const stream = eventSource(streamUrl(JOBS, opened.ticket));
    await eventually(async () => live.hub.stats().events === before + 1, 10_000, 'the stream to go live');
    const res = await post(adminKey, 'mutation ($id: ID!) { revokeApiKey(id: $id) { revokedAt } }', { id: apiKey.id });
    expect(res.errors).toBeUndefined();
    await eventually(async () => stream.state.ended, 10_000, 'the stream to end');
    const codes = stream.state.frames.flatMap((f) =>
      (f.data?.errors ?? []).map((e: { extensions?: { code?: string } }) => e.extensions?.code),
    );
    expect(codes).toContain('UNAUTHENTICATED');
    const late = await refused(streamUrl(JOBS, unused.ticket));
    expect(late.status).toBe(401);
  });

  it('open subscriptions only: a query or mutation with a ticket is FORBIDDEN, and runs nothing', async () => {
    const { key } = await newKey('ADMIN');
    for (const query of ['{ workspace { slug } }', 'mutation { createApiKey(input: { name: "by ticket", role: ADMIN }) { key } }']) {
      const { ticket } = await mint(key);
      const res = await fetch(`${live.httpUrl}?${new URLSearchParams({ query, ticket })}`, { headers: { accept: 'application/json' } });
      const body = (await res.json()) as { data?: unknown; errors: { extensions: { code: string } }[] };
      expect(body.errors[0]!.extensions.code, query).toBe('FORBIDDEN');
      expect(body.data ?? null).toBeNull();
    }
    expect((await t.query(`select count(*)::int as n from api_keys where name = 'by ticket'`)).rows[0].n).toBe(0);
  });

  it('act as their key with its role, in its workspace, and are stored only as a hash', async () => {
    const { key, apiKey } = await newKey('OPERATOR');
    const { ticket } = await mint(key);
    const rows = (await t.query(`select * from subscription_tickets where api_key_id = $1`, [apiKey.id])).rows;
    expect(rows).toHaveLength(1);
    expect(rows[0].role).toBe('OPERATOR');
    expect(rows[0].workspace_id).toBe(t.actor.workspaceId);
    expect(Buffer.from(rows[0].ticket_hash).equals(createHash('sha256').update(ticket).digest())).toBe(true);
    expect(JSON.stringify(rows)).not.toContain(ticket.slice(4));
    // Its audit row records the minting, not the ticket.
    const audit = (await t.query(`select * from audit_log where action = 'subscriptionTicket.create' and actor_key_id = $1`, [apiKey.id]))
      .rows;
    expect(audit).toHaveLength(1);
    expect(JSON.stringify(audit)).not.toContain(ticket.slice(4));
    // A stream in another workspace's terms is not reachable: the actor is the key's.
    const actor = await t.service.redeemSubscriptionTicket(ticket);
    expect(actor).toMatchObject({ workspaceId: t.actor.workspaceId, kind: 'user', role: 'OPERATOR', keyId: apiKey.id });
  });

  it('work with persisted queries: the subscription by its hash alone, once the document was sent with it', async () => {
    const { key } = await newKey('VIEWER');
    const extensions = JSON.stringify({ persistedQuery: { version: 1, sha256Hash: createHash('sha256').update(JOBS).digest('hex') } });
    const before = live.hub.stats().events;
    const first = eventSource(`${live.httpUrl}?${new URLSearchParams({ query: JOBS, extensions, ticket: (await mint(key)).ticket })}`);
    await eventually(async () => live.hub.stats().events === before + 1, 10_000, 'the first stream to go live');
    // The document is kept now: the hash alone opens the second.
    const second = eventSource(`${live.httpUrl}?${new URLSearchParams({ extensions, ticket: (await mint(key)).ticket })}`);
    await eventually(async () => live.hub.stats().events === before + 2, 10_000, 'the second stream to go live');
    const jobId = await createJob();
    await eventually(async () => delivered(first, jobId) && delivered(second, jobId), 10_000, 'both to deliver');
    first.close();
    second.close();
  });

  it('are not used up by a hash the gateway does not hold: the retry with the document and the same ticket opens the stream', async () => {
    const { key } = await newKey('VIEWER');
    const doc = `subscription { jobEvents { cursor jobId } }`;
    const extensions = JSON.stringify({ persistedQuery: { version: 1, sha256Hash: createHash('sha256').update(doc).digest('hex') } });
    const { ticket } = await mint(key);
    const hashOnly = await refused(`${live.httpUrl}?${new URLSearchParams({ extensions, ticket })}`);
    expect(hashOnly.status).toBe(404);
    expect(hashOnly.text).toContain('PERSISTED_QUERY_NOT_FOUND');
    // A stranger's ticket learns nothing of the store: UNAUTHENTICATED, not PERSISTED_QUERY_NOT_FOUND.
    const stranger = await refused(
      `${live.httpUrl}?${new URLSearchParams({ extensions, ticket: 'jgt_neverMintedNeverMintedNeverMinted00' })}`,
    );
    expect(stranger.status).toBe(401);
    expect(stranger.text).toContain('UNAUTHENTICATED');
    const before = live.hub.stats().events;
    const retry = eventSource(`${live.httpUrl}?${new URLSearchParams({ query: doc, extensions, ticket })}`);
    await eventually(async () => live.hub.stats().events === before + 1, 10_000, 'the retry to go live');
    const jobId = await createJob();
    await eventually(async () => delivered(retry, jobId), 10_000, 'the event');
    expect(retry.state.status).toBe(200);
    retry.close();
  });

  it('is refused without a ticket or a key, as any request is', async () => {
    const res = await fetch(`${live.httpUrl}?${new URLSearchParams({ query: JOBS })}`, {
      headers: { accept: 'text/event-stream', 'x-jobgate-csrf': '1' },
    });
    expect(res.status).toBe(401);
  });
});
