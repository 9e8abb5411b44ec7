/**
 * A worker's due timer (claim-loop.ts): when to claim next for work that is due later. Two
 * sources arm it:
 *  - reads of the next due time (after a claim that came back short, after a retry was scheduled),
 *    on the database's clock, which see everything committed before they were sent;
 *  - hints of work created due later (the insert trigger's `due:<ms>`, migration 000063), each sent
 *    after its rows committed, so a worker arms its timer without a claim that would find nothing.
 * A read replaces the timer (it knows better than the one before it), unless a later read has
 * answered already: then it can only bring the timer forward. A hint heard while a read was in
 * flight may name a row the read did not see, so its time is kept until a read sent after it
 * answers or a claim sent after it is due takes it.
 */
import { performance } from 'node:perf_hooks';

export interface DueTimerDeps {
  /** The next due time, in ms from now on the database's clock; null when nothing is ahead. */
  read(): Promise<number | null>;
  /** The poll's period: the timer is never armed further out (the poll claims then anyway). */
  pollMs: number;
  running(): boolean;
  /** Claims (the timer fired). */
  kick(): void;
  /** A read failed (the caller retries when the database is unreachable). */
  readFailed(error: unknown): void;
  /** The clock of `claimed`'s argument and of the timer. Default: performance.now. */
  now?: () => number;
}

export interface DueTimer {
  /** Reads the next due time and arms the timer for it. */
  arm(): Promise<void>;
  /** Work was created due in `inMs` (a hint). */
  hinted(inMs: number): void;
  /** A claim sent at `sentAt` (see `now`) answered: hinted work due by then was its to take. */
  claimed(sentAt: number): void;
  /** Disarms it, and forgets the hints (at stop). */
  clear(): void;
}

export function createDueTimer(deps: DueTimerDeps): DueTimer {
  const now = deps.now ?? (() => performance.now());
  let timer: NodeJS.Timeout | undefined;
  /** When the timer fires (`now`); Infinity when it is not armed. */
  let dueAt = Infinity;
  /** The earliest hinted time no read or claim has covered yet; Infinity when none. */
  let hintedAt = Infinity;
  let hintsHeard = 0;
  /** Reads sent, and the latest of them whose answer armed the timer. */
  let readsSent = 0;
  let readApplied = 0;

  function set(at: number) {
    clearTimeout(timer);
    dueAt = at;
    timer = setTimeout(
      () => {
        timer = undefined;
        dueAt = Infinity;
        deps.kick();
      },
      Math.max(0, at - now()),
    );
    timer.unref();
  }

  /** Arms the timer for `at` unless it fires earlier already. */
  function bringForward(at: number) {
    if (timer && dueAt <= at) return;
    set(at);
  }

  return {
    async arm() {
      const read = ++readsSent;
      const hintsBefore = hintsHeard;
      let inMs: number | null;
      try {
        inMs = await deps.read();
      } catch (error) {
        if (deps.running()) deps.readFailed(error);
        return;
      }
      if (!deps.running()) return;
      const latest = read > readApplied;
      // Every hint heard before this read was sent came after its rows' commit: the read saw them.
      if (latest && hintsHeard === hintsBefore) hintedAt = Infinity;
      // The read's round trip makes the timer late by as much, at most.
      const at = Math.min(inMs === null ? Infinity : now() + Math.max(0, Math.min(deps.pollMs, inMs)), hintedAt);
      if (at === Infinity) return;
      if (!latest) return bringForward(at);
      readApplied = read;
      set(at);
    },
    hinted(inMs) {
      // The poll wakes the worker sooner, and its claim, when short, reads the due time.
      if (!deps.running() || inMs >= deps.pollMs) return;
      const at = now() + inMs;
      hintsHeard++;
      hintedAt = Math.min(hintedAt, at);
      bringForward(at);
    },
    claimed(sentAt) {
      if (hintedAt <= sentAt) hintedAt = Infinity;
    },
    clear() {
      clearTimeout(timer);
      timer = undefined;
      dueAt = Infinity;
      hintedAt = Infinity;
    },
  };
}
