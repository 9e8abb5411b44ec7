/**
 * Bulk operator actions: re-drive or cancel the executions matching a filter (the dead-letter
 * view's "retry all"), pause or resume many jobs. Each item goes through the single-item
 * function, in its own transaction with its own guards and audit row, so a bulk action can do
 * nothing a run of single actions could not; the selection itself is audited as one action.
 * Bounded: at most BULK_LIMIT items per call; a caller repeats the call for more (items already
 * done no longer match).
 */
import { z } from 'zod';
import * as executionsRepo from '../db/repos/executions.js';
import type { Actor } from './actor.js';
import { mutate } from './audited-mutation.js';
import { parseInput, type ServiceContext } from './context.js';
import { DomainError, type ErrorCode } from './errors.js';
import { withEventCursor } from './event-cursor.js';
import { executionFilterSchema, idSchema, type ExecutionFilter } from './inputs.js';

export const BULK_LIMIT = 1000;
const DEFAULT_BULK_LIMIT = 100;

export interface BulkSkip {
  id: string;
  code: ErrorCode;
  message: string;
}

export interface BulkResult {
  /** Items the selection matched (at most the limit). */
  matched: number;
  /** Items the action changed. */
  changed: number;
  /** Items it left as they were, each with the domain error the single action gave. */
  skipped: BulkSkip[];
  /** Whether more items may match than this call took (it stopped at its limit). */
  more: boolean;
  /** The event cursor from just before the first item changed (see ./event-cursor.ts). */
  eventCursor?: string;
}

const limitSchema = z.number().int().min(1).max(BULK_LIMIT).nullish();
const idsSchema = z.array(idSchema).min(1).max(BULK_LIMIT);

interface Single {
  retryExecution(actor: Actor, id: string): Promise<unknown>;
  cancelExecution(actor: Actor, id: string): Promise<unknown>;
  pauseJob(actor: Actor, id: string): Promise<unknown>;
  resumeJob(actor: Actor, id: string): Promise<unknown>;
}

/** Runs `one` on each id in turn; a domain error skips that item, anything else stops the call. */
async function each(ids: string[], one: (id: string) => Promise<unknown>, more: boolean): Promise<BulkResult> {
  const result: BulkResult = { matched: ids.length, changed: 0, skipped: [], more };
  for (const id of ids) {
    try {
      await one(id);
      result.changed++;
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      result.skipped.push({ id, code: error.code, message: error.message });
    }
  }
  return result;
}

export function createBulkService(ctx: ServiceContext, single: Single) {
  /** The ids of the executions matching `filter` in `statuses`, newest first, audited as `action`. */
  const select = (
    actor: Actor,
    action: string,
    raw: { filter?: ExecutionFilter | null; limit?: number | null },
    statuses: ('PENDING' | 'RUNNING' | 'FAILED')[],
  ) =>
    mutate<{ ids: string[]; more: boolean }>(
      ctx,
      actor,
      { action, role: 'OPERATOR', input: raw, target: { type: 'Execution' } },
      async (trx) => {
        const filter = parseInput(executionFilterSchema, raw.filter ?? {}, ['filter']);
        const limit = parseInput(limitSchema, raw.limit, ['limit']) ?? DEFAULT_BULK_LIMIT;
        const wanted = filter.statuses?.length ? statuses.filter((s) => filter.statuses!.includes(s)) : statuses;
        if (wanted.length === 0) return { ids: [], more: false };
        const rows = await executionsRepo.listExecutions(trx, actor.workspaceId, {
          ...filter,
          status: undefined,
          statuses: wanted,
          limit: limit + 1,
        });
        return { ids: rows.slice(0, limit).map((r) => r.id), more: rows.length > limit };
      },
    );

  return {
    /**
     * Re-drives the FAILED executions matching `filter` (other statuses in it are ignored), up to
     * `limit` (default 100, at most 1000), each as retryExecution would. Throws FORBIDDEN (VIEWER)
     * and VALIDATION_FAILED for a bad filter; per-item refusals are in `skipped`.
     */
    async retryExecutions(actor: Actor, raw: { filter?: ExecutionFilter | null; limit?: number | null }): Promise<BulkResult> {
      return withEventCursor(ctx, actor.workspaceId, async () => {
        const { ids, more } = await select(actor, 'executions.retry-many', raw, ['FAILED']);
        return each(ids, (id) => single.retryExecution(actor, id), more);
      });
    },

    /** Cancels the PENDING and RUNNING executions matching `filter`, each as cancelExecution would. */
    async cancelExecutions(actor: Actor, raw: { filter?: ExecutionFilter | null; limit?: number | null }): Promise<BulkResult> {
      return withEventCursor(ctx, actor.workspaceId, async () => {
        const { ids, more } = await select(actor, 'executions.cancel-many', raw, ['PENDING', 'RUNNING']);
        return each(ids, (id) => single.cancelExecution(actor, id), more);
      });
    },

    /** Pauses each job, as pauseJob would (1 to 1000 ids). */
    async pauseJobs(actor: Actor, rawIds: string[]): Promise<BulkResult> {
      return withEventCursor(ctx, actor.workspaceId, async () => {
        const ids = await mutate(
          ctx,
          actor,
          { action: 'jobs.pause-many', role: 'OPERATOR', input: { ids: rawIds }, target: { type: 'Job' } },
          async () => parseInput(idsSchema, rawIds, ['ids']),
        );
        return each(ids, (id) => single.pauseJob(actor, id), false);
      });
    },

    /** Resumes each job, as resumeJob would (1 to 1000 ids). */
    async resumeJobs(actor: Actor, rawIds: string[]): Promise<BulkResult> {
      return withEventCursor(ctx, actor.workspaceId, async () => {
        const ids = await mutate(
          ctx,
          actor,
          { action: 'jobs.resume-many', role: 'OPERATOR', input: { ids: rawIds }, target: { type: 'Job' } },
          async () => parseInput(idsSchema, rawIds, ['ids']),
        );
        return each(ids, (id) => single.resumeJob(actor, id), false);
      });
    },
  };
}
