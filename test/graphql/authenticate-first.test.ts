/**
 * Authentication comes before validation, and no error suggests a name: through the real
 * gateway over HTTP (POST, GET, SSE) and graphql-ws, with introspection closed, so the schema
 * cannot be mapped by its errors, by a stranger or by a key.
 */
import type { AddressInfo } from 'node:net';
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createLogger } from '../../src/log.js';
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
    introspection: false,
    authenticate: (request) => t.service.authenticate(/^Bearer (\S+)$/.exec(request.headers.get('authorization') ?? '')?.[1]),
  });
  url = `http://127.0.0.1:${(gw.server.address() as AddressInfo).port}/graphql`;
  key = (await t.service.bootstrapKey('default', 'VIEWER', 'viewer')).key;
});
afterAll(async () => {
  await gw.close();
  await t.close();
});

type Body = { data?: any; errors?: { message: string; extensions?: any }[] };

async function post(auth: string | undefined, query: string, variables: Record<string, unknown> = {}, accept = 'application/json') {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept, ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, text: await res.text() };
}

/** Documents whose errors, if validated, would name or suggest parts of the schema. */
const PROBES: [string, string, Record<string, unknown>?][] = [
  ['a misspelled root field', '{ jbos { id } }'],
  ['a misspelled enum literal', 'mutation { createJob(input: { endpointName: "x", kind: IMMEDIAT }) { created } }'],
  [
    'a misspelled enum in variables',
    'mutation ($input: CreateJobInput!) { createJob(input: $input) { created } }',
    { input: { endpointName: 'x', kind: 'IMMEDIAT' } },
  ],
  ['a misspelled argument', '{ jobs(firs: 1) { nodes { id } } }'],
  ['a misspelled type', 'query ($x: Strin) { workspace { slug } }'],
  ['a syntax error', '{ workspace { slug '],
  ['a real field', '{ workspace { slug } }'],
  ['a subscription on a misspelled field', 'subscription { jbEvents { cursor } }'],
];

describe('a request without a valid key', () => {
  for (const auth of [undefined, 'jg_unknownunknownunknownunknown']) {
    for (const [what, query, variables] of PROBES) {
      it(`is answered 401 UNAUTHENTICATED, saying nothing of the schema (${auth ? 'unknown key' : 'no key'}, ${what})`, async () => {
        for (const accept of ['application/json', 'text/event-stream']) {
          const { status, text } = await post(auth, query, variables, accept);
          expect(status, `${accept}: ${text}`).toBe(401);
          expect(text).toContain('UNAUTHENTICATED');
          expect(text).not.toMatch(/Cannot query|Did you mean|Unknown|Syntax|IMMEDIAT|jbos|Expected|Variable/);
        }
      });
    }
  }

  it('is answered 401 over GET too, before its query is parsed or validated', async () => {
    for (const query of ['{ jbos { id } }', '{ workspace { slug } }', '{ workspace {']) {
      const res = await fetch(`${url}?query=${encodeURIComponent(query)}`, {
        headers: { accept: 'application/json', 'x-jobgate-csrf': '1' },
      });
      const text = await res.text();
      expect(res.status, text).toBe(401);
      expect(text).toContain('UNAUTHENTICATED');
      expect(text).not.toMatch(/Cannot query|Syntax/);
    }
  });

  it('is answered 401 with no CSRF header either (a plain GET or form POST with no key), not 403', async () => {
    const requests: [string, RequestInit][] = [
      [`${url}?query=${encodeURIComponent('{ workspace { slug } }')}`, { headers: { accept: 'application/json' } }],
      [`${url}?query=${encodeURIComponent('{ workspace { slug } }')}`, {}],
      [url, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{"query":"{ workspace { slug } }"}' }],
      [url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'query=%7B%20jbos%20%7D' }],
      [url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{ not json' }],
    ];
    for (const [target, init] of requests) {
      const res = await fetch(target, init);
      const text = await res.text();
      expect(res.status, `${init.method ?? 'GET'} ${JSON.stringify(init.headers)}: ${text}`).toBe(401);
      expect(JSON.parse(text).errors[0].extensions.code).toBe('UNAUTHENTICATED');
      expect(text).not.toMatch(/CSRF|Cannot query|Syntax|jbos/);
    }
  });

  it('with a key, still meets the full authentication: an unknown key in a simple GET is 401 too', async () => {
    const res = await fetch(`${url}?query=${encodeURIComponent('{ workspace { slug } }')}`, {
      headers: { authorization: 'Bearer jg_unknownunknownunknownunknown' },
    });
    expect(res.status).toBe(401);
    const ok = await fetch(`${url}?query=${encodeURIComponent('{ workspace { slug } }')}`, {
      headers: { authorization: `Bearer ${key}`, accept: 'application/json' },
    });
    expect(ok.status).toBe(200);
    expect((await ok.json()).data.workspace.slug).toBe('default');
  });

  it('over graphql-ws, closes the socket with 4403 at connection_init and never answers the operation', async () => {
    const client = createClient({
      url: url.replace('http', 'ws'),
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      connectionParams: { authorization: 'Bearer jg_unknownunknownunknownunknown' },
    });
    const outcome = await new Promise<unknown>((resolve) => {
      client.subscribe(
        { query: '{ jbos { id } }' },
        { next: (m) => resolve({ next: m }), error: (e) => resolve(e), complete: () => resolve('complete') },
      );
    });
    await client.dispose();
    expect((outcome as { code?: number }).code).toBe(4403);
    expect(JSON.stringify(outcome)).not.toMatch(/Cannot query|jbos/);
  });
});

describe('an authenticated request', () => {
  /** Each with the name a suggestion would have given away. */
  const suggestive: [string, string, Record<string, unknown> | undefined, RegExp][] = [
    ['a misspelled field', '{ workspac { slug } }', undefined, /"workspace"/],
    [
      'a misspelled enum literal',
      'mutation { createJob(input: { endpointName: "x", kind: IMMEDIAT }) { created } }',
      undefined,
      /IMMEDIATE/,
    ],
    [
      'a misspelled enum literal with two near values',
      'mutation { registerEndpoint(input: { name: "a.b", kind: HTTP, url: "https://example.com", method: POS }) { id } }',
      undefined,
      /POST|PUT/,
    ],
    [
      'a misspelled enum in variables',
      'mutation ($input: CreateJobInput!) { createJob(input: $input) { created } }',
      { input: { endpointName: 'x', kind: 'IMMEDIAT' } },
      /IMMEDIATE/,
    ],
    [
      'a misspelled input field in variables',
      'mutation ($input: CreateJobInput!) { createJob(input: $input) { created } }',
      { input: { endpointNam: 'x', kind: 'IMMEDIATE' } },
      /"endpointName"/,
    ],
    [
      'a misspelled input field inline',
      'mutation { createJob(input: { endpointNam: "x", kind: IMMEDIATE }) { created } }',
      undefined,
      /"endpointName"/,
    ],
    ['a misspelled argument', '{ jobs(firs: 1) { nodes { id } } }', undefined, /"first"/],
    ['a misspelled type', 'query ($x: Strin) { workspace { slug } }', undefined, /"String"/],
  ];
  for (const [what, query, variables, hidden] of suggestive) {
    it(`gets its error without a suggestion (${what})`, async () => {
      const { status, text } = await post(key, query, variables);
      expect(status).not.toBe(401);
      const body = JSON.parse(text) as Body;
      expect(body.errors?.length).toBeGreaterThan(0);
      for (const error of body.errors!) {
        expect(error.message).not.toMatch(/Did you mean|Suggestion/);
        expect(error.message).not.toMatch(hidden);
      }
    });
  }

  it('gets its error without a suggestion over graphql-ws too', async () => {
    const client = createClient({
      url: url.replace('http', 'ws'),
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      connectionParams: { authorization: `Bearer ${key}` },
    });
    try {
      for (const [, query, variables, hidden] of suggestive) {
        const errors = await new Promise<unknown>((resolve) => {
          client.subscribe(
            { query, variables: variables ?? {} },
            { next: (m) => resolve(m.errors), error: (e) => resolve(e), complete: () => resolve('complete') },
          );
        });
        expect(JSON.stringify(errors)).toMatch(/message/);
        expect(JSON.stringify(errors)).not.toMatch(/Did you mean/);
        for (const error of errors as { message: string }[]) expect(error.message).not.toMatch(hidden);
      }
    } finally {
      await client.dispose();
    }
  });
});
