/**
 * `POST /jobs/run-due` (or `GET`, as Vercel Cron calls it): the serverless pass of
 * src/service/engine/serverless/run-due.ts (reconcile expired leases, one scheduler pass, a bounded drain of due
 * executions), for hosts whose only clock is a platform's minute cron. Requires `Authorization:
 * Bearer $JOBGATE_CRON_SECRET`; the route does not exist when the secret is unset. Safe to call
 * concurrently, or twice in one minute: the scheduler's compare-and-set and unique
 * occurrences, and the claim's SKIP LOCKED, make a second call find nothing already done.
 */
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../log.js';
import { bearerToken } from './bearer.js';

export interface RunDueOptions {
  secret: string;
  run(): Promise<Record<string, unknown>>;
  log: Logger;
}

function authorized(header: string | undefined, secret: string): boolean {
  const token = bearerToken(header);
  if (token === undefined) return false;
  const given = Buffer.from(token);
  const expected = Buffer.from(secret);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** Handles the request if it is for /jobs/run-due; returns false to let the next handler have it. */
export function handleRunDue(options: RunDueOptions | undefined, req: IncomingMessage, res: ServerResponse): boolean {
  const path = (req.url ?? '').split('?')[0];
  if (!options || path !== '/jobs/run-due') return false;
  const send = (status: number, body: Record<string, unknown>) => {
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body));
  };
  // GET too: Vercel Cron (and other platform crons) can only send GET, with the same bearer.
  if (req.method !== 'POST' && req.method !== 'GET') {
    res.setHeader('allow', 'GET, POST');
    send(405, { error: { code: 'METHOD_NOT_ALLOWED', message: 'use POST or GET' } });
    return true;
  }
  if (!authorized(req.headers.authorization, options.secret)) {
    send(401, { error: { code: 'UNAUTHENTICATED', message: 'missing or wrong bearer token' } });
    return true;
  }
  req.resume();
  options.run().then(
    (result) => send(200, result),
    (error: unknown) => {
      options.log.error(`run-due failed: ${(error as Error).stack ?? String(error)}`);
      send(500, { error: { code: 'INTERNAL_SERVER_ERROR', message: 'Unexpected error.' } });
    },
  );
  return true;
}
