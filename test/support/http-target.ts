/**
 * A real HTTP server on loopback standing in for a customer's endpoint.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Hit {
  path: string;
  method: string;
  headers: IncomingMessage['headers'];
  body: string;
}

export interface HttpTarget {
  url: string;
  port: number;
  hits: Hit[];
  hitsOf(path: string): Hit[];
  /** Paths whose client went away before the response was complete. */
  abandoned: string[];
  route(path: string, fn: (req: IncomingMessage, res: ServerResponse, n: number) => void): void;
  close(): Promise<void>;
}

export async function startHttpTarget(): Promise<HttpTarget> {
  const routes = new Map<string, (req: IncomingMessage, res: ServerResponse, n: number) => void>();
  const hits: Hit[] = [];
  const abandoned: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      hits.push({ path, method: req.method ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.on('close', () => {
        if (!res.writableFinished) abandoned.push(path);
      });
      const fn = routes.get(path);
      if (!fn) {
        res.writeHead(404).end('no route');
        return;
      }
      fn(req, res, hits.filter((h) => h.path === path).length);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    hits,
    hitsOf: (path) => hits.filter((h) => h.path === path),
    abandoned,
    route: (path, fn) => void routes.set(path, fn),
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
