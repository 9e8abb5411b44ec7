/**
 * Choosing rows of a list to act on together: a checkbox per row, one for the page, and "select
 * all matching" (every row the current filter matches, not only the page shown). A change of
 * filter clears the choice, so an action never reaches rows the operator no longer sees.
 */
import { useEffect, useState, type ReactNode } from 'react';
import { formatCount } from '../lib/format.ts';

export interface Selection {
  /** Ids chosen one by one (ignored while `allMatching`). */
  ids: ReadonlySet<string>;
  /** Every row the filter matches is chosen. */
  allMatching: boolean;
  has(id: string): boolean;
  toggle(id: string): void;
  /** Chooses the page's rows, or clears them when all are chosen. */
  togglePage(ids: readonly string[]): void;
  selectAllMatching(): void;
  clear(): void;
}

/** A selection that clears itself whenever `scope` (the filter, as a string) changes. */
export function useSelection(scope: string): Selection {
  const [ids, setIds] = useState<ReadonlySet<string>>(new Set());
  const [allMatching, setAllMatching] = useState(false);
  useEffect(() => {
    setIds(new Set());
    setAllMatching(false);
  }, [scope]);
  return {
    ids,
    allMatching,
    has: (id) => allMatching || ids.has(id),
    toggle: (id) => {
      setAllMatching(false);
      setIds((s) => {
        const next = new Set(s);
        if (next.has(id)) next.delete(id);
        else next.add(id);
        return next;
      });
    },
    togglePage: (page) => {
      setAllMatching(false);
      setIds((s) => (page.every((id) => s.has(id)) ? new Set([...s].filter((id) => !page.includes(id))) : new Set([...s, ...page])));
    },
    selectAllMatching: () => setAllMatching(true),
    clear: () => {
      setIds(new Set());
      setAllMatching(false);
    },
  };
}

/** How many rows an action will reach: the ones chosen, or every match (counted up to the API's bound). */
export function selectedCount(selection: Selection, matching: number | null | undefined): number {
  return selection.allMatching ? (matching ?? 0) : selection.ids.size;
}

/**
 * The bar over a list while rows are chosen: how many, "select all matching", the actions; with
 * nothing chosen, the outcome of the last action. Both are announced (a status region).
 */
export function BulkBar({
  selection,
  noun,
  matching,
  capped,
  children,
  note,
}: {
  selection: Selection;
  /** Plural noun: "executions". */
  noun: string;
  matching: number | null | undefined;
  capped: boolean | null | undefined;
  children: ReactNode;
  note: string | null;
}) {
  const count = selectedCount(selection, matching);
  return (
    <div className="bulk" data-testid="bulk-bar">
      <p role="status" className="bulk-note">
        {count > 0 ? `${formatCount(count)}${selection.allMatching && capped ? '+' : ''} ${noun} selected` : (note ?? '')}
      </p>
      {count > 0 && (
        <div className="actions">
          {!selection.allMatching && matching !== null && matching !== undefined && matching > selection.ids.size && (
            <button type="button" className="link" onClick={selection.selectAllMatching}>
              Select all {formatCount(matching)}
              {capped ? '+' : ''} matching
            </button>
          )}
          {children}
          <button type="button" className="link" onClick={selection.clear}>
            Clear selection
          </button>
        </div>
      )}
    </div>
  );
}
