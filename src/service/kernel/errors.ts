/**
 * Typed domain errors. The service throws only these (anything else is a bug and gets
 * masked); library callers use `instanceof`, the GraphQL layer maps `code` to
 * `extensions.code`, the CLI to exit codes.
 */
import type { ZodError } from 'zod';

/**
 * Every code the service gives, with what it means for a caller. The GraphQL schema publishes
 * them as the `ErrorCode` enum (src/schema/errors.ts), so generated clients can switch on them.
 */
export const ERROR_CODES = {
  NOT_FOUND:
    'No such object in your workspace (an id from another workspace is not found either); or, for a trigger of a handler, no live worker has registered it (`extensions.reason` is `NO_LIVE_WORKER`).',
  VALIDATION_FAILED: 'The input is invalid; `extensions.issues` lists the path and message of each bad field. Nothing was changed.',
  CONFLICT: 'The request contradicts the current state (e.g. an idempotency key reused with a different request). Nothing was changed.',
  FORBIDDEN: "Your key's role may not do this.",
  UNAUTHENTICATED: 'No valid API key: missing, unknown, revoked or expired (HTTP 401).',
  RETIRED: 'The job is retired: it can no longer run or change.',
  ARCHIVED: 'The object is archived and can no longer be used for new work.',
  INTERNAL_ENDPOINT: "The endpoint is jobgate's own: users cannot create jobs on it, change it or cancel it.",
  LOCK_HELD: 'Another job with the same lock key has a pending or running execution.',
  SLOW_CONSUMER: 'A live subscription fell too far behind and was cut; resubscribe with `after` to resume.',
  CURSOR_EXPIRED:
    'What `after` pointed at was pruned by retention (or deleted): the events after a stream cursor, or the item a page cursor was taken at. Start again without `after`.',
  UNAVAILABLE: 'The database cannot be reached just now (HTTP 503): retry later.',
  LEASE_LOST: "A handler's fenced transaction (ctx.transaction) found its lease lost or taken over: nothing it wrote was committed.",
  RATE_LIMITED:
    'A bound on load was reached (requests a second per key, open connections or subscriptions per key or per connection, or failed authentications per client address): nothing was done. `extensions.retryAfterMs` says when to try again, `extensions.limit` which bound it was; over HTTP the status is 429 with `Retry-After`.',
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export class DomainError extends Error {
  override name = 'DomainError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** Extra machine-readable fields a client may switch on; never secrets. */
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/** An outcome of one item of a many-item body (../jobs/pause.ts, ../jobs/execution-changes.ts): its value, or its refusal thrown. */
export function unwrap<T>(outcome: T | DomainError): T {
  if (outcome instanceof DomainError) throw outcome;
  return outcome;
}

export type ResourceKind =
  | 'Workspace'
  | 'AuditEntry'
  | 'Finding'
  | 'Endpoint'
  | 'PayloadSpec'
  | 'Config'
  | 'Job'
  | 'Execution'
  | 'ApiKey'
  | 'Run'
  | 'Batch'
  | 'Handler'
  | 'AlertRule'
  | 'Alert'
  | 'AlertState'
  | 'AlertSilence';

export class NotFoundError extends DomainError {
  override name = 'NotFoundError';
  constructor(resource: ResourceKind, ref: string) {
    // The same words whether the id exists in another workspace or nowhere. A ref longer than any
    // id or name is cut: the whole of a 100,000-character id came back in the message.
    super('NOT_FOUND', `${resource} ${JSON.stringify(ref.length > 100 ? `${ref.slice(0, 100)}…` : ref)} not found`, { resource });
  }
}

/**
 * A trigger of a handler that no live worker (heartbeating, with that handler registered) has:
 * the work would wait for a worker that may never come. NOT_FOUND, with `reason: NO_LIVE_WORKER`
 * and the handler's kind and name beside the code, so a client can tell it from an unknown id.
 */
export class NoLiveWorkerError extends DomainError {
  override name = 'NoLiveWorkerError';
  constructor(kind: 'RECOVERABLE' | 'INTERVAL', handlerName: string, hint: string) {
    super(
      'NOT_FOUND',
      `no live worker has registered the ${kind === 'RECOVERABLE' ? 'recoverable' : 'interval'} handler ${JSON.stringify(handlerName)}; ${hint}`,
      {
        resource: 'Handler',
        reason: 'NO_LIVE_WORKER',
        handlerKind: kind,
        handlerName,
      },
    );
  }
}

export interface ValidationIssue {
  /** Path of the offending field, from the root of the input. */
  path: (string | number)[];
  message: string;
}

export class ValidationError extends DomainError {
  override name = 'ValidationError';
  constructor(
    readonly issues: ValidationIssue[],
    /** A stable name for the rule that was broken (`extensions.reason`), where a client may switch on it. */
    reason?: string,
  ) {
    super('VALIDATION_FAILED', issues.map((i) => (i.path.length ? `${i.path.join('.')}: ${i.message}` : i.message)).join('; '), {
      issues,
      ...(reason ? { reason } : {}),
    });
  }

  static at(path: (string | number)[], message: string, reason?: string): ValidationError {
    return new ValidationError([{ path, message }], reason);
  }

  static fromZod(error: ZodError, prefix: (string | number)[] = []): ValidationError {
    return new ValidationError(
      error.issues.map((issue) => ({
        path: [...prefix, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))],
        // A record's key that fails its schema comes as "Invalid key in record", its reasons nested.
        message: issue.code === 'invalid_key' && issue.issues.length > 0 ? issue.issues.map((i) => i.message).join('; ') : issue.message,
      })),
    );
  }
}

export class ConflictError extends DomainError {
  override name = 'ConflictError';
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('CONFLICT', message, details);
  }
}

export class ForbiddenError extends DomainError {
  override name = 'ForbiddenError';
  constructor(message: string) {
    super('FORBIDDEN', message);
  }
}

export class RetiredError extends DomainError {
  override name = 'RetiredError';
  constructor(jobId: string) {
    super('RETIRED', `job ${JSON.stringify(jobId)} is retired; a retired job cannot be changed`, { jobId });
  }
}

export class ArchivedError extends DomainError {
  override name = 'ArchivedError';
  constructor(endpointId: string) {
    super('ARCHIVED', `endpoint ${JSON.stringify(endpointId)} is archived`, { endpointId });
  }
}

export class InternalEndpointError extends DomainError {
  override name = 'InternalEndpointError';
  constructor(endpointName: string) {
    super('INTERNAL_ENDPOINT', `endpoint ${JSON.stringify(endpointName)} is internal to jobgate; jobs on it are system-owned`, {
      endpoint: endpointName,
    });
  }
}

export class LockHeldError extends DomainError {
  override name = 'LockHeldError';
  constructor(lockKey: string, holder: { jobId: string; executionId: string }) {
    super(
      'LOCK_HELD',
      `lock key "${lockKey}" is held by job ${holder.jobId} (execution ${holder.executionId}), which is pending or running`,
      {
        lockKey,
        holderJobId: holder.jobId,
        holderExecutionId: holder.executionId,
      },
    );
  }
}

/** A stream was asked to replay from before the oldest events still kept (retention pruned them). Both cursors are sealed (./cursors.ts). */
export class CursorExpiredError extends DomainError {
  override name = 'CursorExpiredError';
  constructor(after: string, oldestCursor: string) {
    super(
      'CURSOR_EXPIRED',
      `events after cursor ${after} are past the retention window and no longer kept; re-read the current state, then subscribe without \`after\` (or from cursor ${oldestCursor}, the oldest it can resume from)`,
      { after, oldestCursor },
    );
  }
}

/**
 * A page cursor whose row is no longer in its list: pruned by retention or deleted since it was
 * handed out (or, were it made up or taken from another list, never there). A keyset page reads
 * its position from that row, so without it the page would come back empty and look like the end.
 */
export class PageCursorExpiredError extends DomainError {
  override name = 'PageCursorExpiredError';
  constructor(after: string) {
    super(
      'CURSOR_EXPIRED',
      'the item this page cursor was taken at is no longer in the list (pruned by retention, or deleted), so the page after it cannot be found; read the list again from its first page',
      { after },
    );
  }
}

/**
 * A handler's fenced transaction (ctx.transaction) found its lease gone: expired, reconciled, or
 * taken over by another worker. Nothing it wrote was committed; another attempt may run.
 */
export class LeaseLostError extends DomainError {
  override name = 'LeaseLostError';
  constructor(executionId: string, epoch: number) {
    super('LEASE_LOST', `the lease of execution ${executionId} (epoch ${epoch}) is no longer held; the transaction was rolled back`, {
      executionId,
      epoch,
    });
  }
}

/** Which bound a RATE_LIMITED refusal met (src/service/access/load-bounds.ts). */
export type LoadBound =
  | 'REQUESTS_PER_KEY'
  | 'REQUESTS_IN_FLIGHT_PER_KEY'
  | 'NEW_KEY_REQUESTS_IN_FLIGHT_PER_ADDRESS'
  | 'CONNECTIONS_PER_KEY'
  | 'SUBSCRIPTIONS_PER_KEY'
  | 'SUBSCRIPTIONS_PER_CONNECTION'
  | 'FAILED_AUTHENTICATIONS_PER_ADDRESS';

/** A bound on load refused the request; nothing was done. `retryAfterMs` is the earliest a retry can succeed. */
export class RateLimitedError extends DomainError {
  override name = 'RateLimitedError';
  constructor(
    readonly limit: LoadBound,
    readonly retryAfterMs: number,
    message: string,
  ) {
    super('RATE_LIMITED', `${message}; retry in ${retryAfterMs} ms`, { limit, retryAfterMs });
  }
}
