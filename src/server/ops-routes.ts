/**
 * The operator's routes: `GET /metrics` (Prometheus text format, behind its own bearer token),
 * `GET /healthz` and `GET /readyz` (no authentication; they reveal nothing but fixed phrases).
 * Served on the gateway's port, and by `jobgate worker` on a port of its own
 * (JOBGATE_METRICS_PORT, see startOpsServer).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/prometheus.js';
import { bearerToken } from './bearer.js';
import type { Health } from './health.js';
import { listen } from './listen.js';
import { boundConnections, CONNECTIONS_CHECKING_INTERVAL_MS, type ConnectionBounds } from './connection-bounds.js';

export interface OpsRoutes {
  health: Health;
  /** Undefined while the process is still starting (before it reached its database): /metrics answers 503. */
  metrics: Metrics | undefined;
  /** Bearer token of /metrics; undefined turns the route off (404). */
  metricsToken: string | undefined;
  log: Logger;
}

/** A bounded name for each route, for the request metrics. */
export function routeOf(url: string | undefined): string {
  const path = (url ?? '').split('?')[0];
  switch (path) {
    case '/graphql':
    case '/metrics':
    case '/healthz':
    case '/readyz':
    case '/jobs/run-due':
      return path;
    default:
      return 'other';
  }
}

/**
 * The token compared in constant time: both sides are hashed first, so neither the comparison
 * nor a length check before it tells how much of a guess was right.
 */
function tokenMatches(header: string | undefined, token: string): boolean {
  const given = bearerToken(header);
  const digest = (s: string) => createHash('sha256').update(s).digest();
  const ok = timingSafeEqual(digest(given ?? ''), digest(token));
  return ok && given !== undefined;
}

function send(res: ServerResponse, status: number, body: string, type = 'application/json') {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' }).end(body);
}

/** Answers the request if it is one of the operator's routes; returns false to let the next handler have it. */
export function handleOps(ops: OpsRoutes | undefined, req: IncomingMessage, res: ServerResponse): boolean {
  const route = routeOf(req.url);
  if (!ops || (route !== '/metrics' && route !== '/healthz' && route !== '/readyz')) return false;
  if (route === '/metrics' && ops.metricsToken === undefined) return false;
  req.resume();
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('allow', 'GET, HEAD');
    send(res, 405, JSON.stringify({ error: { code: 'METHOD_NOT_ALLOWED', message: 'use GET' } }));
    return true;
  }
  if (route === '/healthz') {
    send(res, 200, JSON.stringify({ status: 'up' }));
    return true;
  }
  if (route === '/readyz') {
    ops.health.readiness().then(
      ({ ready, reasons }) => send(res, ready ? 200 : 503, JSON.stringify(ready ? { status: 'ready' } : { status: 'not ready', reasons })),
      (error: unknown) => {
        ops.log.error(`readyz: ${(error as Error).message}`);
        send(res, 503, JSON.stringify({ status: 'not ready', reasons: ['check failed'] }));
      },
    );
    return true;
  }
  if (!tokenMatches(req.headers.authorization, ops.metricsToken!)) {
    res.setHeader('www-authenticate', 'Bearer');
    send(res, 401, JSON.stringify({ error: { code: 'UNAUTHENTICATED', message: 'missing or wrong bearer token' } }));
    return true;
  }
  const metrics = ops.metrics;
  if (!metrics) {
    send(res, 503, JSON.stringify({ error: { code: 'UNAVAILABLE', message: 'waiting for database' } }));
    return true;
  }
  metrics.render().then(
    (text) => send(res, 200, text, metrics.contentType),
    (error: unknown) => {
      ops.log.error(`metrics: rendering failed: ${(error as Error).message}`);
      send(res, 500, JSON.stringify({ error: { code: 'INTERNAL_SERVER_ERROR', message: 'Unexpected error.' } }));
    },
  );
  return true;
}

export interface OpsServer {
  url: string;
  port: number;
  /** The listening server, for whoever takes it over (`takeOver`). */
  server: Server;
  /**
   * Stops answering requests here and hands the listening server over (the gateway, once it is
   * built, answers on the same socket: no moment without a listener). `close` then does nothing.
   */
  takeOver(): Server;
  close(): Promise<void>;
}

/**
 * A server of the operator's routes alone: what `jobgate worker` serves on JOBGATE_METRICS_PORT.
 * With `starting`, the gateway's port while the process waits for its database: other routes
 * answer 503 (not there yet) instead of 404, until the gateway takes the server over.
 */
export async function startOpsServer(
  ops: OpsRoutes,
  host: string,
  port: number,
  {
    starting = false,
    setting = 'PORT',
    connections,
  }: { starting?: boolean; setting?: string; connections?: ConnectionBounds | undefined } = {},
): Promise<OpsServer> {
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    const started = performance.now();
    res.on('finish', () => ops.metrics?.observer.httpRequest(routeOf(req.url), res.statusCode, (performance.now() - started) / 1000));
    if (!handleOps(ops, req, res)) {
      req.resume();
      if (starting) send(res, 503, JSON.stringify({ error: { code: 'UNAVAILABLE', message: 'starting: waiting for database' } }));
      else send(res, 404, JSON.stringify({ error: { code: 'NOT_FOUND', message: 'no such route' } }));
    }
  };
  const server = createServer({ connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS }, onRequest);
  // The gateway's port while the process waits for its database: bounded from the start, since
  // descriptors taken now would keep the database's own connections from opening.
  if (connections) boundConnections(server, connections);
  await listen(server, port, host, setting);
  const onError = (error: Error) => ops.log.error(`metrics server: ${error.message}`);
  server.on('error', onError);
  const bound = (server.address() as AddressInfo).port;
  const shownHost = host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  let handedOver = false;
  return {
    url: `http://${shownHost}:${bound}`,
    port: bound,
    server,
    takeOver() {
      handedOver = true;
      server.off('request', onRequest);
      server.off('error', onError);
      return server;
    },
    close: () =>
      handedOver
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            server.close(() => resolve());
            server.closeAllConnections();
          }),
  };
}
