/**
 * The stable watermark: the highest event id below which every event is committed (or rolled
 * back for good), so a reader can deliver ids in order without skipping one.
 *
 * Ids come from a sequence when the row is written, not when its transaction commits: id 101
 * can be visible while id 100's transaction is still open. Reading "id > last" would then skip
 * 100 forever. So every writer of events or findings first takes a shared advisory lock (the
 * writer mark, migration 000009), before it takes an id, and holds it until it ends. A reader
 * reads the sequence's last value V, then (in a later statement) the open transactions holding
 * the mark. Every transaction holding an id <= V took its mark before V was read, so it is
 * either finished or in that list. Once none of the listed ones still holds the mark, every
 * id <= V is settled and V is the new watermark. With no writer open, V is settled at once.
 *
 * This is the idea behind PgQ's snapshot-based batches, narrowed to the transactions that write
 * events: an open writer delays later events until it ends (a reader logs when that lasts
 * long); other open transactions, however long, do not.
 *
 * It relies on two things that hold today and must keep holding: the id sequences hand out one
 * value at a time (CACHE 1, the identity default: a cached value would be taken before the
 * mark), and no writer uses two-phase commit (a prepared transaction's locks move to a holder
 * with a different virtual transaction id).
 */

/** The sequence positions read before a list of open writers: settled once those have ended. */
interface Candidate<P> {
  positions: P;
  writers: string[];
  seenAt: number;
}

/**
 * Tracks candidates until they settle. `offer` takes the positions just read and the writers
 * open after that read (their virtual transaction ids), and returns the newest positions that
 * are now settled (or undefined).
 */
export class Watermark<P> {
  private pending: Candidate<P>[] = [];

  offer(positions: P, writers: string[], now = Date.now()): P | undefined {
    const open = new Set(writers);
    let settled: P | undefined;
    while (this.pending.length > 0 && this.pending[0]!.writers.every((w) => !open.has(w))) settled = this.pending.shift()!.positions;
    if (writers.length === 0) {
      this.pending = [];
      return positions;
    }
    // Candidates pile up behind a long writer. The oldest settles first, so it is never dropped;
    // at the cap the newest is replaced (it settles no earlier than the one replacing it).
    if (this.pending.length >= 64) this.pending[this.pending.length - 1] = { positions, writers, seenAt: now };
    else this.pending.push({ positions, writers, seenAt: now });
    return settled;
  }

  /** Whether a candidate is waiting to settle (the reader should look again soon). */
  get waiting(): boolean {
    return this.pending.length > 0;
  }

  /** How long the oldest waiting candidate has waited, in ms. */
  oldestWait(now = Date.now()): number {
    return this.pending.length ? now - this.pending[0]!.seenAt : 0;
  }
}
