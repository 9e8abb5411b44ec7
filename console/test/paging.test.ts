import { describe, expect, it } from 'vitest';
import { firstPage, nextPage, pageNumber, previousPage } from '../src/lib/paging.ts';

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
