import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../types.js';

/** A repository runs on the pool or inside the caller's transaction; the service decides which. */
export type Executor = Kysely<DB> | Transaction<DB>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Ids are UUIDs; anything else cannot name a row, so callers answer NOT_FOUND without a query. */
export function isUuid(id: string): boolean {
  return UUID.test(id);
}

/**
 * Every repository function takes the workspace as a required argument and calls this first:
 * a missing workspace is a bug that must fail loudly, never a filter that silently widens a query.
 */
export function scoped(workspaceId: string): string {
  if (typeof workspaceId !== 'string' || !isUuid(workspaceId)) {
    throw new Error(`repository called without a workspace (got ${JSON.stringify(workspaceId)})`);
  }
  return workspaceId;
}
