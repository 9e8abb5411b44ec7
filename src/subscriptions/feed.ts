/**
 * One subscriber's queue: the hub pushes, graphql-js pulls (an AsyncIterator). Unbounded
 * queues are how one stuck subscriber takes a gateway down, so a feed holds at most `limit`
 * undelivered items; past that it ends with SLOW_CONSUMER and the client resubscribes with its
 * last cursor (nothing is lost: the events are rows).
 */
import { DomainError } from '../service/errors.js';

export class SlowConsumerError extends DomainError {
  override name = 'SlowConsumerError';
  constructor(limit: number) {
    super('SLOW_CONSUMER', `this subscription fell more than ${limit} events behind and was ended; subscribe again with the cursor of the last event you received`);
  }
}

export class Feed<T> implements AsyncIterableIterator<T> {
  private readonly items: T[] = [];
  private waiting: ((r: IteratorResult<T>) => void) | undefined;
  private failWaiting: ((e: unknown) => void) | undefined;
  private ended = false;
  private error: unknown;

  constructor(
    private readonly limit: number,
    /** Called once when the feed ends for any reason (client left, complete, failure). */
    private readonly onEnd: () => void,
  ) {}

  get closed(): boolean {
    return this.ended;
  }

  push(item: T): void {
    if (this.ended) return;
    if (this.waiting) {
      const resolve = this.waiting;
      this.waiting = this.failWaiting = undefined;
      resolve({ value: item, done: false });
      return;
    }
    if (this.items.length >= this.limit) return this.fail(new SlowConsumerError(this.limit));
    this.items.push(item);
  }

  /** Ends the stream after what is queued (a run that finished). */
  complete(): void {
    if (this.ended) return;
    this.ended = true;
    this.onEnd();
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
    this.onEnd();
    if (this.failWaiting) {
      const reject = this.failWaiting;
      this.waiting = this.failWaiting = undefined;
      reject(error);
    }
  }

  next(): Promise<IteratorResult<T>> {
    if (this.items.length > 0) return Promise.resolve({ value: this.items.shift()!, done: false });
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
