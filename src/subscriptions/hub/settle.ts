/**
 * The live hub's horizon: the highest event and finding ids it has fetched or is fetching for
 * its live subscriptions. A cycle reads the sequences and the open writers, offers them to the
 * stable watermark (./watermark.ts), and moves the horizon up to what settled, handing the new
 * range to `deliver`. Hints that arrive during a cycle run it once more rather than in
 * parallel; while a candidate waits for open writers, a timer looks again soon.
 */
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import type { Logger } from '../../log.js';
import { readPositions, type Positions } from '../../db/statements/events.js';
import type { Lifetime } from './shared.js';
import { Watermark } from './watermark.js';

export interface SettleOptions {
  pool: pg.Pool;
  log: Logger;
  /** How soon to try again after a failed cycle. */
  pollMs: number;
  /** How soon to look again while the watermark waits for open transactions. */
  settleMs: number;
  lifetime: Lifetime;
  /** Delivers (from, to] to the live subscriptions; when it throws, the range is delivered again. */
  deliver(from: Positions, to: Positions): Promise<void>;
}

export class Settle {
  private readonly watermark = new Watermark<Positions>();
  /** Everything at or below is delivered or being fetched; undefined until the first settle. */
  private current: Positions | undefined;
  private firstSettle: Promise<void> = Promise.resolve();
  /** Set while someone waits for the first settle. */
  private markReady: (() => void) | undefined;
  /** A cycle is running; `again`: a hint came meanwhile, so it runs once more. */
  private readonly running = { cycling: false, again: false };
  private timer: NodeJS.Timeout | undefined;
  private warnedStuck = false;
  /** When reading events began to fail (performance.now()), while it fails: said once, and once when it reads again. */
  private failingSince: number | undefined;

  constructor(private readonly options: SettleOptions) {}

  get horizon(): Positions | undefined {
    return this.current;
  }

  /** Resolves once the horizon is known (at once if it is, or nobody asked for it yet). */
  get ready(): Promise<void> {
    return this.firstSettle;
  }

  /** Whether someone waits for the first settle. */
  get awaited(): boolean {
    return this.markReady !== undefined;
  }

  /** Starts finding the horizon, if it is not known yet; `ready` resolves when it is. */
  need(): void {
    if (this.current) return;
    if (!this.markReady) this.firstSettle = new Promise<void>((r) => (this.markReady = r));
    void this.cycle();
  }

  async cycle(): Promise<void> {
    const { log, lifetime } = this.options;
    if (lifetime.stopped) return;
    if (this.running.cycling) {
      this.running.again = true;
      return;
    }
    this.running.cycling = true;
    try {
      do {
        this.running.again = false;
        await this.step();
      } while (this.running.again && !lifetime.stopped);
      if (this.failingSince !== undefined) {
        log.warn(`live: reading new events again after ${((performance.now() - this.failingSince) / 1000).toFixed(1)} s`);
        this.failingSince = undefined;
      }
    } catch (error) {
      // Once per outage, not once per retry (every pollMs: a line a second through a long outage).
      if (this.failingSince === undefined) {
        this.failingSince = performance.now();
        log.warn(`live: reading new events failed (${(error as Error).message}); trying again until it reads`);
      }
      this.schedule(this.options.pollMs);
    } finally {
      this.running.cycling = false;
    }
    this.lookAgainIfWaiting();
  }

  /** Runs a cycle in `ms`, unless one is already scheduled. */
  schedule(ms: number): void {
    if (this.timer || this.options.lifetime.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.cycle();
    }, ms);
    this.timer.unref();
  }

  stop(): void {
    clearTimeout(this.timer);
  }

  private lookAgainIfWaiting(): void {
    const { watermark } = this;
    if (!watermark.waiting) {
      this.warnedStuck = false;
      return;
    }
    // Look again soon, less often the longer a writer stays open (each look reads pg_locks).
    this.schedule(Math.min(200, this.options.settleMs * 2 ** Math.floor(watermark.oldestWait() / 100)));
    const waited = watermark.oldestWait();
    if (waited > 10_000 && !this.warnedStuck) {
      this.warnedStuck = true;
      this.options.log.warn(
        `live: events have waited ${Math.round(waited / 1000)} s for an open transaction to end; a long transaction that wrote events or findings delays live delivery after it`,
      );
    }
  }

  private async step(): Promise<void> {
    const read = await readPositions(this.options.pool);
    const settled = this.watermark.offer(read.positions, read.writers);
    if (!settled) return;
    if (!this.current) {
      this.current = settled;
      this.markReady?.();
      this.markReady = undefined;
      return;
    }
    const from = this.current;
    const to: Positions = { events: max(from.events, settled.events), findings: max(from.findings, settled.findings) };
    this.current = to; // new subscribers replay up to here; the fetch below delivers above `from`
    try {
      await this.options.deliver(from, to);
    } catch (error) {
      // Deliver (from, to] again next time: what got through is skipped (ids <= each one's `last`).
      this.current = from;
      throw error;
    }
  }
}

function max(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}
