/**
 * RATE_LIMITED answered before yoga reads a request, when the bounds on load can tell without a
 * lookup that they would refuse it (LoadBounds.refusal): an address throttled for failed
 * authentications sending a key it has not shown to be good, or a key that authenticated lately
 * whose request bucket is empty. A refusal inside yoga costs its parse of the request, the
 * body's read and the key's lookup, about as much as a small query: under a one-key flood
 * that work took the gateway's one thread from every other key. Here it costs a hash and a map
 * lookup. What this lets through meets the full checks inside yoga (./authenticate-first.ts).
 *
 * A client that keeps sending while refused gets its answer after a hold (a second by default,
 * on average), as long as fewer than MAX_HELD answers are held: a client that waits for each
 * answer before sending again (most floods: a loop over a few connections) is slowed to one
 * request a second per connection, so it costs almost nothing, where answered at once it came
 * straight back and kept the gateway's thread busy with refusals. Each hold is drawn between half
 * and one and a half of it: held for the same time, a flood's clients refused together came back
 * together, and the tokens their key had gathered meanwhile let a wave of them in at once, ahead
 * of every other key (measured: bench/bounds.ts). The hold is not tied to the retry time: a key
 * over its rate may get a token again within milliseconds, and a flood would come back that
 * fast. A client that honours Retry-After (whole seconds, at least 1) waits that long anyway.
 * Past MAX_HELD, answers go at once: held answers cost memory and sockets, and that stays bounded.
 *
 * The answer is the one yoga gives the same refusal (./mask-error.ts): 429, Retry-After, and a
 * GraphQL error RATE_LIMITED with `limit`, `retryAfterMs` and the request's id, with the same
 * CORS headers for an origin the gateway allows, so a browser reads it as any refusal.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RateLimitedError } from '../service/kernel/errors.js';
import { retryAfterSeconds } from './mask-error.js';

/** Answers held at once, at most; past it answers go out unheld. */
const MAX_HELD = 1_000;

export interface EarlyRefusals {
  refuse(req: IncomingMessage, res: ServerResponse, error: RateLimitedError, requestId: string): void;
}

/** `holdMs`: how long an answer is held (0: none). */
export function createEarlyRefusals(options: { holdMs: number; corsOrigins: readonly string[] }): EarlyRefusals {
  let held = 0;
  return {
    refuse(req, res, error, requestId) {
      const { holdMs } = options;
      if (holdMs <= 0 || held >= MAX_HELD) return answer(req, res, error, requestId, options.corsOrigins);
      held++;
      const release = () => {
        clearTimeout(timer);
        res.off('close', release);
        held--;
      };
      const timer = setTimeout(
        () => {
          release();
          answer(req, res, error, requestId, options.corsOrigins);
        },
        holdMs * (0.5 + Math.random()),
      );
      // A client that gave up takes nothing more.
      res.once('close', release);
    },
  };
}

function answer(
  req: IncomingMessage,
  res: ServerResponse,
  error: RateLimitedError,
  requestId: string,
  corsOrigins: readonly string[],
): void {
  const accept = req.headers.accept ?? '';
  const body = JSON.stringify({
    errors: [{ message: error.message, extensions: { code: error.code, ...error.details, requestId } }],
  });
  const headers: Record<string, string | number> = {
    'content-type': accept.includes('application/graphql-response+json')
      ? 'application/graphql-response+json; charset=utf-8'
      : 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'retry-after': retryAfterSeconds(error.retryAfterMs),
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
