/**
 * Recoverable runs, as operators and frontends see them: trigger (idempotent), cancel, read,
 * and their findings. The runner that executes them is src/service/engine/runs/recoverable.ts.
 */
import { z } from 'zod';
import { HANDLER_NAME, HANDLER_NAME_RULE } from '../../db/handler-name.js';
import { isUuid, scoped, type Executor } from '../../db/repositories/scope.js';
import { isPgError, UNIQUE_VIOLATION } from '../../db/sqlstate.js';
import type { Actor } from '../kernel/actor.js';
import { mutate } from '../kernel/audited-mutation.js';
import { CHANGE_ROLE, runCancelRefusal, runPermissions, type RunPermissions } from '../access/permissions.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import type { WorkspaceCursors } from '../kernel/cursors.js';
import { hasLiveRegistration } from '../../db/repositories/handlers.js';
import { ConflictError, NoLiveWorkerError, NotFoundError } from '../kernel/errors.js';
import { jsonValue, pageSchema, text, type PageInput } from '../kernel/inputs.js';
import {
  checkPageCursor,
  COUNT_LIMIT,
  decodeCursor,
  pageConnection,
  pageSize,
  toConnection,
  type Connection,
} from '../kernel/pagination.js';
import { batchedFirstPages, batchedRead } from '../kernel/batched-reads.js';
import {
  countFindings,
  countFindingsOf,
  findFinding,
  findingCountsOf,
  findingPage,
  firstFindingsOf,
  type FindingListFilter as FindingRowFilter,
} from '../../db/repositories/findings.js';
import * as runsRepo from '../../db/repositories/runs.js';
import type { RunRecord } from '../../db/types.js';
import { withEventCursor } from '../live/event-cursor.js';

import type { PauseKind, RunStatus, Severity } from '../../db/types.js';

export type { PauseKind, RunStatus, Severity } from '../../db/types.js';

export interface Run {
  id: string;
  workspaceId: string;
  name: string;
  status: RunStatus;
  params: unknown;
  /** The checkpointed cursor as base64, or null before the first checkpoint. */
  cursorBase64: string | null;
  stats: Record<string, unknown>;
  processed: number;
  total: number | null;
  /** processed / total, when total is known. */
  progress: number | null;
  startedAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
  heartbeatAt: Date | null;
  error: string | null;
  pauseReason: string | null;
  /** Set while PAUSED: CANCELLED (an operator), CRASHED (its worker died) or HANDLER (it paused itself). */
  pauseKind: PauseKind | null;
  /** Retries spent since the run last advanced its cursor (its handler threw each time). */
  retryAttempt: number;
  /** The retries its handler allows after a throw; null before its first failure. */
  retryBudget: number | null;
  /** Whether it waits (RUNNING, no worker holds it) to be tried again after its handler threw. */
  waitingToRetry: boolean;
  /** When it is taken again, while it waits after a failure (a throw, or its database lost); else null. */
  nextAttemptAt: Date | null;
  /**
   * Set on the object a mutation returns (see ../live/event-cursor.ts): the event cursor from just
   * before the mutation, to subscribe `after`. Absent on objects read by queries.
   */
  eventCursor?: string;
}

export interface Finding {
  /** Opaque and stable: the row's id sealed with its workspace's key (../kernel/cursors.ts); also the `after` of the next page or stream. */
  id: string;
  runId: string;
  kind: string;
  severity: Severity;
  resourceId: string;
  detail: unknown;
  createdAt: Date;
}

/** A runs row as read (every column; see src/db/types.ts). */
export type RunRow = RunRecord;

type RunFields = Pick<
  RunRow,
  | 'id'
  | 'workspace_id'
  | 'name'
  | 'status'
  | 'params'
  | 'cursor'
  | 'stats'
  | 'processed'
  | 'total'
  | 'started_at'
  | 'updated_at'
  | 'finished_at'
  | 'heartbeat_at'
  | 'error'
  | 'pause_reason'
  | 'pause_kind'
  | 'owner'
  | 'resume_after'
  | 'retry_attempts'
  | 'retry_budget'
>;

export const toRun = (r: RunFields): Run => {
  const processed = Number(r.processed);
  const total = r.total === null ? null : Number(r.total);
  // Handed back after a failure: RUNNING, unowned, not to be taken before resume_after.
  const waiting = r.status === 'RUNNING' && r.owner === null && r.resume_after !== null;
  return {
    id: r.id,
    workspaceId: r.workspace_id,
    name: r.name,
    status: r.status,
    params: r.params,
    cursorBase64: r.cursor ? r.cursor.toString('base64') : null,
    stats: r.stats,
    processed,
    total,
    progress: total ? Math.min(1, processed / total) : null,
    startedAt: r.started_at,
    updatedAt: r.updated_at,
    finishedAt: r.finished_at,
    heartbeatAt: r.heartbeat_at,
    error: r.error,
    pauseReason: r.pause_reason,
    pauseKind: r.pause_kind,
    retryAttempt: r.retry_attempts,
    retryBudget: r.retry_budget,
    waitingToRetry: waiting && r.retry_attempts > 0,
    nextAttemptAt: waiting ? r.resume_after : null,
  };
};

/** The run of this workspace with this id; NOT_FOUND otherwise (also for an id of another workspace). */
export async function findRun(db: Executor, workspaceId: string, id: string): Promise<RunRow> {
  if (!isUuid(id)) throw new NotFoundError('Run', id);
  const row = await runsRepo.findRunById(db, workspaceId, id);
  if (!row) throw new NotFoundError('Run', id);
  return row;
}

/** A findings row as the API shows it, its id sealed with its workspace's cursors. */
export const toFinding = (
  r: { id: string | number; run_id: string; kind: string; severity: Severity; resource_id: string; detail: unknown; created_at: Date },
  cursors: WorkspaceCursors,
): Finding => ({
  id: cursors.seal('finding', r.id),
  runId: r.run_id,
  kind: r.kind,
  severity: r.severity,
  resourceId: r.resource_id,
  detail: r.detail,
  createdAt: r.created_at,
});

export const triggerRunSchema = z.object({
  name: z.string().regex(HANDLER_NAME, HANDLER_NAME_RULE),
  params: jsonValue().optional(),
  /** Queue the run even when no live worker has registered the handler (it waits for one). */
  force: z.boolean().nullish(),
  /** With no live run and the newest run FAILED: resume that run from its last checkpoint. */
  fromCheckpoint: z.boolean().nullish(),
});
export type TriggerRunInput = z.input<typeof triggerRunSchema>;

export const findingFilterSchema = z.object({
  kind: text().max(200).nullish(),
  severity: z.enum(['INFO', 'WARNING', 'ERROR', 'DATA_LOSS']).nullish(),
  first: z.number().int().min(1).max(500).nullish(),
  after: text().max(100).nullish(),
});
export type FindingFilter = z.input<typeof findingFilterSchema>;

export const findingListFilterSchema = findingFilterSchema.pick({ kind: true, severity: true });
export type FindingListFilter = z.input<typeof findingListFilterSchema>;

export const runFilterSchema = z.object({
  name: text().max(200).nullish(),
  status: z.enum(['RUNNING', 'CANCEL_REQUESTED', 'PAUSED', 'COMPLETED', 'FAILED'] satisfies RunStatus[]).nullish(),
});
export type RunFilter = z.input<typeof runFilterSchema>;

export interface TriggerRunResult {
  run: Run;
  /**
   * STARTED (a fresh run), RESUMED (a paused run, or with `fromCheckpoint` a failed one,
   * continues with its cursor), ACTIVE (already
   * running: returned as it is), or HELD (paused by an operator's cancel and left paused: only
   * with `resumeCancelled: false`, as schedules trigger).
   */
  outcome: 'STARTED' | 'RESUMED' | 'ACTIVE' | 'HELD';
  /**
   * Set on the object a mutation returns (see ../live/event-cursor.ts): the event cursor from just
   * before the mutation, to subscribe `after`. Absent on objects read by queries.
   */
  eventCursor?: string;
}

export interface TriggerRunOptions {
  /**
   * Whether a run paused by an operator's cancel is resumed. Default true (an operator, GraphQL,
   * the library); schedules pass false, so a scan an operator stopped stays stopped.
   */
  resumeCancelled?: boolean;
}

/**
 * The newest run of the name resumed from its last checkpoint, when it FAILED; undefined when it
 * did not (the trigger then starts a fresh run).
 */
async function resumeFailed(trx: Executor, workspaceId: string, name: string): Promise<RunRow | undefined> {
  const latest = await runsRepo.findLatestRunForUpdate(trx, workspaceId, name);
  if (latest?.status !== 'FAILED') return undefined;
  let resumed: RunRow | undefined;
  try {
    resumed = await runsRepo.resumeFailedRun(trx, latest.id);
  } catch (error) {
    // Another trigger started a run of the name after this one looked: that one is live now.
    if (isPgError(error, UNIQUE_VIOLATION))
      throw new ConflictError('another run of this handler was triggered concurrently and is live; trigger again to see it');
    throw error;
  }
  await runsRepo.notifyRunWaiting(trx, name);
  return resumed;
}

// eslint-disable-next-line max-lines-per-function -- an area factory: short methods sharing one context, its length theirs added up
export function createRunsService(ctx: ServiceContext) {
  const { db } = ctx;
  // A page of runs counts their findings together (../kernel/batched-reads.ts).
  const countsOf = batchedRead((ws, ids) => findingCountsOf(db, scoped(ws), ids.filter(isUuid)), !ctx.outer);
  // And their first pages of findings, with their counts.
  const firstFindings = batchedFirstPages(
    (ws, ids, filter: FindingRowFilter, limit) => firstFindingsOf(db, scoped(ws), ids, filter, limit),
    (row) => row.run_id,
    (ws, ids, filter) => countFindingsOf(db, scoped(ws), ids, filter, COUNT_LIMIT),
    !ctx.outer,
  );

  const service = {
    /**
     * Triggers a recoverable handler by name, idempotently: an active run is returned as it is;
     * a paused one is resumed with the same cursor and stats; otherwise a fresh run starts. The
     * partial unique index on live runs makes concurrent triggers converge on one run. With
     * `resumeCancelled: false` (schedules) a run paused by an operator's cancel is left paused
     * (HELD); runs paused by a crash or by their handler are resumed either way. With
     * `fromCheckpoint`, when no run of the name is live and the newest one FAILED, that run is
     * resumed from its last checkpoint (RESUMED, its retry budget whole) instead of a fresh start.
     * A name no live worker has registered (see the handler catalogue) is refused with NOT_FOUND
     * (`reason: NO_LIVE_WORKER`), whatever runs exist, unless `force`, which queues the run for a
     * worker to come. Inside the caller's transaction, the check reads the workers' rows as that
     * transaction sees them.
     * Throws NOT_FOUND, VALIDATION_FAILED, FORBIDDEN.
     */
    async triggerRun(actor: Actor, raw: TriggerRunInput, options: TriggerRunOptions = {}): Promise<TriggerRunResult> {
      const target = (r: TriggerRunResult) => ({ type: 'Run', id: r.run.id });
      return withEventCursor(ctx, actor.workspaceId, () =>
        mutate(ctx, actor, { action: 'run.trigger', role: CHANGE_ROLE, input: raw, target }, async (trx) => {
          const input = parseInput(triggerRunSchema, raw);
          if (!input.force && !(await hasLiveRegistration(trx, 'RECOVERABLE', input.name))) {
            throw new NoLiveWorkerError(
              'RECOVERABLE',
              input.name,
              'start a worker that registers it, or trigger with force: true to queue the run until one does',
            );
          }
          const live = () => runsRepo.findLiveRunForUpdate(trx, actor.workspaceId, input.name);
          let row = await live();
          if (!row && input.fromCheckpoint) {
            const resumed = await resumeFailed(trx, actor.workspaceId, input.name);
            if (resumed) return { run: toRun(resumed), outcome: 'RESUMED' as const };
          }
          if (!row) {
            const inserted = await runsRepo.insertRunUnlessLive(trx, {
              workspaceId: actor.workspaceId,
              name: input.name,
              params: input.params ?? {},
              createdByKeyId: actor.keyId ?? null,
            });
            if (inserted) {
              await runsRepo.notifyRunWaiting(trx, input.name);
              return { run: toRun(inserted), outcome: 'STARTED' as const };
            }
            row = await live(); // lost the race: the winner is committed
            if (!row) throw new ConflictError('the run was triggered concurrently and has already finished; trigger it again');
          }
          if (row.status !== 'PAUSED') return { run: toRun(row), outcome: 'ACTIVE' as const };
          if (row.pause_kind === 'CANCELLED' && options.resumeCancelled === false) return { run: toRun(row), outcome: 'HELD' as const };
          // Resume: same cursor, stats and started_at; any runner with the handler takes it.
          const resumed = await runsRepo.resumePausedRun(trx, row.id);
          await runsRepo.notifyRunWaiting(trx, input.name);
          return { run: toRun(resumed!), outcome: 'RESUMED' as const };
        }),
      );
    },

    /**
     * Asks a running run to stop at its next safe boundary: it becomes CANCEL_REQUESTED, and
     * PAUSED (kind CANCELLED) once the handler sees it. A live run no runner holds (not taken
     * yet, handed back, or of a handler no worker has) is PAUSED at once. A run already paused by a crash or by its
     * handler is marked CANCELLED, so its schedule no longer resumes it. OPERATOR keys may cancel
     * only runs their key triggered.
     * Throws NOT_FOUND, CONFLICT (already finished), FORBIDDEN.
     */
    async cancelRun(actor: Actor, id: string): Promise<Run> {
      return withEventCursor(ctx, actor.workspaceId, () =>
        mutate(ctx, actor, { action: 'run.cancel', role: CHANGE_ROLE, input: { id }, target: { type: 'Run', id } }, async (trx) => {
          if (!isUuid(id)) throw new NotFoundError('Run', id);
          const row = await runsRepo.findRunById(trx, actor.workspaceId, id, { forUpdate: true });
          if (!row) throw new NotFoundError('Run', id);
          const refusal = runCancelRefusal(actor, row);
          if (refusal) throw refusal;
          if (row.status === 'COMPLETED' || row.status === 'FAILED')
            throw new ConflictError(`run ${id} has already finished (${row.status})`, { status: row.status });
          if (row.status === 'PAUSED') {
            if (row.pause_kind === 'CANCELLED') return toRun(row);
            return toRun(await runsRepo.markPausedRunCancelled(trx, id));
          }
          if (row.owner === null) {
            // No handler is running it to see a CANCEL_REQUESTED, and perhaps none ever will (a
            // handler no worker registers): left to a runner, the run could never be stopped. A
            // runner's take skips this locked row, and after the commit finds it paused.
            return toRun(await runsRepo.pauseRunCancelled(trx, id));
          }
          if (row.status !== 'RUNNING') return toRun(row);
          return toRun(await runsRepo.requestRunCancel(trx, id));
        }),
      );
    },

    /** Which actions on the run the actor may take, by the rules cancelRun and triggerRun enforce. Throws NOT_FOUND. */
    async runPermissions(actor: Actor, id: string): Promise<RunPermissions> {
      return runPermissions(actor, await findRun(db, actor.workspaceId, id));
    },

    async run(actor: Actor, id: string): Promise<Run> {
      return toRun(await findRun(db, actor.workspaceId, id));
    },

    /**
     * Runs, newest first, by name and/or status, a page at a time. Throws VALIDATION_FAILED (a
     * cursor this list did not issue, a page size out of range).
     */
    async runConnection(actor: Actor, rawFilter: RunFilter = {}, rawPage: PageInput = {}): Promise<Connection<Run>> {
      const filter = parseInput(runFilterSchema, rawFilter);
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const afterId = page.after ? decodeCursor(page.after) : undefined;
      const rows = await runsRepo.runPage(db, actor.workspaceId, filter, { limit: size + 1, afterId });
      await checkPageCursor(db, 'runs', actor.workspaceId, page.after, rows);
      return toConnection(rows, size, toRun, () => runsRepo.countRuns(db, actor.workspaceId, filter, COUNT_LIMIT));
    },

    /** @deprecated The newest 100 runs only; use `runConnection`, which pages past them. */
    async runs(actor: Actor, filter: { name?: string | null; status?: RunStatus | null } = {}): Promise<Run[]> {
      return (await service.runConnection(actor, filter, { first: 100 })).edges.map((e) => e.node);
    },

    /**
     * A run's findings in the order recorded, a page at a time, with a bounded count when asked
     * for. An id that names no run of the workspace has none. VALIDATION_FAILED for a cursor this
     * list did not issue or a page size out of range.
     */
    async findingConnection(
      actor: Actor,
      runId: string,
      rawFilter: FindingListFilter = {},
      rawPage: PageInput = {},
    ): Promise<Connection<Finding>> {
      const filter = parseInput(findingListFilterSchema, rawFilter);
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const ws = scoped(actor.workspaceId);
      const cursors = await ctx.cursors.forWorkspace(db, ws);
      const afterId = page.after ? cursors.open('finding', page.after, ['after']) : 0n;
      if (!isUuid(runId))
        return pageConnection<Finding>(
          [],
          size,
          (f) => f.id,
          async () => 0,
        );
      // A first page is read with the other runs' on the same page of runs.
      if (!page.after) {
        const first = firstFindings(actor.workspaceId, runId, filter, size);
        return pageConnection(
          (await first.rows).map((r) => toFinding(r, cursors)),
          size,
          (f) => f.id,
          first.count,
        );
      }
      const rows = await findingPage(db, ws, runId, filter, { limit: size + 1, afterId });
      // A finding's id is its cursor: the page after it is the findings above it.
      return pageConnection(
        rows.map((r) => toFinding(r, cursors)),
        size,
        (f) => f.id,
        () => countFindings(db, ws, runId, filter, COUNT_LIMIT),
      );
    },

    /** A run's findings counted per kind and severity (all of them, not a page). */
    async findingCounts(actor: Actor, runId: string) {
      if (!isUuid(runId)) return [];
      return (await countsOf(actor.workspaceId, runId.toLowerCase())) ?? [];
    },

    /** One finding by its (sealed) id; NOT_FOUND when it is not one of the workspace's. */
    async finding(actor: Actor, id: string): Promise<Finding> {
      const ws = scoped(actor.workspaceId);
      const cursors = await ctx.cursors.forWorkspace(db, ws);
      let rowId: bigint;
      try {
        rowId = cursors.open('finding', id, ['id']);
      } catch {
        throw new NotFoundError('Finding', id);
      }
      const row = await findFinding(db, ws, rowId);
      if (!row) throw new NotFoundError('Finding', id);
      return toFinding(row, cursors);
    },

    /** A run's findings in the order recorded, with counts per kind and severity. */
    async findings(actor: Actor, runId: string, raw: FindingFilter = {}) {
      const f = parseInput(findingFilterSchema, raw);
      const ws = scoped(actor.workspaceId);
      if (!isUuid(runId))
        return { findings: [] as Finding[], nextCursor: null, counts: [] as { kind: string; severity: Severity; count: number }[] };
      const cursors = await ctx.cursors.forWorkspace(db, ws);
      const afterId = f.after ? cursors.open('finding', f.after, ['after']) : 0n;
      const size = f.first ?? 100;
      const rows = await findingPage(db, ws, runId, f, { limit: size + 1, afterId });
      const counts = (await countsOf(actor.workspaceId, runId.toLowerCase())) ?? [];
      const page = rows.slice(0, size).map((r) => toFinding(r, cursors));
      return {
        findings: page,
        // A page goes on after its last finding: its id is the cursor.
        nextCursor: rows.length > size ? page.at(-1)!.id : null,
        counts,
      };
    },
  };
  return service;
}
