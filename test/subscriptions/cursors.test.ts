/**
 * Cursors say nothing of the installation: event cursors, finding ids and audit ids (all from
 * installation-wide sequences) are sealed per workspace, so a key of one workspace can neither
 * read another's activity from the gaps between its own cursors nor learn the last id handed out
 * from an error. Through a real gateway: graphql-ws for streams, HTTP for pages.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/engine.js';
import { collect, startLiveGateway, type LiveGateway } from '../support/live.js';

let t: TestDb;
let live: LiveGateway;
let viewerB: string;
let adminA: string;
let adminB: string;
let endpointA: string;
let endpointB: string;

const JOBS = `subscription($after: String) { jobEvents(after: $after) { cursor jobId status } }`;

beforeAll(async () => {
  t = await createTestDb();
  live = await startLiveGateway(t);
  adminA = (await t.service.bootstrapKey('default', 'ADMIN', 'admin a')).key;
  adminB = (await t.service.bootstrapKey('other', 'ADMIN', 'admin b')).key;
  viewerB = (await t.service.bootstrapKey('other', 'VIEWER', 'viewer b')).key;
  endpointA = (await t.service.registerEndpoint(t.actor, { name: 'cursor.a', kind: 'HANDLER', handlerName: 'noop' })).id;
  endpointB = (await t.service.registerEndpoint(t.otherActor, { name: 'cursor.b', kind: 'HANDLER', handlerName: 'noop' })).id;
});
afterAll(async () => {
  await live.close();
  await t.close();
});

async function gql(key: string, query: string, variables: Record<string, unknown> = {}) {
  const res = await fetch(live.httpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  return (await res.json()) as { data?: any; errors?: { message: string; extensions?: any }[] };
}

const later = new Date('2999-01-01T00:00:00Z');
const jobIn = async (which: 'A' | 'B') =>
  which === 'A'
    ? (await t.service.createJob(t.actor, { endpointId: endpointA, kind: 'DELAYED', runAt: later })).job.id
    : (await t.service.createJob(t.otherActor, { endpointId: endpointB, kind: 'DELAYED', runAt: later })).job.id;

/** Whether `text` shows a number, as it is or decoded from base64url into printable text. */
function readable(text: string): boolean {
  const decoded = Buffer.from(text, 'base64url').toString('latin1');
  return /^\d+$/.test(text) || (/^[\x20-\x7e]+$/.test(decoded) && /\d/.test(decoded));
}

describe('event cursors', () => {
  it('do not show a viewer how much another workspace did between two of its own events', async () => {
    const sub = collect(live.client(viewerB), JOBS, { after: '0' });
    const first = await jobIn('B');
    await sub.until((xs) => xs.some((x) => x.jobId === first));
    for (let i = 0; i < 10; i++) await jobIn('A');
    const second = await jobIn('B');
    const items = await sub.until((xs) => xs.some((x) => x.jobId === second));
    sub.stop();
    const [c1, c2] = [items.find((x) => x.jobId === first)!.cursor as string, items.find((x) => x.jobId === second)!.cursor as string];
    // Raw ids would differ by 11 here: ten of A's jobs created in between.
    expect(readable(c1)).toBe(false);
    expect(readable(c2)).toBe(false);
    expect(items.every((x) => x.jobId === first || x.jobId === second || !readable(x.cursor))).toBe(true);
  });

  it('resume a stream from where it was, in their own workspace only', async () => {
    const sub = collect(live.client(viewerB), JOBS, { after: '0' });
    const job = await jobIn('B');
    const items = await sub.until((xs) => xs.some((x) => x.jobId === job));
    sub.stop();
    const before = items[items.indexOf(items.find((x) => x.jobId === job)!) - 1]?.cursor ?? '0';
    const resumed = collect(live.client(viewerB), JOBS, { after: before });
    expect((await resumed.until((xs) => xs.length >= 1))[0].jobId).toBe(job);
    resumed.stop();
    // The same cursor in another workspace is no cursor there.
    const elsewhere = collect(live.client(adminA), JOBS, { after: items.at(-1).cursor });
    await eventually(async () => elsewhere.errors.length > 0, 5000, 'a refusal');
    expect(elsewhere.errors[0]).toMatchObject({ extensions: { code: 'VALIDATION_FAILED' } });
  });

  it('are refused when made up, with an error that carries no id', async () => {
    const latest = BigInt((await t.query('select last_value from events_id_seq')).rows[0].last_value);
    for (const after of [String(latest + 1000n), String(latest), '1', Buffer.from(`a1:${latest + 5n}`).toString('base64url')]) {
      const sub = collect(live.client(viewerB), JOBS, { after });
      await eventually(async () => sub.errors.length > 0, 5000, 'a refusal');
      expect(sub.errors[0]).toMatchObject({ extensions: { code: 'VALIDATION_FAILED' } });
      expect((sub.errors[0] as { message: string }).message).not.toMatch(/\d{2,}/);
      // The request id (a random UUID the client may quote to an operator) is the one number it carries.
      const { requestId, ...extensions } = (sub.errors[0] as { extensions: { requestId?: string } }).extensions;
      expect(requestId).toMatch(/^[0-9a-f-]{36}$/);
      expect(JSON.stringify(extensions)).not.toMatch(/\d{2,}/);
    }
  });
});

describe('audit and finding ids', () => {
  it('are opaque in the audit log, its page cursors included, and page through in order', async () => {
    for (let i = 0; i < 3; i++) await jobIn('B');
    const first = await gql(adminB, '{ auditLog(first: 2) { entries { id action } nextCursor } }');
    const page = first.data.auditLog;
    expect(page.entries).toHaveLength(2);
    for (const e of page.entries) expect(readable(e.id)).toBe(false);
    expect(readable(page.nextCursor)).toBe(false);
    const next = await gql(adminB, 'query ($after: String) { auditLog(first: 2, after: $after) { entries { id } } }', {
      after: page.nextCursor,
    });
    const ids = next.data.auditLog.entries.map((e: { id: string }) => e.id);
    expect(ids.length).toBeGreaterThan(0);
    expect(ids).not.toContain(page.entries[0].id);
    expect(ids).not.toContain(page.entries[1].id);
    // Another workspace's cursor is no cursor here.
    const foreign = await gql(adminA, 'query ($after: String) { auditLog(after: $after) { entries { id } } }', { after: page.nextCursor });
    expect(foreign.errors?.[0]?.extensions?.code).toBe('VALIDATION_FAILED');
  });
});
