/**
 * Queries and mutations over HTTP: one POST to /graphql with the tab's key. A GraphQL error becomes
 * an ApiError with its stable `extensions.code`; UNAUTHENTICATED (a revoked or expired key) also
 * tells the app to sign the tab out.
 */
import type { TypedDocumentString } from '../gql/graphql.ts';

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
  extensions?: { code?: string; issues?: { path: (string | number)[]; message: string }[] };
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

export function createApi(key: string, endpoint = '/graphql'): Api {
  return {
    async request(document, variables) {
      let response: Response;
      try {
        response = await fetch(endpoint, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/graphql-response+json, application/json',
            authorization: `Bearer ${key}`,
          },
          body: JSON.stringify({ query: document.toString(), variables: variables ?? {} }),
        });
      } catch (error) {
        throw new ApiError('UNAVAILABLE', `the gateway cannot be reached (${(error as Error).message})`);
      }
      let body: { data?: unknown; errors?: GraphQLErrorLike[] } | undefined;
      try {
        body = (await response.json()) as typeof body;
      } catch {
        body = undefined;
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
