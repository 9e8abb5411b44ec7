/**
 * Relay-style connections with keyset cursors. Lists are ordered newest first by
 * (created_at, id); a cursor is the id of the last row seen, and the next page is the rows
 * strictly below that row's (created_at, id) pair, read with full database precision.
 */
import { cursorRowExists, type KeysetTable } from '../../db/repositories/keyset.js';
import { isUuid, type Executor } from '../../db/repositories/scope.js';
import { PageCursorExpiredError, ValidationError } from './errors.js';
import type { PageInput } from './inputs.js';

export interface Edge<T> {
  cursor: string;
  node: T;
}

export interface Connection<T> {
  edges: Edge<T>[];
  pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null };
  /**
   * How many items the whole list holds, at most COUNT_LIMIT; run only when a client asks.
   * Absent for lists that are not counted.
   */
  count?: () => Promise<number>;
}

export const DEFAULT_PAGE_SIZE = 20;

export function encodeCursor(id: string): string {
  return Buffer.from(`v1:${id}`).toString('base64url');
}

export function decodeCursor(cursor: string): string {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const match = /^v1:([0-9a-f-]{36})$/.exec(text);
  // The shape alone lets 36 dashes through, which Postgres refuses as a uuid (an internal error).
  if (!match || !isUuid(match[1]!)) throw ValidationError.at(['after'], 'is not a cursor returned by this list');
  return match[1]!;
}

/**
 * CURSOR_EXPIRED when `rows`, a page read after the cursor `after`, are none because the cursor's
 * row is gone (pruned by retention, or deleted): a keyset page compares with that row, so it
 * would come back empty, and a client (Apollo's fetchMore, Relay's loadNext) would take it for
 * the end of the list while older rows remain. Asked only of an empty page: a full one costs
 * nothing more. Read on the primary: a replica behind it may not hold a row just handed out.
 */
export async function checkPageCursor(
  db: Executor,
  table: KeysetTable,
  workspaceId: string,
  after: string | null | undefined,
  rows: readonly unknown[],
): Promise<void> {
  if (rows.length > 0 || after == null) return;
  if (!(await cursorRowExists(db, table, decodeCursor(after), workspaceId))) throw new PageCursorExpiredError(after);
}

/**
 * Counting is bounded: past this many, a count reads the bound. An exact count of a million
 * rows costs a scan of them; a list screen needs "10,000+" there, not the digit.
 */
export const COUNT_LIMIT = 10_000;

export function pageSize(page: PageInput | undefined): number {
  return page?.first ?? DEFAULT_PAGE_SIZE;
}

/** Builds the connection from rows fetched with `limit size + 1`; `count` counts the whole list. */
export function toConnection<R extends { id: string }, T>(
  rows: R[],
  size: number,
  map: (row: R) => T,
  count?: () => Promise<number>,
): Connection<T> {
  return pageConnection(rows.map(map), size, (_node, i) => encodeCursor(rows[i]!.id), count);
}

/**
 * The connection of `items` fetched with `limit size + 1` (the extra one says a next page
 * exists), each edge's cursor given by `cursorOf` (for lists whose cursors are not row UUIDs:
 * sealed ids, catalogue keys).
 */
export function pageConnection<T>(
  items: T[],
  size: number,
  cursorOf: (item: T, index: number) => string,
  count?: () => Promise<number>,
): Connection<T> {
  const hasNextPage = items.length > size;
  const edges = items.slice(0, size).map((node, i) => ({ cursor: cursorOf(node, i), node }));
  return {
    edges,
    pageInfo: {
      hasNextPage,
      hasPreviousPage: false,
      startCursor: edges[0]?.cursor ?? null,
      endCursor: edges.at(-1)?.cursor ?? null,
    },
    ...(count ? { count: once(count) } : {}),
  };
}

/** totalCount and totalCountCapped share one count. */
function once<T>(fn: () => Promise<T>): () => Promise<T> {
  let result: Promise<T> | undefined;
  return () => (result ??= fn());
}
