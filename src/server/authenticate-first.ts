/**
 * Authentication of GraphQL requests over HTTP, first of all (./gateway.ts), and the bounds that
 * come with it: failed authentications per client address before the lookup, the key's request
 * rate after it (src/service/access/load-bounds.ts).
 */
import { getOperationAST, parse } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Actor } from '../service/kernel/actor.js';
import { ForbiddenError } from '../service/kernel/errors.js';
import type { LoadBounds } from '../service/access/load-bounds.js';
import type { YogaServerContext } from '../subscriptions/ws.js';
import { LIMITS } from './hardening.js';
import { persistedQueryNotFound, type PersistedQueries } from './persisted-queries.js';
import { ticketOf } from './ticket.js';

export interface AuthenticateFirstOptions {
  /** Who a request acts as. Throw a DomainError (UNAUTHENTICATED) to refuse it. */
  authenticate(request: Request): Promise<Actor>;
  tickets: { check(ticket: string): Promise<void>; redeem(ticket: string): Promise<Actor> };
  persisted: PersistedQueries;
  bounds: LoadBounds;
  /** Where the actor of each request is left for the context. */
  actors: WeakMap<Request, Actor>;
  /** The requests authenticated by a ticket. */
  ticketed: WeakSet<Request>;
  failed: (request: Request, error: unknown) => void;
}

/**
 * Who each HTTP request acts as, decided before anything reads its document (Invariant 10): yoga
 * builds the context only after parsing and validating, so authenticating there let a stranger
 * learn the schema from the errors of documents it never had the right to send (`Cannot query
 * field "jbos"` beside a 401 for a real one). `onParams` is the first hook that sees a GraphQL
 * request (GraphiQL's page is served before it, and needs no key); a refusal thrown here is
 * masked as any error is: UNAUTHENTICATED, 401 (RATE_LIMITED, 429, from the bounds). The actor waits here for the context.
 *
 * A request with `?ticket=` (a browser's EventSource, which cannot send headers) is authenticated
 * by that subscription ticket instead of a key: redeemed (used up) here, and held to what a
 * ticket is for, one subscription, by useTicketForOneSubscription, which runs after persisted
 * queries have put the document in place. A ticketed request that sends only a hash the store
 * does not hold is answered PERSISTED_QUERY_NOT_FOUND before its ticket is redeemed (checked,
 * not used up), so the persisted-query client's retry with the full document can use it.
 */
export function useAuthenticateFirst(options: AuthenticateFirstOptions): Plugin {
  const { authenticate, tickets, persisted, bounds, actors, ticketed } = options;
  return {
    // A request that carries no credential at all (no Authorization header, no ticket) is refused
    // before yoga parses it, so before the CSRF check too (./hardening.ts): it is UNAUTHENTICATED
    // whatever its method or content type. CSRF is a forgery that borrows a credential the browser
    // adds by itself; a request with none has nothing to borrow, and answering it 403 told a
    // newcomer trying `curl` without a key the wrong thing. A request with a credential meets the
    // CSRF check as before, then the full authentication in onParams.
    async onRequestParse({ request, serverContext }) {
      if (request.headers.has('authorization') || ticketOf(request) !== null) return;
      try {
        await authenticateRequest(request, {}, (serverContext as YogaServerContext).clientAddress);
      } catch (error) {
        options.failed(request, error);
        throw error;
      }
    },
    async onParams({ request, params, context }) {
      if (actors.has(request)) return;
      try {
        await authenticateRequest(request, params, (context as YogaServerContext).clientAddress);
      } catch (error) {
        options.failed(request, error);
        throw error;
      }
    },
  };

  async function authenticateRequest(
    request: Request,
    params: { query?: string; extensions?: Record<string, unknown> },
    address: string | undefined,
  ): Promise<void> {
    const ticket = ticketOf(request);
    if (ticket === null) {
      const actor = await bounds.authenticate(address, request.headers.get('authorization') ?? undefined, () => authenticate(request));
      bounds.request(actor);
      actors.set(request, actor);
      return;
    }
    // A hash the store does not hold: PERSISTED_QUERY_NOT_FOUND without using the ticket up, so
    // the client's retry with the document (same URL, same ticket) opens the subscription. The
    // ticket is still checked first: a stranger learns nothing of the store (UNAUTHENTICATED).
    if (await persisted.missing(params)) {
      await bounds.authenticate(address, ticket, () => tickets.check(ticket));
      throw persistedQueryNotFound();
    }
    const actor = await bounds.authenticate(address, ticket, () => tickets.redeem(ticket));
    bounds.request(actor);
    actors.set(request, actor);
    ticketed.add(request);
  }
}

/** A request authenticated by a subscription ticket may run a subscription, nothing else (FORBIDDEN). */
export function useTicketForOneSubscription(ticketed: WeakSet<Request>): Plugin {
  return {
    onParams({ request, params }) {
      if (ticketed.has(request) && !isSubscription(params.query, params.operationName)) {
        throw new ForbiddenError('a subscription ticket opens one subscription (Server-Sent Events); send other operations with your key');
      }
    },
  };
}

/**
 * Whether the operation a request would run is a subscription (an unparsable one, or one past the
 * token limit, is not: this parse runs before the limits' own).
 */
function isSubscription(query: string | undefined, operationName: string | undefined): boolean {
  if (!query) return false;
  try {
    return getOperationAST(parse(query, { maxTokens: LIMITS.tokens }), operationName)?.operation === 'subscription';
  } catch {
    return false;
  }
}
