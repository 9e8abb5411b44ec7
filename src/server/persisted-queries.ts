/**
 * Automatic persisted queries (Apollo's protocol, graphql-yoga's plugin): a client sends the
 * SHA-256 of its document in `extensions.persistedQuery`; the first time, the gateway answers
 * PERSISTED_QUERY_NOT_FOUND and the client sends the document with its hash, which is kept; from
 * then on the hash alone will do, also as a GET that caches can hold.
 *
 * The plugin runs after authentication (useAuthenticateFirst comes first in the gateway's
 * plugins), so a request without a valid key is refused 401 before its hash is looked up or
 * its document stored: a stranger can neither fill the store nor probe it. The store is per
 * process and bounded: at most MAX_ENTRIES documents, each at most MAX_QUERY_CHARS (a longer one
 * is executed but not kept, so it always travels in full), kept TTL_MS. A document is stored as
 * soon as its hash checks out, before it is validated; one that then fails validation costs a
 * slot, not an execution. Sharing the store across workspaces tells nothing: a document comes
 * back only for its hash, which only someone who has the document can compute.
 */
import { createInMemoryAPQStore, useAPQ, type APQStore } from '@graphql-yoga/plugin-apq';
import type { Plugin } from 'graphql-yoga';

const MAX_ENTRIES = 1000;
const MAX_QUERY_CHARS = 32 * 1024;
const TTL_MS = 24 * 60 * 60 * 1000;

export function usePersistedQueries(): Plugin {
  const memory = createInMemoryAPQStore({ max: MAX_ENTRIES, ttl: TTL_MS });
  const store: APQStore = {
    get: (hash) => memory.get(hash),
    set: (hash, query) => (query.length <= MAX_QUERY_CHARS ? memory.set(hash, query) : undefined),
  };
  return useAPQ({ store }) as Plugin;
}
