/**
 * One execution of a recoverable run in its runner (runner.ts): the store the
 * handler talks to, the heartbeat while it runs, and the record of how it ended. Every write is
 * fenced on the run's take (src/db/statements/run-fence.ts): a runner that lost the run changes
 * nothing, and learns so from the write.
 */
import { inspect } from 'node:util';
import type pg from 'pg';
import { z } from 'zod';
import {
  checkpointRun,
  endRun,
  heartbeatRun,
  ownedRunStatus,
  recordFindingFenced,
  runHeld,
  type Checkpoint,
  type RunEnding,
  type RunFence,
  type TakenRun,
} from '../../../db/statements/run-fence.js';
import { inTransaction } from '../../../db/transaction.js';
import { isConnectionError } from '../../../db/unavailable.js';
import type { Logger } from '../../../log.js';
import { parseInput } from '../../kernel/context.js';
import { ValidationError } from '../../kernel/errors.js';
import { jsonValue, storableText } from '../../kernel/inputs.js';
import type { Observer } from '../../kernel/observer.js';
import { waitForDatabase, type Availability } from '../runtime/availability.js';
import {
  DEFAULT_RUN_RETRY,
  outcome,
  RunLostError,
  RunStoreUnavailableError,
  type RecoverableHandler,
  type RunOutcome,
  type RunStore,
} from './recoverable.js';

/** What the runner knows of one execution: whether it is stopping, whether the run was lost. */
export interface RunState {
  stopping: boolean;
  lost: boolean;
  done: Promise<void>;
}

export interface RunExecutionDeps {
  pool: pg.Pool;
  log: Logger;
  owner: string;
  heartbeatMs: number;
  availability: Availability;
  observer: Observer;
}

/** What a checkpoint's progress must be to be stored (the database would refuse the rest, less clearly). */
const progressSchema = z.object({
  processed: z.number(),
  total: z.number().int().min(0).nullish(),
  stats: jsonValue().optional(),
});

type Progress = Parameters<RunStore['checkpoint']>[1];

/** The cursor as stored: a Buffer's bytes, or JSON text. Throws ValidationError for what JSON cannot hold. */
function encodeCursor(c: unknown): [Buffer | null, boolean] {
  if (c === null) return [null, false];
  if (Buffer.isBuffer(c)) return [c, false];
  let json: string | undefined;
  try {
    json = JSON.stringify(c);
  } catch (error) {
    throw ValidationError.at(['cursor'], `cannot be stored as JSON (${(error as Error).message})`);
  }
  // Stored as NULL, undefined would silently send a resumed run back to the start.
  if (json === undefined)
    throw ValidationError.at(
      ['cursor'],
      `cannot be stored as JSON (${c === undefined ? 'undefined; checkpoint null to start over' : `a ${typeof c}`})`,
    );
  return [Buffer.from(json), true];
}

/**
 * What the handler returned, as an outcome the database can record. Anything else (a handler
 * that returns nothing) is a failure saying so: an outcome that cannot be written would leave
 * the run owned, unheartbeated, to be swept later as if its worker had crashed.
 */
function recordable(result: unknown): RunOutcome {
  const r = result as Partial<{ kind: string; message: unknown }> | null | undefined;
  if (r?.kind === 'completed' || r?.kind === 'paused') return r as RunOutcome;
  if (r?.kind === 'failed') return { kind: 'failed', message: storableText(String(r.message)).slice(0, 2000) };
  return outcome.failed(
    `the handler returned ${inspect(result, { depth: 1, breakLength: Infinity }).slice(0, 200)}, not an outcome (outcome.completed(), outcome.paused() or outcome.failed())`,
  );
}

/** A checkpoint as stored, and the stats it leaves. Throws ValidationError, writing nothing, for what cannot be stored. */
function prepareCheckpoint(stats: Record<string, unknown>, next: unknown, progress: Progress) {
  parseInput(progressSchema, progress);
  const [bytes, json] = encodeCursor(next);
  const merged = mergeStats(stats, progress.stats);
  const checkpoint: Checkpoint = {
    cursor: bytes,
    cursorJson: json,
    processed: Math.max(0, Math.floor(progress.processed)),
    total: progress.total ?? null,
    stats: JSON.stringify(merged),
  };
  return { checkpoint, merged };
}

function sameBytes(a: Buffer | null, b: Buffer | null): boolean {
  return a === null || b === null ? a === b : a.equals(b);
}

function mergeStats(into: Record<string, unknown>, add: Record<string, unknown> | undefined): Record<string, unknown> {
  if (!add) return into;
  const out = { ...into };
  for (const [k, v] of Object.entries(add)) {
    out[k] = typeof v === 'number' && typeof out[k] === 'number' ? (out[k] as number) + v : v;
  }
  return out;
}

/** The store a handler's run is given, and what it learned of the run and its database. */
interface ExecutionStore {
  store: RunStore;
  /** The last cursor checkpointed (or the one the run was taken at). */
  cursor(): unknown;
  /**
   * Whether the last store call found the database unreachable (a later one that works clears
   * it). If so when the handler ends by throwing or failing, the run is handed back, after a
   * backoff, rather than recorded FAILED; a pause or completion it returns stands.
   */
  unavailable(): boolean;
  /** The run's progress as its checkpoints recorded it: items processed in all (every take's) and its stats. */
  progress(): { processed: number; stats: Record<string, unknown> };
  /** Retries spent since the run last made progress (a committed checkpoint that moved its cursor). */
  retriesSpent(): number;
}

/** Calls `call` for run `runId`; tells `seen` whether the database answered; a connection error becomes RunStoreUnavailableError. */
async function reachRun<T>(runId: string, seen: (answered: boolean) => void, call: () => Promise<T>): Promise<T> {
  try {
    const result = await call();
    seen(true);
    return result;
  } catch (error) {
    if (!isConnectionError(error)) throw error;
    seen(false);
    throw new RunStoreUnavailableError(`run ${runId}: the database could not be reached (${(error as Error).message})`, { cause: error });
  }
}

function createExecutionStore(run: TakenRun, fence: RunFence, state: RunState, deps: RunExecutionDeps): ExecutionStore {
  const { pool } = deps;
  let stats = run.stats ?? {};
  let cursor: unknown = run.cursor === null ? null : run.cursor_json ? JSON.parse(run.cursor.toString('utf8')) : run.cursor;
  let unavailable = false;
  // The run's total: a checkpoint's `processed` is added to it (src/db/statements/run-fence.ts), not a total itself.
  let processed = Number(run.processed);
  let storedBytes: Buffer | null = run.cursor;
  let retriesSpent = run.retry_attempts;
  const lost = (): never => {
    state.lost = true;
    throw new RunLostError(`run ${run.id} is no longer this worker's`);
  };
  const reach = <T>(call: () => Promise<T>): Promise<T> => reachRun(run.id, (answered) => (unavailable = !answered), call);
  const prepare = (next: unknown, progress: Progress) => prepareCheckpoint(stats, next, progress);
  // Only once written: a checkpoint retried after a failure does not count its stats twice.
  const committed = (next: unknown, checkpoint: Checkpoint, merged: Record<string, unknown>) => {
    deps.observer.runCheckpointed();
    if (!sameBytes(storedBytes, checkpoint.cursor)) retriesSpent = 0;
    storedBytes = checkpoint.cursor;
    stats = merged;
    cursor = next;
    processed += checkpoint.processed;
  };
  const store: RunStore = {
    runId: run.id,
    startedAt: run.started_at,
    params: run.params,
    loadCursor: async () => cursor,
    async checkpoint(next, progress) {
      const { checkpoint, merged } = prepare(next, progress);
      if (!(await reach(() => checkpointRun(pool, fence, checkpoint)))) lost();
      committed(next, checkpoint, merged);
    },
    async status() {
      if (state.stopping || state.lost) return 'CANCEL_REQUESTED';
      // Anything but the run as this runner took it, still live (swept and paused, resumed and
      // taken by another runner, finished), means: stop now.
      const status = await reach(() => ownedRunStatus(pool, fence));
      if (status === undefined) state.lost = true;
      return status ?? 'CANCEL_REQUESTED';
    },
    async recordFinding(f) {
      if (state.lost) lost();
      const detail = JSON.stringify(f.detail ?? {});
      const { live, inserted } = await reach(() => recordFindingFenced(pool, fence, { ...f, detail }));
      if (!live) lost();
      return inserted;
    },
    // As a job's fenced transaction (../delivery/fenced-transaction.ts): a cheap check first, the
    // handler's writes, then the fence is locked by the checkpoint's update (or a heartbeat) and
    // the commit follows at once, so nobody takes the run over in between.
    async transaction(fn) {
      if (state.lost) lost();
      let pending: { next: unknown; checkpoint: Checkpoint; merged: Record<string, unknown> } | undefined;
      const result = await reach(() =>
        inTransaction(pool, async (client) => {
          if (!(await runHeld(client, fence, { lock: false }))) lost();
          const value = await fn(client, {
            checkpoint(next, progress) {
              pending = { next, ...prepare(next, progress) };
            },
          });
          const held = pending ? await checkpointRun(client, fence, pending.checkpoint) : await runHeld(client, fence, { lock: true });
          if (!held) lost();
          return value;
        }),
      );
      if (pending) committed(pending.next, pending.checkpoint, pending.merged);
      return result;
    },
  };
  return {
    store,
    cursor: () => cursor,
    unavailable: () => unavailable,
    progress: () => ({ processed, stats }),
    retriesSpent: () => retriesSpent,
  };
}

/** Heartbeats the run while its handler runs; returns the stop. */
function heartbeatWhileRunning(fence: RunFence, state: RunState, deps: RunExecutionDeps): () => void {
  const beat = setInterval(() => {
    heartbeatRun(deps.pool, fence)
      .then((held) => {
        if (!held) state.lost = true;
      })
      .catch(
        (e: Error) =>
          deps.availability.unreachable(e, 'run heartbeat') ||
          deps.log.warn(`runner ${deps.owner}: heartbeat of run ${fence.runId} failed: ${e.message}`),
      );
  }, deps.heartbeatMs);
  beat.unref();
  return () => clearInterval(beat);
}

/** What a handler's execution came to: what it returned, or a failure for what it threw (retryable unless its params were refused). */
interface HandlerResult {
  result: unknown;
  threw: boolean;
}

/** Runs the handler on its (validated) params. */
async function runHandler(handler: RecoverableHandler, run: TakenRun, store: RunStore): Promise<HandlerResult> {
  let params = run.params;
  if (handler.params) {
    let parsed: ReturnType<NonNullable<RecoverableHandler['params']>['safeParse']>;
    try {
      parsed = handler.params.safeParse(params);
    } catch (error) {
      // A schema that cannot parse synchronously (an async refinement): refused like bad params.
      return { result: outcome.failed(`Error: params rejected: ${(error as Error).message}`), threw: false };
    }
    if (!parsed.success) {
      const why = parsed.error.issues.map((i) => `${i.path.join('.') || '(params)'}: ${i.message}`).join('; ');
      return { result: outcome.failed(`Error: params rejected: ${why}`), threw: false };
    }
    params = parsed.data;
  }
  try {
    return { result: await handler.run(store, params), threw: false };
  } catch (error) {
    const result =
      error instanceof RunLostError
        ? { kind: 'failed', message: error.message }
        : outcome.failed(`${(error as Error).name}: ${(error as Error).message}`);
    return { result, threw: true };
  }
}

/** How the run ends, from what its handler returned and what the store saw of the database. */
function endingOf(handler: RecoverableHandler, { result, threw }: HandlerResult, exec: ExecutionStore, state: RunState): RunEnding {
  let final = recordable(result);
  let pausedAt: [Buffer | null, boolean] = [null, false];
  if (final.kind === 'paused') {
    try {
      pausedAt = encodeCursor(final.cursor === undefined ? exec.cursor() : final.cursor);
    } catch (error) {
      // Its last checkpoint stays in the row.
      final = outcome.failed(`${(error as Error).name}: ${(error as Error).message}`);
    }
  }
  // The database failed the run, not its handler. The cursor, processed count and stats the
  // database holds were committed together by the last checkpoint that got through: they stay (a
  // checkpoint whose answer was lost may have committed; writing the cursor known here could
  // rewind past it). Taken again after a backoff, unless an operator asked it to stop.
  if (exec.unavailable() && final.kind === 'failed') return { kind: 'outage' };
  if (final.kind === 'failed') {
    const retry = {
      budget: handler.retry?.budget ?? DEFAULT_RUN_RETRY.budget,
      backoffMs: handler.retry?.backoffMs ?? DEFAULT_RUN_RETRY.backoffMs,
      maxBackoffMs: handler.retry?.maxBackoffMs ?? DEFAULT_RUN_RETRY.maxBackoffMs,
    };
    // A throw may be transient: tried again from the last checkpoint while budget is left. A
    // failure the handler returned is its verdict, final.
    if (threw && exec.retriesSpent() < retry.budget) return { kind: 'retry', message: final.message, ...retry };
    return { ...final, budget: retry.budget };
  }
  if (final.kind !== 'paused') return final;
  const [cursor, cursorJson] = pausedAt;
  // Shutdown: the run is handed back for another runner, unless an operator asked to cancel.
  return { kind: state.stopping ? 'hand-back' : 'paused', cursor, cursorJson };
}

/** A cursor as a log line shows it: its JSON, or base64 for bytes; cut to 500 characters. */
function loggedCursor(cursor: Buffer | null, json: boolean): unknown {
  if (cursor === null) return null;
  const text = json ? cursor.toString('utf8') : `base64:${cursor.toString('base64')}`;
  if (text.length > 500) return `${text.slice(0, 500)}…`;
  return json ? (JSON.parse(text) as unknown) : text;
}

/**
 * A run's one log line when this take of it ends (recorded): `{ kind: 'recoverable', handler,
 * run_id, outcome, cause, completed, paused, count, elapsed_ms, extra, cursor }`. `count` is the
 * run's items processed so far (the sum of its checkpoints' `processed`), `extra` its accumulated stats, `elapsed_ms`
 * this take's time (a run resumed after a pause has one line per take). A crashed run's line is the
 * sweep's (./runner.ts).
 */
/** How a take ended as its log line says: as recorded, or a throw that met an operator's cancel (recorded as that pause). */
type LoggedEnding = RunEnding | { kind: 'cancelled'; message: string };

function logRunEnd(
  log: RunExecutionDeps['log'],
  owner: string,
  run: TakenRun,
  ending: LoggedEnding,
  progress: { processed: number; stats: Record<string, unknown> },
  elapsedMs: number,
): void {
  const outcome = {
    completed: 'COMPLETED',
    failed: 'FAILED',
    retry: 'RETRYING',
    paused: 'PAUSED',
    cancelled: 'PAUSED',
    'hand-back': 'HANDED_BACK',
    outage: 'HANDED_BACK',
  }[ending.kind];
  const cause = {
    completed: null,
    failed: 'HANDLER',
    retry: 'HANDLER',
    paused: null,
    cancelled: 'HANDLER',
    'hand-back': 'SHUTDOWN',
    outage: 'OUTAGE',
  }[ending.kind];
  const fields = {
    kind: 'recoverable',
    handler: run.name,
    run_id: run.id,
    outcome,
    cause,
    completed: ending.kind === 'completed',
    paused: ending.kind === 'paused' || ending.kind === 'cancelled',
    count: progress.processed,
    elapsed_ms: elapsedMs,
    extra: progress.stats,
    cursor: ending.kind === 'paused' || ending.kind === 'hand-back' ? loggedCursor(ending.cursor, ending.cursorJson) : null,
  };
  const why =
    ending.kind === 'failed'
      ? `: ${ending.message}`
      : ending.kind === 'retry'
        ? `: ${ending.message}; retrying from its last checkpoint`
        : ending.kind === 'cancelled'
          ? `: cancelled by an operator; its handler threw: ${ending.message}`
          : '';
  const msg = `runner ${owner}: run ${run.id} (${run.name}): ${outcome}${why}`;
  if (ending.kind === 'completed' || ending.kind === 'paused') log.info(msg, fields);
  else log.warn(msg, fields);
}

/** Runs a taken run's handler to its end and records the end, fenced on the take. */
export async function executeRun(handler: RecoverableHandler, run: TakenRun, state: RunState, deps: RunExecutionDeps): Promise<void> {
  const { log, owner } = deps;
  const startedAt = performance.now();
  const fence: RunFence = { runId: run.id, epoch: run.epoch, owner };
  const exec = createExecutionStore(run, fence, state, deps);
  const stopBeating = heartbeatWhileRunning(fence, state, deps);
  let result: HandlerResult;
  try {
    result = await runHandler(handler, run, exec.store);
  } finally {
    stopBeating();
  }
  if (state.lost) {
    log.warn(`runner ${owner}: run ${run.id} was taken from this worker; its outcome is not recorded`);
    return;
  }
  const ending = endingOf(handler, result, exec, state);
  if (ending.kind === 'outage')
    log.warn(`runner ${owner}: run ${run.id} (${run.name}) lost its database mid-run; handing it back to resume from its last checkpoint`);
  try {
    // Through an outage: the hand-back after one is written the moment the database was found
    // gone, so its first try nearly always fails with it, and unretried the run stayed RUNNING
    // with nobody beating for it until a sweep paused it as crashed. The write is fenced on the
    // take, so a try that committed before its answer was lost is refused when repeated.
    const written = await waitForDatabase(deps.availability, 'recoverable runner', () => endRun(deps.pool, fence, ending));
    if (written === undefined) state.lost = true;
    // A retry or failure that met an operator's cancel was recorded as that operator's pause.
    else if (written === 'PAUSED' && (ending.kind === 'retry' || ending.kind === 'failed'))
      logRunEnd(
        log,
        owner,
        run,
        { kind: 'cancelled', message: ending.message },
        exec.progress(),
        Math.round(performance.now() - startedAt),
      );
    else logRunEnd(log, owner, run, ending, exec.progress(), Math.round(performance.now() - startedAt));
  } catch (error) {
    log.error(`runner ${owner}: recording the outcome of run ${run.id} failed: ${(error as Error).message}`);
  }
}
