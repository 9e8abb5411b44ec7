/**
 * Automatic persisted queries over the real gateway on HTTP: the protocol (an unknown hash, then
 * the document with its hash, then the hash alone, by POST and GET), a hash that does not fit
 * its document, and authentication still first: a request without a valid key is 401 before
 * its hash is looked up or its document kept.
 */
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const apq = (hash: string) => ({ persistedQuery: { version: 1, sha256Hash: hash } });

async function post(auth: string | undefined, body: Record<string, unknown>) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as { data?: any; errors?: { message: string; extensions?: any }[] } };
}

describe('automatic persisted queries', () => {
  it('answers an unknown hash PERSISTED_QUERY_NOT_FOUND, keeps the document sent with it, then runs the hash alone', async () => {
    const query = '{ workspace { slug } }';
    const hash = sha256(query);
    const unknown = await post(key, { extensions: apq(hash) });
    expect(unknown.status).toBe(404);
    expect(unknown.body.errors![0]!).toMatchObject({
      message: 'PersistedQueryNotFound',
      extensions: { code: 'PERSISTED_QUERY_NOT_FOUND' },
    });
    expect(unknown.body.data).toBeUndefined();

    const full = await post(key, { query, extensions: apq(hash) });
    expect(full.status).toBe(200);
    expect(full.body).toEqual({ data: { workspace: { slug: 'default' } } });

    const hashOnly = await post(key, { extensions: apq(hash) });
    expect(hashOnly.body).toEqual({ data: { workspace: { slug: 'default' } } });

    // By GET too, as a CDN would cache it.
    const params = new URLSearchParams({ extensions: JSON.stringify(apq(hash)) });
    const get = await fetch(`${url}?${params}`, { headers: { authorization: `Bearer ${key}`, accept: 'application/json' } });
    expect(await get.json()).toEqual({ data: { workspace: { slug: 'default' } } });
  });

  it('refuses a document whose hash is not the one sent, and keeps nothing under that hash', async () => {
    const query = '{ workspace { name } }';
    const wrong = sha256('{ workspace { id } }');
    const res = await post(key, { query, extensions: apq(wrong) });
    expect(res.status).toBe(400);
    expect(res.body.errors![0]!.extensions).toMatchObject({ code: 'PERSISTED_QUERY_MISMATCH' });
    const after = await post(key, { extensions: apq(wrong) });
    expect(after.body.errors![0]!.extensions).toMatchObject({ code: 'PERSISTED_QUERY_NOT_FOUND' });
  });

  it('authenticates before it looks a hash up or keeps a document', async () => {
    const known = '{ workspace { slug name } }';
    await post(key, { query: known, extensions: apq(sha256(known)) });
    for (const auth of [undefined, 'jg_not-a-real-key-0000000000000000']) {
      // A hash it holds: 401, not the answer.
      const lookup = await post(auth, { extensions: apq(sha256(known)) });
      expect(lookup.status).toBe(401);
      expect(lookup.body.errors![0]!.extensions).toMatchObject({ code: 'UNAUTHENTICATED' });
      expect(lookup.body.data).toBeUndefined();
      // A hash it does not hold: 401, not PERSISTED_QUERY_NOT_FOUND (which would say whether it is held).
      const probe = await post(auth, { extensions: apq(sha256('{ workspace { id } }')) });
      expect(probe.status).toBe(401);
      expect(probe.body.errors![0]!.extensions).toMatchObject({ code: 'UNAUTHENTICATED' });
      // A document sent by a stranger is not kept: a keyed request for its hash finds nothing.
      const stranger = `{ workspace { id slug } } # ${auth ?? 'none'}`;
      const refused = await post(auth, { query: stranger, extensions: apq(sha256(stranger)) });
      expect(refused.status).toBe(401);
      const later = await post(key, { extensions: apq(sha256(stranger)) });
      expect(later.body.errors![0]!.extensions).toMatchObject({ code: 'PERSISTED_QUERY_NOT_FOUND' });
    }
  });

  it('validates a persisted document like any other: no suggestion, the usual code', async () => {
    const bad = '{ jbos { id } }';
    const res = await post(key, { query: bad, extensions: apq(sha256(bad)) });
    expect(res.body.errors![0]!.extensions).toMatchObject({ code: 'GRAPHQL_VALIDATION_FAILED' });
    expect(res.body.errors![0]!.message).not.toMatch(/Did you mean/);
    const again = await post(key, { extensions: apq(sha256(bad)) });
    expect(again.body.errors![0]!.extensions).toMatchObject({ code: 'GRAPHQL_VALIDATION_FAILED' });
  });
});
