/**
 * The caller's own open transaction as a Kysely executor, so the service can run its statements
 * inside it (see ServiceContext.transaction): a Kysely `Transaction` is one already; a `pg`
 * client (a `PoolClient` or `Client` inside BEGIN) is wrapped in a Kysely whose "pool" hands out
 * that one client and never releases it, so every statement goes down the caller's connection.
 */
import { Kysely, PostgresDialect, type Transaction } from 'kysely';
import type pg from 'pg';
import { pgTypes } from './pg-types.js';
import type { Db } from './pool.js';
import type { DB } from './types.js';

/** What a caller may pass: a Kysely transaction, or a pg client with a transaction open on it. */
export type OuterTransaction = Transaction<DB> | Kysely<DB> | Pick<pg.ClientBase, 'query'>;

function isKysely(tx: OuterTransaction): tx is Kysely<DB> {
  return typeof (tx as Kysely<DB>).selectFrom === 'function' && typeof (tx as Kysely<DB>).executeQuery === 'function';
}

export function outerExecutor(tx: OuterTransaction): Db {
  if (isKysely(tx)) {
    // A plain Kysely over a pool would spread our statements across connections, outside the
    // caller's transaction: only a Transaction is one connection.
    if (!tx.isTransaction) throw new TypeError('jobgate: pass a Kysely Transaction (db.transaction()), not the Kysely instance');
    return tx;
  }
  if (typeof (tx as pg.ClientBase).query !== 'function')
    throw new TypeError('jobgate: pass a pg client inside BEGIN or a Kysely Transaction');
  // One stable handle, so Kysely's per-client connection cache sees one connection. Each
  // statement carries jobgate's parsers (pg-types.ts): the caller's connection keeps its own.
  const handle = { query: (text: string, values: unknown[]) => tx.query({ text, values, types: pgTypes }), release: () => {} };
  return new Kysely<DB>({ dialect: new PostgresDialect({ pool: { connect: async () => handle, end: async () => {} } as never }) });
}
