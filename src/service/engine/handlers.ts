/**
 * In-process handlers for HANDLER endpoints, registered by name through the library.
 */
import type { ZodType } from 'zod';

export interface HandlerContext {
  /** Fires on timeout, on cancellation, when the lease is lost, and at shutdown. Stop promptly. */
  signal: AbortSignal;
  executionId: string;
  jobId: string;
  workspaceId: string;
  /** 1 for the first attempt. */
  attempt: number;
}

export type HandlerFn<I = unknown> = (input: I, ctx: HandlerContext) => unknown;

export interface RegisteredHandler {
  name: string;
  schema?: ZodType | undefined;
  fn: HandlerFn<any>;
}

/**
 * Throw this from a handler to fail the execution at once, without retries (for errors that
 * another attempt cannot fix). Any other thrown error is retried per the endpoint's policy.
 */
export class UnrecoverableError extends Error {
  override name = 'UnrecoverableError';
}

export class HandlerRegistry {
  private readonly handlers = new Map<string, RegisteredHandler>();

  register(name: string, schema: ZodType | undefined, fn: HandlerFn<any>): void {
    if (!/^[A-Za-z0-9_.:-]{1,200}$/.test(name)) throw new Error(`handler name "${name}" must be 1-200 letters, digits, _ . : -`);
    if (this.handlers.has(name)) throw new Error(`a handler named "${name}" is already registered`);
    this.handlers.set(name, { name, schema, fn });
  }

  get(name: string): RegisteredHandler | undefined {
    return this.handlers.get(name);
  }

  names(): string[] {
    return [...this.handlers.keys()];
  }
}
