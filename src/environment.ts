/**
 * The process configuration: `process.env` parsed once, with every bad variable named at
 * once, into a frozen object. Factories receive it; tests build their own with `parseConfig`.
 */
import net from 'node:net';
import path from 'node:path';
import { parse as parseConnectionString } from 'pg-connection-string';
import { z } from 'zod';
import { ENGINE_DEFAULTS as D, MAX_CRON_LEAD_MS, WS_KEEPALIVE_MS } from './defaults.js';
import { isPlainEmailAddress } from './service/alerts/email-address.js';
import { LOAD_BOUND_DEFAULTS as B, type LoadBoundSettings } from './service/access/load-bounds.js';

const intFrom = (def: number, min: number, max: number) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v === '') return def;
      // Decimal digits only: Number() reads " " as 0, and "0x10" or "3e4" as numbers nobody wrote.
      const n = /^\d+$/.test(v.trim()) ? Number(v) : Number.NaN;
      if (!Number.isInteger(n) || n < min || n > max) {
        ctx.addIssue({ code: 'custom', message: `must be a whole number from ${min} to ${max}` });
        return z.NEVER;
      }
      return n;
    });

/** An optional string: '' is unset, as an exported empty variable means to a shell user. */
const optionalText = () =>
  z
    .string()
    .optional()
    .transform((v) => (v === '' ? undefined : v));

/** A comma-separated list, each item trimmed; unset or '' is the empty list. */
const commaList = () =>
  z
    .string()
    .optional()
    .transform((v) =>
      (v ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    );

/** An optional postgres:// connection string ('' is unset) that pg itself can read. */
const postgresUrl = () =>
  optionalText()
    .refine((v) => v === undefined || /^postgres(ql)?:\/\//.test(v), 'must be a postgres:// connection string')
    // pg's own parser, so a URL it cannot read is refused here, by name, not at the first connect.
    .refine((v) => {
      if (v === undefined) return true;
      try {
        parseConnectionString(v);
        return true;
      } catch {
        return false;
      }
    }, 'is not a valid URL (percent-encode special characters such as # / ? @ in the user name and password)');

const envSchema = z.object({
  DATABASE_URL: postgresUrl(),
  // A transaction-mode pooler in front of Postgres (src/composition-root.ts, sessions()).
  JOBGATE_DATABASE_POOLER: optionalText().refine(
    (v) => v === undefined || v === 'none' || v === 'transaction',
    'must be none or transaction',
  ),
  JOBGATE_LISTEN_DATABASE_URL: postgresUrl(),
  JOBGATE_PREPARED_STATEMENTS: z.enum(['on', 'off']).optional(),
  // A read replica for lists, counts and stats (src/db/read-replica.ts).
  JOBGATE_READ_DATABASE_URL: postgresUrl(),
  JOBGATE_READ_MAX_LAG_MS: intFrom(5_000, 100, 3_600_000),
  // Empty means the default: to Node, an empty host is every interface.
  HOST: z
    .string()
    .optional()
    .transform((v) => (v === undefined || v === '' ? '127.0.0.1' : v)),
  PORT: intFrom(4000, 0, 65535),
  JOBGATE_DATA_DIR: optionalText(),
  JOBGATE_EMBEDDED_PORT: intFrom(0, 0, 65535),
  // At least 2: a run schedule's tick holds one connection while it triggers the run on another.
  DATABASE_POOL_MAX: intFrom(D.poolMax, 2, 1000),
  DATABASE_POOL_WAIT_MS: intFrom(D.poolWaitMs, 100, 3_600_000),
  JOBGATE_DEFAULT_MAX_ATTEMPTS: intFrom(D.defaultMaxAttempts, 1, 100),
  JOBGATE_WORKER_CONCURRENCY: intFrom(D.worker.concurrency, 1, 10_000),
  JOBGATE_WORKER_BATCH_SIZE: intFrom(D.worker.batchSize, 0, 10_000),
  JOBGATE_CRON_LEAD_MS: intFrom(D.cronLeadMs, 0, MAX_CRON_LEAD_MS),
  JOBGATE_LEASE_MS: intFrom(D.worker.leaseMs, 1_000, 3_600_000),
  JOBGATE_HEARTBEAT_MS: intFrom(D.worker.heartbeatMs, 100, 600_000),
  JOBGATE_DEFAULT_TIMEOUT_MS: intFrom(D.worker.defaultTimeoutMs, 1, 3_600_000),
  JOBGATE_SHUTDOWN_GRACE_MS: intFrom(D.worker.shutdownGraceMs, 0, 3_600_000),
  // The demo handlers of the quick start (src/service/engine/demo/demo-handlers.ts): on by default only
  // on the embedded default outside production, so a gateway on a real database serves none.
  JOBGATE_DEMO_HANDLERS: z.enum(['on', 'off']).optional(),
  JOBGATE_MIGRATIONS: z.enum(['apply', 'verify']).default('apply'),
  JOBGATE_OUTBOUND_ALLOW: commaList().refine((list) => list.every(isIpOrCidr), 'must be a comma-separated list of IP addresses or CIDRs'),
  JOBGATE_CRON_SECRET: optionalText().refine((v) => v === undefined || v.length >= 32, 'must be at least 32 characters'),
  JOBGATE_SECRET_KEY: optionalText().refine((v) => {
    if (v === undefined) return true;
    const raw = /^[0-9a-f]{64}$/i.test(v) ? Buffer.from(v, 'hex') : Buffer.from(v, 'base64');
    return raw.length === 32;
  }, 'must be 32 bytes, as base64 or hex (e.g. `openssl rand -base64 32`)'),
  JOBGATE_INTROSPECTION: z.enum(['on', 'off']).default('on'),
  JOBGATE_PERSISTED_ONLY: z.enum(['on', 'off']).default('off'),
  JOBGATE_PERSISTED_DOCUMENTS: commaList(),
  JOBGATE_CORS_ORIGINS: commaList().refine(
    (list) => list.every((o) => o === '*' || isOrigin(o)),
    'must be a comma-separated list of origins (scheme://host[:port], no path), or *',
  ),
  JOBGATE_MAX_BODY_BYTES: intFrom(1_000_000, 1024, 100_000_000),
  JOBGATE_WS_KEEPALIVE_MS: intFrom(WS_KEEPALIVE_MS, 1_000, 600_000),
  // Bounds on load (src/service/access/load-bounds.ts), per gateway replica; 0 turns one off.
  JOBGATE_RATE_LIMIT_PER_SECOND: intFrom(B.requestsPerSecond, 0, 1_000_000),
  JOBGATE_RATE_LIMIT_BURST: intFrom(B.requestBurst, 1, 1_000_000),
  JOBGATE_MAX_REQUESTS_IN_FLIGHT_PER_KEY: intFrom(B.requestsInFlightPerKey, 0, 1_000_000),
  JOBGATE_MAX_CONNECTIONS_PER_KEY: intFrom(B.connectionsPerKey, 0, 1_000_000),
  JOBGATE_MAX_SUBSCRIPTIONS_PER_KEY: intFrom(B.subscriptionsPerKey, 0, 1_000_000),
  JOBGATE_MAX_SUBSCRIPTIONS_PER_CONNECTION: intFrom(B.subscriptionsPerConnection, 0, 1_000_000),
  JOBGATE_FAILED_AUTH_PER_MINUTE: intFrom(B.failedAuthPerMinute, 0, 1_000_000),
  JOBGATE_MAX_CONNECTIONS_PER_ADDRESS: intFrom(B.connectionsPerAddress, 0, 1_000_000),
  // Proxies whose X-Forwarded-For names the client (the right-most address not itself trusted).
  JOBGATE_TRUSTED_PROXIES: commaList().refine((list) => list.every(isIpOrCidr), 'must be a comma-separated list of IP addresses or CIDRs'),
  JOBGATE_EVENT_RETENTION_HOURS: intFrom(D.retention.eventsHours, 1, 24 * 365),
  // Retention of finished history (src/service/engine/maintenance/pruner.ts); 0 days keeps it forever.
  JOBGATE_RETENTION_EXECUTIONS_DAYS: intFrom(D.retention.executionsDays, 0, 36_500),
  JOBGATE_RETENTION_FAILED_DAYS: intFrom(D.retention.failedExecutionsDays, 0, 36_500),
  JOBGATE_RETENTION_AUDIT_DAYS: intFrom(D.retention.auditDays, 0, 36_500),
  JOBGATE_RETENTION_RUNS_DAYS: intFrom(D.retention.runsDays, 0, 36_500),
  JOBGATE_RETENTION_KEEP_PER_JOB: intFrom(D.retention.keepPerJob, 1, 100_000),
  JOBGATE_RETENTION_ALERTS_DAYS: intFrom(D.retention.alertNotificationsDays, 0, 36_500),
  JOBGATE_RETENTION_RUN_DUE_BATCHES: intFrom(D.retention.runDueBatches, 0, 10_000),
  JOBGATE_RETENTION_GONE_WORKERS_HOURS: intFrom(D.retention.goneWorkersHours, 1, 24 * 365),
  JOBGATE_RETENTION_BATCH: intFrom(D.retention.batchSize, 1, 100_000),
  JOBGATE_RETENTION_PAUSE_MS: intFrom(D.retention.pauseMs, 0, 60_000),
  JOBGATE_RETENTION_EVERY_MINUTES: intFrom(D.retention.everyMs / 60_000, 1, 24 * 60),
  // Alerts by email (src/service/engine/alerts/alert-handlers.ts).
  JOBGATE_SMTP_URL: optionalText().refine((v) => v === undefined || /^smtps?:\/\//.test(v), 'must be an smtp:// or smtps:// URL'),
  JOBGATE_SMTP_FROM: optionalText(),
  JOBGATE_ALERT_EMAIL_TO: commaList().refine(
    (list) => list.every(isPlainEmailAddress),
    'must be a comma-separated list of plain email addresses (local@host.name)',
  ),
  // Where people reach this gateway: alert emails link into its console from it.
  JOBGATE_PUBLIC_URL: z
    .string()
    .optional()
    .transform((v) => (v === '' || v === undefined ? undefined : v.replace(/\/+$/, '')))
    .refine((v) => v === undefined || (/^https?:\/\/[^\s/?#]+/.test(v) && URL.canParse(v)), 'must be an http:// or https:// URL'),
  // Metrics and health (src/metrics, src/server/ops-routes.ts).
  JOBGATE_METRICS_TOKEN: optionalText().refine(
    (v) => v === undefined || (v.length >= 16 && /^[\x21-\x7e]+$/.test(v)),
    'must be at least 16 printable characters, no spaces',
  ),
  JOBGATE_METRICS_PORT: z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v === '') return undefined;
      const n = /^\d+$/.test(v.trim()) ? Number(v) : Number.NaN;
      if (!Number.isInteger(n) || n > 65535) {
        ctx.addIssue({ code: 'custom', message: 'must be a whole number from 0 to 65535' });
        return z.NEVER;
      }
      return n;
    }),
  JOBGATE_METRICS_ENDPOINT_LABELS: intFrom(D.metricsEndpointLabels, 1, 10_000),
  JOBGATE_SHUTDOWN_DELAY_MS: intFrom(0, 0, 600_000),
  JOBGATE_LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
  JOBGATE_LOG_FORMAT: optionalText().refine((v) => v === undefined || v === 'json' || v === 'pretty', 'must be json or pretty'),
  NODE_ENV: z.string().default('development'),
});

/** Every environment variable jobgate reads (the CLI's help names each, test/cli.test.ts holds it). */
export const ENVIRONMENT_VARIABLES: readonly string[] = Object.keys(envSchema.shape);

/** An origin as a browser sends it: scheme, host and port only. */
function isOrigin(entry: string): boolean {
  try {
    const url = new URL(entry);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.origin === entry;
  } catch {
    return false;
  }
}

/** What the outbound policy accepts (src/service/endpoints/outbound-policy.ts): checked here, so a bad entry is named at start. */
function isIpOrCidr(entry: string): boolean {
  const [address = '', prefix, ...rest] = entry.split('/');
  const version = net.isIP(address);
  if (version === 0 || rest.length > 0) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (version === 4 ? 32 : 128);
}

export interface Config {
  /** Connection string of an external Postgres; undefined means "start the embedded one". */
  databaseUrl: string | undefined;
  /** What DATABASE_URL is: `transaction` for a transaction-mode pooler (PgBouncer), else undefined. */
  pooler: 'transaction' | undefined;
  /** Where LISTEN connects (a session on Postgres itself); undefined: DATABASE_URL, unless that is a transaction pooler. */
  listenDatabaseUrl: string | undefined;
  /** Named statements prepared once per connection; undefined: on, unless DATABASE_URL is a transaction pooler. */
  preparedStatements: boolean | undefined;
  /** A streaming replica for lists, counts and stats, and how stale it may be before reads go to the primary. */
  readReplica: { connectionString: string; maxLagMs: number } | undefined;
  host: string;
  port: number;
  /** Where the embedded Postgres keeps its cluster, log and bootstrap files. */
  dataDir: string;
  /** Port for the embedded Postgres; 0 picks a free one. */
  embeddedPort: number;
  poolMax: number;
  /** Longest wait for a pooled connection before the caller gets an error. */
  poolWaitMs: number;
  defaultMaxAttempts: number;
  /** How long before its time a cron occurrence is written (0: at its time). */
  cronLeadMs: number;
  logLevel: 'debug' | 'info' | 'warn' | 'error' | 'silent';
  /** Log lines as JSON or for a person; undefined: JSON unless stderr is a terminal outside production (src/log.ts). */
  logFormat: 'json' | 'pretty' | undefined;
  production: boolean;
  /**
   * Whether `jobgate start | worker` registers the demo handlers (demo.echo, demo.flaky, demo.scan)
   * of the quick start. Default: on the embedded default outside production only.
   */
  demoHandlers: boolean;
  /**
   * What a start does with the database's migrations: `apply` the pending ones (the default), or
   * `verify` that none is pending and stop if one is (migrations run apart, by `jobgate migrate`).
   */
  migrations: 'apply' | 'verify';
  /** Whether authenticated callers may introspect the schema. */
  introspection: boolean;
  maxBodyBytes: number;
  /** How often the gateway pings each WebSocket connection (ms). */
  wsKeepAliveMs: number;
  /** Bounds on what one API key, connection and client address may hold and send, per gateway replica (0: off). */
  bounds: Readonly<LoadBoundSettings>;
  /**
   * Addresses (or CIDRs) of reverse proxies in front of the gateway: a request from one of them is
   * counted against the client its X-Forwarded-For names. Empty: the socket's address, always.
   */
  trustedProxies: string[];
  /** Origins whose pages may call the API from a browser (CORS); empty: none but the gateway's own; `*`: any. */
  corsOrigins: string[];
  /** Run only trusted persisted documents (the console's and `persistedDocuments`'), no document sent as text. */
  persistedOnly: boolean;
  /** Manifests of trusted documents (SHA-256 to document) besides the console's, as absolute paths. */
  persistedDocuments: string[];
  /** How long live events are kept for subscriptions to replay (the pruner prunes older ones). */
  eventRetentionMs: number;
  /** Retention of finished history: the installation's windows (0 days: forever) and the pruner's pace. */
  retention: {
    executionsDays: number;
    failedExecutionsDays: number;
    auditDays: number;
    runsDays: number;
    keepPerJob: number;
    alertNotificationsDays: number;
    batchSize: number;
    pauseMs: number;
    everyMs: number;
    /** Pruning batches one serverless pass (run-due) runs at most; 0: none. */
    runDueBatches: number;
    /** Hours after which a worker gone (no heartbeat) is forgotten. */
    goneWorkersHours: number;
  };
  /** Key for secrets at rest (base64 or hex); the embedded default generates one. */
  secretKey: string | undefined;
  /** Bearer secret of POST /jobs/run-due; undefined turns the route off. */
  cronSecret: string | undefined;
  /**
   * Metrics and health: the bearer token of /metrics (undefined: route off), the port a process
   * serves /metrics, /healthz and /readyz on besides the gateway's (undefined: none), and the most
   * endpoint names given series of their own.
   */
  metrics: { token: string | undefined; port: number | undefined; endpointLabels: number };
  /** On SIGINT/SIGTERM, how long a process answers /readyz 503 before it stops serving and drains. */
  shutdownDelayMs: number;
  /**
   * Email alerts: the SMTP server, the sender, recipients for rules that name none, and the
   * gateway's public address (JOBGATE_PUBLIC_URL) their link into the console starts with.
   */
  alerts: { smtpUrl: string | undefined; from: string | undefined; defaultTo: string[]; publicUrl: string | undefined };
  worker: {
    concurrency: number;
    batchSize: number;
    leaseMs: number;
    heartbeatMs: number;
    defaultTimeoutMs: number;
    shutdownGraceMs: number;
    /** CIDRs outbound HTTP may reach although they are private or special-purpose. */
    outboundAllow: string[];
  };
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** What DATABASE_URL is (a transaction pooler or not), and what that allows (src/db/pooler.ts). */
function poolerSettings(
  e: z.output<typeof envSchema>,
): Pick<Config, 'pooler' | 'listenDatabaseUrl' | 'preparedStatements' | 'readReplica'> {
  return {
    pooler: e.JOBGATE_DATABASE_POOLER === 'transaction' ? 'transaction' : undefined,
    listenDatabaseUrl: e.JOBGATE_LISTEN_DATABASE_URL,
    preparedStatements: e.JOBGATE_PREPARED_STATEMENTS === undefined ? undefined : e.JOBGATE_PREPARED_STATEMENTS === 'on',
    readReplica: e.JOBGATE_READ_DATABASE_URL
      ? { connectionString: e.JOBGATE_READ_DATABASE_URL, maxLagMs: e.JOBGATE_READ_MAX_LAG_MS }
      : undefined,
  };
}

/** Retention of finished history: the installation's windows and the pruner's pace. */
function retentionSettings(e: z.output<typeof envSchema>): Config['retention'] {
  return Object.freeze({
    executionsDays: e.JOBGATE_RETENTION_EXECUTIONS_DAYS,
    failedExecutionsDays: e.JOBGATE_RETENTION_FAILED_DAYS,
    auditDays: e.JOBGATE_RETENTION_AUDIT_DAYS,
    runsDays: e.JOBGATE_RETENTION_RUNS_DAYS,
    keepPerJob: e.JOBGATE_RETENTION_KEEP_PER_JOB,
    alertNotificationsDays: e.JOBGATE_RETENTION_ALERTS_DAYS,
    runDueBatches: e.JOBGATE_RETENTION_RUN_DUE_BATCHES,
    goneWorkersHours: e.JOBGATE_RETENTION_GONE_WORKERS_HOURS,
    batchSize: e.JOBGATE_RETENTION_BATCH,
    pauseMs: e.JOBGATE_RETENTION_PAUSE_MS,
    everyMs: e.JOBGATE_RETENTION_EVERY_MINUTES * 60_000,
  });
}

export function parseConfig(env: Record<string, string | undefined> = process.env, cwd = process.cwd()): Readonly<Config> {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid environment:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  if (e.JOBGATE_METRICS_PORT !== undefined && e.JOBGATE_METRICS_PORT !== 0 && e.JOBGATE_METRICS_PORT === e.PORT) {
    throw new ConfigError(
      'invalid environment:\n  JOBGATE_METRICS_PORT: must differ from PORT (the gateway already serves /metrics, /healthz and /readyz there)',
    );
  }
  return Object.freeze({
    databaseUrl: e.DATABASE_URL,
    ...poolerSettings(e),
    host: e.HOST,
    port: e.PORT,
    dataDir: path.resolve(cwd, e.JOBGATE_DATA_DIR ?? '.jobgate'),
    embeddedPort: e.JOBGATE_EMBEDDED_PORT,
    poolMax: e.DATABASE_POOL_MAX,
    poolWaitMs: e.DATABASE_POOL_WAIT_MS,
    defaultMaxAttempts: e.JOBGATE_DEFAULT_MAX_ATTEMPTS,
    cronLeadMs: e.JOBGATE_CRON_LEAD_MS,
    logLevel: e.JOBGATE_LOG_LEVEL,
    logFormat: e.JOBGATE_LOG_FORMAT as 'json' | 'pretty' | undefined,
    production: e.NODE_ENV === 'production',
    cronSecret: e.JOBGATE_CRON_SECRET,
    secretKey: e.JOBGATE_SECRET_KEY,
    introspection: e.JOBGATE_INTROSPECTION === 'on',
    demoHandlers:
      e.JOBGATE_DEMO_HANDLERS === undefined
        ? e.DATABASE_URL === undefined && e.NODE_ENV !== 'production'
        : e.JOBGATE_DEMO_HANDLERS === 'on',
    migrations: e.JOBGATE_MIGRATIONS,
    maxBodyBytes: e.JOBGATE_MAX_BODY_BYTES,
    wsKeepAliveMs: e.JOBGATE_WS_KEEPALIVE_MS,
    bounds: Object.freeze({
      requestsPerSecond: e.JOBGATE_RATE_LIMIT_PER_SECOND,
      requestBurst: e.JOBGATE_RATE_LIMIT_BURST,
      requestsInFlightPerKey: e.JOBGATE_MAX_REQUESTS_IN_FLIGHT_PER_KEY,
      connectionsPerKey: e.JOBGATE_MAX_CONNECTIONS_PER_KEY,
      subscriptionsPerKey: e.JOBGATE_MAX_SUBSCRIPTIONS_PER_KEY,
      subscriptionsPerConnection: e.JOBGATE_MAX_SUBSCRIPTIONS_PER_CONNECTION,
      failedAuthPerMinute: e.JOBGATE_FAILED_AUTH_PER_MINUTE,
      connectionsPerAddress: e.JOBGATE_MAX_CONNECTIONS_PER_ADDRESS,
    }),
    trustedProxies: e.JOBGATE_TRUSTED_PROXIES,
    corsOrigins: e.JOBGATE_CORS_ORIGINS,
    persistedOnly: e.JOBGATE_PERSISTED_ONLY === 'on',
    persistedDocuments: e.JOBGATE_PERSISTED_DOCUMENTS.map((p) => path.resolve(cwd, p)),
    eventRetentionMs: e.JOBGATE_EVENT_RETENTION_HOURS * 3_600_000,
    metrics: Object.freeze({
      token: e.JOBGATE_METRICS_TOKEN,
      port: e.JOBGATE_METRICS_PORT,
      endpointLabels: e.JOBGATE_METRICS_ENDPOINT_LABELS,
    }),
    shutdownDelayMs: e.JOBGATE_SHUTDOWN_DELAY_MS,
    retention: retentionSettings(e),
    alerts: Object.freeze({
      smtpUrl: e.JOBGATE_SMTP_URL,
      from: e.JOBGATE_SMTP_FROM,
      defaultTo: e.JOBGATE_ALERT_EMAIL_TO,
      publicUrl: e.JOBGATE_PUBLIC_URL,
    }),
    worker: Object.freeze({
      concurrency: e.JOBGATE_WORKER_CONCURRENCY,
      batchSize: e.JOBGATE_WORKER_BATCH_SIZE,
      leaseMs: e.JOBGATE_LEASE_MS,
      heartbeatMs: Math.min(e.JOBGATE_HEARTBEAT_MS, Math.floor(e.JOBGATE_LEASE_MS / 3)),
      defaultTimeoutMs: e.JOBGATE_DEFAULT_TIMEOUT_MS,
      shutdownGraceMs: e.JOBGATE_SHUTDOWN_GRACE_MS,
      outboundAllow: e.JOBGATE_OUTBOUND_ALLOW,
    }),
  });
}
