/**
 * Trusted persisted documents over the real gateway on HTTP and graphql-ws: the console's build
 * carries the manifest codegen wrote (hash to document) and the gateway runs those documents by
 * their hash alone; other clients' documents still run unless the operator turns "persisted only"
 * on (JOBGATE_PERSISTED_ONLY), which runs the trusted documents (the console's, and the manifests
 * JOBGATE_PERSISTED_DOCUMENTS names) and nothing else, and keeps nothing.
 */
import { createHash } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { parseConfig } from '../../src/environment.js';
import { CONSOLE_DOCUMENTS } from '../../src/server/console.js';
import type { GatewayOptions, RunningGateway } from '../../src/server/gateway.js';
import { readDocumentManifest } from '../../src/server/persisted-queries.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { listeningGateway } from '../support/graphql.js';

/** The manifest `npm run console:codegen` writes (console/codegen.ts), as the console build carries it. */
const MANIFEST = join(import.meta.dirname, '../../console/src/gql/persisted-documents.json');
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const apq = (hash: string) => ({ persistedQuery: { version: 1, sha256Hash: hash } });

let t: TestDb;
let key: string;
let consoleDir: string;
let viewerHash: string;
const gateways: RunningGateway[] = [];

async function gateway(options: Partial<GatewayOptions> = {}): Promise<string> {
  const gw = await listeningGateway(t, { console: consoleDir, ...options });
  gateways.push(gw);
  return gw.url;
}

async function post(url: string, body: Record<string, unknown>) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as { data?: any; errors?: { message: string; extensions?: any }[] } };
}

/** One operation over graphql-ws: its first result, or its error. */
async function overWebSocket(url: string, payload: { query: string; extensions?: Record<string, unknown> }): Promise<unknown> {
  const client = createClient({
    url: url.replace('http', 'ws'),
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    connectionParams: { authorization: `Bearer ${key}` },
  });
  try {
    return await new Promise<unknown>((resolve) => {
      client.subscribe(payload, { next: (m) => resolve(m), error: (e) => resolve({ error: e }), complete: () => resolve('complete') });
    });
  } finally {
    await client.dispose();
  }
}

beforeAll(async () => {
  t = await createTestDb();
  key = (await t.service.bootstrapKey('default', 'VIEWER', 'persisted documents')).key;
  // A console "build" that holds only its manifest: the gateway reads the hashes from there.
  consoleDir = mkdtempSync(join(tmpdir(), 'jobgate-console-'));
  copyFileSync(MANIFEST, join(consoleDir, CONSOLE_DOCUMENTS));
  const viewer = [...readDocumentManifest(MANIFEST)].find(([, document]) => document.startsWith('query Viewer '));
  viewerHash = viewer![0];
});
afterAll(async () => {
  for (const gw of gateways) await gw.close();
  await t.close();
  rmSync(consoleDir, { recursive: true, force: true });
});

describe("the console's persisted documents", () => {
  it('are in the manifest under their SHA-256, as the console sends them', () => {
    const manifest = JSON.parse(readFileSync(MANIFEST, 'utf8')) as Record<string, string>;
    expect(Object.keys(manifest).length).toBeGreaterThan(20);
    for (const [hash, document] of Object.entries(manifest)) expect(sha256(document)).toBe(hash);
  });

  it('run by their hash alone, over HTTP and graphql-ws, while any other document still runs', async () => {
    const url = await gateway();
    const hashOnly = await post(url, { extensions: apq(viewerHash) });
    expect(hashOnly.status).toBe(200);
    expect(hashOnly.body.data.viewer).toMatchObject({ role: 'VIEWER', workspace: { slug: 'default' } });
    // graphql-ws wants a `query` string: '' beside the hash, as the console sends it.
    expect(await overWebSocket(url, { query: '', extensions: apq(viewerHash) })).toMatchObject({ data: { viewer: { role: 'VIEWER' } } });
    // Other clients are unaffected: a document as text, and the automatic register-then-hash flow.
    expect((await post(url, { query: '{ workspace { slug } }' })).body).toEqual({ data: { workspace: { slug: 'default' } } });
    const other = '{ workspace { name } }';
    expect((await post(url, { extensions: apq(sha256(other)) })).body.errors![0]!.extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
    expect((await post(url, { query: other, extensions: apq(sha256(other)) })).status).toBe(200);
    expect((await post(url, { extensions: apq(sha256(other)) })).body.data.workspace.name).toBeTruthy();
  });

  it('answers an unknown hash PersistedQueryNotFound (404), over graphql-ws too', async () => {
    const url = await gateway();
    const unknown = await post(url, { extensions: apq(sha256('query Nobody { workspace { id } }')) });
    expect(unknown.status).toBe(404);
    expect(unknown.body.errors![0]).toMatchObject({ message: 'PersistedQueryNotFound', extensions: { code: 'PERSISTED_QUERY_NOT_FOUND' } });
    const ws = (await overWebSocket(url, { query: '', extensions: apq(sha256('query Nobody { workspace { id } }')) })) as {
      error: unknown;
    };
    expect(ws.error).toEqual([
      expect.objectContaining({
        message: 'PersistedQueryNotFound',
        extensions: expect.objectContaining({ code: 'PERSISTED_QUERY_NOT_FOUND' }),
      }),
    ]);
  });
});

describe('persisted only (JOBGATE_PERSISTED_ONLY)', () => {
  let url: string;
  let extraDir: string;
  const extra = 'query Mine { workspace { slug } }';
  // graphql-codegen's client preset 6 writes its hashes as `sha256:<hex>`, and its documents send them so.
  const preset6 = 'query Named { workspace { name } }';
  beforeAll(async () => {
    extraDir = mkdtempSync(join(tmpdir(), 'jobgate-manifest-'));
    writeFileSync(join(extraDir, 'mine.json'), JSON.stringify({ [sha256(extra)]: extra }));
    writeFileSync(join(extraDir, 'preset6.json'), JSON.stringify({ [`sha256:${sha256(preset6)}`]: preset6 }));
    const config = parseConfig({ JOBGATE_PERSISTED_ONLY: 'on', JOBGATE_PERSISTED_DOCUMENTS: 'mine.json,preset6.json' }, extraDir);
    expect(config.persistedDocuments).toEqual([join(extraDir, 'mine.json'), join(extraDir, 'preset6.json')]);
    url = await gateway({ persisted: { only: config.persistedOnly, manifests: config.persistedDocuments } });
  });
  afterAll(() => rmSync(extraDir, { recursive: true, force: true }));

  it("runs the console's documents and the operator's manifests by hash", async () => {
    expect((await post(url, { extensions: apq(viewerHash) })).body.data.viewer.role).toBe('VIEWER');
    expect((await post(url, { extensions: apq(sha256(extra)) })).body).toEqual({ data: { workspace: { slug: 'default' } } });
    expect(await overWebSocket(url, { query: '', extensions: apq(viewerHash) })).toMatchObject({ data: { viewer: { role: 'VIEWER' } } });
  });

  it('reads a hash named with its algorithm (sha256:<hex>) as the bare hex, in manifests and requests', async () => {
    const named = { data: { workspace: { name: expect.any(String) } } };
    expect((await post(url, { extensions: apq(`sha256:${sha256(preset6)}`) })).body).toEqual(named);
    expect((await post(url, { extensions: apq(sha256(preset6)) })).body).toEqual(named);
    expect((await post(url, { extensions: apq(`sha256:${sha256(extra)}`) })).body).toEqual({ data: { workspace: { slug: 'default' } } });
  });

  it('takes an empty query beside a hash as no text, over HTTP as over graphql-ws (graphql-sse clients must send a string)', async () => {
    const res = await post(url, { query: '', extensions: apq(sha256(extra)) });
    expect(res).toEqual({ status: 200, body: { data: { workspace: { slug: 'default' } } } });
    const sse = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${key}` },
      body: JSON.stringify({ query: '', extensions: apq(sha256(extra)) }),
    });
    expect(sse.status).toBe(200);
    expect(await sse.text()).toContain('"slug":"default"');
  });

  it('refuses a document sent as text, even a trusted one or with its hash, and keeps nothing', async () => {
    for (const body of [{ query: '{ workspace { slug } }' }, { query: extra }, { query: extra, extensions: apq(sha256(extra)) }]) {
      const res = await post(url, body);
      expect(res.status).toBe(400);
      expect(res.body.errors![0]!.extensions).toMatchObject({ code: 'PERSISTED_QUERY_ONLY' });
      expect(res.body.data).toBeUndefined();
    }
    // The automatic flow registers nothing: the hash of a document sent with it stays unknown.
    const other = '{ workspace { id } }';
    expect((await post(url, { query: other, extensions: apq(sha256(other)) })).body.errors![0]!.extensions.code).toBe(
      'PERSISTED_QUERY_ONLY',
    );
    const after = await post(url, { extensions: apq(sha256(other)) });
    expect(after.status).toBe(404);
    expect(after.body.errors![0]!.extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
    // Over graphql-ws alike.
    const ws = (await overWebSocket(url, { query: '{ workspace { slug } }' })) as { error: unknown };
    expect(ws.error).toEqual([expect.objectContaining({ extensions: expect.objectContaining({ code: 'PERSISTED_QUERY_ONLY' }) })]);
  });
});

describe('a manifest of trusted documents', () => {
  it('is refused when a hash is not its document’s', () => {
    const dir = mkdtempSync(join(tmpdir(), 'jobgate-manifest-'));
    try {
      writeFileSync(join(dir, 'bad.json'), JSON.stringify({ [sha256('{ a }')]: '{ b }' }));
      expect(() => readDocumentManifest(join(dir, 'bad.json'))).toThrow(/is not the SHA-256 of its document/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
