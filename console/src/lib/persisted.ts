/**
 * Persisted documents: every document of the console has a SHA-256 from codegen
 * (console/codegen.ts), and the gateway that serves the console trusts those hashes (its build's
 * manifest). So a request carries the hash alone, in Apollo's `extensions.persistedQuery`, not
 * the document: smaller requests, and a gateway that runs only known documents
 * (JOBGATE_PERSISTED_ONLY) serves the console. A gateway that does not know a hash (another
 * replica running an older build, mid-deploy) answers PERSISTED_QUERY_NOT_FOUND, and the request
 * is sent once more with its document.
 */
import type { TypedDocumentString } from '../gql/graphql.ts';

/** A type, not an interface: it must fit graphql-ws's `extensions: Record<string, unknown>`. */
export type PersistedQueryExtension = { persistedQuery: { version: 1; sha256Hash: string } };

/** The request fields naming `document`: its hash alone, or its text when it has no hash. */
export function documentFields<R, V>(
  document: TypedDocumentString<R, V>,
  withText = false,
): { query?: string; extensions?: PersistedQueryExtension } {
  const hash = (document.__meta__ as { hash?: unknown } | undefined)?.hash;
  if (withText || typeof hash !== 'string') return { query: document.toString() };
  return { extensions: { persistedQuery: { version: 1, sha256Hash: hash } } };
}

export const PERSISTED_QUERY_NOT_FOUND = 'PERSISTED_QUERY_NOT_FOUND';
