/**
 * A request whose Content-Type yoga has no parser for gets a 415 with an empty body from yoga,
 * where every other refusal (400, 401, 405, 413, 429) carries a JSON error with its code. This
 * gives the 415 the same shape: BAD_REQUEST, saying which types are read.
 */
import type { Plugin } from 'graphql-yoga';

export const UNSUPPORTED_MEDIA_TYPE_MESSAGE =
  'unsupported Content-Type: send the operation as application/json (or application/graphql, application/graphql+json, application/x-www-form-urlencoded), or as a GET with query parameters';

export function useMediaTypeError(): Plugin {
  return {
    onResponse({ response, setResponse, fetchAPI }) {
      if (response.status !== 415 || response.body !== null) return;
      const headers = new fetchAPI.Headers(response.headers);
      headers.set('content-type', 'application/json; charset=utf-8');
      const body = JSON.stringify({ errors: [{ message: UNSUPPORTED_MEDIA_TYPE_MESSAGE, extensions: { code: 'BAD_REQUEST' } }] });
      setResponse(new fetchAPI.Response(body, { status: 415, statusText: 'Unsupported Media Type', headers }));
    },
  };
}
