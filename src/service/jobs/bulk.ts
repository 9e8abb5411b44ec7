/**
 * Bulk operator actions: re-drive or cancel the executions matching a filter (the dead-letter
 * view's "retry all", or a selection by `ids`), pause, resume or cancel many jobs. The selection is audited as one action; then
 * each item gets exactly what its single action does (the same body: ./pause.ts,
 * ./execution-changes.ts), with its own audit row, so a bulk action can do nothing a run of single
 * actions could not. Bounded: at most BULK_LIMIT items per call; a caller repeats the call for
 * more (items already done no longer match). An id given twice is one item: changed, skipped and
 * audited once, in the place it was first given.
 *
 * What a caller can count on (atomicity): the items go BULK_CHUNK at a time, each chunk in one
 * transaction, set-based (a few statements for the chunk, not a transaction per item: a 1,000-id
 * pauseJobs took 1,000 transactions and 8-11 s). Within a chunk:
 *  - each item is all-or-nothing, as its single action is;
 *  - a refused item (NOT_FOUND, RETIRED, FORBIDDEN, CONFLICT, LOCK_HELD) changes nothing, is in
 *    `skipped` with its code and audited with it, and the rest of the chunk goes on;
 *  - the chunk's changes, their events and NOTIFYs, and their audit rows commit together.
 * An unexpected failure (the database's) rolls back the chunk it happened in and fails the call:
 * chunks committed before it stay done (and audited), those after it are not tried. The call as a
 * whole is not atomic, as it never was: a caller repeats it, and what is done no longer matches
 * (or is idempotent: pausing a paused job).
 */
import { z } from 'zod';
import type { Transaction } from 'kysely';
import * as executionList from '../../db/repositories/execution-list.js';
import type { DB } from '../../db/types.js';
import type { Actor } from '../kernel/actor.js';
import { mutate, mutateEach } from '../kernel/audited-mutation.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { DomainError, NotFoundError, type ErrorCode } from '../kernel/errors.js';
import { withEventCursor } from '../live/event-cursor.js';
import { cancelExecutionsIn, retryExecutionsIn } from './execution-changes.js';
import { executionFilterSchema, idSchema, type ExecutionFilter } from '../kernel/inputs.js';
import { pauseJobsIn, resumeJobsIn } from './pause.js';
import { cancelJobIn } from './change.js';
import * as endpointsRepo from '../../db/repositories/endpoints.js';
import { CHANGE_ROLE } from '../access/permissions.js';

export const BULK_LIMIT = 1000;
const DEFAULT_BULK_LIMIT = 100;
/**
 * Items per transaction. A chunk holds its rows' locks until it commits: 250 keeps that to a
 * few tens of milliseconds while a 1,000-item call still costs four transactions (bench/lists.ts).
 */
export const BULK_CHUNK = 250;

export interface BulkSkip {
  id: string;
  code: ErrorCode;
  message: string;
}

export interface BulkResult {
  /** Items the selection matched (at most the limit); an id given twice is one item. */
  matched: number;
  /** Items the action changed, or found already as asked (a paused job paused). */
  changed: number;
  /** Items it left as they were, each once, in order, with the domain error the single action gives. */
  skipped: BulkSkip[];
  /** Whether more items may match than this call took (it stopped at its limit). */
  more: boolean;
  /** The event cursor from just before the first item changed (see ../live/event-cursor.ts). */
  eventCursor?: string;
}

const limitSchema = z.number().int().min(1).max(BULK_LIMIT).nullish();
const idsSchema = z.array(idSchema).min(1).max(BULK_LIMIT);

/** What a chunk's body returns: each item's outcome (a result, or the refusal its single action throws). */
type ApplyChunk = (trx: Transaction<DB>, chunk: string[]) => Promise<Map<string, unknown>>;

/**
 * Applies `apply` to `ids` (distinct, in order) BULK_CHUNK at a time, each chunk audited per item
 * as `action` on `targetType` (mutateEach); `committed` runs after each chunk commits.
 */
async function inChunks(
  ctx: ServiceContext,
  actor: Actor,
  spec: { action: string; targetType: string },
  ids: string[],
  more: boolean,
  apply: ApplyChunk,
  committed: () => void = () => {},
): Promise<BulkResult> {
  const result: BulkResult = { matched: ids.length, changed: 0, skipped: [], more };
  for (let i = 0; i < ids.length; i += BULK_CHUNK) {
    const chunk = ids.slice(i, i + BULK_CHUNK);
    const outcomes = await mutateEach(ctx, actor, { ...spec, role: CHANGE_ROLE }, chunk, (trx) => apply(trx, chunk));
    committed();
    for (const id of chunk) {
      const outcome = outcomes.get(id);
      if (outcome instanceof DomainError) result.skipped.push({ id, code: outcome.code, message: outcome.message });
      else result.changed++;
    }
  }
  return result;
}

/**
 * Cancels the jobs (distinct ids) as cancelJob would, one after the other in id order (the order
 * every statement that locks several jobs or executions takes them: no cycle). Answers each
 * job's outcome and the pending executions cancelled per endpoint name, for the metrics.
 */
async function cancelJobsIn(trx: Transaction<DB>, actor: Actor, ids: readonly string[]) {
  const outcomes = new Map<string, unknown>();
  const pendingCancelled = new Map<string, number>();
  for (const id of [...ids].sort()) {
    try {
      const result = await cancelJobIn(trx, actor, id);
      outcomes.set(id, result);
      if (result.cancelledExecutions > 0) {
        const endpoint = await endpointsRepo.findEndpointById(trx, actor.workspaceId, result.job.endpointId);
        if (endpoint) pendingCancelled.set(endpoint.name, (pendingCancelled.get(endpoint.name) ?? 0) + result.cancelledExecutions);
      }
    } catch (error) {
      // The single action's guards throw before it writes anything: the item is left as it was.
      if (!(error instanceof DomainError)) throw error;
      outcomes.set(id, error);
    }
  }
  return { outcomes, pendingCancelled };
}

/** Each id once, where it first appears. */
const distinct = (ids: string[]) => [...new Set(ids)];

/** The distinct job ids of a bulk job action, validated (1 to BULK_LIMIT) and audited as `action`. */
async function selectJobs(ctx: ServiceContext, actor: Actor, action: string, rawIds: string[]): Promise<string[]> {
  const ids = await mutate(ctx, actor, { action, role: 'OPERATOR', input: { ids: rawIds }, target: { type: 'Job' } }, async () =>
    parseInput(idsSchema, rawIds, ['ids']),
  );
  return distinct(ids);
}

type Cancelling = (
  trx: Transaction<DB>,
  chunk: string[],
) => Promise<{ outcomes: Map<string, unknown>; pendingCancelled: Map<string, number> }>;

/**
 * A chunk body that cancels, and the report of the pending executions it cancelled: they finish
 * without any worker recording them, so they are counted once committed. Inside a caller's
 * transaction (the library's inTransaction) nothing has committed yet: not counted.
 */
function countingCancels(ctx: ServiceContext, cancel: Cancelling): { apply: ApplyChunk; report: () => void } {
  let cancelled = new Map<string, number>();
  return {
    apply: async (trx, chunk) => {
      const { outcomes, pendingCancelled } = await cancel(trx, chunk);
      cancelled = pendingCancelled; // a retried transaction decides again
      return outcomes;
    },
    report: () => {
      if (!ctx.outer) for (const [endpoint, n] of cancelled) ctx.observer.pendingCancelled(endpoint, n);
    },
  };
}

/**
 * The executions a bulk execution action takes, audited as `action`: those matching `filter` in
 * `statuses`, newest first, at most `limit`. Executions named by `filter.ids` with no status in
 * the filter are each an item, in the order given, whatever their status and the limit (ids
 * are at most BULK_LIMIT): the per-item rule then says why one in another status is not taken,
 * and a named one that the rest of the filter does not match (or that does not exist) is
 * `unmatched`, refused NOT_FOUND, instead of each matching nothing.
 */
function selectExecutions(
  ctx: ServiceContext,
  actor: Actor,
  action: string,
  raw: { filter?: ExecutionFilter | null; limit?: number | null },
  statuses: ('PENDING' | 'RUNNING' | 'FAILED')[],
) {
  return mutate<{ ids: string[]; more: boolean; unmatched: Set<string> }>(
    ctx,
    actor,
    { action, role: 'OPERATOR', input: raw, target: { type: 'Execution' } },
    async (trx) => {
      const filter = parseInput(executionFilterSchema, raw.filter ?? {}, ['filter']);
      const limit = parseInput(limitSchema, raw.limit, ['limit']) ?? DEFAULT_BULK_LIMIT;
      if (filter.ids?.length && !filter.status && !filter.statuses?.length) {
        const named = distinct(filter.ids);
        const rows = await executionList.listExecutions(trx, actor.workspaceId, { ...filter, ids: named, limit: named.length });
        const found = new Set(rows.map((r) => r.id));
        return { ids: named, more: false, unmatched: new Set(named.filter((id) => !found.has(id))) };
      }
      // `status` narrows as `statuses` does (it was dropped: {status: SUCCEEDED} retried the FAILED ones).
      const asked = filter.statuses?.length ? filter.statuses : filter.status ? [filter.status] : undefined;
      const wanted = asked ? statuses.filter((s) => asked.includes(s)) : statuses;
      if (wanted.length === 0) return { ids: [], more: false, unmatched: new Set() };
      const rows = await executionList.listExecutions(trx, actor.workspaceId, {
        ...filter,
        status: undefined,
        statuses: wanted,
        limit: limit + 1,
      });
      return { ids: rows.slice(0, limit).map((r) => r.id), more: rows.length > limit, unmatched: new Set() };
    },
  );
}

/** `apply` to a chunk's items but the unmatched ones, which are refused NOT_FOUND. */
const matchedOnly =
  (unmatched: Set<string>, apply: ApplyChunk): ApplyChunk =>
  async (trx, chunk) => {
    const outcomes = await apply(
      trx,
      chunk.filter((id) => !unmatched.has(id)),
    );
    for (const id of chunk) if (unmatched.has(id)) outcomes.set(id, new NotFoundError('Execution', id));
    return outcomes;
  };

export function createBulkService(ctx: ServiceContext) {
  return {
    /**
     * Re-drives the FAILED executions matching `filter` (other statuses in it are ignored), up to
     * `limit` (default 100, at most 1000), each as retryExecution would; with `filter.ids` and no
     * status, each named execution (see selectExecutions). Throws FORBIDDEN (VIEWER) and VALIDATION_FAILED
     * for a bad filter; per-item refusals are in `skipped`.
     */
    async retryExecutions(actor: Actor, raw: { filter?: ExecutionFilter | null; limit?: number | null }): Promise<BulkResult> {
      return withEventCursor(ctx, actor.workspaceId, async () => {
        const { ids, more, unmatched } = await selectExecutions(ctx, actor, 'executions.retry-many', raw, ['FAILED']);
        return inChunks(
          ctx,
          actor,
          { action: 'execution.retry', targetType: 'Execution' },
          ids,
          more,
          matchedOnly(unmatched, (trx, chunk) => retryExecutionsIn(trx, actor, chunk)),
        );
      });
    },

    /** Cancels the PENDING and RUNNING executions matching `filter`, each as cancelExecution would. */
    async cancelExecutions(actor: Actor, raw: { filter?: ExecutionFilter | null; limit?: number | null }): Promise<BulkResult> {
      return withEventCursor(ctx, actor.workspaceId, async () => {
        const { ids, more, unmatched } = await selectExecutions(ctx, actor, 'executions.cancel-many', raw, ['PENDING', 'RUNNING']);
        const { apply, report } = countingCancels(ctx, (trx, chunk) => cancelExecutionsIn(trx, actor, chunk));
        return inChunks(
          ctx,
          actor,
          { action: 'execution.cancel', targetType: 'Execution' },
          ids,
          more,
          matchedOnly(unmatched, apply),
          report,
        );
      });
    },

    /** Pauses each job, as pauseJob would (1 to 1000 ids; one given twice counts once). */
    async pauseJobs(actor: Actor, rawIds: string[]): Promise<BulkResult> {
      return withEventCursor(ctx, actor.workspaceId, async () => {
        const ids = await selectJobs(ctx, actor, 'jobs.pause-many', rawIds);
        return inChunks(ctx, actor, { action: 'job.pause', targetType: 'Job' }, ids, false, (trx, chunk) => pauseJobsIn(trx, actor, chunk));
      });
    },

    /**
     * Cancels each job, as cancelJob would (1 to 1000 ids; one given twice counts once): retired,
     * its pending executions cancelled, its running ones asked to abort, its schedule stopped.
     * Refusals per item: NOT_FOUND, RETIRED, FORBIDDEN (an internal job or another key's job).
     */
    async cancelJobs(actor: Actor, rawIds: string[]): Promise<BulkResult> {
      return withEventCursor(ctx, actor.workspaceId, async () => {
        const ids = await selectJobs(ctx, actor, 'jobs.cancel-many', rawIds);
        const { apply, report } = countingCancels(ctx, (trx, chunk) => cancelJobsIn(trx, actor, chunk));
        return inChunks(ctx, actor, { action: 'job.cancel', targetType: 'Job' }, ids, false, apply, report);
      });
    },

    /** Resumes each job, as resumeJob would (1 to 1000 ids; one given twice counts once). */
    async resumeJobs(actor: Actor, rawIds: string[]): Promise<BulkResult> {
      return withEventCursor(ctx, actor.workspaceId, async () => {
        const ids = await selectJobs(ctx, actor, 'jobs.resume-many', rawIds);
        return inChunks(ctx, actor, { action: 'job.resume', targetType: 'Job' }, ids, false, (trx, chunk) =>
          resumeJobsIn(ctx, trx, actor, chunk),
        );
      });
    },
  };
}
