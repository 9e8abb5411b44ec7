/**
 * The handler catalogue, live (the handlerCatalog subscription): the catalogue at once, then
 * again each time it changes, read from the database whenever the hub hears that it may have
 * (a `c` hint, migration 000029; or a listener that (re)connects or polls) and when the first
 * live worker would go stale, which no write announces.
 *
 * The catalogue is small and a state, not a stream of events: a subscriber wants the latest one,
 * so its feed keeps only the newest (a slow client skips intermediate states), and a catalogue
 * equal to the last one pushed is not pushed again (worker heartbeat times aside, which move
 * without a hint). Subscribers who see the same catalogue (the service's audience: installation
 * or tenant view, and workspace; and the same filter) share one read per change, and hints in a
 * burst (many handlers ticking at once) coalesce into one read per `coalesceMs`.
 */
import type { Logger } from '../log.js';
import type { Actor } from '../service/kernel/actor.js';
import type { HandlerCatalogSnapshot, HandlerFilter, HandlerInfo } from '../service/handlers/handlers.js';
import { Feed } from './hub/feed.js';

export interface CatalogWatchOptions {
  /** The service's read (it validates the filter: the first read's refusal is the subscriber's). */
  read(actor: Actor, filter: HandlerFilter): Promise<HandlerCatalogSnapshot>;
  /** Who sees the same catalogue as this actor (the service decides). */
  audience(actor: Actor): string;
  /** The hub's catalogue hints; returns the stop. */
  onHint(fn: () => void): () => void;
  log: Logger;
  /** The least time between two reads for one audience. Default 100 ms. */
  coalesceMs?: number;
  /** How soon a failed read is tried again. Default 1 s. */
  retryMs?: number;
}

interface Audience {
  /** The first subscriber's actor and filter: every subscriber of the audience sees the same catalogue. */
  actor: Actor;
  filter: HandlerFilter;
  feeds: Set<Feed<HandlerInfo[]>>;
  /** The catalogue last pushed, and its comparison key. */
  latest: HandlerInfo[] | undefined;
  key: string | undefined;
  reading: boolean;
  again: boolean;
  timer: NodeJS.Timeout | undefined;
  recheck: NodeJS.Timeout | undefined;
}

/** What is compared: everything but the workers' heartbeat times. */
const keyOf = (handlers: HandlerInfo[]) => JSON.stringify(handlers, (k, v: unknown) => (k === 'heartbeatAt' ? undefined : v));

export class CatalogWatch {
  private readonly audiences = new Map<string, Audience>();
  private readonly stopHints: () => void;
  private readonly coalesceMs: number;
  private readonly retryMs: number;

  constructor(private readonly options: CatalogWatchOptions) {
    this.coalesceMs = options.coalesceMs ?? 100;
    this.retryMs = options.retryMs ?? 1000;
    this.stopHints = options.onHint(() => {
      for (const a of this.audiences.values()) this.schedule(a, this.coalesceMs);
    });
  }

  /**
   * The actor's catalogue now, then each change. Throws what the first read throws
   * (VALIDATION_FAILED for a bad filter), before anything is watched.
   */
  async watch(actor: Actor, filter: HandlerFilter): Promise<Feed<HandlerInfo[]>> {
    const first = await this.options.read(actor, filter);
    const id = `${this.options.audience(actor)}\u0000${JSON.stringify([filter.kind ?? null, filter.name ?? null])}`;
    let audience = this.audiences.get(id);
    if (!audience) {
      audience = {
        actor,
        filter,
        feeds: new Set(),
        latest: undefined,
        key: undefined,
        reading: false,
        again: false,
        timer: undefined,
        recheck: undefined,
      };
      this.audiences.set(id, audience);
      this.took(audience, first);
    }
    const a = audience;
    const feed: Feed<HandlerInfo[]> = new Feed<HandlerInfo[]>(() => {
      a.feeds.delete(feed);
      if (a.feeds.size > 0 || this.audiences.get(id) !== a) return;
      clearTimeout(a.timer);
      clearTimeout(a.recheck);
      this.audiences.delete(id);
    }, true);
    a.feeds.add(feed);
    feed.push(a.latest ?? first.handlers);
    return feed;
  }

  /** Subscriptions open (diagnostics and tests). */
  get size(): number {
    return [...this.audiences.values()].reduce((n, a) => n + a.feeds.size, 0);
  }

  stop(): void {
    this.stopHints();
    for (const a of [...this.audiences.values()]) for (const f of [...a.feeds]) f.complete();
  }

  private schedule(a: Audience, ms: number): void {
    if (a.timer) return;
    a.timer = setTimeout(() => {
      a.timer = undefined;
      void this.read(a);
    }, ms);
    a.timer.unref();
  }

  private async read(a: Audience): Promise<void> {
    if (a.feeds.size === 0) return;
    if (a.reading) {
      a.again = true;
      return;
    }
    a.reading = true;
    try {
      this.took(a, await this.options.read(a.actor, a.filter));
    } catch (error) {
      this.options.log.warn(`live: reading the handler catalogue failed (${(error as Error).message}); trying again`);
      this.schedule(a, this.retryMs);
    } finally {
      a.reading = false;
    }
    if (a.again) {
      a.again = false;
      this.schedule(a, this.coalesceMs);
    }
  }

  /** Pushes a changed catalogue to the audience, and reads again when a worker would go stale. */
  private took(a: Audience, snapshot: HandlerCatalogSnapshot): void {
    const key = keyOf(snapshot.handlers);
    if (key !== a.key) {
      a.key = key;
      a.latest = snapshot.handlers;
      for (const f of a.feeds) f.push(snapshot.handlers);
    }
    clearTimeout(a.recheck);
    a.recheck = undefined;
    if (snapshot.recheckInMs !== null) {
      // A little past the deadline: at it exactly, the worker may still count as live.
      a.recheck = setTimeout(() => this.schedule(a, 0), snapshot.recheckInMs + 50);
      a.recheck.unref();
    }
  }
}
