import { builder } from '../schema/builder.js';
import { ExecutionStatsRef } from '../schema/stats.js';

builder.queryFields((t) => ({
  executionStats: t.field({
    type: ExecutionStatsRef,
    description:
      "The workspace's executions at a glance: live and dead-letter counts per endpoint, and per-minute throughput, failures and enqueue-to-start latency over the last `windowMinutes`. VALIDATION_FAILED for a window out of range. Any key may read it.",
    args: { windowMinutes: t.arg.int({ description: 'The window, in minutes, ending now: 5 to 1440. Default 60.' }) },
    resolve: (_root, args, ctx) => ctx.service.executionStats(ctx.actor, args),
  }),
}));
