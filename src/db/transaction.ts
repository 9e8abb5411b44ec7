/**
 * Transactions and savepoints: the only place jobgate says BEGIN, COMMIT, SAVEPOINT or ROLLBACK.
 * The service decides where its boundaries are (src/service/kernel/context.ts); this is how they are
 * drawn, on the pool or inside a caller's own open transaction; the engine's loops, which work on
 * plain pg connections, draw theirs with inTransaction.
 */
import { sql, type RawBuilder, type Transaction } from 'kysely';
import type pg from 'pg';
import type { Db } from './pool.js';
import type { Executor } from './repositories/scope.js';
import { retryConflicts, type ConflictRetryReport } from './conflicts.js';
import { isPgError, NO_ACTIVE_TRANSACTION } from './sqlstate.js';
import type { DB } from './types.js';

const SAVEPOINT_NAME = /^[a-z_][a-z0-9_]*$/;

/**
 * Runs `fn` inside a savepoint of the transaction `ex` is in: released when `fn` succeeds, rolled
 * back to (and released) when it throws, so the transaction stays usable after the refusal and
 * the caller can still read, or write, in it. `fn`'s error is rethrown as it was; a failed
 * rollback (a lost connection) is not reported here: the transaction is then unusable, which its
 * next statement reports. Throws a TypeError when `ex` is in no open transaction.
 */
export async function inSavepoint<T>(ex: Executor, name: string, fn: () => Promise<T>): Promise<T> {
  if (!SAVEPOINT_NAME.test(name)) throw new TypeError(`savepoint name "${name}" is not a plain identifier`);
  const savepoint = sql.raw(name);
  try {
    await sql`savepoint ${savepoint}`.execute(ex);
  } catch (error) {
    if (isPgError(error, NO_ACTIVE_TRANSACTION)) throw new TypeError('jobgate: the transaction passed in is not open (BEGIN it first)');
    throw error;
  }
  try {
    const result = await fn();
    await sql`release savepoint ${savepoint}`.execute(ex);
    return result;
  } catch (error) {
    await sql`rollback to savepoint ${savepoint}`.execute(ex).catch(() => {});
    await sql`release savepoint ${savepoint}`.execute(ex).catch(() => {});
    throw error;
  }
}

/** The service's transaction boundary over one executor (see ServiceContext in src/service/kernel/context.ts). */
export interface TransactionBoundary {
  /** `fn` commits or rolls back as a whole: a transaction of its own, or a savepoint of the caller's. */
  transaction<T>(fn: (trx: Transaction<DB>) => Promise<T>): Promise<T>;
  /** A savepoint of the caller's transaction around `fn`; nothing extra on the pool. */
  atomic<T>(fn: () => Promise<T>): Promise<T>;
}

/**
 * On the pool (`outer` false), `transaction` is BEGIN ... COMMIT (ROLLBACK on a throw) on one
 * connection, tried again whole when Postgres aborted it for a conflict with another transaction
 * (a deadlock it broke, a serialization failure: ./conflicts.ts), a few times in under 100 ms;
 * `conflictRetried` hears each retry. `fn` reads what it decides on inside the transaction, so a
 * second try decides again on what is there then. Inside the caller's open transaction (`db` is
 * that one connection, see ./outer.ts), both are savepoints, numbered so that nested ones never
 * share a name, and a conflict is the caller's to retry: its own transaction may hold locks in the
 * cycle, which a savepoint's retry would only meet again.
 */
export function createTransactionBoundary(
  db: Db,
  outer: boolean,
  conflictRetried: (report: ConflictRetryReport) => void = () => {},
): TransactionBoundary {
  let savepoints = 0;
  const savepoint = <T>(fn: () => Promise<T>) => inSavepoint(db, `jobgate_${++savepoints}`, fn);
  return {
    transaction: (fn) =>
      outer ? savepoint(() => fn(db as Transaction<DB>)) : retryConflicts(() => db.transaction().execute(fn), conflictRetried),
    atomic: (fn) => (outer ? savepoint(fn) : fn()),
  };
}

/** The database's clock: `now()`, the start of the transaction `ex` is in (or of this statement). */
export async function databaseNow(ex: Executor): Promise<Date> {
  const { rows } = await sql<{ now: Date }>`select now() as now`.execute(ex);
  return rows[0]!.now;
}

/**
 * The database's `now()` as a value to write: to the microsecond, and the same instant as every
 * other `now()` of the transaction (a JS Date would round two writes in one millisecond together).
 */
export const DATABASE_NOW: RawBuilder<Date> = sql<Date>`now()`;

/**
 * One transaction on one pooled connection: BEGIN, `fn`, COMMIT; ROLLBACK when `fn` (or the
 * commit) throws, and the error is rethrown. A connection whose rollback failed is in an unknown
 * state and is dropped by the pool rather than handed to the next caller.
 */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    return await transactionOn(
      client,
      () => fn(client),
      (e) => (broken = e),
    );
  } finally {
    client.release(broken);
  }
}

/**
 * inTransaction on a connection the caller has taken from the pool (and releases): BEGIN, `fn`,
 * COMMIT; ROLLBACK when `fn` or the commit throws, and the error is rethrown. A failed rollback
 * is passed to `rollbackFailed`: the connection is then in an unknown state.
 */
export async function transactionOn<T>(
  client: pg.PoolClient,
  fn: () => Promise<T>,
  rollbackFailed: (error: Error) => void = () => {},
): Promise<T> {
  try {
    await client.query('begin');
    const result = await fn();
    await client.query('commit');
    return result;
  } catch (error) {
    await client.query('rollback').catch(rollbackFailed);
    throw error;
  }
}
