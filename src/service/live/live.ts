/**
 * Who may watch what. Subscriptions are reads: any role may open one, but only on its own
 * workspace. A job, endpoint, run or batch of another workspace is NOT_FOUND, as everywhere else;
 * the fan-out then only ever matches events of the workspace decided here.
 */
import { z } from 'zod';
import { positionsBeforeJobs, type EventMatch } from '../../db/statements/events.js';
import { eventHorizon, latestFindingId } from '../../db/statements/stream-horizon.js';
import { findBatchesByIds } from '../../db/repositories/batches.js';
import { findEndpointById, internalEndpointIds } from '../../db/repositories/endpoints.js';
import { findJobById } from '../../db/repositories/jobs.js';
import { scoped } from '../../db/repositories/scope.js';
import type { Actor } from '../kernel/actor.js';
import { batchedRead, pairKey, splitPairKey } from '../kernel/batched-reads.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { CursorExpiredError, NotFoundError, ValidationError } from '../kernel/errors.js';
import { findRun } from '../runs/runs.js';
import type { WorkspaceCursors } from '../kernel/cursors.js';
import { idSchema, text } from '../kernel/inputs.js';

/**
 * An event cursor (or finding id) as the API shows it: sealed per workspace (../kernel/cursors.ts), or
 * "0" for "everything kept". Its content is checked when it is opened.
 */
export const eventCursorSchema = text().max(100);
const NOT_A_CURSOR = 'is not a cursor of this stream: pass the `cursor` (or finding `id`) of the last item you received';

/** Opens `after` ("0" is 0): VALIDATION_FAILED when it is not a cursor of `kind` of this workspace. */
function openAfter(cursors: WorkspaceCursors, kind: 'event' | 'finding', after: string | null | undefined): bigint | undefined {
  if (after == null) return undefined;
  if (after === '0') return 0n;
  return cursors.open(kind, after, ['after'], NOT_A_CURSOR);
}

export const eventStreamSchema = z.object({
  jobId: idSchema.nullish(),
  endpointId: idSchema.nullish(),
  endpointType: z.enum(['USER', 'INTERNAL']).nullish(),
  name: text().min(1).max(200).nullish(),
  after: eventCursorSchema.nullish(),
});
export type EventStreamInput = z.input<typeof eventStreamSchema>;

export type EventTopic = EventMatch['topic'];

/**
 * The replay rule: a stream may go on from `after` only if no event above it was pruned
 * (`prunedThrough` is the workspace's highest pruned id). `after` 0 means "everything kept" and
 * is never refused. Checked when a stream is authorised and again by each replay read, in the
 * snapshot of the rows it reads (src/subscriptions/hub/hub.ts). `cursorOf` seals an id for the
 * error (the workspace's own cursors, never a raw id). Throws CURSOR_EXPIRED.
 */
export function assertCursorKept(after: bigint, prunedThrough: bigint, cursorOf: (id: bigint) => string): void {
  if (after > 0n && after < prunedThrough) throw new CursorExpiredError(cursorOf(after), cursorOf(prunedThrough));
}

/**
 * A cursor above the last id its sequence handed out names no item: it can only come from a
 * database restored to an earlier state (sealed cursors cannot be made up). Taken as a position,
 * it would skip every new item until the ids reached it, in silence. The message does not say
 * the last id: the sequences are installation-wide. Throws VALIDATION_FAILED.
 */
function assertCursorHandedOut(after: bigint, latest: bigint): void {
  if (after > latest)
    throw ValidationError.at(
      ['after'],
      `is not a cursor of this stream: it is ahead of every item recorded (a database restored to an earlier state?); pass the \`cursor\` (or finding \`id\`) of the last item you received`,
    );
}

export function createLiveService(ctx: ServiceContext) {
  const { db } = ctx;
  // The cursors a createJobs' results ask are read together (../kernel/batched-reads.ts): one
  // query for the call, not one per job. A key is the job's id and its creation instant.
  const positionBeforeJob = batchedRead<bigint>(async (workspaceId, keys) => {
    const jobs = keys.map((key) => {
      const [id, createdAt] = splitPairKey(key);
      return { id, createdAt: new Date(createdAt) };
    });
    const byJob = await positionsBeforeJobs(db, workspaceId, jobs);
    return new Map(keys.map((key, i) => [key, byJob.get(jobs[i]!.id)!]));
  }, !ctx.outer);

  return {
    /**
     * The event cursor just before `job`'s first event: a page that created the job subscribes
     * to executionUpdates or jobEvents of it with this as `after` and receives every event of
     * the job, from its creation, once. The latest position when the job's events were pruned.
     */
    async eventCursorBeforeJob(actor: Actor, job: { id: string; createdAt: Date }): Promise<string> {
      const workspaceId = scoped(actor.workspaceId);
      const cursors = await ctx.cursors.forWorkspace(db, workspaceId);
      return cursors.seal('event', (await positionBeforeJob(workspaceId, pairKey(job.id.toLowerCase(), job.createdAt.toISOString())))!);
    },

    /**
     * Authorises a stream of execution, job or run events in the actor's workspace, optionally
     * narrowed to a job, an endpoint, a type of endpoint or (runs) a handler name, from `after`
     * on. The type is matched against the workspace's INTERNAL endpoints as they are when the
     * stream opens: jobgate makes them with the workspace, so they are all there by then. Throws
     * VALIDATION_FAILED (a bad cursor, or one above every event id handed out), NOT_FOUND (a job
     * or endpoint not in the workspace), CURSOR_EXPIRED (events after `after` were pruned:
     * replaying would skip them silently).
     * `after` "0" asks for everything kept, and is never refused.
     */
    async authorizeEventStream(
      actor: Actor,
      topic: EventTopic,
      raw: EventStreamInput,
    ): Promise<{ match: EventMatch; after: bigint | undefined; cursorOf: (id: bigint | number) => string }> {
      const input = parseInput(eventStreamSchema, raw);
      const workspaceId = scoped(actor.workspaceId);
      if (input.jobId && !(await findJobById(db, workspaceId, input.jobId))) throw new NotFoundError('Job', input.jobId);
      if (input.endpointId && !(await findEndpointById(db, workspaceId, input.endpointId)))
        throw new NotFoundError('Endpoint', input.endpointId);
      const internal = input.endpointType ? await internalEndpointIds(db, workspaceId) : undefined;
      const cursors = await ctx.cursors.forWorkspace(db, workspaceId);
      const cursorOf = (id: bigint | number) => cursors.seal('event', id);
      const after = openAfter(cursors, 'event', input.after);
      if (after !== undefined && after > 0n) {
        const horizon = await eventHorizon(db, workspaceId);
        assertCursorHandedOut(after, horizon.latest);
        assertCursorKept(after, horizon.prunedThrough, cursorOf);
      }
      return {
        match: {
          workspaceId,
          topic,
          jobId: input.jobId ?? undefined,
          endpointId: input.endpointId ?? undefined,
          endpointType:
            input.endpointType && internal ? { internal: input.endpointType === 'INTERNAL', ids: new Set(internal) } : undefined,
          name: input.name ?? undefined,
        },
        after,
        cursorOf,
      };
    },

    /**
     * Authorises watching one run (its progress or its findings, from `after` on). Throws
     * NOT_FOUND, VALIDATION_FAILED (a bad cursor, or one above every finding id handed out).
     */
    async authorizeRunStream(
      actor: Actor,
      runId: string,
      rawAfter?: string | null,
    ): Promise<{ runId: string; after: bigint | undefined; cursors: WorkspaceCursors }> {
      const { after } = parseInput(z.object({ after: eventCursorSchema.nullish() }), { after: rawAfter });
      await findRun(db, actor.workspaceId, runId);
      const cursors = await ctx.cursors.forWorkspace(db, scoped(actor.workspaceId));
      const from = openAfter(cursors, 'finding', after);
      if (from !== undefined && from > 0n) {
        assertCursorHandedOut(from, await latestFindingId(db));
      }
      return { runId, after: from, cursors };
    },

    /**
     * Authorises watching one batch's counts and state (batchProgress): the batch must be of the
     * actor's workspace. Throws NOT_FOUND (of another workspace, or of none: the same answer).
     */
    async authorizeBatchStream(actor: Actor, batchId: string): Promise<{ batchId: string }> {
      const [batch] = await findBatchesByIds(db, scoped(actor.workspaceId), [batchId]);
      if (!batch) throw new NotFoundError('Batch', batchId);
      return { batchId: batch.id };
    },
  };
}
