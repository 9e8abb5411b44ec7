/**
 * In-process handlers for HANDLER endpoints, registered by name through the library.
 */
import type { ZodType } from 'zod';
import type { FencedTransaction } from './fenced-transaction.js';
import { HANDLER_NAME_RULE, isHandlerName } from '../../../db/handler-name.js';

export interface HandlerContext {
  /** Fires on timeout, on cancellation, when the lease is lost, and at shutdown. Stop promptly. */
  signal: AbortSignal;
  executionId: string;
  jobId: string;
  workspaceId: string;
  /** 1 for the first attempt. */
  attempt: number;
  /**
   * Runs `fn` in a transaction of its own (on a client of the worker's pool) that commits only
   * while this attempt's lease is held: a worker whose lease expired or was taken over cannot
   * commit it, and gets LeaseLostError with everything rolled back. With `{ complete: true }`
   * the execution's success is recorded in the same commit (exactly-once for database work);
   * what the handler returns or throws afterwards no longer changes the outcome. Pass the client
   * to `gate.inTransaction(client)` to enqueue follow-up work in the same commit.
   */
  transaction: FencedTransaction;
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
    if (!isHandlerName(name)) throw new Error(`handler name "${name}" ${HANDLER_NAME_RULE}`);
    if (this.handlers.has(name)) throw new Error(`a handler named "${name}" is already registered`);
    this.handlers.set(name, { name, schema, fn });
  }

  /** Registers or replaces (a typed job defined again: the library's defineJob) the handler of this name. */
  replace(name: string, schema: ZodType | undefined, fn: HandlerFn<any>): void {
    if (!isHandlerName(name)) throw new Error(`handler name "${name}" ${HANDLER_NAME_RULE}`);
    this.handlers.set(name, { name, schema, fn });
  }

  get(name: string): RegisteredHandler | undefined {
    return this.handlers.get(name);
  }

  names(): string[] {
    return [...this.handlers.keys()];
  }
}
