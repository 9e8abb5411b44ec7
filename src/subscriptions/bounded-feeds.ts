/**
 * The live feeds of one operation, within the bounds on subscriptions (src/service/access/load-bounds.ts):
 * each stream holds its place from before it is opened until it ends, whichever way it ends
 * (the client completes it, its socket closes, its key lapses, its feed fails or finishes).
 * A stream over its bound is refused RATE_LIMITED before anything is opened for it.
 *
 * What a stream counts against is the budget the transport hands in: a WebSocket connection's
 * (its subscriptions, and the key's), or, for a stream that is a connection of its own (SSE), the
 * key's connections and subscriptions.
 */
import type { Actor } from '../service/kernel/actor.js';
import type { StreamBudget } from '../service/access/load-bounds.js';
import type { LiveFeeds } from './live-feeds.js';

/** `source`, releasing `release` once when it finishes, fails, or is returned. */
function releasing<T>(source: AsyncIterable<T>, release: () => void): AsyncIterableIterator<T> {
  const inner = source[Symbol.asyncIterator]();
  // Not an async generator: a generator awaiting its source cannot be returned until the source
  // yields (see ./map-iterator.ts).
  const iterator: AsyncIterableIterator<T> = {
    next: async () => {
      try {
        const r = await inner.next();
        if (r.done) release();
        return r;
      } catch (error) {
        release();
        throw error;
      }
    },
    return: async () => {
      release();
      await inner.return?.();
      return { done: true, value: undefined };
    },
    throw: async (error?: unknown) => {
      release();
      await inner.return?.();
      throw error;
    },
    [Symbol.asyncIterator]: () => iterator,
  };
  return iterator;
}

type Args<K extends keyof LiveFeeds> = Parameters<LiveFeeds[K]>;

/**
 * A class with its methods on the prototype: one is made per GraphQL request (the context of a
 * query or mutation has one too, and never calls it), so it costs two fields, not nine closures.
 */
export class BoundedFeeds implements LiveFeeds {
  constructor(
    private readonly feeds: LiveFeeds,
    private readonly budget: StreamBudget,
  ) {}

  private async open<A extends [Actor, ...unknown[]], T>(opener: (...args: A) => Promise<AsyncIterable<T>>, ...args: A) {
    const release = this.budget.open(args[0]);
    try {
      return releasing(await opener.apply(this.feeds, args), release);
    } catch (error) {
      release();
      throw error;
    }
  }

  runProgress(...args: Args<'runProgress'>) {
    return this.open(this.feeds.runProgress, ...args);
  }
  batchProgress(...args: Args<'batchProgress'>) {
    return this.open(this.feeds.batchProgress, ...args);
  }
  runFindings(...args: Args<'runFindings'>) {
    return this.open(this.feeds.runFindings, ...args);
  }
  executionUpdates(...args: Args<'executionUpdates'>) {
    return this.open(this.feeds.executionUpdates, ...args);
  }
  jobEvents(...args: Args<'jobEvents'>) {
    return this.open(this.feeds.jobEvents, ...args);
  }
  runEvents(...args: Args<'runEvents'>) {
    return this.open(this.feeds.runEvents, ...args);
  }
  alerts(...args: Args<'alerts'>) {
    return this.open(this.feeds.alerts, ...args);
  }
  handlerCatalog(...args: Args<'handlerCatalog'>) {
    return this.open(this.feeds.handlerCatalog, ...args);
  }
  forConnection(cutOff: () => void): LiveFeeds {
    return new BoundedFeeds(this.feeds.forConnection(cutOff), this.budget);
  }
  watchKey(...args: Args<'watchKey'>) {
    return this.feeds.watchKey(...args);
  }
}
