/**
 * Limits at the edges of the gateway, over real HTTP: aliases of every field count, a body with
 * no declared length is answered 413 (not a reset connection), and a variable that cannot be
 * coerced carries a code a client can switch on.
 */
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { DEFAULT_CONSOLE_DIR, loadConsoleSite } from '../../src/server/console.js';
import { startGateway, type RunningGateway } from '../../src/server/gateway.js';
import { createTestDb, type TestDb } from '../support/db.js';

let t: TestDb;
let gw: RunningGateway;
let url: string;
let key: string;

beforeAll(async () => {
  t = await createTestDb();
  gw = await startGateway({
    service: t.service,
    log: createLogger('silent'),
    host: '127.0.0.1',
    port: 0,
    maxBodyBytes: 100_000,
    authenticate: (request) => t.service.authenticate(/^Bearer (\S+)$/.exec(request.headers.get('authorization') ?? '')?.[1]),
  });
  url = `http://127.0.0.1:${(gw.server.address() as AddressInfo).port}/graphql`;
  key = (await t.service.bootstrapKey('default', 'ADMIN', 'admin')).key;
});
afterAll(async () => {
  await gw.close();
  await t.close();
});

type Body = { data?: any; errors?: { message: string; extensions?: any }[] };

async function gql(query: string, variables: Record<string, unknown> = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, body: (await res.json()) as Body };
}

/**
 * A 2 MB body sent in chunks of `size` with no Content-Length (Transfer-Encoding: chunked), each
 * chunk after `pauseMs`: a client still sending when the gateway answers.
 */
function chunked(parts: string[], pauseMs = 0): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let i = 0;
  return new ReadableStream({
    async pull(controller) {
      if (pauseMs) await new Promise((r) => setTimeout(r, pauseMs));
      if (i < parts.length) controller.enqueue(encoder.encode(parts[i++]));
      else controller.close();
    },
  });
}

async function postChunked(parts: string[], pauseMs = 0) {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: chunked(parts, pauseMs),
    duplex: 'half',
  } as RequestInit);
}

describe('aliases', () => {
  it('counts aliases of __typename against the alias limit, as aliases of any field', async () => {
    const many = Array.from({ length: 900 }, (_, i) => `t${i}: __typename`).join(' ');
    const res = await gql(`{ ${many} }`);
    expect(res.body.data ?? null).toBeNull();
    // The document parsed: graphql-armor's "Syntax Error:" is taken off.
    expect(res.body.errors?.[0]?.message).toMatch(/^Aliases limit of 20 exceeded, found 900/);
    // Within the limit, an aliased __typename still works.
    const few = await gql('{ a: __typename b: __typename }');
    expect(few.body.data).toEqual({ a: 'Query', b: 'Query' });
  });
});

describe('request bodies', () => {
  it('answers a 2 MB chunked body (no Content-Length) with 413 and a JSON error, however it is sent, and keeps serving', async () => {
    // Chunk sizes and pauses vary so that the answer finds the client at different points of
    // its upload; each must get the answer, not a reset connection.
    for (const size of [16 * 1024, 64 * 1024, 256 * 1024]) {
      for (const pauseMs of [0, 1, 2]) {
        const pad = 'x'.repeat(size);
        const parts = [
          '{"query":"{ workspace { slug } }","variables":{"pad":"',
          ...Array.from({ length: Math.ceil((2 * 1024 * 1024) / size) }, () => pad),
          '"}}',
        ];
        const res = await postChunked(parts, pauseMs);
        expect(res.status).toBe(413);
        const body = (await res.json()) as Body;
        expect(body.errors?.[0]?.extensions?.code).toBe('PAYLOAD_TOO_LARGE');
      }
    }
    expect((await gql('{ workspace { slug } }')).body.data.workspace.slug).toBe('default');
  });

  it('answers a body that is not JSON with a short BAD_REQUEST, not the body quoted back', async () => {
    const body = `{"query": "{ workspace { slug } }", ${'\u0000'.repeat(90_000)}`;
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body,
    });
    const text = await res.text();
    // yoga's parser quoted the whole body in extensions.originalError: six times the request.
    // What is left of that message is cut short.
    expect(text.length).toBeLessThan(500);
    const answer = JSON.parse(text) as Body;
    expect(answer.errors?.[0]).toMatchObject({ message: 'POST body sent invalid JSON.', extensions: { code: 'BAD_REQUEST' } });
    expect(res.status).toBe(400);
  });

  it('answers variables that are not JSON in a GET with BAD_REQUEST, not as an unexpected error', async () => {
    const res = await fetch(`${url}?${new URLSearchParams({ query: '{ workspace { slug } }', variables: 'notjson' })}`, {
      headers: { authorization: `Bearer ${key}`, 'x-jobgate-csrf': '1' },
    });
    expect(res.status).toBe(400);
    const answer = (await res.json()) as Body;
    expect(answer.errors?.[0]?.extensions?.code).toBe('BAD_REQUEST');
    expect(answer.errors?.[0]?.message).toMatch(/variables or extensions are not valid JSON/);
  });

  it('answers a Content-Type it does not read with 415 and a JSON error with its code, as every other refusal', async () => {
    for (const type of ['text/plain', 'application/xml']) {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': type, authorization: `Bearer ${key}`, 'x-jobgate-csrf': '1' },
        body: '{"query":"{ workspace { slug } }"}',
      });
      expect(res.status, type).toBe(415);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(res.headers.get('x-request-id')).toBeTruthy();
      const answer = (await res.json()) as Body;
      expect(answer.errors?.[0]?.extensions?.code).toBe('BAD_REQUEST');
      expect(answer.errors?.[0]?.message).toMatch(/unsupported Content-Type/);
    }
  });

  it("answers JSON sent as a form (curl -d without a Content-Type) with BAD_REQUEST saying so, and still runs a form's query", async () => {
    const form = (body: string) =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Bearer ${key}`, 'x-jobgate-csrf': '1' },
        body,
      });
    const res = await form('{"query":"{ workspace { slug } }"}');
    expect(res.status).toBe(400);
    const answer = (await res.json()) as Body;
    expect(answer.errors?.[0]?.extensions?.code).toBe('BAD_REQUEST');
    expect(answer.errors?.[0]?.message).toMatch(/read as a form .* set content-type: application\/json/);
    const ok = await form(new URLSearchParams({ query: '{ workspace { slug } }' }).toString());
    expect(((await ok.json()) as Body).errors).toBeUndefined();
  });

  it('sends a browser at / to the console when it is built, else to GraphiQL (it was an empty 404)', async () => {
    const res = await fetch(url.replace(/\/graphql$/, '/'), { redirect: 'manual' });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe(loadConsoleSite(DEFAULT_CONSOLE_DIR).built ? '/console/' : '/graphql');
    const post = await fetch(url.replace(/\/graphql$/, '/'), { method: 'POST', redirect: 'manual' });
    expect(post.status).toBe(404);
  });

  it('names a long id it did not find only in part', async () => {
    const res = await gql('query ($id: ID!) { job(id: $id) { id } }', { id: 'x'.repeat(50_000) });
    expect(res.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    expect(res.body.errors![0]!.message.length).toBeLessThan(200);
  });

  it('serves a chunked body within the limit as any other', async () => {
    const res = await postChunked(['{"query":"{ workspace', ' { slug } }"}']);
    expect(res.status).toBe(200);
    expect(((await res.json()) as Body).data.workspace.slug).toBe('default');
  });
});

describe('variable coercion', () => {
  it('answers a variable that cannot be coerced with VALIDATION_FAILED, naming the variable', async () => {
    const res = await gql('mutation ($input: CreateJobInput!) { createJob(input: $input) { created } }', {
      input: { endpointName: 'x', kind: 'SOMETIME' },
    });
    expect(res.body.data ?? null).toBeNull();
    expect(res.body.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['input'] }] });
    const missing = await gql('query ($first: Int!) { jobs(first: $first) { nodes { id } } }');
    expect(missing.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_FAILED');
    const wrongType = await gql('query ($first: Int) { jobs(first: $first) { nodes { id } } }', { first: 'ten' });
    expect(wrongType.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_FAILED');
  });
});
