/**
 * Every LISTEN/NOTIFY channel jobgate uses: its name, its payload's format (an encode/decode
 * pair), who sends on it and who listens. Every TypeScript statement that sends, and every
 * listener that reads a payload, goes through here.
 *
 * Some senders are trigger functions written in frozen migrations: their payloads are spelled
 * in SQL and cannot import this file. Each channel lists those functions (`sentByTriggers`), and
 * test/db/channels.test.ts holds them to it: it reads every trigger function's body from
 * pg_proc, checks that each channel it notifies is declared here with that function, fires each
 * one for real and decodes what arrives with the decoder below. A migration that adds a sender
 * or changes a payload fails that test until this file says so.
 *
 * A notification is only a hint (DESIGN.md, invariant 6): a payload this version cannot decode
 * is ignored by the decoders here (`undefined`), and the rows stay the record.
 */

/** One channel: its name and how a message is written into, and read from, its payload. */
export interface Channel<M> {
  /** The channel's name, as LISTEN and pg_notify take it. */
  readonly name: string;
  /** The trigger functions (migrations) that notify on it, as pg_proc names them. */
  readonly sentByTriggers: readonly string[];
  /** The payload that carries `message`. */
  encode(message: M): string;
  /** The message `payload` carries; undefined for a payload this version does not know. */
  decode(payload: string): M | undefined;
}

/** Matches a uuid as Postgres prints it (lowercase). */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A payload `<prefix><rest>` with a non-empty rest, or undefined. */
function after(prefix: string, payload: string): string | undefined {
  return payload.startsWith(prefix) && payload.length > prefix.length ? payload.slice(prefix.length) : undefined;
}

/** `jobgate_work`: something a worker can take is due, or will be. */
export type WorkHint =
  /** An execution became claimable (payload `''`). */
  | { kind: 'work' }
  /** Executions were created, the earliest claimable `inMs` milliseconds after (payload `due:<ms>`). */
  | { kind: 'due'; inMs: number }
  /** Interval handler `name`'s tick was made due (payload `interval:<name>`). */
  | { kind: 'interval'; name: string };

const INTERVAL_PREFIX = 'interval:';
const DUE_PREFIX = 'due:';

/**
 * Work for the workers. Sent by the trigger on an insert into executions with claimable rows
 * (000002; `due:<ms>` when none is due yet, 000063), by the trigger on interval_handlers when an
 * idle tick is made due (000030, `interval:<name>`), and inside the transactions that make
 * executions claimable again (src/db/repositories/executions.ts notifyWork,
 * src/db/statements/lease.ts releaseExecutions, src/db/statements/claim.ts lost-claim hand-back).
 * Listened to by each worker's LISTEN connection (src/service/engine/worker/loops.ts): `work`
 * kicks its claim loop, `due` arms its due timer (src/service/engine/worker/due-timer.ts),
 * `interval` wakes the interval runner on the same pool (src/service/engine/intervals/wake.ts).
 */
export const workChannel: Channel<WorkHint> = {
  name: 'jobgate_work',
  sentByTriggers: ['jobgate_notify_work', 'jobgate_notify_interval_due', 'jobgate_settle_dependents'],
  encode: (hint) => (hint.kind === 'interval' ? INTERVAL_PREFIX + hint.name : hint.kind === 'due' ? DUE_PREFIX + hint.inMs : ''),
  decode(payload) {
    if (payload === '') return { kind: 'work' };
    const inMs = after(DUE_PREFIX, payload);
    if (inMs !== undefined) return /^\d{1,15}$/.test(inMs) ? { kind: 'due', inMs: Number(inMs) } : undefined;
    const name = after(INTERVAL_PREFIX, payload);
    return name === undefined ? undefined : { kind: 'interval', name };
  },
};

/** `jobgate_cancel`: a running execution is asked to abort. */
export interface CancelHint {
  executionId: string;
}

/**
 * Cancellation of running executions; the payload is the execution's id. Sent inside the
 * transaction that asks for it (src/db/repositories/executions.ts: cancelling a job, or executions by
 * id), by the reaper (src/db/statements/reap.ts notifyCancel), and by the trigger that cancels a
 * cancelled execution's child jobs (jobgate_parent_cancelled, 000050). Listened to
 * by each worker's LISTEN connection (src/service/engine/worker/loops.ts), which aborts the
 * attempt it has in flight for that execution, if any (heartbeats carry the request too).
 */
export const cancelChannel: Channel<CancelHint> = {
  name: 'jobgate_cancel',
  sentByTriggers: ['jobgate_parent_cancelled'],
  encode: (hint) => hint.executionId,
  decode: (payload) => (UUID.test(payload) ? { executionId: payload } : undefined),
};

/** `jobgate_events`: something a live subscription shows changed. */
export type LiveHint =
  /** Events rows were written (payload `e`). */
  | { kind: 'events' }
  /** Findings rows were written (payload `f`). */
  | { kind: 'findings' }
  /** A run's status or progress changed (payload `r:<run id>`). */
  | { kind: 'run'; runId: string }
  /** A batch's counts or state changed (payload `b:<batch id>`). */
  | { kind: 'batch'; batchId: string }
  /** An API key's standing changed (payload `k:<key id>`). */
  | { kind: 'key'; keyId: string }
  /** What the handler catalogue shows changed (payload `c`). */
  | { kind: 'catalog' };

const RUN_PREFIX = 'r:';
const BATCH_PREFIX = 'b:';
const KEY_PREFIX = 'k:';

/**
 * The live hub's hints. Sent by the events triggers on executions, jobs, runs and
 * alert_notifications (`e`, 000009, 000020, 000022), by the withdrawal of a cron occurrence written
 * ahead (`e`, 000056), on findings (`f`, 000009), on runs whose
 * status or progress moved (`r:<id>`, 000022), on batches whose counts, open or completed_at moved
 * (`b:<id>`, 000049), by the catalogue triggers on workers, interval_handlers, run_schedules and
 * runs (`c`, 000029), and inside the transaction that
 * changes an API key (`k:<id>`, src/db/repositories/api-keys.ts notifyKeyChanged). Listened to by each
 * gateway's live hub (src/subscriptions/hub/hint-listener.ts): `e` and `f` read the streams again,
 * `r` the run, `b` the batch, `k` the key's standing, `c` the catalogue.
 */
export const liveChannel: Channel<LiveHint> = {
  name: 'jobgate_events',
  sentByTriggers: [
    'jobgate_events_executions_insert',
    'jobgate_events_executions_update',
    'jobgate_events_jobs_insert',
    'jobgate_events_jobs_update',
    'jobgate_events_runs_insert',
    'jobgate_events_runs_update',
    'jobgate_events_findings_insert',
    'jobgate_events_alerts_insert',
    'jobgate_catalog_hint',
    'jobgate_events_batches_update',
    'jobgate_withdraw_ahead',
  ],
  encode(hint) {
    switch (hint.kind) {
      case 'events':
        return 'e';
      case 'findings':
        return 'f';
      case 'catalog':
        return 'c';
      case 'run':
        return RUN_PREFIX + hint.runId;
      case 'batch':
        return BATCH_PREFIX + hint.batchId;
      case 'key':
        return KEY_PREFIX + hint.keyId;
    }
  },
  decode(payload) {
    if (payload === 'e') return { kind: 'events' };
    if (payload === 'f') return { kind: 'findings' };
    if (payload === 'c') return { kind: 'catalog' };
    const runId = after(RUN_PREFIX, payload);
    if (runId !== undefined) return { kind: 'run', runId };
    const batchId = after(BATCH_PREFIX, payload);
    if (batchId !== undefined) return { kind: 'batch', batchId };
    const keyId = after(KEY_PREFIX, payload);
    return keyId === undefined ? undefined : { kind: 'key', keyId };
  },
};

/** `jobgate_runs`: a recoverable run is waiting for a runner. */
export interface RunWaitingHint {
  /** The recoverable handler's name. */
  name: string;
}

/**
 * A run started or resumed; the payload is its handler's name. Sent inside triggerRun's
 * transaction (src/db/repositories/runs.ts notifyRunWaiting). No trigger sends it, and no process of
 * this version listens: runners find waiting runs by polling (`enginePollMs`).
 */
export const runWaitingChannel: Channel<RunWaitingHint> = {
  name: 'jobgate_runs',
  sentByTriggers: [],
  encode: (hint) => hint.name,
  decode: (payload) => (payload === '' ? undefined : { name: payload }),
};

/** Every channel above (not the listeners' probe channels, which are each one connection's own). */
export const CHANNELS: readonly Channel<unknown>[] = [workChannel, cancelChannel, liveChannel, runWaitingChannel];

/**
 * A listening connection's probe (src/db/listener.ts): it notifies its own channel,
 * `jobgate_probe_<connection token>`, with `probe:<nonce>` and expects it back, which tells a
 * connection that works from one behind a transaction-mode pooler. Sent and heard by that
 * connection only; nobody else listens.
 */
export const probeChannel = {
  /** The channel of the connection that `token` names. */
  name: (token: string): string => `jobgate_probe_${token}`,
  encode: (nonce: string): string => `probe:${nonce}`,
  /** The nonce; undefined for a payload that is not a probe. */
  decode: (payload: string): string | undefined => after('probe:', payload),
};
