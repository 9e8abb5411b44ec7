/**
 * A real gateway (HTTP + WebSocket on a loopback port) with its live hub, over a test
 * database, and real graphql-ws clients that collect what a subscription delivers.
 */
import type { AddressInfo } from 'node:net';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { createLogger } from '../../src/log.js';
import { startGateway, type GatewayOptions, type RunningGateway } from '../../src/server/gateway.js';
import { createHub, type Hub, type HubOptions } from '../../src/subscriptions/hub/hub.js';
import { createLiveFeeds, type LiveFeedOptions } from '../../src/subscriptions/live-feeds.js';
import type { TestDb } from './db.js';
import { track, untrack } from './tracked.js';
import type { JobService } from '../../src/service/index.js';

export interface LiveGateway {
  gw: RunningGateway;
  hub: Hub;
  httpUrl: string;
  wsUrl: string;
  logs: string[];
  /** A graphql-ws client authenticating with `key`. */
  client(key: string): Client;
  close(): Promise<void>;
}

export async function startLiveGateway(
  t: TestDb,
  options: {
    hub?: Partial<HubOptions>;
    gateway?: Partial<GatewayOptions>;
    live?: LiveFeedOptions;
    connectionString?: string;
    /** The gateway's own service (a replica's), instead of the test database's. */
    service?: JobService;
  } = {},
): Promise<LiveGateway> {
  const logs: string[] = [];
  const log = createLogger('debug', (l) => logs.push(l));
  const hub = createHub({ pool: t.database.pool, connectionString: options.connectionString ?? t.url, log, ...options.hub });
  await hub.start();
  const service = options.service ?? t.service;
  const gw = await startGateway({
    service,
    log,
    host: '127.0.0.1',
    port: 0,
    live: createLiveFeeds(service, hub, options.live),
    authenticate: (request) => service.authenticate(/^Bearer (\S+)$/.exec(request.headers.get('authorization') ?? '')?.[1]),
    ...options.gateway,
  });
  const port = (gw.server.address() as AddressInfo).port;
  const clients: Client[] = [];
  const live: LiveGateway = {
    gw,
    hub,
    logs,
    httpUrl: `http://127.0.0.1:${port}/graphql`,
    wsUrl: `ws://127.0.0.1:${port}/graphql`,
    client(key) {
      const c = createClient({
        url: `ws://127.0.0.1:${port}/graphql`,
        webSocketImpl: WebSocket,
        retryAttempts: 0,
        connectionParams: { authorization: `Bearer ${key}` },
      });
      clients.push(c);
      return c;
    },
    async close() {
      await Promise.all(clients.map((c) => c.dispose()));
      await gw.close();
      await hub.stop();
      untrack(live);
    },
  };
  track(live, `live gateway on port ${port} (close() it)`);
  return live;
}

export interface Collected<T> {
  items: T[];
  errors: unknown[];
  completed: boolean;
  /** Resolves once `predicate` holds for the items (or rejects after `ms`). */
  until(predicate: (items: T[]) => boolean, ms?: number, what?: string): Promise<T[]>;
  stop(): void;
}

/** Subscribes and collects `data[field]` of every message. */
export function collect<T = any>(client: Client, query: string, variables: Record<string, unknown> = {}): Collected<T> {
  const out: Collected<T> = {
    items: [],
    errors: [],
    completed: false,
    async until(predicate, ms = 10_000, what = 'the subscription to deliver') {
      const deadline = Date.now() + ms;
      while (!predicate(out.items)) {
        if (out.errors.length) throw new Error(`subscription failed: ${JSON.stringify(out.errors)}`);
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; got ${JSON.stringify(out.items).slice(0, 2000)}`);
        await new Promise((r) => setTimeout(r, 10));
      }
      return out.items;
    },
    stop: () => {},
  };
  out.stop = client.subscribe<Record<string, T>>(
    { query, variables },
    {
      next: (message) => {
        if (message.errors) out.errors.push(...message.errors);
        if (message.data) out.items.push(Object.values(message.data)[0] as T);
      },
      error: (e) => out.errors.push(e),
      complete: () => (out.completed = true),
    },
  );
  return out;
}
