/**
 * Automatic persisted queries (Apollo's protocol, graphql-yoga's plugin): a client sends the
 * SHA-256 of its document in `extensions.persistedQuery`; the first time, the gateway answers
 * PERSISTED_QUERY_NOT_FOUND and the client sends the document with its hash, which is kept; from
 * then on the hash alone will do, also as a GET that caches can hold.
 *
 * The plugin runs after authentication (useAuthenticateFirst comes first in the gateway's
 * plugins), so a request without a valid key is refused 401 before its hash is looked up or
 * its document stored: a stranger can neither fill the store nor probe it. A request with a
 * subscription ticket that sends a hash the store does not hold is answered
 * PERSISTED_QUERY_NOT_FOUND once its ticket is checked but before it is redeemed, so the client's
 * retry with the full document can still use it (see useAuthenticateFirst in gateway.ts). The store is per
 * process and bounded: at most MAX_ENTRIES documents, each at most MAX_QUERY_CHARS (a longer one
 * is executed but not kept, so it always travels in full), kept TTL_MS. A document is stored as
 * soon as its hash checks out, before it is validated; one that then fails validation costs a
 * slot, not an execution. Sharing the store across workspaces tells nothing: a document comes
 * back only for its hash, which only someone who has the document can compute.
 */
import { createInMemoryAPQStore, useAPQ, type APQStore } from '@graphql-yoga/plugin-apq';
import { createGraphQLError, type Plugin } from 'graphql-yoga';
import type { GraphQLError } from 'graphql';

const MAX_ENTRIES = 1000;
const MAX_QUERY_CHARS = 32 * 1024;
const TTL_MS = 24 * 60 * 60 * 1000;

export interface PersistedQueries {
  plugin: Plugin;
  /**
   * Whether a request's params ask for a document by its hash alone that the store does not hold
   * (so the plugin would answer PERSISTED_QUERY_NOT_FOUND).
   */
  missing(params: { query?: string | undefined; extensions?: Record<string, unknown> | undefined }): Promise<boolean>;
}

export function createPersistedQueries(): PersistedQueries {
  const memory = createInMemoryAPQStore({ max: MAX_ENTRIES, ttl: TTL_MS });
  const store: APQStore = {
    get: (hash) => memory.get(hash),
    set: (hash, query) => (query.length <= MAX_QUERY_CHARS ? memory.set(hash, query) : undefined),
  };
  return {
    plugin: useAPQ({ store }) as Plugin,
    async missing(params) {
      if (params.query != null) return false;
      const persisted = params.extensions?.['persistedQuery'] as { version?: unknown; sha256Hash?: unknown } | undefined;
      if (persisted?.version !== 1 || typeof persisted.sha256Hash !== 'string') return false;
      return (await store.get(persisted.sha256Hash)) == null;
    },
  };
}

/** PERSISTED_QUERY_NOT_FOUND, as the plugin answers it. */
export function persistedQueryNotFound(): GraphQLError {
  return createGraphQLError('PersistedQueryNotFound', { extensions: { http: { status: 404 }, code: 'PERSISTED_QUERY_NOT_FOUND' } });
}

export function usePersistedQueries(): Plugin {
  return createPersistedQueries().plugin;
}
