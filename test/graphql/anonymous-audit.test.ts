/**
 * An anonymous authentication failure (no key, a malformed, unknown or revoked one) writes no
 * audit row: the audit log records what actors did, and a request that never became an actor is
 * refused (401, or 4403 over graphql-ws) before anything is written. Through the real gateway over
 * HTTP and graphql-ws, with the real key lookup. A file of its own: it stays under the failed-
 * authentication bound per address (20 a minute), which would answer 429 instead.
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
    authenticate: (request) => t.service.authenticate(/^Bearer (\S+)$/.exec(request.headers.get('authorization') ?? '')?.[1]),
  });
  url = `http://127.0.0.1:${(gw.server.address() as AddressInfo).port}/graphql`;
  key = (await t.service.bootstrapKey('default', 'VIEWER', 'viewer')).key;
});
afterAll(async () => {
  await gw.close();
  await t.close();
});

async function post(auth: string | undefined, query: string, variables: Record<string, unknown> = {}, accept = 'application/json') {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept, ...(auth !== undefined ? { authorization: `Bearer ${auth}` } : {}) },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, text: await res.text() };
}

describe('an anonymous authentication failure', () => {
  const auditRows = async () => (await t.query(`select count(*)::int as n from audit_log`)).rows[0].n as number;
  const MUTATION = 'mutation { createJob(input: { endpointName: "nowhere", kind: IMMEDIATE }) { created } }';

  it('writes no audit row, in any workspace, whatever the key and the transport', async () => {
    const revoked = await t.service.bootstrapKey('default', 'OPERATOR', 'revoked-operator');
    await t.service.revokeApiKey(t.actor, revoked.apiKey.id);
    const before = await auditRows();
    for (const auth of [undefined, '', 'jg_unknownunknownunknownunknown', 'not-a-key', revoked.key]) {
      for (const accept of ['application/json', 'text/event-stream']) {
        const { status } = await post(auth, MUTATION, {}, accept);
        expect(status).toBe(401);
      }
    }
    // A header that is not Bearer at all, and GET.
    const basic = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Basic dXNlcjpwYXNz' },
      body: JSON.stringify({ query: MUTATION }),
    });
    expect(basic.status).toBe(401);
    const get = await fetch(`${url}?query=${encodeURIComponent('{ workspace { slug } }')}`, {
      headers: { accept: 'application/json', 'x-jobgate-csrf': '1', authorization: `Bearer ${revoked.key}` },
    });
    expect(get.status).toBe(401);
    // graphql-ws, with the revoked key.
    const client = createClient({
      url: url.replace('http', 'ws'),
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      connectionParams: { authorization: `Bearer ${revoked.key}` },
    });
    const outcome = await new Promise<unknown>((resolve) => {
      client.subscribe(
        { query: MUTATION },
        { next: (m) => resolve({ next: m }), error: (e) => resolve(e), complete: () => resolve('complete') },
      );
    });
    await client.dispose();
    expect((outcome as { code?: number }).code).toBe(4403);
    expect(await auditRows()).toBe(before);
    // The same mutation with a valid key that may not do it is refused and audited: the count
    // above would have seen a row written.
    const { status, text } = await post(key, MUTATION);
    expect(status, text).toBe(200);
    expect(text).toContain('FORBIDDEN');
    expect(await auditRows()).toBe(before + 1);
  });
});
