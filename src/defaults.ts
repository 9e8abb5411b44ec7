/**
 * jobgate's defaults, written once: the environment's (src/environment.ts) and the library's
 * (src/index.ts) are these, and the composition root (src/composition-root.ts) fills in any
 * option left unset with them.
 */
import { DEFAULT_RETENTION } from './service/retention/windows.js';

/** Under a minute, a cron schedule's finest step: no job then has more than one occurrence written ahead. */
export const MAX_CRON_LEAD_MS = 55_000;

/**
 * How often the gateway pings each WebSocket connection (one that has not answered by the next
 * ping is dropped): graphql-ws's own default, well under the idle timeouts of common proxies and
 * load balancers (60 s for nginx and AWS's ALB). Fewer pings did not show in the live fan-out
 * bench: 30 s against 12 s, three paired rounds with 5,000 quiet subscriptions a gateway, gave
 * commit-to-client p99 50-60 ms against 45-55 ms and the same gateway CPU.
 */
export const WS_KEEPALIVE_MS = 12_000;

export const ENGINE_DEFAULTS = Object.freeze({
  /** Most connections to Postgres (at least 2: a run schedule's tick holds one while it triggers the run on another). */
  poolMax: 10,
  /** Longest wait for a pooled connection before the caller gets an error. */
  poolWaitMs: 30_000,
  /** Max attempts when neither a job nor its endpoint sets one. */
  defaultMaxAttempts: 5,
  /**
   * How long before its time the scheduler writes a cron job's next occurrence, so that it starts
   * on time however many fall due at once (100,000 take the database about 11 s to write).
   */
  cronLeadMs: 30_000,
  worker: Object.freeze({
    /** Attempts one worker runs at once. */
    concurrency: 20,
    /**
     * Executions one claim takes at most; 0: the concurrency. Above it, those without a slot wait in
     * the worker, their leases renewed, and start as attempts end (fewer, larger claims).
     */
    batchSize: 0,
    leaseMs: 30_000,
    heartbeatMs: 10_000,
    /** An HTTP attempt's timeout when its endpoint sets none. */
    defaultTimeoutMs: 30_000,
    /** On stop, how long attempts in flight may finish before their leases are released. */
    shutdownGraceMs: 10_000,
    /** CIDRs outbound HTTP may reach although the outbound policy refuses them. */
    outboundAllow: [] as readonly string[],
  }),
  retention: Object.freeze({
    ...DEFAULT_RETENTION,
    /** The pruner: rows per batch, least pause between batches, how often each slice is pruned. */
    batchSize: 1000,
    pauseMs: 50,
    everyMs: 10 * 60_000,
    /** Pruning batches a serverless pass (run-due) runs at most, after its other work. */
    runDueBatches: 4,
    /** Hours after which a worker gone (no heartbeat) is forgotten. */
    goneWorkersHours: 24,
  }),
  /** Most endpoint names with metric series of their own. */
  metricsEndpointLabels: 100,
});

export type EngineDefaults = {
  worker: {
    -readonly [K in keyof (typeof ENGINE_DEFAULTS)['worker']]: (typeof ENGINE_DEFAULTS)['worker'][K] extends readonly string[]
      ? string[]
      : number;
  };
  retention: { -readonly [K in keyof (typeof ENGINE_DEFAULTS)['retention']]: number };
};
