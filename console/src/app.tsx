/**
 * The shell: sign-in, then the header (workspace, role, live state), the navigation and the screen
 * of the current path. A key refused by the API (UNAUTHENTICATED) or by the socket (4403) signs the
 * tab out with the reason.
 */
import { Component, lazy, Suspense, useEffect, useMemo, useRef, useState, type ComponentType, type ReactNode } from 'react';
import { graphql } from './gql/index.ts';
import type { ViewerQuery } from './gql/graphql.ts';
import { ApiError, createApi, onUnauthenticated } from './lib/api.ts';
import { SessionContext, useLiveState, useSession, type Session } from './lib/hooks.ts';
import { createLive } from './lib/live.ts';
import { href, navigate, useLocation } from './lib/router.ts';
import { forgetKey, signOutNotice, storedKey, storeKey } from './lib/session.ts';
import { ErrorBox, Link, Loading } from './ui/common.tsx';

/**
 * Each screen is its own chunk, fetched when first shown: the sign-in and the shell load first,
 * then only the screen of the address (`npm run bench console` prints the first screen's size).
 */
const screen = <K extends string>(load: () => Promise<Record<K, ComponentType<any>>>, name: K) =>
  lazy(async () => ({ default: (await load())[name] }));
const Overview = screen(() => import('./screens/overview.tsx'), 'Overview');
const JobsScreen = screen(() => import('./screens/jobs.tsx'), 'JobsScreen');
const JobScreen = screen(() => import('./screens/job.tsx'), 'JobScreen');
const NewJobScreen = screen(() => import('./screens/new-job.tsx'), 'NewJobScreen');
const EndpointsScreen = screen(() => import('./screens/endpoints.tsx'), 'EndpointsScreen');
const EndpointScreen = screen(() => import('./screens/endpoint.tsx'), 'EndpointScreen');
const ExecutionsScreen = screen(() => import('./screens/executions.tsx'), 'ExecutionsScreen');
const ExecutionScreen = screen(() => import('./screens/execution.tsx'), 'ExecutionScreen');
const RunsScreen = screen(() => import('./screens/runs.tsx'), 'RunsScreen');
const RunScreen = screen(() => import('./screens/run.tsx'), 'RunScreen');
const HandlersScreen = screen(() => import('./screens/handlers.tsx'), 'HandlersScreen');
const AuditScreen = screen(() => import('./screens/audit.tsx'), 'AuditScreen');
const KeysScreen = screen(() => import('./screens/keys.tsx'), 'KeysScreen');
const AlertsScreen = screen(() => import('./screens/alerts.tsx'), 'AlertsScreen');
const AlertScreen = screen(() => import('./screens/alert.tsx'), 'AlertScreen');
const BatchesScreen = screen(() => import('./screens/batches.tsx'), 'BatchesScreen');
const BatchScreen = screen(() => import('./screens/batch.tsx'), 'BatchScreen');

export const ViewerDocument = graphql(`
  query Viewer {
    viewer {
      role
      installationAdmin
      workspace {
        id
        slug
        name
      }
      apiKey {
        id
        name
        prefix
      }
    }
  }
`);

export function App() {
  const [key, setKey] = useState<string | null>(() => storedKey());
  const [notice, setNotice] = useState<string | null>(() => signOutNotice());
  const [viewer, setViewer] = useState<ViewerQuery['viewer'] | null>(null);
  const [error, setError] = useState<ApiError | null>(null);

  const signOut = (message?: string) => {
    forgetKey(message);
    setNotice(message ?? null);
    setViewer(null);
    setKey(null);
  };

  // Whether the key in use has been accepted: a key refused at its first request after being typed
  // in was mistyped (or never valid), not revoked. One kept from an earlier visit was accepted then.
  const accepted = useRef(key !== null);
  useEffect(
    () =>
      onUnauthenticated(() =>
        signOut(
          accepted.current
            ? 'Your API key is no longer valid (revoked or expired): this tab is signed out. Sign in with a valid key.'
            : 'That API key was not accepted: check it (it starts with jg_) and sign in again.',
        ),
      ),
    [],
  );

  const api = useMemo(() => (key ? createApi(key) : null), [key]);
  useEffect(() => {
    if (!api) return;
    let stale = false;
    api.request(ViewerDocument).then(
      (r) => {
        if (stale) return;
        accepted.current = true;
        setViewer(r.viewer);
      },
      (e: unknown) => !stale && setError(e instanceof ApiError ? e : new ApiError('INTERNAL_SERVER_ERROR', String(e))),
    );
    return () => {
      stale = true;
    };
  }, [api]);

  const live = useMemo(() => {
    if (!key || !viewer) return null;
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/graphql`;
    return createLive({ url, key, onSignOut: (reason) => signOut(reason) });
  }, [key, viewer]);
  useEffect(() => () => live?.dispose(), [live]);

  if (!key || !api)
    return <SignIn notice={notice} onKey={(k) => (storeKey(k), (accepted.current = false), setNotice(null), setError(null), setKey(k))} />;
  if (!viewer || !live) {
    return (
      <main className="signin">
        {error ? (
          <>
            <ErrorBox error={error} title="Could not sign in" />
            <button type="button" onClick={() => signOut()}>
              Back to sign-in
            </button>
          </>
        ) : (
          <Loading />
        )}
      </main>
    );
  }
  const session: Session = { api, live, viewer, signOut };
  return (
    <SessionContext.Provider value={session}>
      <Shell />
    </SessionContext.Provider>
  );
}

function SignIn({ notice, onKey }: { notice: string | null; onKey(key: string): void }) {
  const [value, setValue] = useState('');
  return (
    <main className="signin">
      <h1>jobgate console</h1>
      {notice && (
        <p className="notice" role="alert">
          {notice}
        </p>
      )}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (value.trim()) onKey(value.trim());
        }}
      >
        <label htmlFor="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          type="password"
          autoComplete="off"
          value={value}
          onChange={(e) => setValue(e.target.value)}
          placeholder="jg_…"
          required
          autoFocus
        />
        <button type="submit">Sign in</button>
        <p className="muted">
          The key is kept for this tab only, and sent only to this gateway. The embedded default saved its first ADMIN key in
          .jobgate/admin-key.
        </p>
      </form>
    </main>
  );
}

const NAV: { path: string; label: string; admin?: boolean }[] = [
  { path: '', label: 'Overview' },
  { path: 'jobs', label: 'Jobs' },
  { path: 'executions', label: 'Executions' },
  { path: 'batches', label: 'Batches' },
  { path: 'runs', label: 'Runs' },
  { path: 'handlers', label: 'Handlers' },
  { path: 'endpoints', label: 'Endpoints' },
  { path: 'alerts', label: 'Alerts' },
  { path: 'audit', label: 'Audit log', admin: true },
  { path: 'keys', label: 'API keys', admin: true },
];

/**
 * After a navigation (not the first screen), moves focus to the new screen's heading once it is
 * shown, so keyboard and screen-reader users land on it and hear it; the tab's title follows it.
 */
function useFocusOnNavigation(path: string) {
  const first = useRef(true);
  useEffect(() => {
    const initial = first.current;
    first.current = false;
    const main = document.getElementById('main');
    if (!main) return;
    const land = (): boolean => {
      const heading = main.querySelector('h1');
      if (!heading) return false;
      document.title = `${heading.textContent ?? ''} · jobgate`;
      if (initial) return true;
      heading.setAttribute('tabindex', '-1');
      heading.focus({ preventScroll: false });
      return true;
    };
    if (land()) return;
    // Screens load their code and data first: wait for the heading to appear.
    const observer = new MutationObserver(() => land() && observer.disconnect());
    observer.observe(main, { childList: true, subtree: true });
    return () => observer.disconnect();
  }, [path]);
}

function Shell() {
  const { viewer, signOut } = useSession();
  const { route, search } = useLocation();
  const state = useLiveState();
  const section = route[0] ?? '';
  const [menuOpen, setMenuOpen] = useState(false);
  const path = route.join('/');
  useFocusOnNavigation(path);
  useEffect(() => setMenuOpen(false), [path]);
  return (
    <>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        <button
          type="button"
          className="menu-button"
          aria-expanded={menuOpen}
          aria-controls="sections"
          onClick={() => setMenuOpen((o) => !o)}
        >
          Menu
        </button>
        <span className="brand">jobgate</span>
        <span className="who" data-testid="who">
          <span>
            Workspace <strong>{viewer.workspace.name}</strong> ({viewer.workspace.slug})
          </span>
          <span>
            Role <strong data-testid="role">{viewer.role}</strong>
          </span>
          {viewer.apiKey && (
            <span className="muted">
              Key {viewer.apiKey.name} ({viewer.apiKey.prefix}…)
            </span>
          )}
        </span>
        <span className={`live live-${state}`} role="status" data-testid="live-state">
          {state === 'live'
            ? 'Live'
            : state === 'connecting'
              ? 'Connecting…'
              : state === 'reconnecting'
                ? 'Reconnecting… (polling)'
                : 'Signed out'}
        </span>
        <button type="button" onClick={() => signOut()}>
          Sign out
        </button>
      </header>
      <nav id="sections" className={menuOpen ? 'side open' : 'side'} aria-label="Sections">
        <ul>
          {NAV.filter((n) => !n.admin || viewer.role === 'ADMIN').map((n) => (
            <li key={n.path}>
              <Link to={n.path ? href(n.path) : '/console/'} className={section === n.path ? 'current' : undefined}>
                {n.label}
              </Link>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main" tabIndex={-1}>
        <ScreenBoundary key={route.join('/')}>
          <Suspense fallback={<Loading />}>
            <Screen route={route} search={search} />
          </Suspense>
        </ScreenBoundary>
      </main>
    </>
  );
}

/** A screen that fails to render says so, with the error, instead of leaving a blank page. */
class ScreenBoundary extends Component<{ children: ReactNode }, { error: Error | null }> {
  override state = { error: null as Error | null };
  static getDerivedStateFromError(error: Error) {
    return { error };
  }
  override render() {
    if (!this.state.error) return this.props.children;
    return <ErrorBox error={new ApiError('CONSOLE_ERROR', this.state.error.message)} title="This screen failed to show" />;
  }
}

function Screen({ route, search }: { route: string[]; search: URLSearchParams }) {
  const [section, id] = route;
  switch (section) {
    case undefined:
      return <Overview />;
    case 'jobs':
      if (id === 'new') return <NewJobScreen />;
      return id ? <JobScreen id={id} /> : <JobsScreen search={search} />;
    case 'executions':
      return id ? <ExecutionScreen id={id} /> : <ExecutionsScreen search={search} />;
    case 'batches':
      return id ? <BatchScreen id={id} search={search} /> : <BatchesScreen search={search} />;
    case 'runs':
      return id ? <RunScreen id={id} search={search} /> : <RunsScreen search={search} />;
    case 'handlers':
      return <HandlersScreen />;
    case 'endpoints':
      return id ? <EndpointScreen id={id} /> : <EndpointsScreen />;
    case 'alerts':
      return id ? <AlertScreen id={id} /> : <AlertsScreen search={search} />;
    case 'audit':
      return <AuditScreen search={search} />;
    case 'keys':
      return <KeysScreen />;
    default:
      return (
        <section>
          <h1>Not found</h1>
          <p>
            There is no screen at this address. <button onClick={() => navigate('/console/')}>Go to the overview</button>
          </p>
        </section>
      );
  }
}
