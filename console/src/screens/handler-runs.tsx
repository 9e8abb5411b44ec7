/**
 * A recoverable handler's run history on the Handlers screen: its newest runs, each linking to its
 * run screen, and a link to all of them on Runs (filtered by the handler's name). Read again when
 * one of its runs starts or changes status (runEvents of that handler only).
 */
import { graphql } from '../gql/index.ts';
import { useQuery, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import { ErrorBox, Link, Status, Time } from '../ui/common.tsx';

/** How many of a handler's runs the Handlers screen shows; the Runs screen has them all. */
const RECENT = 5;

const HandlerRunsDocument = graphql(`
  query HandlerRuns($name: String!, $first: Int!) {
    runConnection(name: $name, first: $first) {
      nodes {
        id
        status
        processed
        total
        startedAt
        finishedAt
      }
    }
  }
`);

const HandlerRunsLiveDocument = graphql(`
  subscription HandlerRunsLive($name: String!, $after: String) {
    runEvents(name: $name, after: $after) {
      cursor
      runId
      status
    }
  }
`);

export function RecentRuns({ name }: { name: string }) {
  const q = useQuery(HandlerRunsDocument, { name, first: RECENT });
  useSubscription(HandlerRunsLiveDocument, { name }, { next: () => q.reloadSoon(), cursor: (d) => d.runEvents.cursor, reset: q.reload });
  if (!q.data) return q.error ? <ErrorBox error={q.error} title="Could not load its runs" /> : null;
  const runs = q.data.runConnection;
  if (runs.nodes.length === 0) return <span className="muted">No run yet</span>;
  return (
    <div data-testid="recent-runs">
      <ol className="recent-runs" aria-label={`Newest runs of ${name}`}>
        {runs.nodes.map((r) => (
          <li key={r.id}>
            <Link to={href('runs', r.id)}>
              <Status value={r.status} /> <Time iso={r.startedAt} />
            </Link>
            <span className="muted">
              {' '}
              {r.processed}
              {r.total !== null && r.total !== undefined ? ` / ${r.total}` : ''} processed
            </span>
          </li>
        ))}
      </ol>
      <Link to={`${href('runs')}?name=${encodeURIComponent(name)}`}>All runs of {name}</Link>
    </div>
  );
}
