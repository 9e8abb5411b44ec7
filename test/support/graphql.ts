/**
 * GraphQL through the real yoga server, in process (`yoga.fetch`): the same plugins, masking
 * and context as over HTTP.
 */
import { createLogger, type Logger } from '../../src/log.js';
import { createGatewayYoga, type Yoga } from '../../src/server/gateway.js';
import type { Actor } from '../../src/service/actor.js';
import type { TestDb } from './db.js';

export interface GqlResult<T = any> {
  data?: T | null;
  errors?: { message: string; path?: (string | number)[]; extensions?: Record<string, any> }[];
}

export interface TestGateway {
  yoga: Yoga;
  /** Runs an operation as the default-workspace actor, or as `as`. */
  gql<T = any>(query: string, variables?: Record<string, unknown>, as?: Actor): Promise<GqlResult<T>>;
  logged: string[];
}

export function createTestGateway(t: TestDb): TestGateway {
  const logged: string[] = [];
  const log: Logger = createLogger('debug', (line) => logged.push(line));
  const actors = new Map<string, Actor>();
  const yoga = createGatewayYoga({
    service: t.service,
    log,
    // Tests pick the actor per request through a header only this test gateway reads.
    authenticate: async (request) => actors.get(request.headers.get('x-test-actor') ?? '') ?? t.actor,
  });
  return {
    yoga,
    logged,
    async gql(query, variables, as) {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
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
      return (await response.json()) as GqlResult;
    },
  };
}
