/**
 * One stream subscription (events or findings) and its handover from replay to live. A
 * subscription is either LIVE (the hub pushes what it fetched for everyone, ./streams.ts)
 * or CATCHING UP (it reads its own rows from the database, a page at a time, as fast as its
 * client takes them). It turns live only when it has read up to the current horizon
 * (./settle.ts), with no await between that check and the switch, so the handover has no
 * gap and no overlap. A client that takes nothing for `stallMs` while rows wait is cut off
 * (SLOW_CONSUMER); it resumes with its last cursor.
 */
import type { Logger } from '../../log.js';
import type { Positions } from '../../db/statements/events.js';
import { isConnectionError } from '../../db/unavailable.js';
import type { Observer } from '../../service/kernel/observer.js';
import { type Feed, SlowConsumerError } from './feed.js';
import type { Lifetime } from './shared.js';
import type { Settle } from './settle.js';

/** Most rows read or fetched at once. */
export const PAGE = 5_000;

export interface StreamSub<T> {
  feed: Feed<T>;
  /** LIVE: the hub pushes rows above `last`. Otherwise the subscription reads its own. */
  live: boolean;
  /** The id of the last row given to the feed (or the position it starts after). */
  last: bigint;
  /** Reads this subscription's rows in (after, upTo], oldest first, at most a page. */
  read: (after: bigint, upTo: bigint, limit: number) => Promise<T[]>;
  position: keyof Positions;
  /** Cuts the client's connection off (a WebSocket is closed), when it stalls. */
  cutOff: (() => void) | undefined;
}

export interface CatchUpOptions {
  settle: Settle;
  lifetime: Lifetime;
  log: Logger;
  observer: Observer;
  /** Most undelivered rows one subscription holds in memory. */
  feedLimit: number;
  /** A subscription whose client takes nothing for this long while rows wait is cut off. */
  stallMs: number;
}

const idOf = (row: { id: number }) => BigInt(row.id);

export class CatchUp {
  constructor(private readonly options: CatchUpOptions) {}

  /** Starts a stream subscription: from `after` (catching up first), or live from the horizon. */
  async start<T extends { id: number }>(sub: StreamSub<T>, after: bigint | undefined): Promise<void> {
    const { settle } = this.options;
    try {
      await settle.ready;
      if (sub.feed.closed) return;
      const upTo = settle.horizon![sub.position];
      if (after === undefined || after >= upTo) {
        sub.last = after !== undefined && after > upTo ? after : upTo;
        sub.live = true;
        return;
      }
      sub.last = after;
    } catch (error) {
      return sub.feed.fail(error);
    }
    await this.run(sub);
  }

  /**
   * Reads a subscription's rows from the database from its `last` up to the horizon, a page
   * at a time, waiting for its client to take each page; turns it live when it has read
   * everything up to the current horizon (no await between that check and the switch).
   */
  async run<T extends { id: number }>(sub: StreamSub<T>): Promise<void> {
    const { settle, lifetime, log } = this.options;
    for (let failures = 0; !sub.feed.closed && !lifetime.stopped;) {
      try {
        await settle.ready;
        await this.untilDrained(sub);
        if (sub.feed.closed) return;
        const upTo = settle.horizon![sub.position];
        if (sub.last >= upTo) {
          sub.live = true;
          return;
        }
        await this.readPage(sub, upTo);
        failures = 0;
      } catch (error) {
        // The database going away (a restart, a killed connection) is waited out: the
        // subscription continues where it was once queries work again.
        if (!isConnectionError(error)) return sub.feed.fail(error);
        const delay = Math.min(5_000, 100 * 2 ** failures++);
        log.warn(`live: catching a subscription up failed (${(error as Error).message}); retrying in ${delay} ms`);
        await new Promise((r) => setTimeout(r, delay).unref());
      }
    }
  }

  private async readPage<T extends { id: number }>(sub: StreamSub<T>, upTo: bigint): Promise<void> {
    const { feedLimit, observer } = this.options;
    // At most what fits under the limit: memory per subscriber stays at `feedLimit` rows.
    const room = Math.max(1, Math.min(PAGE, feedLimit - sub.feed.size));
    const rows = await sub.read(sub.last, upTo, room);
    for (const row of rows) {
      sub.last = idOf(row);
      sub.feed.push(row);
    }
    observer.eventsDelivered(rows.length);
    if (rows.length < room) sub.last = upTo > sub.last ? upTo : sub.last;
  }

  /** Waits until the feed is half empty; a client that takes nothing for `stallMs` is cut off. */
  private async untilDrained<T>(sub: StreamSub<T>): Promise<void> {
    const { feedLimit, stallMs, log, observer } = this.options;
    for (;;) {
      if (sub.feed.size < feedLimit / 2 || sub.feed.closed) return;
      let timer: NodeJS.Timeout | undefined;
      const stalled = new Promise<'stalled'>(
        (r) => (timer = setTimeout(() => r('stalled'), Math.max(10, sub.feed.lastPullAt + stallMs - Date.now()))),
      );
      const result = await Promise.race([sub.feed.drained(feedLimit / 2).then(() => 'drained' as const), stalled]);
      clearTimeout(timer);
      if (result === 'stalled' && Date.now() - sub.feed.lastPullAt >= stallMs && !sub.feed.closed) {
        log.warn(`live: a subscriber took nothing for ${stallMs} ms with ${sub.feed.size} rows waiting; ending it`);
        sub.feed.fail(new SlowConsumerError(stallMs));
        observer.slowConsumerCut();
        sub.cutOff?.();
        return;
      }
    }
  }
}
