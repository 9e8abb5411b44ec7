/**
 * Token buckets by name (an API key's id, a client address), in this process's memory.
 *
 * A bucket holds up to `capacity` tokens and gains `perSecond` a second. A bucket that has filled
 * up again is the same as no bucket at all, so full ones are dropped (swept at most once per
 * `sweepMs`, on use): the map holds only names that spent tokens lately, however many names come
 * and go. Past `maxEntries` the oldest entries go first, which can hand a name a fresh bucket
 * early: the map's size is the bound that must hold, a flood of names must not grow it.
 */
export interface TokenBucketOptions {
  capacity: number;
  perSecond: number;
  maxEntries?: number;
  /** Monotonic milliseconds. Default performance.now. */
  now?: () => number;
}

interface Bucket {
  tokens: number;
  at: number;
}

const SWEEP_MS = 10_000;

export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();
  private readonly perMs: number;
  private readonly now: () => number;
  private readonly maxEntries: number;
  private lastSweep: number;

  constructor(private readonly options: TokenBucketOptions) {
    this.perMs = options.perSecond / 1000;
    this.now = options.now ?? (() => performance.now());
    this.maxEntries = options.maxEntries ?? 100_000;
    this.lastSweep = this.now();
  }

  /** How many names have a bucket (for tests and metrics). */
  get size(): number {
    return this.buckets.size;
  }

  /** Takes one token: 0 when taken, else the milliseconds until one is there (nothing taken). */
  take(name: string): number {
    const now = this.now();
    const bucket = this.level(name, now);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      this.keep(name, bucket, now);
      return 0;
    }
    return this.waitMs(bucket.tokens);
  }

  /** 0 when a token is there (none taken), else the milliseconds until one is. */
  check(name: string): number {
    const bucket = this.buckets.get(name);
    if (!bucket) return 0;
    const tokens = this.level(name, this.now()).tokens;
    return tokens >= 1 ? 0 : this.waitMs(tokens);
  }

  /**
   * Takes one token whether or not it is there, down to `-capacity` at most: spending past empty
   * (requests that were under way together) delays the next token, up to twice the time the
   * bucket takes to fill.
   */
  debit(name: string): void {
    const now = this.now();
    const bucket = this.level(name, now);
    bucket.tokens = Math.max(-this.options.capacity, bucket.tokens - 1);
    this.keep(name, bucket, now);
  }

  private waitMs(tokens: number): number {
    return Math.max(1, Math.ceil((1 - tokens) / this.perMs));
  }

  private level(name: string, now: number): Bucket {
    const bucket = this.buckets.get(name);
    if (!bucket) return { tokens: this.options.capacity, at: now };
    bucket.tokens = Math.min(this.options.capacity, bucket.tokens + (now - bucket.at) * this.perMs);
    bucket.at = now;
    return bucket;
  }

  private keep(name: string, bucket: Bucket, now: number): void {
    if (!this.buckets.has(name)) {
      // Not a sweep here: at the cap, a flood of new names would make every request walk the map.
      while (this.buckets.size >= this.maxEntries) this.buckets.delete(this.buckets.keys().next().value!);
      this.buckets.set(name, bucket);
    }
    if (now - this.lastSweep >= SWEEP_MS) this.sweep(now);
  }

  /** Drops every bucket that has filled up again. */
  sweep(now = this.now()): void {
    this.lastSweep = now;
    for (const [name, bucket] of this.buckets)
      if (bucket.tokens + (now - bucket.at) * this.perMs >= this.options.capacity) this.buckets.delete(name);
  }
}
