/**
 * What every filtered list shares: its page in keyset order, either way, and its bounded count.
 * Each list builds its filtered rows once (the `base` query) and hands it to both.
 */
import { sql, type SelectQueryBuilder } from 'kysely';
import { afterCursor, type ListOrder } from './keyset.js';
import type { DB } from '../types.js';
import type { Executor } from './scope.js';

type Listed = 'jobs' | 'executions';

/** One page of `base` by (created_at, id), newest first unless `order` says otherwise, after the cursor row. */
export function orderedPage<T extends Listed, O>(
  base: SelectQueryBuilder<DB, T, O>,
  table: T,
  workspaceId: string,
  opts: { limit: number; afterId?: string | undefined; order?: ListOrder | null | undefined },
) {
  const order = opts.order ?? 'NEWEST_FIRST';
  const direction = order === 'OLDEST_FIRST' ? 'asc' : 'desc';
  const q = opts.afterId ? base.where(afterCursor(table, opts.afterId, workspaceId, order)) : base;
  return q
    .orderBy(sql.ref(`${table}.created_at`), direction)
    .orderBy(sql.ref(`${table}.id`), direction)
    .limit(opts.limit);
}

/** How many rows `base` matches, counting at most `limit` (see COUNT_LIMIT): a scan stops there. */
export async function countAtMost<T extends Listed, O>(db: Executor, base: SelectQueryBuilder<DB, T, O>, limit: number): Promise<number> {
  const row = await db
    .selectFrom(
      base
        .select(sql<number>`1`.as('one'))
        .limit(limit)
        .as('matching'),
    )
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}
