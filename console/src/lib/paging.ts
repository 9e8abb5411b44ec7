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
