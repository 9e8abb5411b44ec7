/**
 * A worker's claims whose answer never reached it (invariant 13: they cost no attempt and are
 * back in a second). A claim can commit and its answer be lost with the connection (a restart, a
 * reset link): the executions are then RUNNING under leases of this worker that it does not know
 * it holds, and without this they would wait for the reconciler, a lease later, which counts
 * the attempt although no handler ran. Each claim carries a token (src/db/statements/claim.ts);
 * when one fails on its connection, the token is kept here, and the claim loop, before it claims
 * again, asks the database to hand back whatever that token took, uncounted. The claim loop
 * retries at most a second apart while the database is unreachable and at once when any loop
 * reaches it again, so the executions are claimable again within a second of its return.
 *
 * A look that finds the claim's executions settles it: a claim's rows commit together. A look
 * that finds nothing cannot tell a claim that never committed from one the server is still
 * running (its client gone, it carries on until it writes the answer): a second look, answered
 * SECOND_LOOK_MS after the first, settles it. The claim never waits on a lock (SKIP LOCKED,
 * try-locks), so it ends within milliseconds of running; a claim still running after that is
 * left to the reconciler, as every lost claim was before.
 */
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { handBackLostClaims } from '../../../db/statements/claim.js';
import type { Logger } from '../../../log.js';
import type { Availability } from '../runtime/availability.js';

/** How long after a look that found nothing the second one is sent. */
export const SECOND_LOOK_MS = 1000;

export interface LostClaimsDeps {
  id: string;
  pool: pg.Pool;
  log: Logger;
  availability: Availability;
  /** A second look is due (the claim loop runs recover() before it claims). */
  wake(): void;
}

export interface LostClaims {
  /** A claim's answer was lost (ClaimAnswerLost): what `token` took is to be handed back. */
  lost(token: string): void;
  /** Whether a look is due now. */
  due(): boolean;
  /**
   * One look for the claims due: hands back what they took. 'retry' while the database cannot be
   * reached (the claim loop's retry timer then calls again), 'failed' on any other error (kept
   * for the next call).
   */
  recover(): Promise<'done' | 'retry' | 'failed'>;
  /**
   * At stop (the claim loop has stopped): looks until every lost claim is settled, for at most
   * `graceMs`; what is left is the reconciler's when its lease expires.
   */
  drain(graceMs: number): Promise<void>;
}

interface Lost {
  /** When a look for it was first answered (performance.now()), having found nothing. */
  answeredAt?: number;
}

export function createLostClaims(deps: LostClaimsDeps): LostClaims {
  const { id, pool, log, availability } = deps;
  const lost = new Map<string, Lost>();
  let secondLook: NodeJS.Timeout | undefined;

  const dueNow = (l: Lost, now: number) => l.answeredAt === undefined || now - l.answeredAt >= SECOND_LOOK_MS;
  const dueTokens = () => {
    const now = performance.now();
    return [...lost].filter(([, l]) => dueNow(l, now)).map(([token]) => token);
  };

  /** Milliseconds until the next second look is due; undefined when none waits for one. */
  function nextLookIn(): number | undefined {
    const at = [...lost.values()].flatMap((l) => (l.answeredAt === undefined ? [] : [l.answeredAt + SECOND_LOOK_MS]));
    return at.length === 0 ? undefined : Math.max(0, Math.min(...at) - performance.now());
  }

  /** Wakes the claim loop when the next second look is due (a first look is the loop's own). */
  function armSecondLook() {
    clearTimeout(secondLook);
    const inMs = nextLookIn();
    if (inMs === undefined) return;
    secondLook = setTimeout(deps.wake, inMs);
    secondLook.unref();
  }

  async function recover(): Promise<'done' | 'retry' | 'failed'> {
    const tokens = dueTokens();
    if (tokens.length === 0) return 'done';
    const askedAt = performance.now();
    let back: Awaited<ReturnType<typeof handBackLostClaims>>;
    try {
      back = await handBackLostClaims(pool, id, tokens);
    } catch (error) {
      if (availability.unreachable(error, 'lost claim')) return 'retry';
      log.warn(`worker ${id}: handing back what a lost claim took failed: ${(error as Error).message}`);
      return 'failed';
    }
    availability.reached(askedAt);
    const answeredAt = performance.now();
    const found = new Set(back.map((r) => r.token));
    for (const token of tokens) {
      const l = lost.get(token)!;
      if (found.has(token) || l.answeredAt !== undefined) lost.delete(token);
      else l.answeredAt = answeredAt;
    }
    if (back.length > 0) {
      const cancelled = back.filter((r) => r.status === 'CANCELLED').length;
      log.warn(
        `worker ${id}: handed back ${back.length} execution(s) a claim took whose answer was lost; no attempt counted` +
          (cancelled ? ` (${cancelled} cancelled meanwhile, ended CANCELLED)` : ''),
      );
    }
    armSecondLook();
    return 'done';
  }

  return {
    lost(token) {
      lost.set(token, {});
    },
    due: () => lost.size > 0 && dueTokens().length > 0,
    recover,
    async drain(graceMs) {
      clearTimeout(secondLook);
      const until = performance.now() + graceMs;
      for (let tries = 0; lost.size > 0;) {
        const result = await recover();
        tries = result === 'done' ? 0 : tries + 1;
        if (lost.size === 0) break;
        const wait = result === 'done' ? (nextLookIn() ?? 0) : Math.min(1000, 50 * 2 ** tries);
        if (performance.now() + wait > until) break;
        await new Promise((r) => setTimeout(r, wait));
      }
      clearTimeout(secondLook);
      if (lost.size > 0) {
        log.warn(
          `worker ${id}: stopped with ${lost.size} claim(s) whose answer was lost not settled; what they took is reconciled when its lease expires`,
        );
      }
    },
  };
}
