/**
 * A list's view in its URL: filters, sort, page size and the page itself, so a reload or a shared
 * link shows the same rows. Changing a filter goes back to the first page. Pure but for
 * `useListParams`; unit-tested.
 */
import { firstPage, type PageStack } from './paging.ts';
import { navigate } from './router.ts';

/** Page sizes a list offers; the API takes 1 to 100. */
export const PAGE_SIZES = [10, 25, 50, 100] as const;
export const DEFAULT_PAGE_SIZE = 25;

/** The page shown: `after` the cursor, `back` the earlier pages' cursors ("~"-joined; "" is the first page). */
export function pageFromSearch(search: URLSearchParams): PageStack {
  const after = search.get('after');
  if (!after) return firstPage;
  const back = search.get('back');
  return { after, previous: back === null ? [null] : back.split('~').map((c) => c || null) };
}

/** The parameters of `page` (none for the first). Cursors are base64url: never "~". */
export function pageParams(page: PageStack): Record<string, string | null> {
  if (page.after === null) return { after: null, back: null };
  return { after: page.after, back: page.previous.map((c) => c ?? '').join('~') };
}

/** The page size in `search` (`size`), or the list's `fallback` when it names none the lists offer. */
export function pageSizeFrom(search: URLSearchParams, fallback: number = DEFAULT_PAGE_SIZE): number {
  const n = Number(search.get('size'));
  return (PAGE_SIZES as readonly number[]).includes(n) ? n : fallback;
}

/** `search` with `patch` applied (null or "" removes a parameter); a filter change drops the page. */
export function withParams(search: URLSearchParams, patch: Record<string, string | null>, keepPage = false): URLSearchParams {
  const next = new URLSearchParams(search);
  if (!keepPage) {
    next.delete('after');
    next.delete('back');
  }
  for (const [k, v] of Object.entries(patch)) {
    if (v === null || v === '') next.delete(k);
    else next.set(k, v);
  }
  return next;
}

/** An ISO instant from a datetime-local input's value (the viewer's zone), or null. */
export function instantFromLocal(value: string): string | null {
  if (!value) return null;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}

/** A datetime-local input's value (the viewer's zone, to the minute) for an ISO instant. */
export function localFromInstant(iso: string | null): string {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** Moves a list at `path` to `search` with `patch` (pushing a history entry: Back returns to the previous view). */
export function goWith(path: string, search: URLSearchParams, patch: Record<string, string | null>, keepPage = false): void {
  const qs = withParams(search, patch, keepPage).toString();
  navigate(`${path}${qs ? `?${qs}` : ''}`);
}

/** A list screen's view as its URL holds it, and the moves that change it (each a history entry). */
export interface ListView {
  page: PageStack;
  size: number;
  /** Applies `patch` to the URL; a filter change goes back to the first page unless `keepPage`. */
  go(patch: Record<string, string | null>, keepPage?: boolean): void;
  /** Shows `page`, the filters kept. */
  toPage(page: PageStack): void;
  /** Shows `size` rows a page, from the first page (the list's default leaves the URL without `size`). */
  toSize(size: number): void;
}

/** The view of the list at `path` (e.g. href('runs')) from its `search`; `defaultSize` is the list's own. */
export function listView(path: string, search: URLSearchParams, defaultSize: number = DEFAULT_PAGE_SIZE): ListView {
  const go = (patch: Record<string, string | null>, keepPage = false) => goWith(path, search, patch, keepPage);
  return {
    page: pageFromSearch(search),
    size: pageSizeFrom(search, defaultSize),
    go,
    toPage: (page) => go(pageParams(page), true),
    toSize: (size) => go({ size: size === defaultSize ? null : String(size) }),
  };
}
