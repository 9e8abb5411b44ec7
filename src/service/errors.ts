/**
 * Typed domain errors. The service throws only these (anything else is a bug and gets
 * masked); library callers use `instanceof`, the GraphQL layer maps `code` to
 * `extensions.code`, the CLI to exit codes.
 */
import type { ZodError } from 'zod';

export type ErrorCode =
  | 'NOT_FOUND'
  | 'VALIDATION_FAILED'
  | 'CONFLICT'
  | 'FORBIDDEN'
  | 'UNAUTHENTICATED'
  | 'RETIRED'
  | 'ARCHIVED'
  | 'INTERNAL_ENDPOINT'
  | 'LOCK_HELD'
  | 'SLOW_CONSUMER'
  | 'CURSOR_EXPIRED'
  | 'UNAVAILABLE';

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

export type ResourceKind =
  | 'Workspace'
  | 'Endpoint'
  | 'PayloadSpec'
  | 'Config'
  | 'Job'
  | 'Execution'
  | 'ApiKey'
  | 'Run'
  | 'Handler';

export class NotFoundError extends DomainError {
  override name = 'NotFoundError';
  constructor(resource: ResourceKind, ref: string) {
    // The same words whether the id exists in another workspace or nowhere.
    super('NOT_FOUND', `${resource} ${JSON.stringify(ref)} not found`, { resource });
  }
}

export interface ValidationIssue {
  /** Path of the offending field, from the root of the input. */
  path: (string | number)[];
  message: string;
}

export class ValidationError extends DomainError {
  override name = 'ValidationError';
  constructor(readonly issues: ValidationIssue[]) {
    super('VALIDATION_FAILED', issues.map((i) => (i.path.length ? `${i.path.join('.')}: ${i.message}` : i.message)).join('; '), {
      issues,
    });
  }

  static at(path: (string | number)[], message: string): ValidationError {
    return new ValidationError([{ path, message }]);
  }

  static fromZod(error: ZodError, prefix: (string | number)[] = []): ValidationError {
    return new ValidationError(
      error.issues.map((issue) => ({
        path: [...prefix, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))],
        message: issue.message,
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
    super('LOCK_HELD', `lock key "${lockKey}" is held by job ${holder.jobId} (execution ${holder.executionId}), which is pending or running`, {
      lockKey,
      holderJobId: holder.jobId,
      holderExecutionId: holder.executionId,
    });
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
