/**
 * Queries and mutations over HTTP: one POST to /graphql with the tab's key, naming its document by
 * hash (./persisted.ts). A GraphQL error becomes
 * an ApiError with its stable `extensions.code`; UNAUTHENTICATED (a revoked or expired key) also
 * tells the app to sign the tab out.
 */
import type { TypedDocumentString } from '../gql/graphql.ts';
import { documentFields, PERSISTED_QUERY_NOT_FOUND } from './persisted.ts';

export class ApiError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly issues: { path: (string | number)[]; message: string }[] = [],
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

interface GraphQLErrorLike {
  message: string;
  extensions?: { code?: string; issues?: { path: (string | number)[]; message: string }[]; retryAfterMs?: number };
}

/** The first error of a GraphQL answer (or a transport failure) as an ApiError. */
export function toApiError(errors: readonly GraphQLErrorLike[] | undefined, status?: number): ApiError {
  const first = errors?.[0];
  if (!first)
    return new ApiError(
      status === 401 ? 'UNAUTHENTICATED' : 'INTERNAL_SERVER_ERROR',
      status ? `the gateway answered HTTP ${status}` : 'no answer',
    );
  return new ApiError(first.extensions?.code ?? 'INTERNAL_SERVER_ERROR', first.message, first.extensions?.issues ?? []);
}

type Listener = (error: ApiError) => void;
const unauthenticated = new Set<Listener>();

/** Called when any request is refused as UNAUTHENTICATED; returns the unsubscribe. */
export function onUnauthenticated(listener: Listener): () => void {
  unauthenticated.add(listener);
  return () => unauthenticated.delete(listener);
}

export function reportUnauthenticated(error: ApiError): void {
  for (const l of unauthenticated) l(error);
}

export interface Api {
  request<R, V>(document: TypedDocumentString<R, V>, variables?: V): Promise<R>;
}

/** One POST of a document (its hash alone, or its text: ./persisted.ts) and what came back. */
async function post(
  endpoint: string,
  key: string,
  fields: ReturnType<typeof documentFields>,
  variables: unknown,
): Promise<{ response: Response; body: { data?: unknown; errors?: GraphQLErrorLike[] } | undefined }> {
  let response: Response;
  try {
    response = await fetch(endpoint, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/graphql-response+json, application/json',
        authorization: `Bearer ${key}`,
      },
      body: JSON.stringify({ ...fields, variables: variables ?? {} }),
    });
  } catch (error) {
    throw new ApiError('UNAVAILABLE', `the gateway cannot be reached (${(error as Error).message})`);
  }
  try {
    return { response, body: (await response.json()) as { data?: unknown; errors?: GraphQLErrorLike[] } };
  } catch {
    return { response, body: undefined };
  }
}

/**
 * A refusal by a bound on load (RATE_LIMITED: the key's request rate, or too many of its requests
 * waiting) ran nothing, so the same request may be sent again once its `retryAfterMs` has passed.
 * A screen that opens several queries at once, or a tab left on a busy key, would otherwise show
 * an error for a burst that is over a second later. A few waits, each capped, then the error shows.
 */
export const RATE_LIMIT_RETRIES = 3;
const RATE_LIMIT_WAIT_CAP_MS = 2_000;

function rateLimitWaitMs(body: { errors?: GraphQLErrorLike[] } | undefined): number | undefined {
  const first = body?.errors?.[0];
  if (first?.extensions?.code !== 'RATE_LIMITED') return undefined;
  const asked = Number(first.extensions.retryAfterMs);
  return Math.min(Number.isFinite(asked) && asked > 0 ? asked : 1_000, RATE_LIMIT_WAIT_CAP_MS);
}

export function createApi(key: string, endpoint = '/graphql'): Api {
  return {
    async request(document, variables) {
      const send = async () => {
        const sent = await post(endpoint, key, documentFields(document), variables);
        // A gateway without this build's hashes: once more with the document (./persisted.ts).
        if (sent.body?.errors?.[0]?.extensions?.code !== PERSISTED_QUERY_NOT_FOUND) return sent;
        return post(endpoint, key, documentFields(document, true), variables);
      };
      let { response, body } = await send();
      for (let retries = 0; retries < RATE_LIMIT_RETRIES; retries++) {
        const waitMs = rateLimitWaitMs(body);
        if (waitMs === undefined) break;
        await new Promise((resolve) => setTimeout(resolve, waitMs));
        ({ response, body } = await send());
      }
      if (body?.errors?.length || !body?.data) {
        const error = toApiError(body?.errors, response.status);
        if (error.code === 'UNAUTHENTICATED') reportUnauthenticated(error);
        throw error;
      }
      return body.data as never;
    },
  };
}
