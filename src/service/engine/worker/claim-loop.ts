/**
 * A worker's claim loop (worker.ts): claims due executions in batches sized to the free slots,
 * hands each to the attempt runner, and decides when to claim again. When a claim comes back
 * short the queue is empty for this worker: it claims again on a hint only (a notification, the
 * due timer, the poll, or a recorded outcome that can free an endpoint's concurrency slot or a
 * serial job's turn), not every time a slot frees. A hint of work due later (a delayed execution
 * created) arms the due timer instead of claiming. While the database is unreachable the claim
 * is retried on a timer, at most a second apart. A claim whose answer was lost with its connection
 * is handed back before the next claim (lost-claims.ts).
 */
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import {
  anyLimitedEndpoint,
  ClaimAnswerLost,
  claimExecutions,
  claimOrder,
  nextDueInMs,
  OLDEST_EVERY,
  type ClaimedExecution,
} from '../../../db/statements/claim.js';
import type { Logger } from '../../../log.js';
import type { Availability } from '../runtime/availability.js';
import type { HandlerRegistry } from '../delivery/handler-registry.js';
import { createDueTimer } from './due-timer.js';
import { createLostClaims, type LostClaims } from './lost-claims.js';

export interface ClaimLoopDeps {
  id: string;
  pool: pg.Pool;
  log: Logger;
  handlers: HandlerRegistry;
  availability: Availability;
  concurrency: number;
  batchSize: number;
  leaseMs: number;
  pollMs: number;
  /** Whether the worker runs. */
  running(): boolean;
  /** Attempts running (what `concurrency` bounds). */
  executing(): number;
  /** Claimed executions waiting for a slot (a batch size above the concurrency). */
  waiting(): number;
  /** Leases held: attempts running, and attempts ended whose outcome is not recorded yet. */
  held(): number;
  /** A claim sent at `sentAt` took these executions. */
  claimed(sentAt: number, claimed: ClaimedExecution[]): void;
}

/** What the claim loop knows between claims. */
interface ClaimState {
  /** A claim loop runs; `run` is it. */
  claiming: boolean;
  run: Promise<void> | undefined;
  /** Another claim was asked for. */
  want: boolean;
  /** A kick is queued for after the current tick (kickSoon). */
  kickQueued: boolean;
  /** The last claim was held back by the cap on leases awaiting their outcome's record. */
  heldBack: boolean;
  /** The last claim found fewer due executions than it asked for (or failed). */
  drained: boolean;
  /** The last claim asked for more than one and came back with as many: more is due than it took. */
  full: boolean;
  /** Some endpoint has a concurrency limit: claims must check it. */
  limited: boolean;
  /** Retries the claim while the database is unreachable. */
  retryTimer: NodeJS.Timeout | undefined;
  /**
   * A limited endpoint the next claim waits for the lock of, and claims first: the last claim
   * found its lock held, or came back full with some of its executions.
   */
  awaitEndpoint: string | undefined;
  /** Claims left that wait for `awaitEndpoint` without looking at the other limited endpoints (nextAwait). */
  stickyLeft: number;
  retries: number;
  /** Claims sent so far: their count picks each claim's order (claimOrder). */
  sent: number;
  /** When the last claim was sent (performance.now()). */
  lastClaimAt: number;
  /** A small room waits for more attempts to end until this fires (waitForMoreRoom). */
  coalesceTimer: NodeJS.Timeout | undefined;
  /** The wait is over: the next claim takes the room as it is. */
  coalesceDone: boolean;
}

export interface ClaimLoop {
  /** Claims now, or once more after the claim in flight. */
  kick(): void;
  /** Kicks once after the current tick, so attempts ending together free their slots for one claim. */
  kickSoon(): void;
  /** Arms the due timer for the next delayed execution. */
  armDueTimer(): Promise<void>;
  /**
   * Executions were created that are claimable in `inMs` (a hint): the due timer is armed for
   * them, without a claim that would find nothing due.
   */
  dueIn(inMs: number): void;
  /** Whether the last claim came back short (the queue looked empty). */
  drained(): boolean;
  /** Whether the last claim came back full: more is due than this worker took. */
  backlogged(): boolean;
  /**
   * A flush of outcomes ended (`freedTurn`: it recorded one that can make another execution
   * claimable): claims again if the lease cap held the last claim back, or if the last claim came
   * back short and this flush freed a slot or a turn. Under load (full claims) ending attempts
   * already keep the loop going.
   */
  flushed(freedTurn: boolean): void;
  /**
   * Learns whether any endpoint is limited; `fallback` answers when the database cannot (by
   * default, what was known before).
   */
  learnLimited(fallback?: (error: unknown) => boolean): Promise<void>;
  /** Clears the due and retry timers (at stop). */
  clearTimers(): void;
  /** Resolves when no claim is in flight. */
  settled(): Promise<void>;
  /** Claims whose answer was lost: handed back before the next claim, and at stop (stop.ts). */
  lostClaims: LostClaims;
}

const initialState = (): ClaimState => ({
  claiming: false,
  run: undefined,
  want: false,
  kickQueued: false,
  heldBack: false,
  drained: true,
  full: false,
  limited: false,
  retryTimer: undefined,
  awaitEndpoint: undefined,
  stickyLeft: 0,
  retries: 0,
  sent: 0,
  lastClaimAt: performance.now(),
  coalesceTimer: undefined,
  coalesceDone: false,
});

/**
 * How long a small room waits for more attempts to end before it is claimed (waitForMoreRoom):
 * attempts claimed together mostly end together, within a fraction of this.
 */
const COALESCE_MS = 1;

export function createClaimLoop(deps: ClaimLoopDeps): ClaimLoop {
  const state = initialState();

  const timers = createClaimTimers(deps, state, () => kick());
  const lostClaims = createLostClaims({ ...deps, wake: () => kick() });
  const claimNow = (limit: number) => claimOnce(deps, state, lostClaims, limit, timers.due.claimed);

  function kick() {
    if (!deps.running()) return;
    state.want = true;
    if (!state.claiming) state.run = claimLoop();
  }

  function kickSoon() {
    if (state.kickQueued) return;
    state.kickQueued = true;
    setImmediate(() => {
      state.kickQueued = false;
      kick();
    });
  }

  // A slot frees when its attempt ends, so the next claim overlaps the flush of the previous
  // outcomes instead of waiting for it. A batch size above the concurrency claims that many ahead:
  // what finds no slot waits in the worker (attempt-runner.ts), so a backlog is claimed in fewer,
  // larger statements. At most as many more leases again are held for outcomes on their way to
  // the database.
  function room(): number {
    const capacity = Math.max(deps.concurrency, deps.batchSize);
    const free = capacity - deps.executing() - deps.waiting();
    const unheld = 2 * capacity - deps.held();
    state.heldBack = unheld < free;
    return Math.min(free, unheld);
  }

  async function claimLoop() {
    state.claiming = true;
    // Whether the queue looked empty (or the database unreachable): then the due timer is armed.
    let short = false;
    try {
      while (deps.running() && state.want) {
        state.want = false;
        // First what a claim whose answer was lost took, so it is claimable again (by this claim,
        // or another worker's) as soon as the database answers.
        if (lostClaims.due() && (await lostClaims.recover()) === 'retry') {
          timers.retry();
          return;
        }
        const free = room();
        if (free <= 0 || waitForMoreRoom(deps, state, free, kick)) break;
        const result = await claimNow(Math.min(free, deps.batchSize));
        if (result === 'retry') {
          timers.retry();
          return;
        }
        // Contended: again at once, and that claim waits for the lock (ClaimOptions.awaitEndpoint).
        if (result === 'more' || result === 'contended') state.want = true;
        else short = true;
        if (result === 'failed') break;
      }
    } finally {
      state.claiming = false;
    }
    if (!deps.running()) return;
    if (state.want && room() > 0) state.run = claimLoop();
    // With every slot busy there is nothing to time: ending attempts kick the loop.
    else if (short) void timers.armDue();
  }

  return {
    kick,
    kickSoon,
    armDueTimer: timers.armDue,
    dueIn: (inMs) => timers.due.hinted(inMs),
    drained: () => state.drained,
    backlogged: () => state.full,
    flushed(freedTurn) {
      if (state.heldBack || (state.drained && (freedTurn || state.limited))) kick();
    },
    async learnLimited(fallback = () => state.limited) {
      state.limited = await anyLimitedEndpoint(deps.pool).catch(fallback);
    },
    clearTimers: timers.clear,
    async settled() {
      while (state.claiming) await state.run;
    },
    lostClaims,
  };
}

/**
 * Under a backlog (the last claim came back full), a room of less than a quarter of a claim
 * while attempts still run waits up to COALESCE_MS for more of them to end, so one claim takes
 * them all. Otherwise a few attempts ending apart from the rest get a claim of their own, and
 * the claims split for good: the next claim takes what ended while the small one was in flight,
 * and so on, a full claim and a claim of two in turn. Each claim has a cost of its own (a
 * limited endpoint's claim is a transaction of three statements), paid twice as often so.
 */
function waitForMoreRoom(deps: ClaimLoopDeps, state: ClaimState, free: number, kick: () => void): boolean {
  const small = free < deps.batchSize / 4;
  if (!small || state.drained || deps.executing() === 0 || state.coalesceDone) {
    clearTimeout(state.coalesceTimer);
    state.coalesceTimer = undefined;
    state.coalesceDone = false;
    return false;
  }
  if (!state.coalesceTimer) {
    state.coalesceTimer = setTimeout(() => {
      state.coalesceTimer = undefined;
      state.coalesceDone = true;
      kick();
    }, COALESCE_MS);
    state.coalesceTimer.unref();
  }
  return true;
}

/**
 * One claim: 'more' when the batch came back full, else 'short', 'contended' (short while another
 * claim held a limited endpoint with due work), 'failed' or 'retry' (unreachable).
 */
async function claimOnce(
  deps: ClaimLoopDeps,
  state: ClaimState,
  lostClaims: LostClaims,
  limit: number,
  /** The claim answered: what hints said was due by `sentAt` was its to take (due-timer.ts). */
  answered: (sentAt: number) => void,
): Promise<'more' | 'short' | 'contended' | 'failed' | 'retry'> {
  const sentAt = performance.now();
  let contended: string[] = [];
  let filledFrom: string | undefined;
  let cutShort = false;
  let limitedDue: string[] | undefined;
  state.lastClaimAt = sentAt;
  const order = claimOrder(state.sent++);
  let claimed: ClaimedExecution[];
  try {
    claimed = await claimExecutions(deps.pool, {
      workerId: deps.id,
      limit,
      handlers: deps.handlers.names(),
      leaseMs: deps.leaseMs,
      limitedEndpoints: state.limited,
      order,
      contended: (ids) => (contended = ids),
      awaitEndpoint: state.awaitEndpoint,
      claimedLimited: (id) => (filledFrom = id),
      cutShort: () => (cutShort = true),
      limitedDue: (ids) => (limitedDue = ids),
    });
  } catch (error) {
    state.drained = true;
    state.full = false;
    // Kept even when the worker is stopping: stop hands it back then (stop.ts).
    if (error instanceof ClaimAnswerLost) lostClaims.lost(error.token);
    if (deps.availability.unreachable(error, 'claim')) return 'retry';
    deps.log.warn(`worker ${deps.id}: claim failed: ${(error as Error).message}`);
    return 'failed';
  }
  deps.availability.reached(sentAt);
  answered(sentAt);
  state.retries = 0;
  clearTimeout(state.retryTimer);
  state.retryTimer = undefined;
  deps.claimed(sentAt, claimed);
  // A claim of one that found one says nothing about what is left (a worker of concurrency 1, or
  // one slot freed under long handlers): only a fuller claim counts as a backlog.
  state.full = limit > 1 && claimed.length >= limit;
  // A full batch means there is probably more. A short one means the queue is empty for this
  // worker, unless it was an OLDEST claim: that one locks what it picked only after picking it, and
  // skips what another worker's claim took meanwhile, so under contention it comes back short with
  // work still due. Taken as drained, its worker sat idle until the next poll (up to 5 s): with four
  // workers on one backlog, one or two of them were claiming at any moment. The next claim, a
  // PRIORITY one, tells.
  //
  // Nor is a claim short because another claim held a limited endpoint's lock: that claim is
  // taking its share, and more may be left once it commits. Taken as drained, a second worker on
  // one limited endpoint's backlog lost the lock once and sat idle for the rest of the drain.
  const next = nextAwait({ full: claimed.length >= limit, contended: contended[0], filledFrom, limitedDue, stickyLeft: state.stickyLeft });
  state.awaitEndpoint = next.awaitEndpoint;
  state.stickyLeft = next.stickyLeft;
  if (claimed.length < limit && state.awaitEndpoint) {
    state.drained = false;
    return 'contended';
  }
  // A claim that committed before it looked everywhere (ClaimOptions.cutShort) is followed at once.
  state.drained = claimed.length < limit && order !== 'OLDEST' && !cutShort;
  return state.drained ? 'short' : 'more';
}

/**
 * How many claims in a row wait for the one limited endpoint with due work (nextAwait) before a
 * claim looks at every limited endpoint again.
 */
export const STICKY_CLAIMS = OLDEST_EVERY;

/**
 * Which limited endpoint the next claim waits for the lock of, and claims first
 * (ClaimOptions.awaitEndpoint), after a claim that was `full` or not, found `contended` held by
 * another claim, took from limited endpoint `filledFrom`, and saw `limitedDue` (the limited
 * endpoints with due work; undefined when it did not look at them all).
 *
 * A short claim that found an endpoint's lock held waits for it next time (that claim is taking
 * its share, and more may be left once it commits); a short claim otherwise waits for none.
 * A full claim that took from a limited endpoint waits for it next time, while it is the only
 * limited endpoint with due work, for STICKY_CLAIMS claims, after which a claim looks at them all
 * again: its backlog is likely not drained, and when other workers drain it too, a claim that
 * only tried its lock found it held nine times in ten (two workers on one limited endpoint) and
 * committed a transaction of its own before the one that waits; the wait also answers what the
 * claim needs of the endpoint. With several limited endpoints due, a claim that finds one's lock
 * held claims another, as before: waiting for the one it last filled from would queue every
 * worker on it, and leave the others to its backlog's end.
 */
export function nextAwait(last: {
  full: boolean;
  contended: string | undefined;
  filledFrom: string | undefined;
  limitedDue: string[] | undefined;
  stickyLeft: number;
}): { awaitEndpoint: string | undefined; stickyLeft: number } {
  const none = { awaitEndpoint: undefined, stickyLeft: 0 };
  const sole = last.limitedDue?.length === 1 ? last.limitedDue[0] : undefined;
  if (!last.full) {
    if (!last.contended) return none;
    const stickyLeft = last.limitedDue ? (last.contended === sole ? STICKY_CLAIMS : 0) : Math.max(0, last.stickyLeft - 1);
    return { awaitEndpoint: last.contended, stickyLeft };
  }
  if (!last.filledFrom) return none;
  if (last.limitedDue) return last.filledFrom === sole ? { awaitEndpoint: last.filledFrom, stickyLeft: STICKY_CLAIMS } : none;
  return last.stickyLeft > 0 ? { awaitEndpoint: last.filledFrom, stickyLeft: last.stickyLeft - 1 } : none;
}

/** The due timer (the next delayed execution) and the retry timer (while the database is unreachable). */
function createClaimTimers(deps: ClaimLoopDeps, state: ClaimState, kick: () => void) {
  function retry() {
    clearTimeout(state.retryTimer);
    const delay = Math.min(1000, 50 * 2 ** state.retries++);
    state.retryTimer = setTimeout(() => {
      state.retryTimer = undefined;
      kick();
    }, delay);
    // The worker's own referenced interval (see loops.ts) keeps the process up meanwhile.
    state.retryTimer.unref();
  }

  // On the database's clock (the claim's): a host clock ahead of it would wake the worker early,
  // over and over.
  const due = createDueTimer({
    read: () => nextDueInMs(deps.pool, performance.now() - state.lastClaimAt),
    pollMs: deps.pollMs,
    running: deps.running,
    kick,
    readFailed: (error) => {
      if (deps.availability.unreachable(error, 'due timer')) retry();
    },
  });

  return {
    retry,
    due,
    armDue: due.arm,
    clear() {
      due.clear();
      clearTimeout(state.retryTimer);
      clearTimeout(state.coalesceTimer);
    },
  };
}
