/**
 * RATE_LIMITED answered before yoga reads a request, when the bounds on load can tell without a
 * lookup that they would refuse it (LoadBounds.refusal): an address throttled for failed
 * authentications sending a key it has not shown to be good, or a key that authenticated lately
 * whose request bucket is empty. A refusal inside yoga costs its parse of the request, the
 * body's read and the key's lookup, about as much as a small query: under a one-key flood
 * that work took the gateway's one thread from every other key. Here it costs a hash and a map
 * lookup. What this lets through meets the full checks inside yoga (./authenticate-first.ts).
 *
 * The answer is the one yoga gives the same refusal (./mask-error.ts): 429, Retry-After, and a
 * GraphQL error RATE_LIMITED with `limit`, `retryAfterMs` and the request's id, with the same CORS headers for an
 * origin the gateway allows, so a browser reads it as it would any refusal.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RateLimitedError } from '../service/kernel/errors.js';

export function refuseEarly(
  req: IncomingMessage,
  res: ServerResponse,
  error: RateLimitedError,
  options: { requestId: string; corsOrigins: readonly string[] },
): void {
  const { requestId, corsOrigins } = options;
  const accept = req.headers.accept ?? '';
  const body = JSON.stringify({
    errors: [{ message: error.message, extensions: { code: error.code, ...error.details, requestId } }],
  });
  const headers: Record<string, string | number> = {
    'content-type': accept.includes('application/graphql-response+json')
      ? 'application/graphql-response+json; charset=utf-8'
      : 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'retry-after': String(Math.max(1, Math.ceil(error.retryAfterMs / 1000))),
  };
  const origin = req.headers.origin;
  if (origin && (corsOrigins.includes('*') || corsOrigins.includes(origin))) {
    headers['access-control-allow-origin'] = origin;
    headers.vary = 'Origin';
  }
  res.writeHead(429, headers);
  res.write(body);
  // Ended once the request's body has been read (a body over the limit never gets here, see
  // ./body-limit.ts): Node resets a connection whose answer ended while the client was still
  // sending, and the client would see ECONNRESET instead of the 429.
  if (req.readableEnded) res.end();
  else {
    req.once('end', () => res.end());
    req.once('error', () => res.end());
    req.resume();
  }
}
