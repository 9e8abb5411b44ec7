import type { WorkspaceRow } from '../types.js';
import { isUuid, type Executor } from './scope.js';

export async function findWorkspaceById(db: Executor, id: string): Promise<WorkspaceRow | undefined> {
  if (!isUuid(id)) return undefined;
  return db.selectFrom('workspaces').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function findWorkspaceBySlug(db: Executor, slug: string): Promise<WorkspaceRow | undefined> {
  return db.selectFrom('workspaces').selectAll().where('slug', '=', slug).executeTakeFirst();
}

/** Creates the workspace, or returns the existing one with that slug. */
export async function ensureWorkspace(db: Executor, slug: string, name: string): Promise<WorkspaceRow> {
  const inserted = await db
    .insertInto('workspaces')
    .values({ slug, name })
    .onConflict((oc) => oc.column('slug').doNothing())
    .returningAll()
    .executeTakeFirst();
  return inserted ?? (await db.selectFrom('workspaces').selectAll().where('slug', '=', slug).executeTakeFirstOrThrow());
}

/** The key that seals the workspace's cursors (migration 000016); throws when there is no such workspace. */
export async function findCursorKey(db: Executor, id: string): Promise<Buffer> {
  const row = await db.selectFrom('workspaces').select('cursor_key').where('id', '=', id).executeTakeFirstOrThrow();
  return row.cursor_key;
}

/** Creates a workspace; undefined when its slug is taken. */
export async function insertWorkspace(db: Executor, slug: string, name: string): Promise<WorkspaceRow | undefined> {
  return db
    .insertInto('workspaces')
    .values({ slug, name })
    .onConflict((oc) => oc.column('slug').doNothing())
    .returningAll()
    .executeTakeFirst();
}

/** Changes a workspace's name and cap (fields left undefined stay); undefined when there is no such workspace. */
export async function updateWorkspace(
  db: Executor,
  id: string,
  patch: { name?: string; concurrency_limit?: number | null },
): Promise<WorkspaceRow | undefined> {
  if (Object.keys(patch).length === 0) return findWorkspaceById(db, id);
  return db.updateTable('workspaces').set(patch).where('id', '=', id).returningAll().executeTakeFirst();
}
