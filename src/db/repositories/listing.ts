/**
 * What every filtered list shares: its page in keyset order, either way, and its bounded count.
 * Each list builds its filtered rows once (the `base` query) and hands it to both.
 */
import { sql, type SelectQueryBuilder } from 'kysely';
import { afterCursor, type ListOrder } from './keyset.js';
import type { DB } from '../types.js';
import { isUuid, type Executor } from './scope.js';

type Listed = 'jobs' | 'executions';

/** `%`, `_` and `\` match themselves in a LIKE pattern. */
const likeEscaped = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`);

/** A LIKE pattern for text starting with `text`. */
export const likePrefix = (text: string) => `${likeEscaped(text)}%`;

/** A LIKE pattern for text containing `text`. */
export const likeInfix = (text: string) => `%${likeEscaped(text)}%`;

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

/** How many rows `base` (any query: only its rows are counted) matches, counting at most `limit` (see COUNT_LIMIT): a scan stops there. */
export async function countAtMost(db: Executor, base: SelectQueryBuilder<any, any, unknown>, limit: number): Promise<number> {
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

/** Up to this many matches, a search reads and sorts them all; past it, it walks the newest-first index. */
export const SEARCH_SORT_LIMIT = 2000;

/**
 * One page of a searched list (`base` holds a search condition that an index serves: a prefix on
 * a name, a trigram on an error). Few matches: read them all through that index (at most
 * SEARCH_SORT_LIMIT + 1, behind an `offset 0` fence) and sort them, counting them on the way. Left
 * to itself the planner walks the newest-first index, filtering row by row in the hope of meeting
 * a page of matches early: when the matches are old (last year's jobs) that walk reads nearly the
 * whole workspace (176 ms at 100,000 jobs for 1,000 old matches; 8 ms this way, on a loaded
 * machine). Many matches: dense enough that the newest-first walk meets a page of them soon. None
 * after the cursor: a bounded count tells the end of a few (the list ends; the walk would read
 * the whole workspace to find nothing) from a page past the few that were read. `candidates`:
 * where the few are read from when `base` alone would not reach them through an index (at most
 * SEARCH_SORT_LIMIT + 1 of `base`'s rows, every column).
 */
export async function searchedPage<T extends Listed, O>(
  db: Executor,
  base: SelectQueryBuilder<DB, T, O>,
  table: T,
  workspaceId: string,
  opts: { limit: number; afterId?: string | undefined; order?: ListOrder | null | undefined },
  candidates: SelectQueryBuilder<any, any, unknown> = base.selectAll().limit(SEARCH_SORT_LIMIT + 1),
) {
  const some = candidates.offset(0).as('some');
  const counted = db
    .selectFrom(some)
    .selectAll()
    .select(sql<string>`count(*) over ()`.as('matched'))
    .as(table);
  const matches = db.selectFrom(counted) as unknown as typeof base;
  const rows = await orderedPage(matches.selectAll(), table, workspaceId, opts).execute();
  const first = rows[0] as { matched?: string } | undefined;
  if (first && Number(first.matched) <= SEARCH_SORT_LIMIT) {
    return rows.map((row) => {
      const { matched: _m, ...rest } = row as typeof row & { matched?: string };
      return rest as typeof row;
    });
  }
  // None after the cursor: were they few (the list ends here), or more than were read?
  if (!first && (await countAtMost(db, candidates, SEARCH_SORT_LIMIT + 1)) <= SEARCH_SORT_LIMIT) return [];
  return orderedPage(base.selectAll(), table, workspaceId, opts).execute();
}

/** The rows whose lists a page of them shows, row by row (a job's executions, an endpoint's jobs, an execution's children, a batch's members, a run's findings). */
type Parent = 'jobs' | 'endpoints' | 'executions' | 'batches' | 'runs';

/** A column of the listed table, and which way a list runs along it. */
type Ordering = readonly { column: string; direction: 'asc' | 'desc' }[];

/** Newest first, as orderedPage reads a page. */
export const NEWEST_FIRST: Ordering = [
  { column: 'created_at', direction: 'desc' },
  { column: 'id', direction: 'desc' },
];

/** In id order, as an execution's children and a job's dependents are listed. */
export const ID_ORDER: Ordering = [{ column: 'id', direction: 'asc' }];

/**
 * For each of `parentIds` (rows of `parent` in the workspace; other ids, and ids that are no uuid,
 * have none): the first `limit` rows of its list in `order`. `rowsOf(parentId)` is one parent's
 * filtered rows of `table`, given a reference to the parent's id. Each parent is one probe of its
 * list's index (a LATERAL join), all of them one statement, the rows in parent order and then the
 * list's.
 */
export async function firstPerParent<O>(
  db: Executor,
  parent: Parent,
  parentIds: readonly string[],
  workspaceId: string,
  table: keyof DB,
  rowsOf: (parentId: ReturnType<typeof sql.ref<string>>) => SelectQueryBuilder<DB, any, O>,
  order: Ordering,
  limit: number,
): Promise<O[]> {
  const ids = parentIds.filter(isUuid);
  if (ids.length === 0) return [];
  let page = rowsOf(sql.ref<string>('p.id'));
  for (const { column, direction } of order) page = page.orderBy(sql.ref(`${table}.${column}`), direction);
  let q = db
    .selectFrom(sql.table(parent).as('p'))
    .innerJoinLateral(page.limit(limit).as('r'), (join) => join.onTrue())
    .selectAll('r')
    .where(sql.ref('p.workspace_id'), '=', workspaceId)
    .where(sql.ref('p.id'), '=', sql<string>`any(${ids}::uuid[])`)
    .orderBy(sql.ref('p.id'));
  for (const { column, direction } of order) q = q.orderBy(sql.ref(`r.${column}`), direction);
  return (await q.execute()) as O[];
}

/**
 * For each of `parentIds`, as firstPerParent: how many rows its list holds, counting at most
 * `limit` (0 for a parent with none). Ids of no parent in the workspace, or no uuid, are left out.
 */
export async function countPerParent(
  db: Executor,
  parent: Parent,
  parentIds: readonly string[],
  workspaceId: string,
  rowsOf: (parentId: ReturnType<typeof sql.ref<string>>) => SelectQueryBuilder<any, any, unknown>,
  limit: number,
): Promise<Map<string, number>> {
  const ids = parentIds.filter(isUuid);
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom(sql.table(parent).as('p'))
    .select((eb) => [
      sql.ref<string>('p.id').as('id'),
      eb
        .selectFrom(
          rowsOf(sql.ref<string>('p.id'))
            .select(sql<number>`1`.as('one'))
            .limit(limit)
            .as('matching'),
        )
        .select((c) => c.fn.countAll<string>().as('n'))
        .as('n'),
    ])
    .where(sql.ref('p.workspace_id'), '=', workspaceId)
    .where(sql.ref('p.id'), '=', sql<string>`any(${ids}::uuid[])`)
    .execute();
  return new Map(rows.map((r) => [r.id, Number(r.n)]));
}
