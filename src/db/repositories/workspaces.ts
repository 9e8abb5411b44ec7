import { sql } from 'kysely';
import { DEADLOCK_DETECTED, isPgError, LOCK_NOT_AVAILABLE } from '../sqlstate.js';
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

/** How long a change of a workspace's cap waits for an endpoint's row lock, and how often it tries. */
const CAP_LOCK_WAIT = '200ms';
const CAP_TRIES = 10;

/**
 * Changes a workspace's name and cap (fields left undefined stay); undefined when there is no such
 * workspace. Inside a transaction.
 *
 * Setting or clearing the cap marks every endpoint of the workspace (trigger jobgate_workspace_cap,
 * in id order), while a statement that makes executions of several endpoints PENDING (a redrive,
 * a lease reconcile) reads their endpoints FOR SHARE in its own order (migration 000044): the two
 * could deadlock, and Postgres might abort the engine's side. So the change waits at most
 * CAP_LOCK_WAIT for a lock, then gives way (its savepoint rolled back) and tries again, up to
 * CAP_TRIES times: it is always the one to give way. The transaction's own lock_timeout is put back.
 */
export async function updateWorkspace(
  db: Executor,
  id: string,
  patch: { name?: string; concurrency_limit?: number | null },
): Promise<WorkspaceRow | undefined> {
  if (Object.keys(patch).length === 0) return findWorkspaceById(db, id);
  const update = () => db.updateTable('workspaces').set(patch).where('id', '=', id).returningAll().executeTakeFirst();
  if (patch.concurrency_limit === undefined) return update();
  const before = (await sql<{ v: string }>`select current_setting('lock_timeout') as v`.execute(db)).rows[0]!.v;
  await sql`select set_config('lock_timeout', ${CAP_LOCK_WAIT}, true)`.execute(db);
  try {
    for (let attempt = 1; ; attempt++) {
      await sql`savepoint jobgate_workspace_cap`.execute(db);
      try {
        const row = await update();
        await sql`release savepoint jobgate_workspace_cap`.execute(db);
        return row;
      } catch (error) {
        if (attempt >= CAP_TRIES || !(isPgError(error, LOCK_NOT_AVAILABLE) || isPgError(error, DEADLOCK_DETECTED))) throw error;
        await sql`rollback to savepoint jobgate_workspace_cap`.execute(db);
        await new Promise((r) => setTimeout(r, 20 * attempt));
      }
    }
  } finally {
    // Not after a failure: the transaction is aborted, and ends with the setting.
    await sql`select set_config('lock_timeout', ${before}, true)`.execute(db).catch(() => {});
  }
}
