/**
 * The HTTP face of jobgate: graphql-yoga over the schema, GraphiQL served from local assets
 * (no CDN: it must render on machines without internet, ./graphiql.ts), masked errors, and the
 * bounds on load (src/service/access/load-bounds.ts) for HTTP, WebSocket and SSE alike.
 */
import { useFormBodyHint, useMediaTypeError } from './media-type.js';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createYoga } from 'graphql-yoga';
import { withFields, type Logger } from '../log.js';
import { schema } from '../schema/index.js';
import type { GraphQLContext } from '../schema/builder.js';
import { UnauthenticatedError } from '../service/access/access.js';
import type { Actor } from '../service/kernel/actor.js';
import { useReplicaReads } from './replica-reads.js';
import { RateLimitedError } from '../service/kernel/errors.js';
import {
  createLoadBounds,
  LOAD_BOUND_DEFAULTS,
  type LoadBounds,
  type LoadBoundSettings,
  type StreamBudget,
} from '../service/access/load-bounds.js';
import type { JobService } from '../service/index.js';
import { bearerToken } from './bearer.js';
import { createMaskError } from './mask-error.js';
import { createErrorOrigins, requestIdFrom, useErrorOrigins, useRequestId } from './request-id.js';
import { hardeningPlugins } from './hardening.js';
import { useAuthenticateFirst, useTicketForOneSubscription } from './authenticate-first.js';
import { createEarlyRefusals } from './early-refusal.js';
import { clientAddressOf, trustedProxyCheck } from './client-address.js';
import { createGraphiQLPage } from './graphiql.js';
import { limitRequestBody } from './body-limit.js';
import { handleRunDue, type RunDueOptions } from './run-due.js';
import { createPersistedQueries, trustedDocuments, type PersistedQueries } from './persisted-queries.js';
import { CONSOLE_DOCUMENTS, DEFAULT_CONSOLE_DIR, loadConsoleSite, type ConsoleSite } from './console.js';
import { noLiveFeeds, type LiveFeeds } from '../subscriptions/live-feeds.js';
import { BoundedFeeds } from '../subscriptions/bounded-feeds.js';
import { useSharedSubscriptionExecution } from '../subscriptions/shared-event-results.js';
import { attachWebSocket, type Yoga, type YogaServerContext } from '../subscriptions/ws.js';
import { noopObserver, type Observer } from '../service/kernel/observer.js';
import { useObserveOperations } from './observe-plugin.js';
import { handleOps, routeOf, type OpsRoutes } from './ops-routes.js';
import { listen } from './listen.js';
import { boundConnections, CONNECTIONS_CHECKING_INTERVAL_MS } from './connection-bounds.js';

export interface GatewayOptions {
  service: JobService;
  /** Who a request acts as. Throw a DomainError (UNAUTHENTICATED) to refuse it. */
  authenticate(request: Request): Promise<Actor>;
  log: Logger;
  graphiql?: boolean;
  /** The serverless trigger, when JOBGATE_CRON_SECRET is set. */
  runDue?: RunDueOptions | undefined;
  /** Whether introspection is allowed (to authenticated callers). Default true. */
  introspection?: boolean;
  /**
   * Origins whose browser pages may call the API (CORS). Default none: a page on another origin
   * gets no CORS headers, so its browser refuses it the answer. `*` allows any origin.
   */
  corsOrigins?: string[];
  /** Largest request body accepted, in bytes. Default 1 MB. */
  maxBodyBytes?: number;
  /** Live subscriptions; without them, subscribing answers UNAVAILABLE. */
  live?: LiveFeeds | undefined;
  /** WebSocket: how long a client may take to send connection_init (close 4408). Default 10 s. */
  connectionInitWaitMs?: number;
  /** WebSocket: how often connections are pinged; one that has not answered by the next ping is dropped. Default WS_KEEPALIVE_MS (12 s). */
  keepAliveMs?: number;
  /** Where requests and operations are reported (metrics). Default: nowhere. */
  observer?: Observer;
  /** /metrics, /healthz and /readyz on the gateway's port. */
  ops?: OpsRoutes | undefined;
  /** The console at /console (src/server/console.ts): its build folder, or false for none. Default dist/console. */
  console?: string | false;
  /**
   * Bounds on what one API key, connection and client address may hold and send, in this
   * gateway's memory (src/service/access/load-bounds.ts); unset ones take LOAD_BOUND_DEFAULTS, 0 turns
   * one off.
   */
  bounds?: Partial<LoadBoundSettings> | undefined;
  /**
   * How long a refusal answered before its request was read is held (./early-refusal.ts), so a
   * flood that waits for its answers slows down. Default 1 s on average (each hold between half
   * and one and a half of it); 0 answers at once.
   */
  refusalHoldMs?: number;
  /** Reverse proxies whose X-Forwarded-For names the client (./client-address.ts). Default none. */
  trustedProxies?: string[] | undefined;
  /**
   * Persisted documents (./persisted-queries.ts): the console's are trusted (when it is served);
   * `manifests` names more (JOBGATE_PERSISTED_DOCUMENTS); `only` runs trusted documents and nothing
   * else (JOBGATE_PERSISTED_ONLY). Default: the console's, and any other document runs too.
   */
  persisted?: { only?: boolean | undefined; manifests?: string[] | undefined } | undefined;
  /**
   * With a read replica: queries may read lists, counts and stats from it, except a key's for
   * `windowMs` after its last mutation here (./replica-reads.ts). Unset: every read is the primary's.
   */
  replicaReads?: { windowMs: number } | undefined;
}

/** The gateway's persisted documents: the console build's manifest, then the operator's. */
export function persistedQueriesFor(options: Pick<GatewayOptions, 'console' | 'persisted'>, log?: Logger): PersistedQueries {
  const consoleManifest =
    options.console === false ? [] : [{ path: `${options.console ?? DEFAULT_CONSOLE_DIR}/${CONSOLE_DOCUMENTS}`, optional: true }];
  const manifests = [...consoleManifest, ...(options.persisted?.manifests ?? []).map((path) => ({ path }))];
  const persisted = createPersistedQueries({ trusted: trustedDocuments(manifests), only: options.persisted?.only ?? false });
  if (options.persisted?.only) log?.info(`gateway: persisted documents only: the ${persisted.trusted} trusted documents run, no other`);
  return persisted;
}

export type { Yoga };

/** The gateway's yoga; `bounds` are shared with its WebSocket server (startGateway), else its own. */
export function createGatewayYoga(
  options: GatewayOptions,
  bounds: LoadBounds = createLoadBounds(options.bounds),
  persisted: PersistedQueries = persistedQueriesFor(options),
): Yoga {
  const log = options.log;
  const graphiql = createGraphiQLPage();
  // What the masking logs carries the id of the request the error came from (./request-id.ts).
  const origins = createErrorOrigins();
  const maskError = createMaskError(log, origins);
  const actors = new WeakMap<Request, Actor>();
  const ticketed = new WeakSet<Request>();
  const requestIds = new WeakMap<Request, string>();
  const requestLog = (request: Request) => requestContext(log, requestIds.get(request)).log;
  const tickets = {
    check: (ticket: string) => options.service.checkSubscriptionTicket(ticket),
    redeem: (ticket: string) => options.service.redeemSubscriptionTicket(ticket),
  };
  return createYoga<YogaServerContext, GraphQLContext>({
    schema,
    graphqlEndpoint: '/graphql',
    landingPage: false,
    graphiql: options.graphiql === false ? false : { title: 'jobgate', defaultQuery: DEFAULT_QUERY },
    renderGraphiQL: graphiql.render,
    maskedErrors: { maskError },
    cors: corsFor(options.corsOrigins ?? []),
    batching: false,
    // The body limit is enforced in front of yoga (limitRequestBody, below, with its own 413):
    // yoga's copy of it would re-stream every body through a TransformStream to count it again,
    // a seventh of a small mutation's CPU.
    maxRequestBodySize: false,
    // The request id first (every later hook logs with it); then authentication: every later
    // hook (persisted queries included) sees only keyed requests.
    plugins: [
      useRequestId(requestIds, requestLog),
      useMediaTypeError(),
      useAuthenticateFirst({
        authenticate: options.authenticate,
        tickets,
        persisted,
        bounds,
        actors,
        ticketed,
        failed: (request, error) => origins.mark(error, requestLog(request)),
      }),
      useFormBodyHint(),
      ...persisted.plugins,
      useTicketForOneSubscription(ticketed),
      ...hardeningPlugins({ introspection: options.introspection ?? true }),
      useSharedSubscriptionExecution(),
      useObserveOperations(options.observer ?? noopObserver),
      ...(options.replicaReads ? [useReplicaReads(options.replicaReads)] : []),
      useErrorOrigins(origins),
      graphiql.plugin,
    ],
    logging: {
      // Yoga's debug lines ("Processing GraphQL Parameters", per request) cannot carry the
      // request's id; useRequestId writes one line per request that does.
      debug: () => {},
      info: (...args) => log.info(args.map(String).join(' ')),
      warn: (...args) => log.warn(args.map(String).join(' ')),
      // Yoga's copy of an error the masking already dealt with (see mask-error.ts) is dropped.
      error: (...args) => {
        if (args.length === 1 && maskError.handled(args[0])) return;
        log.error(args.map(String).join(' '));
      },
    },
    // WebSocket operations arrive already authenticated (see src/subscriptions/ws.ts), HTTP ones
    // by `useAuthenticateFirst`.
    context: async (initial) => {
      const request = requestContext(options.log, requestIds.get(initial.request) ?? (initial as { requestId?: string }).requestId);
      let actor = (initial as { actor?: Actor }).actor ?? actors.get(initial.request);
      try {
        actor ??= await options.authenticate(initial.request);
      } catch (error) {
        origins.mark(error, request.log);
        throw error;
      }
      return {
        ...request,
        actor,
        service: options.service,
        live: liveFor(options.live ?? noLiveFeeds, initial as LiveInitial, bounds),
      };
    },
  }) as Yoga;
}

/** The request's id and logger for resolvers; a WebSocket operation brings an id of its own (src/subscriptions/ws.ts). */
function requestContext(log: Logger, requestId = requestIdFrom(undefined)): { requestId: string; log: Logger } {
  return { requestId, log: withFields(log, { requestId }) };
}

/**
 * Yoga's default reflects any origin with credentials allowed. Keys travel in a header, not a
 * cookie, so that default leaks nothing by itself, but an API a browser on any origin may call is
 * not a default an operator chose; the console is served from the gateway's own origin and needs
 * none. Credentials are never allowed: there are no cookies to send.
 */
function corsFor(origins: string[]) {
  if (origins.length === 0) return false;
  return {
    origin: origins.includes('*') ? '*' : origins,
    credentials: false,
    methods: ['GET', 'POST'],
    allowedHeaders: ['authorization', 'content-type', 'accept', 'x-jobgate-csrf'],
    maxAge: 600,
  };
}

/** What a WebSocket operation brings for its streams (src/subscriptions/ws.ts). */
interface LiveInitial {
  cutOff?: () => void;
  streams?: StreamBudget;
}

/**
 * A WebSocket operation carries its connection's cut-off and subscription budget; a stream over
 * HTTP (SSE) is a connection of its own.
 */
function liveFor(live: LiveFeeds, initial: LiveInitial, bounds: LoadBounds): LiveFeeds {
  return new BoundedFeeds(initial.cutOff ? live.forConnection(initial.cutOff) : live, initial.streams ?? bounds.ownStreams);
}

export interface RunningGateway {
  server: Server;
  yoga: Yoga;
  /** What the gateway's bounds on load hold now (src/service/access/load-bounds.ts). */
  bounds: Pick<LoadBounds, 'settings' | 'stats'>;
  url: string;
  close(): Promise<void>;
}

/**
 * Runs a GraphQL request when the bounds on load admit it (LoadBounds.admit: at once, or when its
 * key has a place free), else answers their refusal before the request is read.
 */
function admit(
  bounds: LoadBounds,
  req: IncomingMessage,
  res: ServerResponse,
  address: string | undefined,
  run: () => void,
  refuse: (refusal: RateLimitedError) => void,
): void {
  // An event stream stays open for as long as its subscription: it holds no request place
  // (connections and subscriptions have bounds of their own).
  const stream = (req.headers.accept ?? '').includes('text/event-stream');
  const admission = bounds.admit(address, req.headers.authorization, run, !stream);
  if (admission instanceof RateLimitedError) return refuse(admission);
  // 'close' comes once the answer is sent, or once the client is gone, waiting or not.
  if (admission) res.once('close', admission);
}

export async function startGateway(
  options: GatewayOptions & {
    host: string;
    port: number;
    /** A server already listening on the gateway's address (the start-up probes' one) to answer on instead of a new one. */
    listening?: Server | undefined;
  },
): Promise<RunningGateway> {
  const bounds = createLoadBounds(options.bounds);
  const persisted = persistedQueriesFor(options, options.log);
  const yoga = createGatewayYoga(options, bounds, persisted);
  const clientAddress = clientAddressOf(options.trustedProxies);
  const maxBody = options.maxBodyBytes ?? 1_000_000;
  const observer = options.observer ?? noopObserver;
  const refusals = createEarlyRefusals({ holdMs: options.refusalHoldMs ?? 1000, corsOrigins: options.corsOrigins ?? [] });
  const site = mountConsole(options);
  // Answers in progress, so that a close can end the ones that never end by themselves.
  const inFlight = new Set<ServerResponse>();
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    const started = performance.now();
    inFlight.add(res);
    res.on('close', () => inFlight.delete(res));
    // Every answer is what its Content-Type says: no browser may sniff a JSON answer (whose
    // strings a client chose) into HTML or script.
    res.setHeader('x-content-type-options', 'nosniff');
    res.on('finish', () => observer.httpRequest(routeOf(req.url), res.statusCode, (performance.now() - started) / 1000));
    if (handleOps(options.ops, req, res)) return;
    if (site?.handle(req, res)) return;
    if (redirectRoot(req, res, site?.built === true)) return;
    if (handleRunDue(options.runDue, req, res)) return;
    const requestId = requestIdFrom(req.headers['x-request-id']);
    res.setHeader('x-request-id', requestId);
    // Answers are a key's own data, as of now: no cache keeps them (a GET query's answer included).
    res.setHeader('cache-control', 'no-store');
    const address = clientAddress(req);
    limitRequestBody(req, res, maxBody, () => {
      const run = () => void yoga(req, res, { requestId, clientAddress: address }); // useRequestId reads the id there
      // Every request yoga answers, whatever its path: it serves /graphql/ as /graphql, and a path
      // left out here would skip the key's bounds.
      admit(bounds, req, res, address, run, (refusal) => refusals.refuse(req, res, refusal, requestId));
    });
  };
  const server = options.listening ?? createServer({ connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS });
  boundConnections(server, {
    connectionsPerAddress: options.bounds?.connectionsPerAddress ?? LOAD_BOUND_DEFAULTS.connectionsPerAddress,
    isTrustedProxy: trustedProxyCheck(options.trustedProxies),
    log: options.log,
  });
  server.on('request', onRequest);
  if (!options.listening) await listen(server, options.port, options.host, 'PORT');
  // Once listening, the server still reports errors (accept failing with EMFILE when file
  // descriptors run out, say): without a listener each would end the process. The gateway
  // logs them and keeps serving its connections.
  server.on('error', (error) => options.log.error(`gateway: server error: ${error.message}`));
  const ws = attachWebSocket(server, yoga, {
    log: options.log,
    maxPayload: maxBody,
    connectionInitWaitMs: options.connectionInitWaitMs,
    keepAliveMs: options.keepAliveMs,
    watchKey: options.live?.watchKey,
    bounds,
    clientAddress,
    documentOf: (payload) => persisted.document(payload),
    maskError: createMaskError(options.log),
    // The same authentication as HTTP: a Request-shaped object carrying the key (sent as a bearer
    // token, or bare in connectionParams). A key that is not a valid header value (a newline, a
    // character past U+00FF) cannot be one: refused as any bad key is, not reported as a server
    // failure.
    authenticate: (credential) => {
      const key = credential === undefined ? undefined : (bearerToken(credential) ?? credential);
      let request: Request;
      try {
        request = new Request('http://ws/', { headers: key ? { authorization: `Bearer ${key}` } : {} });
      } catch {
        throw new UnauthenticatedError();
      }
      return options.authenticate(request);
    },
  });
  const url = `http://${hostToShow(options.host)}:${(server.address() as AddressInfo).port}/graphql`;
  if (site?.built) options.log.info(`gateway: console at ${url.replace(/\/graphql$/, '/console/')}`);
  return { server, yoga, bounds, url, close: closer(server, ws, inFlight) };
}

/** The content type of a subscription's stream over HTTP: yoga serves subscriptions as SSE only (multipart is a 406, ./media-type.ts). */
const STREAMING = /^text\/event-stream/;

/**
 * The gateway's close, once however often called: no new connections, WebSocket ones closed,
 * idle ones at once, and what is still answering given up to 5 s. A subscription over SSE
 * streams until its client leaves, so the close waited the whole 5 s for each one: their
 * connections are closed now, as WebSocket ones are.
 */
function closer(server: Server, ws: { close(): unknown }, inFlight: Set<ServerResponse>): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () =>
    (closing ??= new Promise<void>((resolve) => {
      void ws.close();
      server.close(() => resolve());
      server.closeIdleConnections();
      for (const res of inFlight) if (STREAMING.test(String(res.getHeader('content-type') ?? ''))) res.destroy();
      setTimeout(() => server.closeAllConnections(), 5000).unref();
    }));
}

/**
 * `/` sends a browser where there is something to see: the console when it is built, else
 * GraphiQL. It was an empty 404, the first page a newcomer opening the printed address met.
 */
function redirectRoot(req: IncomingMessage, res: ServerResponse, consoleBuilt: boolean): boolean {
  if ((req.url ?? '').split('?')[0] !== '/' || (req.method !== 'GET' && req.method !== 'HEAD')) return false;
  res.writeHead(302, { location: consoleBuilt ? '/console/' : '/graphql', 'content-length': '0' });
  res.end();
  return true;
}

/** The address actually bound, as a URL's host ("localhost" may resolve to ::1 first, where nothing listens). */
const hostToShow = (host: string) => (host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host);

/** The console's site; a missing build is said once, at start, and /console answers how to build it. */
function mountConsole(options: GatewayOptions): ConsoleSite | undefined {
  if (options.console === false) return undefined;
  const site = loadConsoleSite(options.console);
  if (!site.built)
    options.log.error(
      `gateway: the console is not built (no ${site.dir}/index.html): run "npm run console:build"; /console answers 503 until then`,
    );
  return site;
}

const DEFAULT_QUERY = `# Welcome to jobgate.
# Every request needs an API key: open
# "Headers" below and set
#   { "Authorization": "Bearer <key>" }
# (the embedded default saved its first
# ADMIN key in .jobgate/admin-key).
# Then click "Re-fetch GraphQL schema"
# (the circling arrows, bottom left) for
# Docs and completion: the page asked for
# the schema before it had your key.
# A five-minute tour, with documents to
# paste here: the README, "Watch it work".
query Overview {
  workspace { slug name }
  endpoints(first: 10) {
    nodes { id name kind handlerName }
  }
  jobs(first: 10) {
    nodes {
      id kind status
      endpoint { name }
      cron { expression nextFireAt }
    }
  }
}
`;
