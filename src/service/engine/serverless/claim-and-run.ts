/**
 * One bounded pass without a long-running worker, for serverless hosts: claim up to `limit` due
 * executions, run them, record the outcomes. Same claim, same fence, same completion as the
 * worker; safe to run concurrently with workers and with itself.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import {
  anyLimitedEndpoint,
  ClaimAnswerLost,
  claimExecutions,
  claimOrder,
  handBackLostClaims,
  longestEndpointTimeoutMs,
} from '../../../db/statements/claim.js';
import { completeExecutions, type Completion } from '../../../db/statements/complete.js';
import { createDelivery } from '../delivery/deliver.js';
import type { SecretBox } from '../../kernel/secrets.js';
import type { HandlerRegistry } from '../delivery/handler-registry.js';

export interface DrainResult {
  claimed: number;
  succeeded: number;
  failed: number;
  retrying: number;
  cancelled: number;
}

// Passes made by this process: as a worker's claims, one in every few takes the oldest due work
// first (claimOrder), so a serverless host starves no priority either.
let passes = 0;

export async function drainDue(
  pool: pg.Pool,
  handlers: HandlerRegistry,
  options: { limit: number; defaultTimeoutMs: number; outboundAllow?: string[]; secrets?: SecretBox | undefined },
): Promise<DrainResult> {
  const delivery = createDelivery({
    handlers,
    defaultTimeoutMs: options.defaultTimeoutMs,
    outboundAllow: options.outboundAllow ?? [],
    secrets: options.secrets,
  });
  try {
    // No heartbeats here: the lease must outlast the longest attempt (its timeout), with margin.
    const leaseMs = Math.max((await longestEndpointTimeoutMs(pool)) ?? 0, options.defaultTimeoutMs) + 30_000;
    const workerId = `run-due:${randomBytes(3).toString('hex')}`;
    const claimed = await claimExecutions(pool, {
      workerId,
      limit: options.limit,
      handlers: handlers.names(),
      leaseMs,
      limitedEndpoints: await anyLimitedEndpoint(pool),
      order: claimOrder(passes++),
    }).catch(async (error: unknown) => {
      // What a claim whose answer was lost took goes back uncounted, if the database answers
      // this one try; if not, the reconciler takes it when its lease expires (counted). The
      // pass fails either way: its caller retries it.
      if (error instanceof ClaimAnswerLost) await handBackLostClaims(pool, workerId, [error.token]).catch(() => {});
      throw error;
    });
    const completions: Completion[] = await Promise.all(
      claimed.map(async (ex) => {
        const started = performance.now();
        const result = await delivery.attempt(ex, new AbortController());
        return { executionId: ex.id, epoch: ex.lease_epoch, durationMs: performance.now() - started, ...result };
      }),
    );
    const recorded = await completeExecutions(pool, workerId, completions);
    const count = (s: string) => [...recorded.values()].filter((v) => v === s).length;
    return {
      claimed: claimed.length,
      succeeded: count('SUCCEEDED'),
      failed: count('FAILED'),
      retrying: count('PENDING'),
      cancelled: count('CANCELLED'),
    };
  } finally {
    await delivery.close().catch(() => {});
  }
}
