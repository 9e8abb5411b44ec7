/**
 * What the console's overview shows: the workspace's executions by status per endpoint, per-minute
 * activity over a recent window, and the live worker count. Read-only: any key may read it.
 */
import { z } from 'zod';
import {
  endpointStatusCounts,
  liveWorkerCount,
  minuteBuckets,
  type EndpointStatusCounts,
  type MinuteBucket,
} from '../../db/statements/execution-stats.js';
import type { Actor } from '../kernel/actor.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';

export type { EndpointStatusCounts, MinuteBucket };

export interface ExecutionStats {
  windowMinutes: number;
  /** The workspace's own (USER) endpoints. */
  byEndpoint: EndpointStatusCounts[];
  /** jobgate's INTERNAL endpoints (alert delivery, the reaper, retention), apart. */
  internalEndpoints: EndpointStatusCounts[];
  perMinute: MinuteBucket[];
  workersAlive: number;
}

export const executionStatsSchema = z.object({
  windowMinutes: z.number().int().min(5).max(1440).nullish(),
});
export type ExecutionStatsInput = z.input<typeof executionStatsSchema>;

export function createStatsService(ctx: ServiceContext) {
  const { db } = ctx;
  return {
    /**
     * The overview's numbers, as of one instant: live and dead-letter counts per endpoint, what
     * ended in the last `windowMinutes` (default 60, 5 to 1440), one bucket per minute of that
     * window (succeeded, failed, first attempts started and their enqueue-to-start latency), and
     * the live workers. The counts are the workspace's: executions on INTERNAL endpoints
     * (jobgate's own work, e.g. alert delivery) are not in `byEndpoint` nor in the per-minute
     * buckets; they are listed apart in `internalEndpoints`. Throws VALIDATION_FAILED for a window out of range. Reads only, three
     * statements outside any transaction: the parts may be a few milliseconds apart.
     */
    async executionStats(actor: Actor, raw: ExecutionStatsInput = {}): Promise<ExecutionStats> {
      const input = parseInput(executionStatsSchema, raw);
      const windowMinutes = input.windowMinutes ?? 60;
      // From the replica when the caller allows it (ServiceContext.reader); which workers live, from
      // the primary, where their heartbeats land.
      const from = ctx.reader(actor);
      const [endpoints, perMinute, workersAlive] = await Promise.all([
        endpointStatusCounts(from, actor.workspaceId, windowMinutes),
        minuteBuckets(from, actor.workspaceId, windowMinutes),
        liveWorkerCount(db),
      ]);
      return {
        windowMinutes,
        byEndpoint: endpoints.filter((e) => !e.internal),
        internalEndpoints: endpoints.filter((e) => e.internal),
        perMinute,
        workersAlive,
      };
    },
  };
}
