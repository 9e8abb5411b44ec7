/**
 * The HTTP face of jobgate: graphql-yoga over the schema, GraphiQL served from local assets
 * (no CDN: it must render on machines without internet), masked errors.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { renderGraphiQL } from '@graphql-yoga/render-graphiql';
import { createYoga, type YogaServerInstance } from 'graphql-yoga';
import type { Logger } from '../log.js';
import { schema } from '../schema/index.js';
import type { GraphQLContext } from '../schema/builder.js';
import type { Actor } from '../service/actor.js';
import type { JobService } from '../service/index.js';
import { createMaskError } from './mask-error.js';
import { handleRunDue, type RunDueOptions } from './run-due.js';

export interface GatewayOptions {
  service: JobService;
  /** Who a request acts as. Throw a DomainError (UNAUTHENTICATED) to refuse it. */
  authenticate(request: Request): Promise<Actor>;
  log: Logger;
  graphiql?: boolean;
  /** The serverless trigger, when JOBGATE_CRON_SECRET is set. */
  runDue?: RunDueOptions | undefined;
}

export type Yoga = YogaServerInstance<Record<string, never>, GraphQLContext>;

export function createGatewayYoga(options: GatewayOptions): Yoga {
  return createYoga<Record<string, never>, GraphQLContext>({
    schema,
    graphqlEndpoint: '/graphql',
    landingPage: false,
    graphiql: options.graphiql === false ? false : { title: 'jobgate', defaultQuery: DEFAULT_QUERY },
    renderGraphiQL,
    maskedErrors: { maskError: createMaskError(options.log) },
    logging: {
      debug: (...args) => options.log.debug(args.map(String).join(' ')),
      info: (...args) => options.log.info(args.map(String).join(' ')),
      warn: (...args) => options.log.warn(args.map(String).join(' ')),
      error: (...args) => options.log.error(args.map(String).join(' ')),
    },
    context: async ({ request }) => ({ actor: await options.authenticate(request), service: options.service }),
  }) as Yoga;
}

export interface RunningGateway {
  server: Server;
  yoga: Yoga;
  url: string;
  close(): Promise<void>;
}

export async function startGateway(options: GatewayOptions & { host: string; port: number }): Promise<RunningGateway> {
  const yoga = createGatewayYoga(options);
  const server = createServer((req, res) => {
    if (!handleRunDue(options.runDue, req, res)) void yoga(req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  // The address actually bound ("localhost" may resolve to ::1 first, where nothing listens).
  const shownHost = options.host === '0.0.0.0' || options.host === '::' ? 'localhost' : options.host.includes(':') ? `[${options.host}]` : options.host;
  const url = `http://${shownHost}:${port}/graphql`;
  let closing: Promise<void> | undefined;
  return {
    server,
    yoga,
    url,
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 5000).unref();
      })),
  };
}

const DEFAULT_QUERY = `# Welcome to jobgate. Try:
query Overview {
  workspace { slug name }
  endpoints(first: 10) { nodes { id name kind url handlerName } }
  jobs(first: 10) { nodes { id kind status endpoint { name } cron { expression timezone nextFireAt } } }
}
`;
