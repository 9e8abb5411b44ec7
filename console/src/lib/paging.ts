/**
 * Keyset pages forwards and back: the API pages forwards only (`first`, `after`), so going back
 * means remembering the `after` of each page seen. Pure; unit-tested.
 */
export interface PageStack {
  /** The `after` of the page shown (null: the first page). */
  after: string | null;
  /** The `after` of each earlier page, oldest first. */
  previous: (string | null)[];
}

export const firstPage: PageStack = { after: null, previous: [] };

export function nextPage(stack: PageStack, endCursor: string | null | undefined): PageStack {
  if (!endCursor) return stack;
  return { after: endCursor, previous: [...stack.previous, stack.after] };
}

export function previousPage(stack: PageStack): PageStack {
  if (stack.previous.length === 0) return firstPage;
  return { after: stack.previous[stack.previous.length - 1] ?? null, previous: stack.previous.slice(0, -1) };
}

/** 1-based number of the page shown. */
export function pageNumber(stack: PageStack): number {
  return stack.previous.length + 1;
}

/**
 * A log read oldest first in keyset pages ("Load more"), then followed live once the pages
 * reached its end: the live stream starts after the last item the pages gave (`followFrom`,
 * fixed when the end is reached), so nothing falls between the two and nothing shows twice.
 * Pure; unit-tested.
 */
export interface FollowedLog<T extends { id: string }> {
  items: T[];
  ids: ReadonlySet<string>;
  /** The `after` of the next page (null: the first). */
  endCursor: string | null;
  /** The pages reached the end: new items come from the live stream. */
  complete: boolean;
  /** Set once complete: the stream's `after` (the last item's id, "0" for "from the start" when there is none). */
  followFrom: string | null;
}

export function emptyLog<T extends { id: string }>(): FollowedLog<T> {
  return { items: [], ids: new Set(), endCursor: null, complete: false, followFrom: null };
}

export function withPage<T extends { id: string }>(
  log: FollowedLog<T>,
  nodes: readonly T[],
  pageInfo: { hasNextPage: boolean; endCursor?: string | null | undefined },
): FollowedLog<T> {
  const fresh = nodes.filter((n) => !log.ids.has(n.id));
  const items = [...log.items, ...fresh];
  const complete = !pageInfo.hasNextPage;
  return {
    items,
    ids: new Set([...log.ids, ...fresh.map((n) => n.id)]),
    endCursor: pageInfo.endCursor ?? log.endCursor,
    complete,
    followFrom: log.followFrom ?? (complete ? (items.at(-1)?.id ?? '0') : null),
  };
}

/** A live item: appended once the pages are complete and if not already shown. */
export function withLive<T extends { id: string }>(log: FollowedLog<T>, item: T): FollowedLog<T> {
  if (!log.complete || log.ids.has(item.id)) return log;
  return { ...log, items: [...log.items, item], ids: new Set([...log.ids, item.id]) };
}
