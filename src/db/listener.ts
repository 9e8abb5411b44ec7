/**
 * A LISTEN connection that stays healthy: the one of a gateway's live hub, and each worker's.
 *
 *  - Reconnects with jittered backoff when the connection drops (Postgres restarted, backend
 *    terminated, network cut), capped at a second (`MAX_RECONNECT_MS`) however long the outage,
 *    so live events and wake-ups resume within about a second of the database answering; and
 *    tells the hub each time it listens again, so the hub re-reads from its own positions:
 *    NOTIFY is a hint, the rows are the record.
 *  - Checks itself every `checkEveryMs`: it sends a probe notification on its own channel and
 *    expects it back. A probe query that does not return finds a half-open connection (it is
 *    dropped and replaced); a probe that returns but is never delivered means LISTEN does not
 *    work here — the signature of a transaction-mode pooler, which hands each statement to
 *    any server connection. It says so, loudly, once, and the hub polls instead of waiting.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Logger } from '../log.js';
import { probeChannel as probeFormat } from './channels.js';
import { pgTypes } from './pg-types.js';

/** What a listener reports about its connection; the service's Observer is one. */
export interface ListenerObserver {
  listenReconnected(who: string): void;
  listenFellBackToPolling(who: string): void;
}

export type ListenMode = 'notify' | 'poll';

/**
 * The longest wait between two reconnections. One connection per process trying once a second is
 * no load on a server coming back; a longer wait is time the process spends deaf after it is back.
 */
export const MAX_RECONNECT_MS = 1_000;

export interface ListenerOptions {
  /**
   * Where to LISTEN: a server session (Postgres itself, or a session-mode pool). Null: nowhere (a
   * transaction-mode pooler and no session URL given): the listener never connects and its owner
   * polls for good, which it was told once at start.
   */
  connectionString: string | null;
  channels: string[];
  log: Logger;
  onHint(channel: string, payload: string): void;
  /** After each (re)connection that listens: anything may have been missed meanwhile. */
  onListening(): void;
  /** 'notify' once a probe came back; 'poll' while disconnected or when LISTEN delivers nothing. */
  onMode(mode: ListenMode): void;
  checkEveryMs?: number;
  probeTimeoutMs?: number;
  /** How long connecting and listening may take before it is given up and retried. Default 10 s. */
  connectTimeoutMs?: number;
  applicationName?: string;
  /** Told when this connection listens again, or falls back to polling (metrics). */
  observer?: ListenerObserver | undefined;
}

// eslint-disable-next-line max-lines-per-function -- one LISTEN connection's life (connect, probe, drop, reconnect): short functions sharing that connection's state
export function createListener(options: ListenerOptions) {
  const { log } = options;
  const name = options.applicationName ?? 'jobgate-live';
  // Probes go to a channel of this connection's own, so they wake nobody else.
  const probeChannel = probeFormat.name(randomBytes(6).toString('hex'));
  const channels = new Set(options.channels);
  const checkEveryMs = options.checkEveryMs ?? 10_000;
  const probeTimeoutMs = options.probeTimeoutMs ?? 3_000;
  // Connecting is several round trips (TCP, TLS, authentication, one LISTEN per channel): a
  // budget of its own, not a probe's.
  const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  let client: pg.Client | undefined;
  let mode: ListenMode = 'poll';
  let stopped = false;
  let failures = 0;
  let warnedDeaf = false;
  let retry: NodeJS.Timeout | undefined;
  // Since when it has been trying to listen again: an outage is logged when it starts and when
  // it ends, not at every reconnection that fails in between.
  let lostSince: number | undefined;
  const probes = new Map<string, () => void>();
  const dropped = new WeakSet<pg.Client>();

  const setMode = (next: ListenMode) => {
    if (next === mode) return;
    mode = next;
    if (next === 'poll') options.observer?.listenFellBackToPolling(name);
    options.onMode(next);
  };

  function destroy(c: pg.Client) {
    c.removeAllListeners('notification');
    // end() waits for the server's goodbye, which a half-open connection never sends.
    (c as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    c.end().catch(() => {});
  }

  function drop(c: pg.Client, why: string) {
    if (dropped.has(c)) return;
    dropped.add(c);
    destroy(c);
    if (client === c) client = undefined;
    setMode('poll');
    if (stopped) return;
    const delay = Math.min(MAX_RECONNECT_MS, 100 * 2 ** failures++) * (0.5 + Math.random() / 2);
    const line = `${name}: listening connection lost (${why}); polling, reconnecting in ${Math.round(delay)} ms`;
    if (lostSince === undefined) log.warn(line);
    else log.debug(line);
    lostSince ??= Date.now();
    // Unreferenced: whoever needs this process up holds it (a started worker, the HTTP server).
    retry = setTimeout(() => void connect(), delay);
    retry.unref();
  }

  async function connect() {
    if (stopped) return;
    if (options.connectionString === null) {
      // Its mode is 'poll' from the start, and stays so.
      log.info(`${name}: no connection to LISTEN on (a transaction-mode pooler, and no JOBGATE_LISTEN_DATABASE_URL): polling the database`);
      return;
    }
    const c = new pg.Client({ connectionString: options.connectionString, application_name: name, keepAlive: true, types: pgTypes });
    c.on('error', (e: Error) => drop(c, e.message));
    c.on('end', () => drop(c, 'connection closed'));
    c.on('notification', (n) => {
      const payload = n.payload ?? '';
      if (n.channel === probeChannel) probes.get(probeFormat.decode(payload) ?? '')?.();
      else if (channels.has(n.channel)) options.onHint(n.channel, payload);
    });
    try {
      // Bounded: a server (or proxy) that accepts the connection and then never answers would
      // otherwise leave no retry scheduled, and the process polling for good.
      const listening = (async () => {
        await c.connect();
        for (const channel of [...channels, probeChannel]) await c.query(`listen ${pg.escapeIdentifier(channel)}`);
      })();
      listening.catch(() => {}); // a late failure after the timeout has already dropped it
      if ((await within(listening, connectTimeoutMs)) === 'timeout')
        return drop(c, `no answer within ${connectTimeoutMs} ms while connecting`);
    } catch (error) {
      drop(c, (error as Error).message);
      return;
    }
    if (stopped || dropped.has(c)) return void destroy(c);
    client = c;
    if (lostSince !== undefined) options.observer?.listenReconnected(name);
    if (lostSince !== undefined) log.info(`${name}: listening again after ${((Date.now() - lostSince) / 1000).toFixed(1)} s`);
    lostSince = undefined;
    options.onListening();
    await check();
  }

  function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
    let timer: NodeJS.Timeout;
    return Promise.race([promise, new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), ms)))]).finally(() =>
      clearTimeout(timer),
    );
  }

  async function check() {
    const c = client;
    if (!c || stopped) return;
    const nonce = randomBytes(6).toString('hex');
    const delivered = new Promise<'delivered'>((r) => probes.set(nonce, () => r('delivered')));
    try {
      const sent = await within(c.query('select pg_notify($1, $2)', [probeChannel, probeFormat.encode(nonce)]), probeTimeoutMs);
      if (sent === 'timeout') return drop(c, `no answer to a probe within ${probeTimeoutMs} ms`);
      const heard = await within(delivered, probeTimeoutMs);
      if (client !== c) return;
      if (heard === 'delivered') {
        failures = 0; // only a connection that works resets the backoff: no storm against a server that drops us
        if (warnedDeaf) log.info(`${name}: notifications arrive again; polling stopped`);
        warnedDeaf = false;
        setMode('notify');
      } else {
        if (!warnedDeaf) {
          log.error(
            `${name}: LISTEN on this connection receives nothing (is DATABASE_URL a transaction-mode pooler, e.g. PgBouncer with pool_mode=transaction?). ` +
              'Falling back to polling the database; connect jobgate to Postgres directly or through a session-mode pool for live delivery.',
          );
        }
        warnedDeaf = true;
        setMode('poll');
      }
    } catch (error) {
      drop(c, (error as Error).message);
    } finally {
      probes.delete(nonce);
    }
  }

  const timer = setInterval(() => void check(), checkEveryMs);
  timer.unref();

  return {
    start: () => connect(),
    get mode(): ListenMode {
      return mode;
    },
    /** The backend pid of the listening connection, when connected (for tests and diagnostics). */
    async backendPid(): Promise<number | undefined> {
      return client ? ((await client.query('select pg_backend_pid() as pid')).rows[0].pid as number) : undefined;
    },
    check,
    async stop() {
      stopped = true;
      clearInterval(timer);
      clearTimeout(retry);
      if (client) {
        const c = client;
        client = undefined;
        dropped.add(c);
        destroy(c);
      }
    },
  };
}

export type Listener = ReturnType<typeof createListener>;
