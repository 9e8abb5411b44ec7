import { useEffect, useState } from 'react';
import { graphql } from '../gql/index.ts';
import { useCan, useQuery } from '../lib/hooks.ts';
import { nextPage, previousPage } from '../lib/paging.ts';
import { href } from '../lib/router.ts';
import { listView } from '../lib/url-state.ts';
import { Empty, ErrorBox, Loading, PageSize, Pager, Time } from '../ui/common.tsx';
import { shortId } from '../lib/format.ts';

const AuditDocument = graphql(`
  query Audit($after: String, $first: Int, $action: String, $resultCode: String) {
    auditLog(first: $first, after: $after, action: $action, resultCode: $resultCode) {
      nextCursor
      entries {
        id
        action
        actorKind
        actorKeyId
        targetType
        targetId
        resultCode
        input
        createdAt
      }
    }
  }
`);

/** The audit log, newest first; the action and result filters, the page size and the page are in the URL. */
export function AuditScreen({ search }: { search: URLSearchParams }) {
  const can = useCan();
  const applied = { action: search.get('action') ?? '', resultCode: search.get('result') ?? '' };
  const view = listView(href('audit'), search, 50);
  const page = view.page;
  // The fields follow the URL (a reload, Back), and are applied with Filter.
  const [action, setAction] = useState(applied.action);
  const [resultCode, setResultCode] = useState(applied.resultCode);
  useEffect(() => setAction(applied.action), [applied.action]);
  useEffect(() => setResultCode(applied.resultCode), [applied.resultCode]);
  const q = useQuery(
    AuditDocument,
    { after: page.after, first: view.size, action: applied.action || null, resultCode: applied.resultCode || null },
    { skip: !can('ADMIN') },
  );
  if (!can('ADMIN')) return <Empty>The audit log is for ADMIN keys.</Empty>;
  return (
    <section aria-labelledby="audit-title">
      <h1 id="audit-title">Audit log</h1>
      <form
        className="filters"
        onSubmit={(e) => {
          e.preventDefault();
          view.go({ action: action.trim(), result: resultCode.trim() });
        }}
      >
        <label>
          Action
          <input value={action} onChange={(e) => setAction(e.target.value)} placeholder="e.g. job.cancel" />
        </label>
        <label>
          Result
          <input value={resultCode} onChange={(e) => setResultCode(e.target.value)} placeholder="e.g. FORBIDDEN" />
        </label>
        <button type="submit">Filter</button>
        <PageSize value={view.size} onChange={view.toSize} />
      </form>
      <ErrorBox error={q.error} />
      {!q.data ? (
        !q.error && <Loading />
      ) : q.data.auditLog.entries.length === 0 ? (
        <Empty>No entries{applied.action || applied.resultCode ? ' match: clear the filters' : ''}. Every mutation is recorded here.</Empty>
      ) : (
        <>
          {/* A table that scrolls sideways on a phone takes the focus, so a keyboard can scroll it. */}
          <div className="table-box" tabIndex={0} role="region" aria-label="Audit entries">
            <table data-testid="audit">
              <thead>
                <tr>
                  <th scope="col">When</th>
                  <th scope="col">Action</th>
                  <th scope="col">Actor</th>
                  <th scope="col">Target</th>
                  <th scope="col">Result</th>
                  <th scope="col">Input</th>
                </tr>
              </thead>
              <tbody>
                {q.data.auditLog.entries.map((e) => (
                  <tr key={e.id}>
                    <td>
                      <Time iso={e.createdAt} />
                    </td>
                    <td>{e.action}</td>
                    <td>
                      {e.actorKind}
                      {e.actorKeyId && <span className="muted"> ({shortId(e.actorKeyId)})</span>}
                    </td>
                    <td>{e.targetType ? `${e.targetType} ${e.targetId ? shortId(e.targetId) : ''}` : '—'}</td>
                    <td>{e.resultCode}</td>
                    <td>
                      <code>{JSON.stringify(e.input).slice(0, 120)}</code>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <Pager
            stack={page}
            hasNext={q.data.auditLog.nextCursor !== null}
            onNext={() => view.toPage(nextPage(page, q.data?.auditLog.nextCursor))}
            onPrevious={() => view.toPage(previousPage(page))}
          />
        </>
      )}
    </section>
  );
}
