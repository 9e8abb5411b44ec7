/**
 * Which of a list of ids name rows of the workspace: for inputs that refer to many jobs or
 * endpoints at once (an alert rule's subjects), checked in one query.
 */
import { sql } from 'kysely';
import { scoped, type Executor } from './scope.js';

/** The ids among `ids` (UUIDs) that name a row of `table` in the workspace. */
export async function existingIds(ex: Executor, table: 'jobs' | 'endpoints', workspaceId: string, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const { rows } = await sql<{ id: string }>`
    select id from ${sql.table(table)} where workspace_id = ${scoped(workspaceId)} and id = any(${ids}::uuid[])`.execute(ex);
  return new Set(rows.map((r) => r.id));
}
