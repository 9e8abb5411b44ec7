/**
 * The console's one WebSocket (graphql-ws on /graphql): its state as the header shows it, the
 * subscriptions of the screens, and `after`-cursor resume.
 *
 * - States: `connecting` (the first time), `live`, `reconnecting` (the socket dropped; it retries
 *   with a capped, jittered backoff, for ever), `signedOut` (closed with 4403: the key was revoked
 *   or changed; graphql-ws does not retry that and neither do we).
 * - Resume: each subscription remembers the `cursor` of the last event it delivered. graphql-ws
 *   re-sends an operation's payload object on every (re)connection, serialising it at that
 *   moment, so the payload's `variables.after` is kept at the latest cursor: after a reconnect the
 *   server replays what came after it, nothing missed and nothing twice. A cursor past the
 *   retention window (CURSOR_EXPIRED) is dropped: the subscription starts from now and the screen
 *   is told to reload its snapshot.
 * - While the socket is not live, screens poll (see hooks.ts); never while it is.
 * - Documents go by their hash alone, as over HTTP (./persisted.ts).
 */
import { createClient, type Client } from 'graphql-ws';
import type { TypedDocumentString } from '../gql/graphql.ts';
import { ApiError, toApiError } from './api.ts';
import { documentFields, PERSISTED_QUERY_NOT_FOUND } from './persisted.ts';

export type LiveState = 'connecting' | 'live' | 'reconnecting' | 'signedOut';

export type LiveEvent = { type: 'connecting' } | { type: 'connected' } | { type: 'closed'; code: number | undefined };

/** The next state of the connection after `event` (pure; unit-tested). */
export function nextLiveState(state: LiveState, event: LiveEvent): LiveState {
  if (state === 'signedOut') return state;
  switch (event.type) {
    case 'connecting':
      return state === 'connecting' ? 'connecting' : 'reconnecting';
    case 'connected':
      return 'live';
    case 'closed':
      if (event.code === 4403 || event.code === 4401) return 'signedOut';
      return state === 'connecting' ? 'connecting' : 'reconnecting';
  }
}

/** Milliseconds before reconnection attempt `retries` (0-based): 0.5 s doubling to 8 s, with up to 50% jitter. */
export function retryDelayMs(retries: number, random: () => number = Math.random): number {
  const base = Math.min(8000, 500 * 2 ** Math.max(0, retries));
  return Math.round(base * (0.5 + random() / 2));
}

/**
 * The cursors one subscription has delivered: the latest (to resume after) and a bounded memory
 * of recent ones, so that an event seen twice (a snapshot and the stream overlapping) is dropped.
 */
export class CursorTracker {
  private recent: string[] = [];
  private seen = new Set<string>();
  constructor(
    public latest: string | null = null,
    private readonly memory = 500,
  ) {}

  /** Records `cursor`; false when it was already delivered. */
  accept(cursor: string | null | undefined): boolean {
    if (!cursor) return true;
    if (this.seen.has(cursor)) return false;
    this.seen.add(cursor);
    this.recent.push(cursor);
    if (this.recent.length > this.memory) this.seen.delete(this.recent.shift()!);
    this.latest = cursor;
    return true;
  }

  reset(): void {
    this.latest = null;
    this.recent = [];
    this.seen.clear();
  }
}

export interface LiveHandlers<R> {
  next(data: R): void;
  /** The cursor of an event (null for streams without one, like runProgress). */
  cursor?(data: R): string | null | undefined;
  error?(error: ApiError): void;
  /** The stream restarted from now (its cursor expired): reload the snapshot. */
  reset?(): void;
}

export interface Live {
  readonly state: LiveState;
  onState(listener: (state: LiveState) => void): () => void;
  /** Also after a reconnect: screens reload what they show (their subscriptions resume by cursor). */
  onReconnected(listener: () => void): () => void;
  subscribe<R, V extends Record<string, unknown>>(document: TypedDocumentString<R, V>, variables: V, handlers: LiveHandlers<R>): () => void;
  dispose(): void;
}

export interface LiveOptions {
  url: string;
  key: string;
  /** The key was refused (close 4403): sign the tab out. */
  onSignOut(reason: string): void;
  webSocketImpl?: unknown;
}

export function createLive(options: LiveOptions): Live {
  let state: LiveState = 'connecting';
  let everConnected = false;
  const stateListeners = new Set<(s: LiveState) => void>();
  const reconnectListeners = new Set<() => void>();
  const move = (event: LiveEvent) => {
    const next = nextLiveState(state, event);
    if (next === state) return;
    state = next;
    for (const l of stateListeners) l(state);
  };

  const client: Client = createClient({
    url: options.url,
    connectionParams: { authorization: `Bearer ${options.key}` },
    lazy: false,
    keepAlive: 10_000,
    retryAttempts: Number.MAX_SAFE_INTEGER,
    retryWait: (retries) => new Promise((resolve) => setTimeout(resolve, retryDelayMs(retries))),
    shouldRetry: (event) => {
      const code = (event as { code?: number } | undefined)?.code;
      return code !== 4403 && code !== 4401;
    },
    onNonLazyError: () => {},
    ...(options.webSocketImpl ? { webSocketImpl: options.webSocketImpl } : {}),
    on: {
      connecting: () => move({ type: 'connecting' }),
      connected: () => {
        move({ type: 'connected' });
        if (everConnected) for (const l of reconnectListeners) l();
        everConnected = true;
      },
      closed: (event) => {
        const code = (event as { code?: number } | undefined)?.code;
        move({ type: 'closed', code });
        if (state === 'signedOut')
          options.onSignOut('Your API key was revoked or changed: this tab is signed out. Sign in with a valid key.');
      },
    },
  });

  return {
    get state() {
      return state;
    },
    onState(listener) {
      stateListeners.add(listener);
      return () => stateListeners.delete(listener);
    },
    onReconnected(listener) {
      reconnectListeners.add(listener);
      return () => reconnectListeners.delete(listener);
    },
    subscribe<R, V extends Record<string, unknown>>(document: TypedDocumentString<R, V>, variables: V, handlers: LiveHandlers<R>) {
      const cursors = new CursorTracker((variables.after as string | null | undefined) ?? null);
      // Mutated as events arrive: graphql-ws serialises it again at each (re)connection. The document
      // by its hash alone (./persisted.ts); graphql-ws wants a `query` string, so it is '' then.
      const payload: { query: string; extensions?: Record<string, unknown>; variables: Record<string, unknown> } = {
        query: '',
        ...documentFields(document),
        variables: { ...variables } as Record<string, unknown>,
      };
      let dispose: () => void = () => {};
      let stopped = false;
      const start = () => {
        dispose = client.subscribe<R>(payload, {
          next: (message) => {
            if (message.errors?.length || !message.data) {
              handlers.error?.(toApiError(message.errors as never));
              return;
            }
            const data = message.data as R;
            const cursor = handlers.cursor?.(data);
            if (!cursors.accept(cursor)) return;
            if (cursor) payload.variables.after = cursor;
            handlers.next(data);
          },
          error: (error) => {
            const apiError = Array.isArray(error) ? toApiError(error as never) : new ApiError('UNAVAILABLE', 'the live connection failed');
            // A gateway without this build's hashes: subscribe again with the document.
            if (apiError.code === PERSISTED_QUERY_NOT_FOUND && payload.extensions && !stopped) {
              delete payload.extensions;
              payload.query = document.toString();
              start();
              return;
            }
            if (apiError.code === 'CURSOR_EXPIRED' && !stopped) {
              cursors.reset();
              delete payload.variables.after;
              handlers.reset?.();
              start();
              return;
            }
            handlers.error?.(apiError);
          },
          complete: () => {},
        });
      };
      start();
      return () => {
        stopped = true;
        dispose();
      };
    },
    dispose() {
      void client.dispose();
    },
  };
}
