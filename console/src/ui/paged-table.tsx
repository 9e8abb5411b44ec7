/**
 * The one table of the keyset-paged lists (jobs, executions, runs, a job's executions): columns
 * declared once, the first one as the row's header, and the Newer/Older pager under it. Keyset
 * pages go forwards only in the API; going back replays the `after` of each page seen
 * (lib/paging.ts).
 */
import type { ReactNode } from 'react';
import { nextPage, previousPage, type PageStack } from '../lib/paging.ts';
import { Pager } from './common.tsx';

export interface Column<T> {
  header: ReactNode;
  cell(row: T): ReactNode;
  className?: string;
}

export interface TableProps<T> {
  testId: string;
  caption?: string;
  /** The first column is each row's header (th scope="row"); `false` leaves a column out (e.g. actions a role does not have). */
  columns: (Column<T> | false)[];
  rows: readonly T[];
  rowKey(row: T): string;
  /** Extra attributes of a row (data-* for tests and benches). */
  rowAttributes?(row: T): Record<string, string>;
  /** A leading checkbox per row (and one for the page) to choose rows for a bulk action. */
  select?: RowSelect<T>;
}

export interface RowSelect<T> {
  isSelected(row: T): boolean;
  toggle(row: T): void;
  togglePage(): void;
  /** The checkbox's accessible name, naming the row: "Select execution 1a2b3c4d". */
  label(row: T): string;
}

export interface PagedTableProps<T> extends TableProps<T> {
  page: PageStack;
  pageInfo: { hasNextPage: boolean; endCursor?: string | null | undefined };
  onPage(page: PageStack): void;
}

export function PagedTable<T>({ page, pageInfo, onPage, ...table }: PagedTableProps<T>) {
  return (
    <>
      <Table {...table} />
      <Pager
        stack={page}
        hasNext={pageInfo.hasNextPage}
        onNext={() => onPage(nextPage(page, pageInfo.endCursor))}
        onPrevious={() => onPage(previousPage(page))}
      />
    </>
  );
}

export function Table<T>({ testId, caption, columns, rows, rowKey, rowAttributes, select }: TableProps<T>) {
  const shown = columns.filter((c): c is Column<T> => c !== false);
  const chosen = select ? rows.filter((r) => select.isSelected(r)).length : 0;
  return (
    // Focusable and named, so a table wider than the window scrolls from the keyboard too.
    <div className="table-box" tabIndex={0} role="region" aria-label={caption ?? testId}>
      <table data-testid={testId}>
        {caption && <caption className="sr-only">{caption}</caption>}
        <thead>
          <tr>
            {select && (
              <th scope="col" className="select">
                <input
                  type="checkbox"
                  aria-label="Select every row of this page"
                  checked={rows.length > 0 && chosen === rows.length}
                  ref={(el) => {
                    if (el) el.indeterminate = chosen > 0 && chosen < rows.length;
                  }}
                  onChange={select.togglePage}
                />
              </th>
            )}
            {shown.map((c, i) => (
              <th scope="col" key={i}>
                {c.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={rowKey(row)} {...rowAttributes?.(row)}>
              {select && (
                <td className="select">
                  <input
                    type="checkbox"
                    aria-label={select.label(row)}
                    checked={select.isSelected(row)}
                    onChange={() => select.toggle(row)}
                  />
                </td>
              )}
              {shown.map((c, i) =>
                i === 0 ? (
                  <th scope="row" key={i} className={c.className}>
                    {c.cell(row)}
                  </th>
                ) : (
                  <td key={i} className={c.className}>
                    {c.cell(row)}
                  </td>
                ),
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
