/**
 * A request whose Content-Type yoga has no parser for gets a 415 with an empty body from yoga,
 * where every other refusal (400, 401, 405, 413, 429) carries a JSON error with its code; so does
 * a 406, a result none of the Accept header's types can carry: most often a subscription asked
 * for as multipart/mixed (Apollo Client's HttpLink), which yoga serves only as SSE. This gives
 * both the same shape: BAD_REQUEST, saying what is served.
 */
import { GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';

export const UNSUPPORTED_MEDIA_TYPE_MESSAGE =
  'unsupported Content-Type: send the operation as application/json (or application/graphql, application/graphql+json, application/x-www-form-urlencoded), or as a GET with query parameters';

export const NOT_ACCEPTABLE_MESSAGE =
  'none of the media types in Accept can carry this result: a subscription streams as text/event-stream (SSE), or over graphql-ws at this same URL (Apollo Client: GraphQLWsLink; multipart/mixed subscriptions are not served); any other operation answers application/graphql-response+json or application/json';

const REFUSALS: Record<number, { message: string; statusText: string }> = {
  406: { message: NOT_ACCEPTABLE_MESSAGE, statusText: 'Not Acceptable' },
  415: { message: UNSUPPORTED_MEDIA_TYPE_MESSAGE, statusText: 'Unsupported Media Type' },
};

export function useMediaTypeError(): Plugin {
  return {
    onResponse({ response, setResponse, fetchAPI }) {
      const refusal = REFUSALS[response.status];
      if (!refusal || response.body !== null) return;
      const headers = new fetchAPI.Headers(response.headers);
      headers.set('content-type', 'application/json; charset=utf-8');
      const body = JSON.stringify({ errors: [{ message: refusal.message, extensions: { code: 'BAD_REQUEST' } }] });
      setResponse(new fetchAPI.Response(body, { status: response.status, statusText: refusal.statusText, headers }));
    },
  };
}

/**
 * A form body (application/x-www-form-urlencoded) with no `query` field: most often JSON sent by
 * `curl -d` without a Content-Type, which curl then labels a form. yoga's own answer, "Must provide
 * query string.", says nothing of why; this one says what the body was taken for and what to send.
 */
export const FORM_WITHOUT_QUERY_MESSAGE =
  'the body was read as a form (Content-Type application/x-www-form-urlencoded, what curl -d sends when none is set) and has no query field: to send JSON, set content-type: application/json';

export function useFormBodyHint(): Plugin {
  return {
    onParams({ params, request }) {
      if (request.method !== 'POST' || params.query) return;
      if (!(request.headers.get('content-type') ?? '').toLowerCase().startsWith('application/x-www-form-urlencoded')) return;
      // A persisted document is named by its hash, with no text.
      const extensions = params.extensions as { persistedQuery?: unknown } | undefined;
      if (extensions?.persistedQuery) return;
      throw new GraphQLError(FORM_WITHOUT_QUERY_MESSAGE, { extensions: { code: 'BAD_REQUEST', http: { status: 400 } } });
    },
  };
}
