/**
 * /console as the gateway serves it: content types, caching, the SPA fallback, the CSP, and a
 * missing build said plainly. Over a real HTTP server on loopback.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_CSP, loadConsoleSite } from '../../src/server/console.js';

let dir: string;
let built: Server;
let missing: Server;
const urlOf = (s: Server, path: string) => `http://127.0.0.1:${(s.address() as AddressInfo).port}${path}`;

async function serve(site: ReturnType<typeof loadConsoleSite>): Promise<Server> {
  const server = createServer((req, res) => {
    if (site.handle(req, res)) return;
    res.writeHead(418).end('not mine');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'jobgate-console-'));
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'index.html'), '<!doctype html><script type="module" src="/console/assets/index-abc123.js"></script>');
  writeFileSync(join(dir, 'assets', 'index-abc123.js'), 'console.log("hi")');
  writeFileSync(join(dir, 'assets', 'index-def456.css'), 'body{}');
  built = await serve(loadConsoleSite(dir));
  missing = await serve(loadConsoleSite(join(dir, 'nothing-here')));
});
afterAll(async () => {
  built.close();
  missing.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the console site', () => {
  it('serves hashed assets with their content type, cached for a year, and index.html never cached', async () => {
    const js = await fetch(urlOf(built, '/console/assets/index-abc123.js'));
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(await js.text()).toBe('console.log("hi")');
    const css = await fetch(urlOf(built, '/console/assets/index-def456.css'));
    expect(css.headers.get('content-type')).toBe('text/css; charset=utf-8');
    const index = await fetch(urlOf(built, '/console/'));
    expect(index.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(index.headers.get('cache-control')).toBe('no-cache');
    expect(await index.text()).toContain('index-abc123.js');
  });

  it("answers the app's own routes with index.html (the SPA fallback), and a missing asset with 404", async () => {
    for (const path of ['/console/jobs', '/console/jobs/8f0c', '/console/executions?status=FAILED']) {
      const res = await fetch(urlOf(built, path));
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('index-abc123.js');
    }
    const gone = await fetch(urlOf(built, '/console/assets/index-old.js'));
    expect(gone.status).toBe(404);
    expect(gone.headers.get('content-type')).toBe('text/plain; charset=utf-8');
  });

  it('sends a strict Content-Security-Policy: scripts and styles from this origin only, nothing inline', async () => {
    const res = await fetch(urlOf(built, '/console/'));
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toBe(CONSOLE_CSP);
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).not.toContain('unsafe-eval');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('redirects /console to /console/, leaves other paths alone, and refuses writes', async () => {
    const bare = await fetch(urlOf(built, '/console'), { redirect: 'manual' });
    expect(bare.status).toBe(308);
    expect(bare.headers.get('location')).toBe('/console/');
    expect((await fetch(urlOf(built, '/consoles'))).status).toBe(418);
    expect((await fetch(urlOf(built, '/graphql'))).status).toBe(418);
    expect((await fetch(urlOf(built, '/console/'), { method: 'POST', body: 'x' })).status).toBe(405);
  });

  it('serves only files of the build, whatever the path says', async () => {
    for (const path of ['/console/../package.json', '/console/%2e%2e/%2e%2e/etc/passwd', '/console/assets/../../index.html']) {
      const res = await fetch(urlOf(built, path));
      const text = await res.text();
      expect(text).not.toContain('root:');
      expect(text).not.toContain('"name"');
    }
  });

  it('says how to build the console when the build is missing', async () => {
    const res = await fetch(urlOf(missing, '/console/'));
    expect(res.status).toBe(503);
    expect(await res.text()).toContain('npm run console:build');
  });
});
