import { sql } from 'kysely';
import type { ConfigEntry, ConfigRow } from '../types.js';
import { afterCursor } from './keyset.js';
import { isUuid, scoped, type Executor } from './scope.js';

/** `forShare`: locked against a concurrent setConfig until the caller commits, and read as that one left it. */
export async function findConfigById(
  db: Executor,
  workspaceId: string,
  id: string,
  opts: { forShare?: boolean } = {},
): Promise<ConfigRow | undefined> {
  if (!isUuid(id)) return undefined;
  return db
    .selectFrom('configs')
    .selectAll()
    .where('workspace_id', '=', scoped(workspaceId))
    .where('id', '=', id)
    .$if(opts.forShare === true, (q) => q.forShare())
    .executeTakeFirst();
}

/** The workspace's configs among `ids`. */
export async function findConfigsByIds(db: Executor, workspaceId: string, ids: readonly string[]): Promise<ConfigRow[]> {
  const valid = ids.filter(isUuid);
  if (valid.length === 0) return [];
  return db.selectFrom('configs').selectAll().where('workspace_id', '=', scoped(workspaceId)).where('id', 'in', valid).execute();
}

export async function findConfigByName(db: Executor, workspaceId: string, name: string): Promise<ConfigRow | undefined> {
  return db
    .selectFrom('configs')
    .selectAll()
    .where('workspace_id', '=', scoped(workspaceId))
    .where('name', '=', name)
    .forUpdate()
    .executeTakeFirst();
}

/** Replaces the config's entries, creating the config when the name is new. */
export async function upsertConfig(
  db: Executor,
  workspaceId: string,
  name: string,
  entries: Record<string, ConfigEntry>,
  createdByKeyId: string | null,
): Promise<ConfigRow> {
  return db
    .insertInto('configs')
    .values({ workspace_id: scoped(workspaceId), name, entries: JSON.stringify(entries), created_by_key_id: createdByKeyId })
    .onConflict((oc) =>
      oc.columns(['workspace_id', 'name']).doUpdateSet({ entries: JSON.stringify(entries), updated_at: sql<Date>`now()` }),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function listConfigs(
  db: Executor,
  workspaceId: string,
  opts: { limit: number; afterId?: string | undefined },
): Promise<ConfigRow[]> {
  let q = db.selectFrom('configs').selectAll().where('workspace_id', '=', scoped(workspaceId));
  if (opts.afterId) q = q.where(afterCursor('configs', opts.afterId, workspaceId));
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(opts.limit).execute();
}
