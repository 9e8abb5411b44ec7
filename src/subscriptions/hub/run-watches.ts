/**
 * Run watches. Run progress is not an event stream: a progress bar wants the latest state, so
 * a hint naming a run marks it dirty and the hub re-reads the dirty runs (one query for all
 * runs hinted at once) and pushes each to its watchers, skipping states they already have;
 * bursts coalesce, the last state and the terminal one always arrive.
 */
import type pg from 'pg';
import type { Logger } from '../../log.js';
import { runsById } from '../../db/statements/events.js';
import { toRun, type Run } from '../../service/runs/runs.js';
import { Feed } from './feed.js';
import { addTo, countIn, removeFrom, type Lifetime } from './shared.js';

const TERMINAL = new Set(['COMPLETED', 'FAILED']);

interface RunWatch {
  feed: Feed<Run>;
  /** The state last pushed to this watcher. */
  last: string | undefined;
}

export interface RunWatchesOptions {
  pool: pg.Pool;
  log: Logger;
  /** How soon to read again after a failed read. */
  pollMs: number;
  lifetime: Lifetime;
}

export class RunWatches {
  private readonly watches = new Map<string, Set<RunWatch>>(); // by run
  /** Runs hinted at and not read since. */
  private readonly dirty = new Set<string>();
  private reading = false;

  constructor(private readonly options: RunWatchesOptions) {}

  /** The run's state now, then each change; completes after a terminal state. */
  watch(runId: string): Feed<Run> {
    // Coalescing: a client that reads slowly gets the newest state, never a backlog.
    const watch: RunWatch = { last: undefined, feed: new Feed<Run>(() => removeFrom(this.watches, runId, watch), true) };
    addTo(this.watches, runId, watch);
    this.dirty.add(runId);
    void this.read();
    return watch.feed;
  }

  /** A hint named this run: read it again if anyone watches it. */
  hinted(runId: string): void {
    if (!this.watches.has(runId)) return;
    this.dirty.add(runId);
    void this.read();
  }

  /** Hints may have been missed: read every watched run again. */
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
        for (const row of await runsById(pool, ids)) this.push(toRun(row));
      }
    } catch (error) {
      for (const id of ids) this.dirty.add(id); // read them again, or a state (the terminal one) is lost
      log.warn(`live: reading runs failed (${(error as Error).message}); trying again`);
      setTimeout(() => void this.read(), pollMs).unref();
    } finally {
      this.reading = false;
    }
  }

  private push(run: Run): void {
    const key = `${run.status}|${run.processed}|${run.total}|${run.updatedAt.getTime()}|${JSON.stringify(run.stats)}`;
    for (const watch of [...(this.watches.get(run.id) ?? [])]) {
      if (watch.last !== key) {
        watch.last = key;
        watch.feed.push(run);
      }
      if (TERMINAL.has(run.status)) watch.feed.complete();
    }
  }
}
