/**
 * GraphQL over WebSocket (the graphql-transport-ws protocol, graphql-ws) on the gateway's port
 * and path. Operations run through yoga's envelop (`getEnveloped`), so the limits, masking and
 * context that guard HTTP guard WebSocket operations identically.
 *
 * The key travels in `connectionParams.authorization` (or the upgrade request's Authorization
 * header) and is checked at connection_init (a bad key closes the socket with 4403) and again
 * at every operation; a key that is revoked (or changes role) while connected has its socket
 * closed with 4403 at once (see ./key-watch.ts).
 *
 * The bounds on load (src/service/access/load-bounds.ts) hold here as over HTTP: failed authentications
 * per client address, the key's connections (one past them is closed with 4429, which
 * graphql-ws clients do not retry), each operation a request of the key's rate, and the
 * connection's subscriptions (an operation refused gets an error message, RATE_LIMITED).
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { GraphQLError, type GraphQLFormattedError } from 'graphql';
import type { Context, SubscribePayload } from 'graphql-ws';
import { useServer } from 'graphql-ws/use/ws';
import type { YogaServerInstance } from 'graphql-yoga';
import { WebSocketServer, type WebSocket } from 'ws';
import { WS_KEEPALIVE_MS } from '../defaults.js';
import type { Logger } from '../log.js';
import type { GraphQLContext } from '../schema/builder.js';
import type { Actor } from '../service/kernel/actor.js';
import { DomainError, RateLimitedError } from '../service/kernel/errors.js';
import type { LoadBounds, StreamBudget } from '../service/access/load-bounds.js';
import { isConnectionError } from '../service/ops/unavailable.js';

/** The gateway's yoga instance, whose envelop runs every WebSocket operation. */
/** The server context: the request's id, as the HTTP handler chose it (src/server/request-id.ts). */
export interface YogaServerContext {
  requestId?: string;
  /** The client's address (src/server/client-address.ts); none for a request made in process. */
  clientAddress?: string | undefined;
}
export type Yoga = YogaServerInstance<YogaServerContext, GraphQLContext>;

export interface WebSocketOptions {
  /**
   * Who a connection acts as, from its credential as the client sent it (`connectionParams.authorization`,
   * else the upgrade request's Authorization header; the caller reads the bearer token out of it).
   */
  authenticate(credential: string | undefined): Promise<Actor>;
  /** How errors are shaped for clients: the HTTP path's masking (src/server/mask-error.ts), so both answer alike. */
  maskError(error: unknown, message: string): Error;
  log: Logger;
  /** Largest message accepted, in bytes. */
  maxPayload?: number | undefined;
  /** How long a client may take to send connection_init before the socket is closed with 4408. Default 10 s. */
  connectionInitWaitMs?: number | undefined;
  /**
   * How often a connection is pinged; one that has not answered by the next ping is terminated.
   * Default WS_KEEPALIVE_MS (12 s, src/defaults.ts).
   */
  keepAliveMs?: number | undefined;
  /** Calls `end` if the actor's key lapses (revoked, another role) while the connection is open; returns the unwatch. */
  watchKey?: ((actor: Actor, end: () => void) => () => void) | undefined;
  /** The gateway's bounds on load, shared with its HTTP path. */
  bounds: LoadBounds;
  /** The address a connection's failed authentications count against. */
  clientAddress(request: IncomingMessage): string | undefined;
  /**
   * The document a subscribe payload asks for, by its text or by its hash alone (persisted
   * documents, src/server/persisted-queries.ts: the same store and the same refusals as HTTP).
   * Default: its text.
   */
  documentOf?: ((payload: { query?: string; extensions?: Record<string, unknown> | null }) => Promise<string>) | undefined;
}

/**
 * The close code and reason of a connection_init without a valid key (a close reason holds at most
 * 123 bytes). 4403 is graphql-ws's "Forbidden", which its clients do not retry.
 */
const FORBIDDEN = { code: 4403, reason: 'Forbidden: send a valid API key in connectionParams, as authorization: "Bearer <key>"' } as const;

/** The close code and reason of a connection whose key lapsed: 4403 is graphql-ws's "Forbidden", which its clients do not retry. */
const KEY_LAPSED = { code: 4403, reason: 'API key revoked or changed' } as const;
/** A connection refused by a bound (RATE_LIMITED): 4429 is graphql-ws's "Too many requests", which its clients do not retry either. */
const TOO_MANY = 4429;

/** Each admitted connection's subscription budget. */
const streamsByConnection = new WeakMap<object, StreamBudget>();

/** The connection's credential, authenticated within the bounds on failed authentications. */
function authenticateCredential(ctx: WsContext, options: WebSocketOptions): Promise<Actor> {
  const credential = credentialOf(ctx.connectionParams, ctx.extra.request);
  return options.bounds.authenticate(options.clientAddress(ctx.extra.request), credential, () => options.authenticate(credential));
}

function credentialOf(params: Readonly<Record<string, unknown>> | undefined, request: IncomingMessage): string | undefined {
  return (typeof params?.authorization === 'string' ? params.authorization : undefined) ?? request.headers.authorization;
}

/**
 * Every operation has a request id, as an HTTP request has (src/server/request-id.ts): its
 * resolvers log with it, and every error the client is sent carries it in `extensions.requestId`.
 * WebSocket operations have no header to bring one: each gets a new one.
 */
function withRequestId(errors: readonly GraphQLFormattedError[], requestId: string | undefined): GraphQLFormattedError[] {
  return errors.map((e) => {
    const { http: _http, ...extensions } = (e.extensions ?? {}) as Record<string, unknown>;
    return { ...e, extensions: requestId ? { ...extensions, requestId } : extensions };
  });
}

/**
 * A socket error is a client's bad frame (too large, invalid UTF-8, a protocol violation) or a
 * dropped connection; ws has already started closing the socket with the matching close code
 * (1009, 1007, 1002), and ends it if the client does not finish the handshake. graphql-ws
 * answers each one by printing a stack trace to stderr, so any client could flood the log by
 * opening connections that send bad frames. Its handler (added while the connection event was
 * emitted) is replaced by one log line.
 */
function replaceErrorHandler(ws: WebSocket, log: Logger) {
  ws.removeAllListeners('error');
  ws.on('error', (error: Error & { code?: string }) => {
    log.info(`websocket: closing a connection after a socket error (${error.code ?? 'error'}: ${error.message})`);
  });
}

/**
 * The protocol lets a client reuse a subscription id once it has sent `complete` for it, and
 * graphql-ws mishandles a reuse that arrives before the first subscription has wound down (its
 * handler still returning the stream, or still setting it up): the first one's ending sees the
 * new id and sends the client `complete` for it, and deletes its entry, so the second
 * subscription is answered `complete` at once and never streams. So a message naming an id the
 * client just completed waits until that subscription's handler has ended (the ws adapter's
 * message listener returns the handler's promise; without one nothing waits). Other ids, and a
 * reuse of an id still active (4409), pass at once. Only client messages are parsed here, and
 * only ones that name an id: few and small.
 */
function holdReusedIds(ws: WebSocket) {
  const listeners = ws.listeners('message') as ((data: unknown, isBinary: boolean) => unknown)[];
  if (listeners.length !== 1) return;
  const handle = listeners[0]!;
  ws.removeAllListeners('message');
  const running = new Map<string, Promise<unknown>>(); // subscribe handlers by id, until they end
  const held = new Map<string, Promise<unknown>>(); // messages for an id wait on this
  ws.on('message', (data: unknown, isBinary: boolean) => {
    const message = idMessage(data);
    if (!message) return void handle.call(ws, data, isBinary);
    const { type, id } = message;
    const deliver = () => {
      if (type === 'subscribe') {
        const done = Promise.resolve(handle.call(ws, data, isBinary)).catch(() => {});
        running.set(id, done);
        void done.then(() => running.get(id) === done && running.delete(id));
        return undefined;
      }
      const ending = running.get(id);
      void handle.call(ws, data, isBinary);
      return ending; // what the client completed: later messages for this id wait for its end
    };
    const before = held.get(id);
    const wait = before ? before.then(deliver) : deliver();
    if (!wait) return;
    held.set(id, wait);
    void wait.then(() => held.get(id) === wait && held.delete(id));
  });
}

function idMessage(data: unknown): { type: 'subscribe' | 'complete'; id: string } | undefined {
  try {
    const message = JSON.parse(String(data)) as { type?: unknown; id?: unknown };
    return (message.type === 'subscribe' || message.type === 'complete') && typeof message.id === 'string'
      ? { type: message.type, id: message.id }
      : undefined;
  } catch {
    return undefined;
  }
}

function asGraphQLError(error: Error): GraphQLError {
  return error instanceof GraphQLError ? error : new GraphQLError(error.message, { extensions: { code: 'INTERNAL_SERVER_ERROR' } });
}

/** Each connection's operations' request ids, by subscription id (dropped when the operation completes). */
const requestIdsByConnection = new WeakMap<object, Map<string, string>>();
function requestIdsOf(ctx: object): Map<string, string> {
  let ids = requestIdsByConnection.get(ctx);
  if (!ids) requestIdsByConnection.set(ctx, (ids = new Map()));
  return ids;
}

type WsContext = Context<Record<string, unknown>, { request: IncomingMessage; socket: WebSocket }>;

/**
 * A connection is admitted when its key authenticates. A refused key closes it with 4403; a key
 * that could not be checked (the database unreachable) with 1013, "try again later".
 */
async function admit(ctx: WsContext, options: WebSocketOptions): Promise<boolean> {
  const socket = ctx.extra.socket;
  try {
    const actor = await authenticateCredential(ctx, options);
    // The key's place among its connections, held until the socket closes.
    socket.once('close', options.bounds.openConnection(actor));
    streamsByConnection.set(ctx, options.bounds.connectionStreams());
    // A revoked key stops everything it had open at once (Invariant 10): the connection is
    // closed, ending its subscriptions with it, on whichever replica holds it.
    const unwatch = options.watchKey?.(actor, () => socket.close(KEY_LAPSED.code, KEY_LAPSED.reason));
    if (unwatch) socket.once('close', unwatch);
    return true;
  } catch (error) {
    if (error instanceof RateLimitedError) {
      socket.close(
        TOO_MANY,
        error.limit === 'CONNECTIONS_PER_KEY' ? 'Too many connections for this key' : 'Too many failed authentications',
      );
      return false;
    }
    if (error instanceof DomainError) {
      // graphql-ws's own close would say only "Forbidden"; over HTTP the same mistake says what to send.
      socket.close(FORBIDDEN.code, FORBIDDEN.reason);
      return false;
    }
    // The key could not be checked (the database unreachable): not the client's fault.
    // 4403 says "this key is forbidden"; 1013 says "try again later", which is the truth.
    options.log.warn(
      `websocket: could not authenticate a connection (${(error as Error)?.message ?? String(error)}); closing it with 1013`,
    );
    ctx.extra.socket.close(1013, 'Try again later');
    return false;
  }
}

/**
 * One operation on an admitted connection: authenticated again (a key revoked since the
 * connection opened is refused), given a request id for its errors, parsed and validated with
 * the gateway's limits, and executed with a context of its own.
 */
async function startOperation(ctx: WsContext, id: string, payload: SubscribePayload, yoga: Yoga, options: WebSocketOptions) {
  const requestId = randomUUID();
  requestIdsOf(ctx).set(id, requestId);
  let actor: Actor;
  try {
    actor = await authenticateCredential(ctx, options);
    options.bounds.request(actor);
  } catch (error) {
    // The HTTP path's answer: a domain error keeps its code, an unreachable database is
    // UNAVAILABLE (logged there), anything else is masked.
    if (!(error instanceof DomainError) && !isConnectionError(error))
      options.log.warn(`websocket: could not authenticate a subscription (${(error as Error)?.message ?? String(error)})`);
    return [asGraphQLError(options.maskError(error, 'Unexpected error.'))];
  }
  // A subscriber that stops reading shows up as a feed that overflows (src/subscriptions/hub/feed.ts):
  // cut the connection, so it cannot hold the gateway's memory; it resumes with its last cursor.
  const socket = ctx.extra.socket;
  const cutOff = () => {
    options.log.warn('websocket: a subscriber stopped reading and fell too far behind; closing its connection (1008)');
    socket.close(1008, 'slow consumer');
    setImmediate(() => socket.terminate());
  };
  let query: string;
  try {
    query = options.documentOf ? await options.documentOf(payload) : payload.query;
  } catch (error) {
    if (error instanceof GraphQLError) return [error];
    return [asGraphQLError(options.maskError(error, 'Unexpected error.'))];
  }
  const { schema, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
    actor,
    params: { ...payload, query },
    cutOff,
    requestId,
    streams: streamsByConnection.get(ctx),
  });
  let document;
  try {
    // Limits may throw here rather than report: either way the client gets the error.
    document = parse(query);
    const errors = validate(schema, document);
    if (errors.length > 0) return errors;
  } catch (error) {
    if (error instanceof GraphQLError) return [error];
    return [asGraphQLError(options.maskError(error, 'Unexpected error.'))];
  }
  return {
    schema,
    operationName: payload.operationName,
    document,
    variableValues: payload.variables,
    contextValue: await contextFactory(),
    rootValue: { execute, subscribe },
  };
}

export function attachWebSocket(server: Server, yoga: Yoga, options: WebSocketOptions) {
  // No permessage-deflate (ws's default, stated so it stays): payloads are small JSON, and
  // compressing each one per socket costs CPU and a zlib context (~300 KB) per connection, where
  // one gateway holds thousands of subscribers.
  //
  // Not attached to the HTTP server (noServer): an attached WebSocketServer re-emits every error
  // of the HTTP server, and graphql-ws answers a WebSocketServer error by closing every socket
  // with 1011, then leaves the next one unhandled (fatal). An accept failing once under load
  // (EMFILE) must not disconnect every subscriber; the gateway logs server errors itself.
  const wss = new WebSocketServer({
    noServer: true,
    path: yoga.graphqlEndpoint,
    maxPayload: options.maxPayload ?? 1_000_000,
    perMessageDeflate: false,
  });
  // Upgrades to another path are refused (400) by handleUpgrade, as an attached server does.
  const onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer) =>
    wss.handleUpgrade(request, socket, head, (ws) => {
      wss.emit('connection', ws, request);
      replaceErrorHandler(ws, options.log);
      holdReusedIds(ws);
    });
  server.on('upgrade', onUpgrade);
  const disposable = useServer<Record<string, unknown>, { request: IncomingMessage; socket: WebSocket }>(
    {
      connectionInitWaitTimeout: options.connectionInitWaitMs ?? 10_000,

      execute: (args: any) => args.rootValue.execute(args),
      subscribe: (args: any) => args.rootValue.subscribe(args),
      onConnect: (ctx) => admit(ctx, options),
      onSubscribe: (ctx, id, payload) => startOperation(ctx, id, payload, yoga, options),
      onNext: (ctx, id, _payload, _args, result) =>
        result.errors?.length ? { ...result, errors: withRequestId(result.errors, requestIdsOf(ctx).get(id)) } : undefined,
      // An `error` message ends its operation: the id is not needed past it.
      onError: (ctx, id, _payload, errors) => {
        const requestId = requestIdsOf(ctx).get(id);
        requestIdsOf(ctx).delete(id);
        return withRequestId(errors, requestId);
      },
      onComplete: (ctx, id) => void requestIdsOf(ctx).delete(id),
    },
    wss,
    options.keepAliveMs ?? WS_KEEPALIVE_MS,
  );
  return {
    async close() {
      server.off('upgrade', onUpgrade);
      await disposable.dispose();
      await new Promise<void>((r) => wss.close(() => r()));
    },
  };
}
