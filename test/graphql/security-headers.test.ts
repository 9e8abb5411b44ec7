/**
 * Headers a browser acts on, over a real gateway on HTTP: GraphiQL's page carries a
 * Content-Security-Policy (its one inline script allowed by hash, nothing framing it), and every
 * answer, GraphQL's JSON included, says `x-content-type-options: nosniff`.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { startGateway, type RunningGateway } from '../../src/server/gateway.js';
import { createTestDb, type TestDb } from '../support/db.js';

let t: TestDb;
let gw: RunningGateway;
let key: string;

beforeAll(async () => {
  t = await createTestDb();
  gw = await startGateway({
    service: t.service,
    log: createLogger('silent'),
    host: '127.0.0.1',
    port: 0,
    console: false,
    authenticate: (request) => t.service.authenticate(/^Bearer (\S+)$/.exec(request.headers.get('authorization') ?? '')?.[1]),
  });
  key = (await t.service.bootstrapKey('default', 'VIEWER', 'headers')).key;
});
afterAll(async () => {
  await gw.close();
  await t.close();
});

const directives = (csp: string | null) =>
  new Map(
    (csp ?? '')
      .split(';')
      .map((d) => d.trim().split(/\s+/) as [string, ...string[]])
      .map(([n, ...v]) => [n, v]),
  );

describe('security headers', () => {
  it('keep every GraphQL answer out of caches (no-store), a GET query answer included', async () => {
    const get = await fetch(`${gw.url}?query=${encodeURIComponent('{ workspace { slug } }')}`, {
      headers: { authorization: `Bearer ${key}`, 'x-jobgate-csrf': '1' },
    });
    expect(get.status).toBe(200);
    expect(get.headers.get('cache-control')).toBe('no-store');
    const post = await fetch(gw.url, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ workspace { slug } }' }),
    });
    expect(post.headers.get('cache-control')).toBe('no-store');
  });

  it("give GraphiQL's page a Content-Security-Policy that allows its own script by hash and no framing", async () => {
    const res = await fetch(gw.url, { headers: { accept: 'text/html' } });
    const html = await res.text();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const csp = directives(res.headers.get('content-security-policy'));
    expect(csp.get('frame-ancestors')).toEqual(["'none'"]);
    expect(csp.get('default-src')).toEqual(["'none'"]);
    expect(csp.get('object-src')).toEqual(["'none'"]);
    expect(csp.get('connect-src')).toEqual(["'self'"]);
    const scripts = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map(
      (m) => `'sha256-${createHash('sha256').update(m[1]!).digest('base64')}'`,
    );
    expect(scripts.length).toBeGreaterThan(0);
    expect(csp.get('script-src')).toEqual(scripts);
    expect(html).not.toMatch(/<script[^>]+src=["']?https?:/);
  });

  it('say nosniff on every answer: data, a refused key, an invalid document, a bad body, an unknown path', async () => {
    const post = (auth: string | undefined, body: string) =>
      fetch(gw.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
        body,
      });
    const answers = [
      await post(key, JSON.stringify({ query: '{ workspace { slug } }' })),
      await post(undefined, JSON.stringify({ query: '{ workspace { slug } }' })),
      await post(key, JSON.stringify({ query: '{ nope }' })),
      await post(key, '{not json'),
      await fetch(gw.url.replace('/graphql', '/nowhere')),
    ];
    expect(answers.map((a) => a.status)).toEqual([200, 401, 200, 400, 404]);
    for (const a of answers) expect(a.headers.get('x-content-type-options'), `${a.status} ${a.url}`).toBe('nosniff');
    expect(answers[0]!.headers.get('content-type')).toMatch(/^application\/(graphql-response\+)?json/);
  });
});
