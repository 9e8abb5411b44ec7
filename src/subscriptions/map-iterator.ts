/**
 * An async iterator's items mapped, for the layers between a feed and graphql-ws.
 *
 * Not an async generator: a generator awaiting its source cannot be returned until the source
 * yields, so a client that leaves a quiet stream would leak it. `return` goes straight to the
 * source, which ends at once (src/subscriptions/hub/feed.ts).
 */
export function mapIterator<A, B>(
  source: AsyncIterator<A>,
  map: (a: A) => B | Promise<B>,
  /** What a failure of the source becomes (it is thrown to the consumer). Default: itself. */
  mapError: (error: unknown) => unknown = (error) => error,
): AsyncIterableIterator<B> {
  const iterator: AsyncIterableIterator<B> = {
    next: async () => {
      let r: IteratorResult<A>;
      try {
        r = await source.next();
      } catch (error) {
        throw mapError(error);
      }
      return r.done ? { done: true, value: undefined } : { done: false, value: await map(r.value) };
    },
    return: async () => {
      await source.return?.();
      return { done: true, value: undefined };
    },
    throw: async (error?: unknown) => {
      await source.return?.();
      throw error;
    },
    [Symbol.asyncIterator]: () => iterator,
  };
  return iterator;
}

/**
 * Maps remembered per input object: an item the hub hands to many subscribers (one event row,
 * one finding) maps to one output object, so what is built from it downstream can be shared
 * too (./shared-event-results.ts keys its results on the payload object). Each subscriber brings
 * its own `map` (a closure over its workspace's cursors); all of them share one memory, so the
 * first to reach an item maps it for all: every `map` given must map an item alike.
 */
export function mappedOnce<A extends object, B>(): (map: (a: A) => B) => (a: A) => B {
  const seen = new WeakMap<A, B>();
  return (map) => (a) => {
    let b = seen.get(a);
    if (b === undefined) seen.set(a, (b = map(a)));
    return b;
  };
}
