/**
 * The per-process fan-out of live events. One listening connection (./listener.ts) hints that
 * something changed; the hub reads what changed from the database once and hands it to every
 * subscription that matches, by workspace first, then by job, endpoint, run or name.
 *
 * Event streams (events and findings, both rows with increasing ids) are delivered in id order
 * up to the stable watermark (./watermark.ts), so nothing is skipped. Each stream subscription
 * is either LIVE (the hub pushes what it fetched for everyone) or CATCHING UP (it reads its own
 * rows from the database, a page at a time, as fast as its client takes them). A subscription
 * with an `after` cursor starts by catching up; a live one whose client falls `feedLimit` rows
 * behind (a burst, a slow network) drops back to catching up from the last row it was given,
 * so memory per subscriber stays bounded and a slow client never slows the others. A client
 * that takes nothing for `stallMs` while rows wait is cut off (SLOW_CONSUMER); it resumes with
 * its last cursor. The horizon is the highest id the hub has fetched or is fetching; a catch-up
 * turns live only when it has read up to the current horizon, so the switch has no gap and no
 * overlap.
 *
 * The same channel carries `k:<key id>`: an API key's standing changed (revoked), for the
 * gateway's KeyWatch (./key-watch.ts) to end what the key has open; and `c`: the handler
 * catalogue changed (migration 000029), for the CatalogWatch (./catalog-watch.ts).
 *
 * Run progress is not an event stream: a progress bar wants the latest state, so a hint naming
 * a run makes the hub re-read that run (one query for all runs hinted at once) and push it to
 * its watchers, skipping states they already have; bursts coalesce, the last state and the
 * terminal one always arrive.
 */
import type pg from 'pg';
import type { Logger } from '../log.js';
import {
  eventsInRange,
  findingsInRange,
  matchingEvents,
  readPositions,
  runsById,
  type EventMatch,
  type EventRow,
  type FindingRow,
  type Positions,
} from '../db/queries/events.js';
import { isConnectionError } from '../db/unavailable.js';
import { assertCursorKept } from '../service/live.js';
import { toRun, type Run } from '../service/runs.js';
import { Feed, SlowConsumerError } from './feed.js';
import { createListener, type Listener, type ListenMode } from '../db/listener.js';
import { Watermark } from './watermark.js';
import { noopObserver, type Observer } from '../service/observer.js';

export interface HubOptions {
  pool: pg.Pool;
  /** For the listening connection (must reach Postgres itself, not a transaction pooler). */
  connectionString: string;
  log: Logger;
  /** How often to look when notifications are not arriving. Default 1 s. */
  pollMs?: number;
  /** How soon to look again while a watermark waits for open transactions. Default 10 ms. */
  settleMs?: number;
  /** Most undelivered rows one subscription holds in memory; past that it catches up from the database. Default 1,000. */
  feedLimit?: number;
  /** A subscription whose client takes nothing for this long while rows wait is cut off. Default 30 s. */
  stallMs?: number;
  /** Listener self-check cadence and probe timeout. */
  checkEveryMs?: number;
  probeTimeoutMs?: number;
  /** Where deliveries, slow consumers and the listener's reconnections are reported (metrics). */
  observer?: Observer | undefined;
}

const CHANNEL = 'jobgate_events';
const PAGE = 5_000;
const TERMINAL = new Set(['COMPLETED', 'FAILED']);

interface StreamSub<T> {
  feed: Feed<T>;
  /** LIVE: the hub pushes rows above `last`. Otherwise the subscription reads its own. */
  live: boolean;
  /** The id of the last row given to the feed (or the position it starts after). */
  last: bigint;
  /** Reads this subscription's rows in (after, upTo], oldest first, at most a page. */
  read: (after: bigint, upTo: bigint, limit: number) => Promise<T[]>;
  position: keyof Positions;
  /** Cuts the client's connection off (a WebSocket is closed), when it stalls. */
  cutOff: (() => void) | undefined;
}

interface EventSub extends StreamSub<EventRow> {
  match: EventMatch;
}

interface RunWatch {
  feed: Feed<Run>;
  last: string | undefined;
}

const idOf = (row: { id: string }) => BigInt(row.id);

export function createHub(options: HubOptions) {
  const { pool, log } = options;
  const pollMs = options.pollMs ?? 1000;
  const settleMs = options.settleMs ?? 10;
  const feedLimit = options.feedLimit ?? 1_000;
  const stallMs = options.stallMs ?? 30_000;
  const idleMs = 100;
  const observer = options.observer ?? noopObserver;

  const eventSubs = new Map<string, Set<EventSub>>(); // by workspace
  const findingSubs = new Map<string, Set<StreamSub<FindingRow>>>(); // by run
  const runWatches = new Map<string, Set<RunWatch>>(); // by run

  const watermark = new Watermark<Positions>();
  /** Everything at or below is delivered or being fetched; undefined until the first settle. */
  let horizon: Positions | undefined;
  let ready: Promise<void> = Promise.resolve();
  let markReady: (() => void) | undefined;
  let cycling = false;
  let again = false;
  let settleTimer: NodeJS.Timeout | undefined;
  let warnedStuck = false;
  let stopped = false;

  /** Who hears that an API key's standing may have changed (./key-watch.ts); undefined: any key's. */
  const keyHints = new Set<(keyId: string | undefined) => void>();
  /** Who hears that the handler catalogue may have changed (./catalog-watch.ts). */
  const catalogHints = new Set<() => void>();

  const dirtyRuns = new Set<string>();
  let readingRuns = false;

  function needHorizon() {
    if (horizon) return;
    if (!markReady) ready = new Promise<void>((r) => (markReady = r));
    void cycle();
  }

  async function cycle(): Promise<void> {
    if (stopped) return;
    if (cycling) {
      again = true;
      return;
    }
    cycling = true;
    try {
      do {
        again = false;
        await step();
      } while (again && !stopped);
    } catch (error) {
      log.warn(`live: reading new events failed (${(error as Error).message}); trying again`);
      schedule(pollMs);
    } finally {
      cycling = false;
    }
    if (watermark.waiting) {
      // Look again soon, less often the longer a writer stays open (each look reads pg_locks).
      schedule(Math.min(200, settleMs * 2 ** Math.floor(watermark.oldestWait() / 100)));
      const waited = watermark.oldestWait();
      if (waited > 10_000 && !warnedStuck) {
        warnedStuck = true;
        log.warn(
          `live: events have waited ${Math.round(waited / 1000)} s for an open transaction to end; a long transaction that wrote events or findings delays live delivery after it`,
        );
      }
    } else warnedStuck = false;
  }

  function schedule(ms: number) {
    if (settleTimer || stopped) return;
    settleTimer = setTimeout(() => {
      settleTimer = undefined;
      void cycle();
    }, ms);
    settleTimer.unref();
  }

  async function step() {
    const read = await readPositions(pool);
    const settled = watermark.offer(read.positions, read.writers);
    if (!settled) return;
    if (!horizon) {
      horizon = settled;
      markReady?.();
      markReady = undefined;
      return;
    }
    const from = horizon;
    const to: Positions = { events: max(from.events, settled.events), findings: max(from.findings, settled.findings) };
    horizon = to; // new subscribers replay up to here; the fetch below delivers above `from`
    try {
      if (to.events > from.events && eventSubs.size > 0) await deliverEvents(from.events, to.events);
      if (to.findings > from.findings && findingSubs.size > 0) await deliverFindings(from.findings, to.findings);
    } catch (error) {
      // Deliver (from, to] again next time: what got through is skipped (ids <= each one's `last`).
      horizon = from;
      throw error;
    }
  }

  async function deliverEvents(after: bigint, upTo: bigint) {
    for (let cursor = after; cursor < upTo;) {
      const rows = await eventsInRange(pool, cursor, upTo, [...eventSubs.keys()], PAGE);
      for (const row of rows) {
        for (const sub of eventSubs.get(row.workspace_id) ?? []) if (matches(sub.match, row)) offer(sub, row, BigInt(row.id));
      }
      if (rows.length < PAGE) break;
      cursor = BigInt(rows.at(-1)!.id);
    }
  }

  async function deliverFindings(after: bigint, upTo: bigint) {
    for (let cursor = after; cursor < upTo;) {
      const rows = await findingsInRange(pool, cursor, upTo, [...findingSubs.keys()], PAGE);
      for (const row of rows) for (const sub of findingSubs.get(row.run_id) ?? []) offer(sub, row, BigInt(row.id));
      if (rows.length < PAGE) break;
      cursor = BigInt(rows.at(-1)!.id);
    }
  }

  function offer<T extends { id: string }>(sub: StreamSub<T>, row: T, id: bigint) {
    if (!sub.live || id <= sub.last) return;
    if (sub.feed.size >= feedLimit) {
      // Too far behind to keep in memory: it reads the rest itself once its client has drained.
      sub.live = false;
      void catchUp(sub);
      return;
    }
    sub.last = id;
    sub.feed.push(row);
    observer.eventsDelivered(1);
  }

  /**
   * Reads a subscription's rows from the database from its `last` up to the horizon, a page
   * at a time, waiting for its client to take each page; turns it live when it has read
   * everything up to the current horizon (no await between that check and the switch).
   */
  async function catchUp<T extends { id: string }>(sub: StreamSub<T>) {
    for (let failures = 0; !sub.feed.closed && !stopped;) {
      try {
        await ready;
        await untilDrained(sub);
        if (sub.feed.closed) return;
        const upTo = horizon![sub.position];
        if (sub.last >= upTo) {
          sub.live = true;
          return;
        }
        // At most what fits under the limit: memory per subscriber stays at `feedLimit` rows.
        const room = Math.max(1, Math.min(PAGE, feedLimit - sub.feed.size));
        const rows = await sub.read(sub.last, upTo, room);
        for (const row of rows) {
          sub.last = idOf(row);
          sub.feed.push(row);
        }
        observer.eventsDelivered(rows.length);
        if (rows.length < room) sub.last = upTo > sub.last ? upTo : sub.last;
        failures = 0;
      } catch (error) {
        // The database going away (a restart, a killed connection) is waited out: the
        // subscription continues where it was once queries work again.
        if (!isConnectionError(error)) return sub.feed.fail(error);
        const delay = Math.min(5_000, 100 * 2 ** failures++);
        log.warn(`live: catching a subscription up failed (${(error as Error).message}); retrying in ${delay} ms`);
        await new Promise((r) => setTimeout(r, delay).unref());
      }
    }
  }

  /** Waits until the feed is half empty; a client that takes nothing for `stallMs` is cut off. */
  async function untilDrained<T>(sub: StreamSub<T>) {
    for (;;) {
      if (sub.feed.size < feedLimit / 2 || sub.feed.closed) return;
      let timer: NodeJS.Timeout | undefined;
      const stalled = new Promise<'stalled'>(
        (r) => (timer = setTimeout(() => r('stalled'), Math.max(10, sub.feed.lastPullAt + stallMs - Date.now()))),
      );
      const result = await Promise.race([sub.feed.drained(feedLimit / 2).then(() => 'drained' as const), stalled]);
      clearTimeout(timer);
      if (result === 'stalled' && Date.now() - sub.feed.lastPullAt >= stallMs && !sub.feed.closed) {
        log.warn(`live: a subscriber took nothing for ${stallMs} ms with ${sub.feed.size} rows waiting; ending it`);
        sub.feed.fail(new SlowConsumerError(stallMs));
        observer.slowConsumerCut();
        sub.cutOff?.();
        return;
      }
    }
  }

  /** Starts a stream subscription: from `after` (catching up first), or live from the horizon. */
  async function startStream<T extends { id: string }>(sub: StreamSub<T>, after: bigint | undefined) {
    try {
      await ready;
      if (sub.feed.closed) return;
      const upTo = horizon![sub.position];
      if (after === undefined || after >= upTo) {
        sub.last = after !== undefined && after > upTo ? after : upTo;
        sub.live = true;
        return;
      }
      sub.last = after;
    } catch (error) {
      return sub.feed.fail(error);
    }
    await catchUp(sub);
  }

  function add<K, V>(map: Map<K, Set<V>>, key: K, value: V) {
    let set = map.get(key);
    if (!set) map.set(key, (set = new Set()));
    set.add(value);
  }

  function remove<K, V>(map: Map<K, Set<V>>, key: K, value: V) {
    const set = map.get(key);
    if (!set) return;
    set.delete(value);
    if (set.size === 0) map.delete(key);
  }

  async function readRuns() {
    if (readingRuns || stopped) return;
    readingRuns = true;
    let ids: string[] = [];
    try {
      while (dirtyRuns.size > 0) {
        ids = [...dirtyRuns].filter((id) => runWatches.has(id));
        dirtyRuns.clear();
        if (ids.length === 0) break;
        for (const row of await runsById(pool, ids)) {
          const run = toRun(row);
          const key = `${run.status}|${run.processed}|${run.total}|${run.updatedAt.getTime()}|${JSON.stringify(run.stats)}`;
          for (const watch of [...(runWatches.get(run.id) ?? [])]) {
            if (watch.last !== key) {
              watch.last = key;
              watch.feed.push(run);
            }
            if (TERMINAL.has(run.status)) watch.feed.complete();
          }
        }
      }
    } catch (error) {
      for (const id of ids) dirtyRuns.add(id); // read them again, or a state (the terminal one) is lost
      log.warn(`live: reading runs failed (${(error as Error).message}); trying again`);
      setTimeout(() => void readRuns(), pollMs).unref();
    } finally {
      readingRuns = false;
    }
  }

  function everythingMayHaveChanged() {
    void cycle();
    for (const fn of catalogHints) fn();
    for (const id of runWatches.keys()) dirtyRuns.add(id);
    void readRuns();
  }

  let pollTimer: NodeJS.Timeout | undefined;
  function onMode(mode: ListenMode) {
    clearInterval(pollTimer);
    pollTimer = undefined;
    if (mode === 'poll' && !stopped) {
      pollTimer = setInterval(everythingMayHaveChanged, pollMs);
      pollTimer.unref();
    }
  }

  const listener: Listener = createListener({
    connectionString: options.connectionString,
    channels: [CHANNEL],
    log,
    checkEveryMs: options.checkEveryMs,
    probeTimeoutMs: options.probeTimeoutMs,
    observer,
    onListening: () => {
      everythingMayHaveChanged();
      for (const fn of keyHints) fn(undefined); // a revocation may have been missed meanwhile
    },
    onMode,
    onHint(_channel, payload) {
      if (payload === 'e' || payload === 'f') {
        // The horizon is kept current even with no subscriber, so one that arrives with a
        // cursor replays at once; without subscribers, at a relaxed pace.
        if (eventSubs.size > 0 || findingSubs.size > 0 || markReady) void cycle();
        else schedule(idleMs);
      } else if (payload === 'c') {
        for (const fn of catalogHints) fn();
      } else if (payload.startsWith('k:')) {
        const keyId = payload.slice(2);
        for (const fn of keyHints) fn(keyId);
      } else if (payload.startsWith('r:')) {
        const id = payload.slice(2);
        if (runWatches.has(id)) {
          dirtyRuns.add(id);
          void readRuns();
        }
      }
    },
  });
  onMode('poll'); // until the listener's first probe comes back

  return {
    async start() {
      await listener.start();
      needHorizon();
    },
    listener,
    /** The hub's log, for what is built on it. */
    log,

    /**
     * Events matching `match`, after `after` (replayed) or from now on. `cursorOf` seals an id as
     * the workspace's cursor, for the error of a replay that finds its events pruned.
     */
    events(match: EventMatch, after: bigint | undefined, cursorOf: (id: bigint) => string, cutOff?: () => void): Feed<EventRow> {
      const sub: EventSub = {
        match,
        live: false,
        last: 0n,
        position: 'events',
        cutOff,
        read: async (from, upTo, limit) => {
          const { rows, prunedThrough } = await matchingEvents(pool, match, from, upTo, limit);
          // Events after `from` may have been pruned (retention) since the stream was authorised
          // or while it caught up: going on would skip them silently.
          assertCursorKept(from, prunedThrough, cursorOf);
          return rows;
        },
        feed: new Feed<EventRow>(() => {
          remove(eventSubs, match.workspaceId, sub);
        }),
      };
      add(eventSubs, match.workspaceId, sub);
      needHorizon();
      void startStream(sub, after);
      return sub.feed;
    },

    /** Findings of one run, after `after` (replayed) or from now on, in the order recorded. */
    findings(runId: string, after: bigint | undefined, cutOff?: () => void): Feed<FindingRow> {
      const sub: StreamSub<FindingRow> = {
        live: false,
        last: 0n,
        position: 'findings',
        cutOff,
        read: (from, upTo, limit) => findingsInRange(pool, from, upTo, [runId], limit),
        feed: new Feed<FindingRow>(() => {
          remove(findingSubs, runId, sub);
        }),
      };
      add(findingSubs, runId, sub);
      needHorizon();
      void startStream(sub, after);
      return sub.feed;
    },

    /** The run's state now, then each change; completes after a terminal state. */
    run(runId: string): Feed<Run> {
      // Coalescing: a client that reads slowly gets the newest state, never a backlog.
      const watch: RunWatch = { last: undefined, feed: new Feed<Run>(() => remove(runWatches, runId, watch), true) };
      add(runWatches, runId, watch);
      dirtyRuns.add(runId);
      void readRuns();
      return watch.feed;
    },

    /**
     * Calls `fn` with the key a revocation hint names (`k:<id>`, sent by the revoking
     * transaction), and with undefined after the listener (re)connects, when hints may have been
     * missed. Returns the function that stops it.
     */
    onKeyHint(fn: (keyId: string | undefined) => void): () => void {
      keyHints.add(fn);
      return () => keyHints.delete(fn);
    },

    /**
     * Calls `fn` when the handler catalogue may have changed: a `c` hint (migration 000029), and
     * whenever the listener (re)connects or polls, when hints may have been missed. Returns the
     * function that stops it.
     */
    onCatalogHint(fn: () => void): () => void {
      catalogHints.add(fn);
      return () => catalogHints.delete(fn);
    },

    /** Up to where events and findings are settled and delivered (undefined before the first settle). */
    horizon: (): Positions | undefined => (horizon ? { ...horizon } : undefined),

    /** Subscriptions open on this hub (for diagnostics and tests). */
    stats: () => ({
      /** Stream subscriptions past their replay, receiving live. */
      events: [...eventSubs.values()].reduce((n, s) => n + [...s].filter((x) => x.live).length, 0),
      findings: [...findingSubs.values()].reduce((n, s) => n + [...s].filter((x) => x.live).length, 0),
      runs: [...runWatches.values()].reduce((n, s) => n + s.size, 0),
      /** Every subscription open, live or catching up. */
      open: [eventSubs, findingSubs, runWatches].reduce((n, map) => n + [...map.values()].reduce((m, s) => m + s.size, 0), 0),
      mode: listener.mode,
    }),

    async stop() {
      stopped = true;
      clearInterval(pollTimer);
      clearTimeout(settleTimer);
      await listener.stop();
      for (const set of [...eventSubs.values(), ...findingSubs.values(), ...runWatches.values()])
        for (const s of [...set]) s.feed.complete();
    },
  };
}

export type Hub = ReturnType<typeof createHub>;

function max(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}

function matches(match: EventMatch, row: EventRow): boolean {
  return (
    match.topic === row.topic &&
    (match.jobId === undefined || match.jobId === row.job_id) &&
    (match.endpointId === undefined || match.endpointId === row.endpoint_id) &&
    (match.name === undefined || match.name === row.name)
  );
}
