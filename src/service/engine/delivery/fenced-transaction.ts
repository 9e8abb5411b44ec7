/**
 * A handler's fenced transaction (HandlerContext.transaction): the handler's own domain writes
 * commit only while its lease is held, and optionally record the execution's success with them.
 *
 * Why the lease is locked at the end and not at the start: a row lock held for the whole of the
 * handler's work would stall the worker's heartbeat (one statement for all its leases) and, if
 * the process stalls (SIGSTOP, a long GC), keep the reconciler from ever taking the execution
 * over. So: a cheap check first (refuse early), the handler's writes, then the lease is locked
 * (and renewed) and checked again, and the commit follows at once. Between that lock and the
 * commit nobody can take the lease over (their updates wait on the row), so what commits,
 * commits under a held lease; a lease taken over at any point before it means a rollback and
 * LeaseLostError. A lease that merely expired (the database was unreachable for longer than the
 * lease, or the process stalled) and that nobody took is still held (src/db/statements/fence.ts).
 *
 * With `complete: true` the execution's success (its attempt row included) is recorded by the
 * same statement the worker uses, in this transaction: the domain write and the recorded
 * completion are one commit, so the effect is exactly-once for work done in this database.
 */
import type pg from 'pg';
import { completeExecutions } from '../../../db/statements/complete.js';
import { leaseHeld } from '../../../db/statements/fence.js';
import { inTransaction } from '../../../db/transaction.js';
import { LeaseLostError } from '../../kernel/errors.js';

export interface FencedTransactionOptions {
  /** Also record the execution as SUCCEEDED in this transaction. Default false. */
  complete?: boolean;
}

export type FencedTransaction = <T>(fn: (client: pg.PoolClient) => Promise<T>, options?: FencedTransactionOptions) => Promise<T>;

export interface FenceScope {
  pool: pg.Pool;
  workerId: string;
  executionId: string;
  epoch: number;
  /** performance.now() at the attempt's start, for the recorded duration. */
  startedAt: number;
  /** How long the execution waited in the worker for a slot before the attempt started. */
  queuedMs?: number;
  /** Called once a transaction that recorded the completion has committed. */
  onRecorded(): void;
  /** The worker's lease length: locking the lease before the commit renews it for this long. */
  leaseMs?: number | undefined;
}

export function fencedTransaction(scope: FenceScope): FencedTransaction {
  const { executionId, epoch } = scope;
  return async (fn, options = {}) => {
    const result = await inTransaction(scope.pool, async (client) => {
      if (!(await leaseHeld(client, executionId, epoch, { lock: false }))) throw new LeaseLostError(executionId, epoch);
      const result = await fn(client);
      if (!(await leaseHeld(client, executionId, epoch, { lock: true, renewMs: scope.leaseMs ?? 0 })))
        throw new LeaseLostError(executionId, epoch);
      if (options.complete) {
        const accepted = await completeExecutions(client, scope.workerId, [
          {
            executionId,
            epoch,
            outcome: 'SUCCEEDED',
            retryable: false,
            retryDelayMs: null,
            statusCode: null,
            durationMs: performance.now() - scope.startedAt,
            queuedMs: scope.queuedMs ?? 0,
            error: null,
            responseExcerpt: null,
          },
        ]);
        // The row is locked under our lease: only a bug could make the fence refuse here.
        if (!accepted.has(executionId)) throw new LeaseLostError(executionId, epoch);
      }
      return result;
    });
    if (options.complete) scope.onRecorded();
    return result;
  };
}
