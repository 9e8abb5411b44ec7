/**
 * Watches of one object's latest state (a run's progress, a batch's counts). Not an event stream:
 * a progress bar wants the latest state, so a hint naming an object marks it dirty and the hub
 * re-reads the dirty objects (one query for all those hinted at once) and pushes each to its
 * watchers, skipping states they already have; bursts coalesce, the last state and the terminal
 * one always arrive. A watch completes after its object's terminal state.
 */
import type pg from 'pg';
import type { Logger } from '../../log.js';
import { Feed } from './feed.js';
import { addTo, countIn, removeFrom, type Lifetime } from './shared.js';

/** What is watched: how it is read, and what of it a watcher has seen. */
export interface WatchedKind<T> {
  /** Its name in the plural, for the log. */
  plural: string;
  /** The objects of these ids that exist. */
  read(pool: pg.Pool, ids: string[]): Promise<T[]>;
  idOf(state: T): string;
  /** A state with the same key as the last one pushed is not pushed again. */
  keyOf(state: T): string;
  /** After this state nothing changes any more: the watch completes. */
  terminal(state: T): boolean;
}

export interface StateWatchesOptions {
  pool: pg.Pool;
  log: Logger;
  /** How soon to read again after a failed read. */
  pollMs: number;
  lifetime: Lifetime;
}

interface Watch<T> {
  feed: Feed<T>;
  /** The key of the state last pushed to this watcher. */
  last: string | undefined;
}

export class StateWatches<T> {
  private readonly watches = new Map<string, Set<Watch<T>>>(); // by object id
  /** Objects hinted at and not read since. */
  private readonly dirty = new Set<string>();
  private reading = false;

  constructor(
    private readonly options: StateWatchesOptions,
    private readonly kind: WatchedKind<T>,
  ) {}

  /** The object's state now, then each change; completes after a terminal state. */
  watch(id: string): Feed<T> {
    // Coalescing: a client that reads slowly gets the newest state, never a backlog.
    const watch: Watch<T> = { last: undefined, feed: new Feed<T>(() => removeFrom(this.watches, id, watch), true) };
    addTo(this.watches, id, watch);
    this.dirty.add(id);
    void this.read();
    return watch.feed;
  }

  /** A hint named this object: read it again if anyone watches it. */
  hinted(id: string): void {
    if (!this.watches.has(id)) return;
    this.dirty.add(id);
    void this.read();
  }

  /** Hints may have been missed: read every watched object again. */
  allMayHaveChanged(): void {
    for (const id of this.watches.keys()) this.dirty.add(id);
    void this.read();
  }

  get count(): number {
    return countIn(this.watches);
  }

  /** Ends every watch (the hub stops). */
  completeAll(): void {
    for (const set of [...this.watches.values()]) for (const w of [...set]) w.feed.complete();
  }

  private async read(): Promise<void> {
    const { pool, log, pollMs, lifetime } = this.options;
    if (this.reading || lifetime.stopped) return;
    this.reading = true;
    let ids: string[] = [];
    try {
      while (this.dirty.size > 0) {
        ids = [...this.dirty].filter((id) => this.watches.has(id));
        this.dirty.clear();
        if (ids.length === 0) break;
        for (const state of await this.kind.read(pool, ids)) this.push(state);
      }
    } catch (error) {
      for (const id of ids) this.dirty.add(id); // read them again, or a state (the terminal one) is lost
      log.warn(`live: reading ${this.kind.plural} failed (${(error as Error).message}); trying again`);
      setTimeout(() => void this.read(), pollMs).unref();
    } finally {
      this.reading = false;
    }
  }

  private push(state: T): void {
    const key = this.kind.keyOf(state);
    const terminal = this.kind.terminal(state);
    for (const watch of [...(this.watches.get(this.kind.idOf(state)) ?? [])]) {
      if (watch.last !== key) {
        watch.last = key;
        watch.feed.push(state);
      }
      if (terminal) watch.feed.complete();
    }
  }
}
