/**
 * Persisted documents: a client sends the SHA-256 of its document in
 * `extensions.persistedQuery` (Apollo's automatic persisted queries protocol, graphql-yoga's
 * plugin) instead of the document. The gateway knows two kinds of hashes:
 *
 * - Trusted documents, known from the start: the console's (graphql-codegen writes the manifest of
 *   its build-time documents, hash to document, and the console build carries it as
 *   dist/console/persisted-documents.json) and any manifest an operator names
 *   (JOBGATE_PERSISTED_DOCUMENTS), for their own clients. They never expire.
 * - Automatic ones: the first time a client sends an unknown hash, the gateway answers
 *   PERSISTED_QUERY_NOT_FOUND and the client sends the document with its hash, which is kept; from
 *   then on the hash alone will do, also as a GET that caches can hold. Per process and bounded:
 *   at most MAX_ENTRIES documents, each at most MAX_QUERY_CHARS (a longer one is executed but not
 *   kept, so it always travels in full), kept TTL_MS. A document is stored as soon as its hash
 *   checks out, before it is validated; one that then fails validation costs a slot, not an
 *   execution.
 *
 * With `only` (JOBGATE_PERSISTED_ONLY=on) the gateway runs trusted documents and nothing else: a
 * request that carries a document's text is PERSISTED_QUERY_ONLY, nothing is stored, and a hash it
 * does not trust is PERSISTED_QUERY_NOT_FOUND. Over HTTP and over graphql-ws alike (`document`,
 * for src/subscriptions/ws.ts).
 *
 * The plugins run after authentication (useAuthenticateFirst comes first in the gateway's
 * plugins), so a request without a valid key is refused 401 before its hash is looked up or
 * its document stored: a stranger can neither fill the store nor probe it. A request with a
 * subscription ticket that sends a hash the store does not hold is answered
 * PERSISTED_QUERY_NOT_FOUND once its ticket is checked but before it is redeemed, so the client's
 * retry with the full document can still use it (see useAuthenticateFirst). Sharing the store
 * across workspaces tells nothing: a document comes back only for its hash, which only someone who
 * has the document can compute.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createInMemoryAPQStore, useAPQ, type APQStore } from '@graphql-yoga/plugin-apq';
import { createGraphQLError, type Plugin } from 'graphql-yoga';
import type { GraphQLError } from 'graphql';

const MAX_ENTRIES = 1000;
const MAX_QUERY_CHARS = 32 * 1024;
const TTL_MS = 24 * 60 * 60 * 1000;

export interface PersistedQueriesOptions {
  /** Trusted documents by their SHA-256 (hex). */
  trusted?: ReadonlyMap<string, string>;
  /** Run trusted documents only (JOBGATE_PERSISTED_ONLY). */
  only?: boolean;
}

export interface PersistedQueries {
  plugins: Plugin[];
  /** How many trusted documents there are. */
  trusted: number;
  /**
   * Whether a request's params ask for a document by its hash alone that the store does not hold
   * (so the plugin would answer PERSISTED_QUERY_NOT_FOUND).
   */
  missing(params: RequestParams): Promise<boolean>;
  /**
   * The document a graphql-ws subscribe payload asks for: its text, or the document of its hash,
   * refused as the HTTP plugins refuse it (a GraphQLError with the same code).
   */
  document(params: RequestParams): Promise<string>;
}

interface RequestParams {
  query?: string | undefined;
  extensions?: Record<string, unknown> | null | undefined;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * graphql-codegen's client preset from version 6 names a hash with its algorithm (`sha256:<hex>`),
 * in its manifests and in what its documents send: the same hash as the bare hex.
 */
const bareHash = (hash: string) => (hash.startsWith(ALGORITHM_PREFIX) ? hash.slice(ALGORITHM_PREFIX.length) : hash);
const ALGORITHM_PREFIX = 'sha256:';

/** The hash of a well-formed `extensions.persistedQuery` (bare hex), else undefined. */
function hashOf(params: RequestParams): string | undefined {
  const persisted = params.extensions?.['persistedQuery'] as { version?: unknown; sha256Hash?: unknown } | undefined;
  return persisted?.version === 1 && typeof persisted.sha256Hash === 'string' ? bareHash(persisted.sha256Hash) : undefined;
}

/**
 * The params as the APQ plugin reads them: the hash without an algorithm prefix, and an empty
 * `query` beside a hash dropped (graphql-ws and graphql-sse clients must send a string; the
 * plugin takes the lookup only when there is none). The same params when nothing changes.
 */
function asPersisted<P extends RequestParams>(params: P): P {
  const hash = hashOf(params);
  if (hash === undefined) return params;
  const sent = (params.extensions!['persistedQuery'] as { sha256Hash: string }).sha256Hash;
  if (sent === hash && params.query !== '') return params;
  const extensions = { ...params.extensions, persistedQuery: { ...(params.extensions!['persistedQuery'] as object), sha256Hash: hash } };
  return { ...params, ...(params.query === '' ? { query: undefined } : {}), extensions };
}

/** A document's text sent by the client (graphql-ws clients send `''` beside a hash). */
const hasText = (params: RequestParams) => typeof params.query === 'string' && params.query !== '';

export function createPersistedQueries(options: PersistedQueriesOptions = {}): PersistedQueries {
  const trusted = options.trusted ?? new Map<string, string>();
  const only = options.only ?? false;
  const memory = createInMemoryAPQStore({ max: MAX_ENTRIES, ttl: TTL_MS });
  const store: APQStore = {
    get: async (hash) => trusted.get(hash) ?? (only ? undefined : memory.get(hash)),
    set: (hash, query) => (only || query.length > MAX_QUERY_CHARS || trusted.has(hash) ? undefined : memory.set(hash, query)),
  };
  const onlyTrusted: Plugin = {
    onParams({ params, setParams }) {
      if (only && hasText(params)) throw persistedQueryOnly();
      const normal = asPersisted(params);
      if (normal !== params) setParams(normal);
    },
  };
  return {
    plugins: [onlyTrusted, useAPQ({ store }) as Plugin],
    trusted: trusted.size,
    async missing(params) {
      const hash = hashOf(params);
      if (hasText(params) || hash === undefined) return false;
      return (await store.get(hash)) == null;
    },
    async document(params) {
      if (only && hasText(params)) throw persistedQueryOnly();
      const hash = hashOf(params);
      if (hash === undefined) return params.query ?? '';
      if (!hasText(params)) {
        const found = await store.get(hash);
        if (found == null) throw persistedQueryNotFound();
        return found;
      }
      if (sha256(params.query!) !== hash) throw persistedQueryMismatch();
      await store.set(hash, params.query!);
      return params.query!;
    },
  };
}

/**
 * Reads a manifest of trusted documents (a JSON object, SHA-256 hex to document, as graphql-codegen's
 * client preset writes it with `persistedDocuments: { hashAlgorithm: 'sha256' }`; from version 6
 * it writes `sha256:<hex>`, read as the same hash). An entry whose
 * hash is not its document's is refused: the hash is what a client is trusted by.
 */
export function readDocumentManifest(path: string): Map<string, string> {
  const parsed = JSON.parse(readFileSync(path, 'utf8')) as unknown;
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new Error(`${path}: a persisted documents manifest is a JSON object of SHA-256 hashes to documents`);
  const documents = new Map<string, string>();
  for (const [hash, document] of Object.entries(parsed)) {
    const hex = bareHash(hash).toLowerCase();
    if (typeof document !== 'string' || sha256(document) !== hex) throw new Error(`${path}: "${hash}" is not the SHA-256 of its document`);
    documents.set(hex, document);
  }
  return documents;
}

/** The trusted documents of these manifests together; a path that does not exist is skipped when `optional`. */
export function trustedDocuments(manifests: { path: string; optional?: boolean }[]): Map<string, string> {
  const documents = new Map<string, string>();
  for (const { path, optional } of manifests) {
    if (optional && !existsSync(path)) continue;
    for (const [hash, document] of readDocumentManifest(path)) documents.set(hash, document);
  }
  return documents;
}

/** PERSISTED_QUERY_NOT_FOUND, as the plugin answers it. */
export function persistedQueryNotFound(): GraphQLError {
  return createGraphQLError('PersistedQueryNotFound', { extensions: { http: { status: 404 }, code: 'PERSISTED_QUERY_NOT_FOUND' } });
}

function persistedQueryMismatch(): GraphQLError {
  return createGraphQLError('PersistedQueryMismatch', { extensions: { http: { status: 400 }, code: 'PERSISTED_QUERY_MISMATCH' } });
}

function persistedQueryOnly(): GraphQLError {
  return createGraphQLError('PersistedQueryOnly: this gateway runs only the documents it knows by hash; send the hash alone', {
    extensions: { http: { status: 400 }, code: 'PERSISTED_QUERY_ONLY' },
  });
}
