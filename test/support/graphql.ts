/**
 * GraphQL through the real yoga server, in process (`yoga.fetch`): the same plugins, masking
 * and context as over HTTP.
 */
import { createLogger, type Logger } from '../../src/log.js';
import { createGatewayYoga, startGateway, type GatewayOptions, type RunningGateway, type Yoga } from '../../src/server/gateway.js';
import type { Actor } from '../../src/service/kernel/actor.js';
import { createHub, type Hub } from '../../src/subscriptions/hub/hub.js';
import { createLiveFeeds } from '../../src/subscriptions/live-feeds.js';
import type { TestDb } from './db.js';

export interface GqlResult<T = any> {
  data?: T | null;
  errors?: { message: string; path?: (string | number)[]; extensions?: Record<string, any> }[];
}

export interface TestGateway {
  yoga: Yoga;
  /**
   * Runs an operation as the default-workspace actor, or as `as`. A subscription goes over
   * Server-Sent Events and answers with its first message, or `{}` if none came within 500 ms.
   */
  gql<T = any>(query: string, variables?: Record<string, unknown>, as?: Actor): Promise<GqlResult<T>>;
  logged: string[];
  close(): Promise<void>;
}

/** With `live`, subscriptions are served by a real hub on the test database. */
export function createTestGateway(t: TestDb, options: { live?: boolean } = {}): TestGateway {
  const logged: string[] = [];
  const log: Logger = createLogger('debug', (line) => logged.push(line));
  const actors = new Map<string, Actor>();
  const hub: Hub | undefined = options.live ? createHub({ pool: t.database.pool, connectionString: t.url, log }) : undefined;
  const started = hub?.start();
  const yoga = createGatewayYoga({
    service: t.service,
    live: hub ? createLiveFeeds(t.service, hub) : undefined,
    log,
    // Tests pick the actor per request through a header only this test gateway reads.
    authenticate: async (request) => actors.get(request.headers.get('x-test-actor') ?? '') ?? t.actor,
  });
  return {
    yoga,
    logged,
    close: async () => {
      await started;
      await hub?.stop();
    },
    async gql(query, variables, as) {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      const subscription = /^\s*subscription\b/.test(query);
      if (subscription) headers.accept = 'text/event-stream';
      if (as) {
        const key = JSON.stringify(as);
        actors.set(key, as);
        headers['x-test-actor'] = key;
      }
      const response = await yoga.fetch('http://jobgate.test/graphql', {
        method: 'POST',
        headers,
        body: JSON.stringify({ query, variables }),
      });
      if (!subscription) return (await response.json()) as GqlResult;
      return firstEvent(response, 500);
    },
  };
}

/** The first `next` message of an SSE response (or `{}` after `ms`), then the stream is cancelled. */
async function firstEvent(response: Response, ms: number): Promise<GqlResult> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const deadline = Date.now() + ms;
  try {
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) return {};
      const chunk = await Promise.race([reader.read(), new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), left))]);
      if (chunk === 'timeout' || chunk.done) return {};
      text += decoder.decode(chunk.value, { stream: true });
      const match = /event: next\ndata: (.*)\n/.exec(text);
      if (match) return JSON.parse(match[1]!) as GqlResult;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/** A GraphQL request to a running jobgate's `url` as the key `key`: its data, or a thrown error naming the errors. */
export async function postGraphql(url: string, key: string, query: string, variables: Record<string, unknown> = {}): Promise<any> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data?: any; errors?: unknown[] };
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}

/**
 * A real gateway over `t`'s service on a loopback port (HTTP and WebSocket), answering bearer keys
 * as `jobgate serve` does, with `options` over those defaults; its caller closes it.
 */
export function listeningGateway(t: TestDb, options: Partial<GatewayOptions> = {}): Promise<RunningGateway> {
  return startGateway({
    service: t.service,
    log: createLogger('silent'),
    host: '127.0.0.1',
    port: 0,
    authenticate: (request) => t.service.authenticate(/^Bearer (\S+)$/.exec(request.headers.get('authorization') ?? '')?.[1]),
    ...options,
  });
}
