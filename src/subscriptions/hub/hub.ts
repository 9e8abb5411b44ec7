/**
 * The per-process fan-out of live events. One listening connection (./hint-listener.ts) hints
 * that something changed; the hub reads what changed from the database once and hands it to
 * every subscription that matches, by workspace first, then by job, endpoint, run or name.
 *
 * Event streams (events and findings, both rows with increasing ids) are delivered in id order
 * up to the stable watermark (./watermark.ts), so nothing is skipped. The horizon
 * (./settle.ts) is the highest id the hub has fetched or is fetching. Each stream
 * subscription is live, pushed what the hub fetched for everyone (./streams.ts), or catching
 * up, reading its own rows until it reaches the horizon (./catch-up.ts). A subscription with
 * an `after` cursor starts by catching up; a live one that falls `feedLimit` rows behind drops
 * back to catching up; one whose client takes nothing for `stallMs` while rows wait is cut off.
 *
 * Run progress and batch progress are re-read, not streamed (./run-watches.ts, ./batch-watches.ts).
 * The same channel carries key and catalogue hints, passed on as they come (./hints.ts).
 */
import type pg from 'pg';
import type { Logger } from '../../log.js';
import type { EventMatch, EventRow, FindingRow, Positions } from '../../db/statements/events.js';
import type { Run } from '../../service/runs/runs.js';
import type { Batch } from '../../service/kernel/models.js';
import { noopObserver, type Observer } from '../../service/kernel/observer.js';
import type { Feed } from './feed.js';
import type { Lifetime } from './shared.js';
import { BatchWatches } from './batch-watches.js';
import { CatchUp } from './catch-up.js';
import { HintFanOut } from './hints.js';
import { HintListener } from './hint-listener.js';
import { RunWatches } from './run-watches.js';
import { Settle } from './settle.js';
import { Streams } from './streams.js';

export interface HubOptions {
  pool: pg.Pool;
  /** For the listening connection (Postgres itself, not a transaction pooler); null: none, the hub polls. */
  connectionString: string | null;
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

/** How soon new events are read when no stream subscription is open (the horizon stays current). */
const IDLE_MS = 100;

export function createHub(options: HubOptions) {
  const { log } = options;
  const { lifetime, settle, streams, runs, batches, hints, listener, stopPolling } = assemble(options);

  return {
    async start() {
      await listener.start();
      settle.need();
    },
    listener,
    /** The hub's log, for what is built on it. */
    log,

    /**
     * Events matching `match`, after `after` (replayed) or from now on. `cursorOf` seals an id as
     * the workspace's cursor, for the error of a replay that finds its events pruned.
     */
    events(match: EventMatch, after: bigint | undefined, cursorOf: (id: bigint) => string, cutOff?: () => void): Feed<EventRow> {
      return streams.openEvents(match, after, cursorOf, cutOff);
    },

    /** Findings of one run, after `after` (replayed) or from now on, in the order recorded. */
    findings(runId: string, after: bigint | undefined, cutOff?: () => void): Feed<FindingRow> {
      return streams.openFindings(runId, after, cutOff);
    },

    /** The run's state now, then each change; completes after a terminal state. */
    run(runId: string): Feed<Run> {
      return runs.watch(runId);
    },

    /** The batch's counts and state now, then each change; completes once the batch has completed. */
    batch(batchId: string): Feed<Batch> {
      return batches.watch(batchId);
    },

    /**
     * Calls `fn` with the key a revocation hint names (`k:<id>`, sent by the revoking
     * transaction), and with undefined after the listener (re)connects, when hints may have been
     * missed. Returns the function that stops it.
     */
    onKeyHint(fn: (keyId: string | undefined) => void): () => void {
      return hints.onKey(fn);
    },

    /**
     * Calls `fn` when the handler catalogue may have changed: a `c` hint (migration 000029), and
     * whenever the listener (re)connects or polls, when hints may have been missed. Returns the
     * function that stops it.
     */
    onCatalogHint(fn: () => void): () => void {
      return hints.onCatalog(fn);
    },

    /** Up to where events and findings are settled and delivered (undefined before the first settle). */
    horizon: (): Positions | undefined => (settle.horizon ? { ...settle.horizon } : undefined),

    /** Subscriptions open on this hub (for diagnostics and tests). */
    stats: () => {
      const s = streams.stats();
      // events, findings: stream subscriptions past their replay, receiving live; open: every subscription, live or catching up.
      const watches = runs.count + batches.count;
      return {
        events: s.events,
        findings: s.findings,
        runs: runs.count,
        batches: batches.count,
        open: s.open + watches,
        mode: listener.mode,
      };
    },

    async stop() {
      lifetime.stopped = true;
      stopPolling();
      settle.stop();
      await listener.stop();
      streams.completeAll();
      runs.completeAll();
      batches.completeAll();
    },
  };
}

export type Hub = ReturnType<typeof createHub>;

/** Builds the hub's parts and wires the listener's hints to them. */
function assemble(options: HubOptions) {
  const { pool, log } = options;
  const pollMs = options.pollMs ?? 1000;
  const feedLimit = options.feedLimit ?? 1_000;
  const observer = options.observer ?? noopObserver;
  const lifetime: Lifetime = { stopped: false };

  const settle: Settle = new Settle({
    pool,
    log,
    pollMs,
    settleMs: options.settleMs ?? 10,
    lifetime,
    deliver: (from, to) => streams.deliver(from, to),
  });
  const catchUp = new CatchUp({ settle, lifetime, log, observer, feedLimit, stallMs: options.stallMs ?? 30_000 });
  const streams = new Streams({ pool, settle, catchUp, observer, feedLimit });
  const runs = new RunWatches({ pool, log, pollMs, lifetime });
  const batches = new BatchWatches({ pool, log, pollMs, lifetime });
  const hints = new HintFanOut();

  const hintListener = new HintListener(
    {
      listenConnectionString: options.connectionString,
      log,
      observer,
      pollMs,
      checkEveryMs: options.checkEveryMs,
      probeTimeoutMs: options.probeTimeoutMs,
      lifetime,
    },
    {
      streams() {
        // The horizon is kept current even with no subscriber, so one that arrives with a
        // cursor replays at once; without subscribers, at a relaxed pace.
        if (streams.any || settle.awaited) void settle.cycle();
        else settle.schedule(IDLE_MS);
      },
      run: (runId) => runs.hinted(runId),
      batch: (batchId) => batches.hinted(batchId),
      key: (keyId) => hints.keyChanged(keyId),
      catalog: () => hints.catalogChanged(),
      anything() {
        void settle.cycle();
        hints.catalogChanged();
        runs.allMayHaveChanged();
        batches.allMayHaveChanged();
      },
    },
  );
  return {
    lifetime,
    settle,
    streams,
    runs,
    batches,
    hints,
    listener: hintListener.listener,
    stopPolling: () => hintListener.stopPolling(),
  };
}
