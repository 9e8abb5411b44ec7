/**
 * The live hub's stream subscriptions (events by workspace, findings by run) and the live
 * delivery: what settled in (from, to] is read once, a page at a time, for all of them, and
 * pushed to each one that matches and is live. A live one whose client falls `feedLimit` rows
 * behind (a burst, a slow network) drops back to catching up (./catch-up.ts) from the last
 * row it was given, so memory per subscriber stays bounded and a slow client never slows the
 * others.
 */
import type pg from 'pg';
import {
  eventsInRange,
  findingsInRange,
  matchingEvents,
  type EventMatch,
  type EventRow,
  type FindingRow,
  type Positions,
} from '../../db/statements/events.js';
import { assertCursorKept } from '../../service/live/live.js';
import type { Observer } from '../../service/kernel/observer.js';
import { Feed } from './feed.js';
import { addTo, countIn, removeFrom } from './shared.js';
import { PAGE, type CatchUp, type StreamSub } from './catch-up.js';
import type { Settle } from './settle.js';

interface EventSub extends StreamSub<EventRow> {
  match: EventMatch;
}

export interface StreamsOptions {
  pool: pg.Pool;
  settle: Settle;
  catchUp: CatchUp;
  observer: Observer;
  /** Most undelivered rows one subscription holds in memory; past that it catches up. */
  feedLimit: number;
}

export class Streams {
  private readonly events = new Map<string, Set<EventSub>>(); // by workspace
  // The same subscriptions to hand rows to: those of one job by its id, the others by workspace.
  // A delivery looks at the subscriptions a row can match, not at every one of its workspace:
  // thousands of subscribers each watching their own job cost a lookup a row, not thousands.
  private readonly eventsOfJob = new Map<string, Set<EventSub>>();
  private readonly eventsOfWorkspace = new Map<string, Set<EventSub>>();
  private readonly findings = new Map<string, Set<StreamSub<FindingRow>>>(); // by run

  constructor(private readonly options: StreamsOptions) {}

  /** Whether any stream subscription is open. */
  get any(): boolean {
    return this.events.size > 0 || this.findings.size > 0;
  }

  openEvents(match: EventMatch, after: bigint | undefined, cursorOf: (id: bigint) => string, cutOff?: () => void): Feed<EventRow> {
    const { pool } = this.options;
    const sub: EventSub = {
      match,
      live: false,
      last: 0n,
      position: 'events',
      cutOff,
      read: async (from, upTo, limit) => {
        const { rows, prunedThrough } = await matchingEvents(pool, match, from, upTo, limit);
        // Events after `from` may have been pruned (retention) since the stream was authorised
        // or while it caught up: going on would skip them silently.
        assertCursorKept(from, prunedThrough, cursorOf);
        return rows;
      },
      feed: new Feed<EventRow>(() => {
        removeFrom(this.events, match.workspaceId, sub);
        if (match.jobId === undefined) removeFrom(this.eventsOfWorkspace, match.workspaceId, sub);
        else removeFrom(this.eventsOfJob, match.jobId, sub);
      }),
    };
    addTo(this.events, match.workspaceId, sub);
    if (match.jobId === undefined) addTo(this.eventsOfWorkspace, match.workspaceId, sub);
    else addTo(this.eventsOfJob, match.jobId, sub);
    this.begin(sub, after);
    return sub.feed;
  }

  openFindings(runId: string, after: bigint | undefined, cutOff?: () => void): Feed<FindingRow> {
    const { pool } = this.options;
    const sub: StreamSub<FindingRow> = {
      live: false,
      last: 0n,
      position: 'findings',
      cutOff,
      read: (from, upTo, limit) => findingsInRange(pool, from, upTo, [runId], limit),
      feed: new Feed<FindingRow>(() => {
        removeFrom(this.findings, runId, sub);
      }),
    };
    addTo(this.findings, runId, sub);
    this.begin(sub, after);
    return sub.feed;
  }

  /** Pushes what settled in (from, to] to the live subscriptions that match. */
  async deliver(from: Positions, to: Positions): Promise<void> {
    if (to.events > from.events && this.events.size > 0) await this.deliverEvents(from.events, to.events);
    if (to.findings > from.findings && this.findings.size > 0) await this.deliverFindings(from.findings, to.findings);
  }

  /** Stream subscriptions open: `live` past their replay, and all of them. */
  stats(): { events: number; findings: number; open: number } {
    const live = (sub: { live: boolean }) => sub.live;
    return {
      events: countIn(this.events, live),
      findings: countIn(this.findings, live),
      open: countIn(this.events) + countIn(this.findings),
    };
  }

  /** Ends every stream subscription (the hub stops). */
  completeAll(): void {
    for (const set of [...this.events.values(), ...this.findings.values()]) for (const s of [...set]) s.feed.complete();
  }

  private begin<T extends { id: number }>(sub: StreamSub<T>, after: bigint | undefined): void {
    this.options.settle.need();
    void this.options.catchUp.start(sub, after);
  }

  private async deliverEvents(after: bigint, upTo: bigint): Promise<void> {
    for (let cursor = after; cursor < upTo;) {
      const rows = await eventsInRange(this.options.pool, cursor, upTo, [...this.events.keys()], PAGE);
      for (const row of rows) {
        for (const sub of this.eventsOfWorkspace.get(row.workspace_id) ?? [])
          if (matches(sub.match, row)) this.offer(sub, row, BigInt(row.id));
        if (row.job_id === null) continue;
        for (const sub of this.eventsOfJob.get(row.job_id) ?? []) if (matches(sub.match, row)) this.offer(sub, row, BigInt(row.id));
      }
      if (rows.length < PAGE) break;
      cursor = BigInt(rows.at(-1)!.id);
    }
  }

  private async deliverFindings(after: bigint, upTo: bigint): Promise<void> {
    for (let cursor = after; cursor < upTo;) {
      const rows = await findingsInRange(this.options.pool, cursor, upTo, [...this.findings.keys()], PAGE);
      for (const row of rows) for (const sub of this.findings.get(row.run_id) ?? []) this.offer(sub, row, BigInt(row.id));
      if (rows.length < PAGE) break;
      cursor = BigInt(rows.at(-1)!.id);
    }
  }

  private offer<T extends { id: number }>(sub: StreamSub<T>, row: T, id: bigint): void {
    if (!sub.live || id <= sub.last) return;
    if (sub.feed.size >= this.options.feedLimit) {
      // Too far behind to keep in memory: it reads the rest itself once its client has drained.
      sub.live = false;
      void this.options.catchUp.run(sub);
      return;
    }
    sub.last = id;
    sub.feed.push(row);
    this.options.observer.eventsDelivered(1);
  }
}

function matches(match: EventMatch, row: EventRow): boolean {
  return (
    match.topic === row.topic &&
    (match.jobId === undefined || match.jobId === row.job_id) &&
    (match.endpointId === undefined || match.endpointId === row.endpoint_id) &&
    (match.endpointType === undefined ||
      match.endpointType.internal === (row.endpoint_id !== null && match.endpointType.ids.has(row.endpoint_id))) &&
    (match.name === undefined || match.name === row.name)
  );
}
