/**
 * The engine's background loops in one shape: a pass now and then, one at a time. A pass that
 * returns a number asks for the next one in that many ms (the scheduler times the next cron
 * occurrence); otherwise the next comes `everyMs` after this one ended. `poke` asks for a pass
 * now: it shares one about to start, or queues one more after the pass in flight (which may have
 * looked before what the poke is about). Timers are unreferenced: a loop never keeps a process up.
 */
export interface PollLoop {
  /** Starts the loop; resolves when its first pass is done. */
  start(): Promise<void>;
  /** A pass as soon as possible, after the one in flight if any; resolves when it is done. */
  poke(): Promise<void>;
  /** Stops the loop; resolves when the pass in flight (and one queued) is done. */
  stop(): Promise<void>;
}

export function createPollLoop(options: {
  everyMs: number;
  /** One pass. It reports its own failures; one it throws goes to `onError`. */
  pass: () => Promise<number | void>;
  onError: (error: unknown) => void;
}): PollLoop {
  let running = false;
  let current: Promise<void> | undefined;
  let queued: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;

  function run(): Promise<void> {
    clearTimeout(timer);
    const pass = (async () => {
      let next: number | void = undefined;
      try {
        next = await options.pass();
      } catch (error) {
        options.onError(error);
      } finally {
        current = undefined;
        if (running) {
          timer = setTimeout(() => void poke(), next ?? options.everyMs);
          timer.unref();
        }
      }
    })();
    current = pass;
    return pass;
  }

  function poke(): Promise<void> {
    if (!running) return Promise.resolve();
    if (!current) return run();
    queued ??= current.then(() => {
      queued = undefined;
      if (!running) return;
      return current ?? run();
    });
    return queued;
  }

  return {
    start() {
      if (running) return Promise.resolve();
      running = true;
      return run();
    },
    poke,
    async stop() {
      running = false;
      clearTimeout(timer);
      await queued;
      await current;
    },
  };
}
