/**
 * The console's static site at /console (built by `npm run console:build` into dist/console):
 * files read once at start into memory (the build is ~100 KB), answered with their content type,
 * a year's immutable caching for content-hashed assets, no caching for index.html, and the SPA
 * fallback (any other path under /console is the app's own route, so it gets index.html).
 *
 * Every answer carries a strict Content-Security-Policy: scripts and styles from this origin only
 * (the build has no inline script or style element; React sets styles through the CSSOM, which CSP
 * does not govern), connections to this origin only (the API and its WebSocket), no frames, no
 * plugins, no base-URI games. The console needs nothing else, so nothing else is allowed.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { dirname, extname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const CONSOLE_PATH = '/console';

/**
 * The console build's manifest of its documents (graphql-codegen's persisted documents, copied in
 * by console/vite.config.ts): the hashes the console sends, trusted by the gateway (./persisted-queries.ts).
 */
export const CONSOLE_DOCUMENTS = 'persisted-documents.json';

/** dist/console of this checkout: src/server/console.ts and dist/server/console.js are both two levels down. */
export const DEFAULT_CONSOLE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../dist/console');

export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  // data: for the icon, which index.html carries inline (no request, no 404 for /favicon.ico).
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

interface Asset {
  body: Buffer;
  type: string;
  immutable: boolean;
}

export interface ConsoleSite {
  /** Whether a build was found; without one, /console answers 503 saying how to build it. */
  readonly built: boolean;
  readonly dir: string;
  /** Handles the request if it is for /console; false lets the next handler have it. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [path];
  });
}

const MISSING = (dir: string) =>
  `The console is not built (no ${join(dir, 'index.html')}). Run "npm run console:build" (npm install runs it), then restart the gateway.\n`;

export function loadConsoleSite(dir: string = DEFAULT_CONSOLE_DIR): ConsoleSite {
  const assets = new Map<string, Asset>();
  const built = existsSync(join(dir, 'index.html'));
  if (built) {
    for (const file of walk(dir)) {
      const rel = relative(dir, file).split(sep).join('/');
      assets.set(`/${rel}`, {
        body: readFileSync(file),
        type: TYPES[extname(file)] ?? 'application/octet-stream',
        // Vite names every built asset after its content hash.
        immutable: rel.startsWith('assets/'),
      });
    }
  }
  const index = assets.get('/index.html');

  const send = (req: IncomingMessage, res: ServerResponse, status: number, headers: Record<string, string>, body: Buffer | string) => {
    res.writeHead(status, {
      'content-security-policy': CONSOLE_CSP,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      'cross-origin-opener-policy': 'same-origin',
      ...headers,
      'content-length': String(Buffer.byteLength(body)),
    });
    res.end(req.method === 'HEAD' ? undefined : body);
  };

  return {
    built,
    dir,
    handle(req, res) {
      const path = (req.url ?? '').split('?')[0]!;
      if (path !== CONSOLE_PATH && !path.startsWith(`${CONSOLE_PATH}/`)) return false;
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        send(req, res, 405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' }, 'method not allowed\n');
        return true;
      }
      if (!index) {
        send(req, res, 503, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' }, MISSING(dir));
        return true;
      }
      if (path === CONSOLE_PATH) {
        send(req, res, 308, { location: `${CONSOLE_PATH}/`, 'content-type': 'text/plain; charset=utf-8' }, '');
        return true;
      }
      // Only names the build contains are served: a path is a key of the map, never a filesystem path.
      const asset = assets.get(path.slice(CONSOLE_PATH.length));
      if (asset && asset !== index) {
        send(
          req,
          res,
          200,
          { 'content-type': asset.type, 'cache-control': asset.immutable ? 'public, max-age=31536000, immutable' : 'no-cache' },
          asset.body,
        );
        return true;
      }
      // A missing asset is a 404 (a stale page asking for an old hash must not get HTML as script).
      if (path.startsWith(`${CONSOLE_PATH}/assets/`)) {
        send(req, res, 404, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' }, 'not found\n');
        return true;
      }
      send(req, res, 200, { 'content-type': index.type, 'cache-control': 'no-cache' }, index.body);
      return true;
    },
  };
}
