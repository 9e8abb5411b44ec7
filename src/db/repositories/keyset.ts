/**
 * The keyset predicate of every list: rows strictly below (or above) the cursor row's
 * (created_at, id) pair, read with full database precision. The cursor's text form (encoding,
 * validation) is the service's (`src/service/kernel/pagination.ts`); this is the SQL it turns into.
 */
import { sql, type Expression, type SqlBool } from 'kysely';
import type { Executor } from './scope.js';

/** The tables listed by (created_at, id) pages. */
export type KeysetTable = 'endpoints' | 'jobs' | 'executions' | 'payload_specs' | 'configs' | 'runs' | 'api_keys';

/** The order of a list: by (created_at, id), newest first unless asked otherwise. */
export type ListOrder = 'NEWEST_FIRST' | 'OLDEST_FIRST';

/**
 * `(created_at, id) < (cursor row's)` (or `>` when the list is oldest first): the keyset
 * predicate, for a table with those columns.
 */
export function afterCursor(
  table: KeysetTable,
  cursorId: string,
  workspaceId: string,
  order: ListOrder = 'NEWEST_FIRST',
): Expression<SqlBool> {
  const t = sql.table(table);
  const cursorRow = sql`(select c.created_at, c.id from ${t} as c where c.id = ${cursorId} and c.workspace_id = ${workspaceId})`;
  return order === 'OLDEST_FIRST'
    ? sql<SqlBool>`(${t}.created_at, ${t}.id) > ${cursorRow}`
    : sql<SqlBool>`(${t}.created_at, ${t}.id) < ${cursorRow}`;
}

/**
 * Whether the cursor row is still in the workspace's table. A page after a row that is gone reads
 * nothing (the predicate compares with null), so an empty page asks this before it says "the end".
 */
export async function cursorRowExists(db: Executor, table: KeysetTable, cursorId: string, workspaceId: string): Promise<boolean> {
  const row = await db
    .selectFrom(sql.table(table).as('c'))
    .select(sql<number>`1`.as('one'))
    .where(sql.ref('c.id'), '=', cursorId)
    .where(sql.ref('c.workspace_id'), '=', workspaceId)
    .executeTakeFirst();
  return row !== undefined;
}
