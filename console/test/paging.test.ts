import { describe, expect, it } from 'vitest';
import { emptyLog, firstPage, nextPage, pageNumber, previousPage, withLive, withPage } from '../src/lib/paging.ts';
import { pageFromSearch, pageParams, pageSizeFrom, withParams } from '../src/lib/url-state.ts';

describe('keyset pages', () => {
  it('goes forwards by endCursor and back through the cursors it has seen', () => {
    const p2 = nextPage(firstPage, 'c1');
    const p3 = nextPage(p2, 'c2');
    expect(p3).toEqual({ after: 'c2', previous: [null, 'c1'] });
    expect(pageNumber(p3)).toBe(3);
    expect(previousPage(p3)).toEqual(p2);
    expect(previousPage(p2)).toEqual(firstPage);
    expect(previousPage(firstPage)).toEqual(firstPage);
  });

  it('stays on the last page when there is no next cursor', () => {
    const p2 = nextPage(firstPage, 'c1');
    expect(nextPage(p2, null)).toBe(p2);
  });
});

describe('a log paged, then followed live', () => {
  const item = (id: string) => ({ id });
  const ids = (log: { items: { id: string }[] }) => log.items.map((i) => i.id);

  it('appends pages, ignores live items until the pages reach the end, then follows from the last item', () => {
    let log = withPage(emptyLog<{ id: string }>(), [item('a'), item('b')], { hasNextPage: true, endCursor: 'b' });
    expect(log).toMatchObject({ complete: false, followFrom: null, endCursor: 'b' });
    // Live items before the end would leave a gap between the pages and them: not shown.
    log = withLive(log, item('z'));
    expect(ids(log)).toEqual(['a', 'b']);
    log = withPage(log, [item('c')], { hasNextPage: false, endCursor: 'c' });
    expect(log).toMatchObject({ complete: true, followFrom: 'c' });
    log = withLive(log, item('d'));
    expect(ids(log)).toEqual(['a', 'b', 'c', 'd']);
  });

  it('shows nothing twice: a live item the pages already gave, a page overlapping what came live', () => {
    let log = withPage(emptyLog<{ id: string }>(), [item('a')], { hasNextPage: false, endCursor: 'a' });
    log = withLive(log, item('a'));
    log = withLive(log, item('b'));
    log = withLive(log, item('b'));
    log = withPage(log, [item('b'), item('c')], { hasNextPage: false, endCursor: 'c' });
    expect(ids(log)).toEqual(['a', 'b', 'c']);
    // Where the stream started is fixed when the end was first reached.
    expect(log.followFrom).toBe('a');
  });

  it('follows an empty log from the start', () => {
    const log = withPage(emptyLog<{ id: string }>(), [], { hasNextPage: false, endCursor: null });
    expect(log).toMatchObject({ complete: true, followFrom: '0', endCursor: null });
  });
});

describe('a list view in its URL', () => {
  it('round-trips the page stack through the URL, the first page being no parameter at all', () => {
    const p3 = nextPage(nextPage(firstPage, 'c1'), 'c2');
    const search = withParams(new URLSearchParams('status=FAILED'), pageParams(p3), true);
    expect(search.get('status')).toBe('FAILED');
    expect(pageFromSearch(search)).toEqual(p3);
    expect(pageFromSearch(withParams(search, pageParams(firstPage), true))).toEqual(firstPage);
    expect(pageFromSearch(withParams(search, pageParams(nextPage(firstPage, 'c1')), true))).toEqual(nextPage(firstPage, 'c1'));
  });

  it('goes back to the first page when a filter changes, and drops an emptied filter', () => {
    const search = new URLSearchParams('status=FAILED&after=c2&back=~c1&size=50');
    const changed = withParams(search, { status: '', endpoint: 'e1' });
    expect(changed.toString()).toBe('size=50&endpoint=e1');
    expect(pageFromSearch(changed)).toEqual(firstPage);
  });

  it('takes only the page sizes it offers', () => {
    expect(pageSizeFrom(new URLSearchParams('size=50'))).toBe(50);
    expect(pageSizeFrom(new URLSearchParams('size=5000'))).toBe(25);
    expect(pageSizeFrom(new URLSearchParams(''))).toBe(25);
    // A list with a default of its own (the audit log: 50).
    expect(pageSizeFrom(new URLSearchParams(''), 50)).toBe(50);
    expect(pageSizeFrom(new URLSearchParams('size=10'), 50)).toBe(10);
  });
});
