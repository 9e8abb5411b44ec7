/**
 * Requests in flight per API key, in this process's memory: at most `inFlight` of a key's
 * requests run at once; the next ones wait their turn, first come first served, up to `waiting`
 * of them; past that a request is refused.
 *
 * The gateway has one thread. A key's request rate is bounded (a token bucket), but the requests
 * a bucket lets through may all arrive at once (fifty clients answered together come back
 * together), and fifty queries' work queued on the thread at once is what another key's request
 * then waits behind. Running a key's requests a few at a time spreads that work out: another key
 * waits behind at most `inFlight` of them. A key's honest bursts (a screen's few queries, a
 * frontend's users) still run, a little later, instead of being refused.
 */
export interface KeySlotOptions {
  /** Requests of one key running at once. */
  inFlight: number;
  /** Requests of one key waiting for a place at once; past it a request is refused. */
  waiting: number;
}

/**
 * A request's place: `release` gives it up (idempotent), whether it is running or still waiting
 * (then `run` is never called).
 */
export type SlotRelease = () => void;

interface KeyState {
  running: number;
  queue: Array<{ run: () => void; gone: boolean }>;
}

export class KeySlots {
  private readonly keys = new Map<string, KeyState>();

  constructor(private readonly options: KeySlotOptions) {}

  /**
   * Calls `run` once `key` has a free place (at once when it has one now) and returns the place's
   * release; returns undefined when the key already has `waiting` requests waiting (nothing is
   * taken, `run` is never called).
   */
  enter(key: string, run: () => void): SlotRelease | undefined {
    let state = this.keys.get(key);
    if (!state) this.keys.set(key, (state = { running: 0, queue: [] }));
    if (state.running < this.options.inFlight) {
      state.running++;
      run();
      return this.leaving(key, state);
    }
    if (state.queue.length >= this.options.waiting) return undefined;
    const waiter = { run, gone: false };
    state.queue.push(waiter);
    let started = false;
    const leave = this.leaving(key, state);
    waiter.run = () => {
      started = true;
      run();
    };
    return () => {
      if (started) return leave();
      if (waiter.gone) return;
      waiter.gone = true;
      state.queue.splice(state.queue.indexOf(waiter), 1);
      this.forget(key, state);
    };
  }

  /** Keys with requests running or waiting (for tests). */
  get size(): number {
    return this.keys.size;
  }

  private leaving(key: string, state: KeyState): SlotRelease {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      // The place passes straight to the next waiter, so a newcomer cannot take it first.
      const next = state.queue.shift();
      if (next) {
        next.gone = true;
        next.run();
        return;
      }
      state.running--;
      this.forget(key, state);
    };
  }

  private forget(key: string, state: KeyState): void {
    if (state.running === 0 && state.queue.length === 0 && this.keys.get(key) === state) this.keys.delete(key);
  }
}
