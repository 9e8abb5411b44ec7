/**
 * Data for screens: a query that reloads when the live stream says something changed, and polls
 * only while the socket is down.
 */
import { createContext, useCallback, useContext, useEffect, useRef, useState } from 'react';
import type { TypedDocumentString, ViewerQuery } from '../gql/graphql.ts';
import type { Api } from './api.ts';
import { ApiError } from './api.ts';
import type { Live, LiveHandlers, LiveState } from './live.ts';

export interface Session {
  api: Api;
  live: Live;
  viewer: ViewerQuery['viewer'];
  signOut(notice?: string): void;
}

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const s = useContext(SessionContext);
  if (!s) throw new Error('no session');
  return s;
}

/** May the viewer take actions of `role` (OPERATOR: run and re-drive; ADMIN: everything)? */
export function useCan(): (role: 'OPERATOR' | 'ADMIN') => boolean {
  const { viewer } = useSession();
  return (role) => (role === 'ADMIN' ? viewer.role === 'ADMIN' : viewer.role === 'ADMIN' || viewer.role === 'OPERATOR');
}

export function useLiveState(): LiveState {
  const { live } = useSession();
  const [state, setState] = useState(live.state);
  useEffect(() => {
    setState(live.state);
    return live.onState(setState);
  }, [live]);
  return state;
}

/** How often a screen polls while the socket is down. */
export const POLL_MS = 5000;

export interface QueryResult<R> {
  data: R | null;
  error: ApiError | null;
  loading: boolean;
  /** When the request whose answer `data` is was sent (performance.now()): what it cannot have seen came later. */
  requestedAt: number;
  /** Reloads now. */
  reload(): void;
  /** Reloads soon, coalescing bursts of events into one request. */
  reloadSoon(): void;
}

/**
 * `throttleMs`: the least time between two reloads that events cause (default 1 s): a busy
 * workspace sends many events a second, and a screen needs its numbers, not every intermediate.
 */
export function useQuery<R, V>(
  document: TypedDocumentString<R, V>,
  variables: V,
  options: { skip?: boolean; throttleMs?: number } = {},
): QueryResult<R> {
  const { api, live } = useSession();
  const [data, setData] = useState<R | null>(null);
  const [requestedAt, setRequestedAt] = useState(0);
  const [error, setError] = useState<ApiError | null>(null);
  const [loading, setLoading] = useState(true);
  const key = JSON.stringify(variables);
  const seq = useRef(0);
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const lastLoad = useRef(0);
  const throttleMs = options.throttleMs ?? 1000;

  const reload = useCallback(() => {
    if (options.skip) return;
    const mine = ++seq.current;
    lastLoad.current = Date.now();
    const sentAt = performance.now();
    setLoading(true);
    api.request(document, JSON.parse(key) as V).then(
      (r) => {
        if (mine !== seq.current) return;
        setRequestedAt(sentAt);
        setData(r);
        setError(null);
        setLoading(false);
      },
      (e: unknown) => {
        if (mine !== seq.current) return;
        setError(e instanceof ApiError ? e : new ApiError('INTERNAL_SERVER_ERROR', String(e)));
        setLoading(false);
      },
    );
  }, [api, document, key, options.skip]);

  const reloadSoon = useCallback(() => {
    if (timer.current) return;
    const wait = Math.max(40, lastLoad.current + throttleMs - Date.now());
    timer.current = setTimeout(() => {
      timer.current = undefined;
      reload();
    }, wait);
  }, [reload, throttleMs]);

  useEffect(() => {
    reload();
    return () => {
      seq.current++;
      if (timer.current) clearTimeout(timer.current);
      timer.current = undefined;
    };
  }, [reload]);

  // Reload after a reconnect; poll while the socket is down.
  const state = useLiveState();
  useEffect(() => live.onReconnected(reload), [live, reload]);
  useEffect(() => {
    if (state === 'live' || state === 'signedOut') return;
    const id = setInterval(reload, POLL_MS);
    return () => clearInterval(id);
  }, [state, reload]);

  return { data, error, loading, requestedAt, reload, reloadSoon };
}

/** A live subscription for the screen's lifetime (resubscribed when `variables` change). */
export function useSubscription<R, V extends Record<string, unknown>>(
  document: TypedDocumentString<R, V>,
  variables: V,
  handlers: LiveHandlers<R>,
  options: { skip?: boolean } = {},
): void {
  const { live } = useSession();
  const latest = useRef(handlers);
  latest.current = handlers;
  const key = JSON.stringify(variables);
  useEffect(() => {
    if (options.skip) return;
    return live.subscribe(document, JSON.parse(key) as V, {
      next: (d) => latest.current.next(d),
      cursor: (d) => latest.current.cursor?.(d),
      error: (e) => latest.current.error?.(e),
      reset: () => latest.current.reset?.(),
    });
  }, [live, document, key, options.skip]);
}

/** Runs a mutation, with its pending state and error. */
export function useMutation<R, V>(
  document: TypedDocumentString<R, V>,
): { run(variables: V): Promise<R | null>; pending: boolean; error: ApiError | null; clear(): void } {
  const { api } = useSession();
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const run = useCallback(
    async (variables: V) => {
      setPending(true);
      setError(null);
      try {
        return await api.request(document, variables);
      } catch (e) {
        setError(e instanceof ApiError ? e : new ApiError('INTERNAL_SERVER_ERROR', String(e)));
        return null;
      } finally {
        setPending(false);
      }
    },
    [api, document],
  );
  return { run, pending, error, clear: () => setError(null) };
}

/**
 * The time now (ms since the epoch), read again every `everyMs`: for what counts down or ends at a
 * time (a hold until an instant) without anything on the server telling the screen.
 */
export function useNow(everyMs = 1000): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const id = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(id);
  }, [everyMs]);
  return now;
}
