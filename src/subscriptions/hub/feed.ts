/**
 * One subscriber's queue: the hub pushes, graphql-js pulls (an AsyncIterator). graphql-ws
 * pulls the next item only when the socket took the previous one, so a client that reads
 * slowly shows up here, as a growing queue, not in the socket's buffer.
 *
 * The queue is bounded by its owner, not here: the hub stops pushing to a feed that holds
 * `limit` items and lets that subscriber catch up from the database once it has drained (see
 * streams.ts and catch-up.ts), so a burst never costs more than `limit` items of memory
 * per subscriber and never slows the others. A subscriber that stops pulling altogether is cut
 * off by the hub.
 */
import { DomainError } from '../../service/kernel/errors.js';

export class SlowConsumerError extends DomainError {
  override name = 'SlowConsumerError';
  constructor(stalledMs: number) {
    super(
      'SLOW_CONSUMER',
      `this subscription read nothing for ${stalledMs} ms while events waited, and was ended; subscribe again with the cursor of the last event you received`,
    );
  }
}

export class Feed<T> implements AsyncIterableIterator<T> {
  private readonly items: T[] = [];
  private waiting: ((r: IteratorResult<T>) => void) | undefined;
  private failWaiting: ((e: unknown) => void) | undefined;
  private drainWaiters: { below: number; resolve: () => void }[] = [];
  private ended = false;
  private error: unknown;
  /** When the consumer last took an item (or asked for one). */
  lastPullAt = Date.now();

  constructor(
    /** Called once when the feed ends for any reason (client left, complete, failure). */
    private readonly onEnd: () => void,
    /** Keep only the newest queued item (run progress: the latest state is what matters). */
    private readonly coalesce = false,
  ) {}

  private also: (() => void)[] = [];

  /** Calls `fn` once when the feed ends (at once if it has): for watchers beside its owner. */
  whenEnded(fn: () => void): void {
    if (this.ended) fn();
    else this.also.push(fn);
  }

  private ending(): void {
    this.onEnd();
    const also = this.also;
    this.also = [];
    for (const fn of also) fn();
  }

  get closed(): boolean {
    return this.ended;
  }

  /** Items queued and not yet taken. */
  get size(): number {
    return this.items.length;
  }

  push(item: T): void {
    if (this.ended) return;
    if (this.waiting) {
      const resolve = this.waiting;
      this.waiting = this.failWaiting = undefined;
      resolve({ value: item, done: false });
      return;
    }
    if (this.coalesce && this.items.length > 0) this.items[this.items.length - 1] = item;
    else this.items.push(item);
  }

  /** Resolves once fewer than `below` items are queued (or the feed ended). */
  drained(below: number): Promise<void> {
    if (this.items.length < below || this.ended) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push({ below, resolve }));
  }

  private notifyDrain() {
    if (this.drainWaiters.length === 0) return;
    const still: typeof this.drainWaiters = [];
    for (const w of this.drainWaiters) {
      if (this.items.length < w.below || this.ended) w.resolve();
      else still.push(w);
    }
    this.drainWaiters = still;
  }

  /** Ends the stream after what is queued (a run that finished). */
  complete(): void {
    if (this.ended) return;
    this.ended = true;
    this.ending();
    this.notifyDrain();
    if (this.waiting && this.items.length === 0) {
      const resolve = this.waiting;
      this.waiting = this.failWaiting = undefined;
      resolve({ value: undefined, done: true });
    }
  }

  /** Ends the stream with an error, dropping what is queued. */
  fail(error: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.error = error;
    this.items.length = 0;
    this.ending();
    this.notifyDrain();
    if (this.failWaiting) {
      const reject = this.failWaiting;
      this.waiting = this.failWaiting = undefined;
      this.error = undefined;
      reject(error);
    }
  }

  next(): Promise<IteratorResult<T>> {
    this.lastPullAt = Date.now();
    if (this.items.length > 0) {
      const value = this.items.shift()!;
      this.notifyDrain();
      return Promise.resolve({ value, done: false });
    }
    if (this.error !== undefined) {
      const error = this.error;
      this.error = undefined;
      return Promise.reject(error);
    }
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.waiting = resolve;
      this.failWaiting = reject;
    });
  }

  return(): Promise<IteratorResult<T>> {
    this.items.length = 0;
    this.error = undefined;
    this.complete();
    if (this.waiting) {
      const resolve = this.waiting;
      this.waiting = this.failWaiting = undefined;
      resolve({ value: undefined, done: true });
    }
    return Promise.resolve({ value: undefined, done: true });
  }

  throw(error?: unknown): Promise<IteratorResult<T>> {
    this.fail(error);
    return this.next().catch(() => ({ value: undefined, done: true }));
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}
