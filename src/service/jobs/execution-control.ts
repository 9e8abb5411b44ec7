/**
 * Operator controls over executions: run a job now, cancel an execution, re-drive a failed one.
 */
import * as executionsRepo from '../../db/repositories/executions.js';
import * as jobsRepo from '../../db/repositories/jobs.js';
import { DATABASE_NOW } from '../../db/transaction.js';
import type { Actor } from '../kernel/actor.js';
import { mutate } from '../kernel/audited-mutation.js';
import { CHANGE_ROLE } from '../access/permissions.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { ConflictError, unwrap } from '../kernel/errors.js';
import { idSchema, triggerJobSchema, type TriggerJobInput } from '../kernel/inputs.js';
import { assertJobMutable, assertLockFree, lockJob } from './jobs.js';
import { toExecution, type Execution } from '../kernel/models.js';
import { withEventCursor } from '../live/event-cursor.js';
import { cancelExecutionsIn, retryExecutionsIn } from './execution-changes.js';

export interface TriggerJobResult {
  execution: Execution;
  /** false when `requestId` matched an earlier trigger, whose execution is returned. */
  created: boolean;
  /**
   * Set on the object a mutation returns (see ../live/event-cursor.ts): the event cursor from just
   * before the mutation, to subscribe `after`. Absent on objects read by queries.
   */
  eventCursor?: string;
}

// eslint-disable-next-line max-lines-per-function -- an area factory: short methods sharing one context, its length theirs added up
export function createExecutionControlService(ctx: ServiceContext) {
  return {
    /**
     * Runs a job now, outside its schedule: one new execution, due immediately. Without `force`
     * it is refused (CONFLICT) while the job is paused or already has a pending or running
     * execution; with `force` it runs anyway. A `requestId` makes it idempotent: a retry of the
     * same request returns the same execution. A lock key still applies (LOCK_HELD).
     * Throws NOT_FOUND, RETIRED, FORBIDDEN (internal job), CONFLICT, LOCK_HELD.
     */
    async triggerJob(actor: Actor, raw: TriggerJobInput): Promise<TriggerJobResult> {
      return withEventCursor(ctx, actor.workspaceId, () =>
        mutate(ctx, actor, { action: 'job.trigger', role: CHANGE_ROLE, input: raw, target: { type: 'Job', id: raw?.id } }, async (trx) => {
          const input = parseInput(triggerJobSchema, raw);
          const { job, endpoint } = await lockJob(trx, actor, input.id);
          if (input.requestId) {
            const earlier = await executionsRepo.findByRequestId(trx, actor.workspaceId, job.id, input.requestId);
            if (earlier) return { execution: toExecution(earlier), created: false };
          }
          assertJobMutable(actor, job, endpoint, { owned: false });
          // An occurrence written ahead of its time is not yet a run: withdrawn, it is written or
          // decided again after this one, as if this trigger had come before it was written.
          if (job.ahead_at) await jobsRepo.withdrawAheadOccurrence(trx, actor.workspaceId, job.id);
          if (!input.force) {
            if (job.status === 'PAUSED') throw new ConflictError(`job ${job.id} is paused; trigger it with force to run it anyway`);
            const live = await executionsRepo.findLiveExecution(trx, actor.workspaceId, job);
            if (live) {
              throw new ConflictError(
                `job ${job.id} already has a ${live.status.toLowerCase()} execution; trigger it with force to run another`,
                {
                  executionId: live.id,
                },
              );
            }
          }
          await assertLockFree(trx, actor, job.lock_key);
          const row = await executionsRepo.insertExecutionUnlessTaken(trx, {
            workspace_id: actor.workspaceId,
            job_id: job.id,
            endpoint_id: job.endpoint_id,
            // The database's clock, to the microsecond (a JS Date would round two triggers together).
            scheduled_for: DATABASE_NOW,
            max_attempts: job.max_attempts,
            priority: job.priority,
            concurrency_key: job.concurrency_key ?? '',
            lock_key: job.lock_key,
            trigger: 'MANUAL',
            request_id: input.requestId ?? null,
            created_by_key_id: actor.keyId ?? null,
            // The job's input as of now, read under its row lock: later edits do not reach it.
            input: JSON.stringify(job.input),
          });
          if (row) return { execution: toExecution(row), created: true };
          // A unique index refused it: a concurrent trigger with this request id, or the lock key.
          if (input.requestId) {
            const earlier = await executionsRepo.findByRequestId(trx, actor.workspaceId, job.id, input.requestId);
            if (earlier) return { execution: toExecution(earlier), created: false };
          }
          await assertLockFree(trx, actor, job.lock_key);
          throw new ConflictError(`job ${job.id} was triggered concurrently; try again`);
        }),
      );
    },

    /**
     * Cancels an execution. A pending one is CANCELLED at once; a running one has its attempt
     * aborted and ends CANCELLED when the attempt returns (the result shows `cancelRequested`).
     * Throws NOT_FOUND, FORBIDDEN (internal job), CONFLICT (already finished).
     */
    async cancelExecution(actor: Actor, rawId: string): Promise<Execution> {
      // A pending execution cancelled here finishes without any worker recording it: counted once committed.
      let cancelledPendingOf: string | undefined;
      const execution = await withEventCursor(ctx, actor.workspaceId, () =>
        mutate(
          ctx,
          actor,
          { action: 'execution.cancel', role: CHANGE_ROLE, input: { id: rawId }, target: { type: 'Execution', id: rawId } },
          async (trx) => {
            cancelledPendingOf = undefined; // a retried transaction decides again
            const id = parseInput(idSchema, rawId);
            const { outcomes, pendingCancelled } = await cancelExecutionsIn(trx, actor, [id]);
            cancelledPendingOf = [...pendingCancelled.keys()][0];
            return toExecution(unwrap(outcomes.get(id)!));
          },
        ),
      );
      // Inside a caller's transaction (the library's inTransaction) nothing has committed yet: not counted.
      if (cancelledPendingOf !== undefined && !ctx.outer) ctx.observer.pendingCancelled(cancelledPendingOf, 1);
      return execution;
    },

    /**
     * Re-drives a FAILED execution: a fresh attempt budget (the job's max attempts again), due
     * now. Throws NOT_FOUND, RETIRED (its job was cancelled), FORBIDDEN (internal job),
     * CONFLICT (not FAILED), LOCK_HELD (its lock key is taken meanwhile).
     */
    async retryExecution(actor: Actor, rawId: string): Promise<Execution> {
      return withEventCursor(ctx, actor.workspaceId, () =>
        mutate(
          ctx,
          actor,
          { action: 'execution.retry', role: CHANGE_ROLE, input: { id: rawId }, target: { type: 'Execution', id: rawId } },
          async (trx) => {
            const id = parseInput(idSchema, rawId);
            return toExecution(unwrap((await retryExecutionsIn(trx, actor, [id])).get(id)!));
          },
        ),
      );
    },
  };
}
