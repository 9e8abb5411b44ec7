/**
 * Batches: jobs created together (fan-out), or added while the batch is open, and one onComplete
 * job that runs once every member has ended (fan-in), with the batch's counts in its input under
 * `batch`. Counting members and completing the batch is the database's (migration 000048), in the
 * transaction that ends each member, so the onComplete job (created with the batch, waiting) is
 * released exactly once, whatever the number of workers and whatever crashes.
 */
import type { Transaction } from 'kysely';
import * as batchesRepo from '../../db/repositories/batches.js';
import type { DB } from '../../db/types.js';
import type { Actor } from '../kernel/actor.js';
import { auditDone, mutate } from '../kernel/audited-mutation.js';
import { batchedFirstPages, batchedRead, byId, perReader } from '../kernel/batched-reads.js';
import { isUuid } from '../../db/repositories/scope.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { DomainError, NotFoundError, ValidationError } from '../kernel/errors.js';
import { createBatchSchema, pageSchema, type CreateBatchInput, type PageInput } from '../kernel/inputs.js';
import { toBatch, toJob, type Batch, type Job } from '../kernel/models.js';
import { decodeCursor, pageSize, toConnection, type Connection } from '../kernel/pagination.js';
import { batchRefusal } from '../access/permissions.js';
import { cancelJobIn } from '../jobs/change.js';
import { createJobIn } from '../jobs/create.js';
import { createManyIn } from '../jobs/create-many.js';
import * as jobsRepo from '../../db/repositories/jobs.js';

export interface CancelBatchResult {
  batch: Batch;
  /** Members retired by this call (those that had not ended). */
  cancelledJobs: number;
}

export interface CreateBatchResult {
  batch: Batch;
  /** false when the key named a batch made before: it is returned, and nothing was created. */
  created: boolean;
}

/** A member's or the onComplete job's refusal, naming it: validation paths under `jobs.<i>` or `onComplete`. */
function at(error: unknown, path: (string | number)[]): unknown {
  if (error instanceof ValidationError)
    return new ValidationError(
      error.issues.map((i) => ({ ...i, path: [...path, ...i.path] })),
      error.details.reason as string,
    );
  if (error instanceof DomainError) {
    error.message = `${path.join('.')}: ${error.message}`;
    error.details.path = path;
  }
  return error;
}

/** createBatch's body, in `trx` (see the service's createBatch). */
async function createBatchIn(ctx: ServiceContext, trx: Transaction<DB>, actor: Actor, raw: CreateBatchInput): Promise<CreateBatchResult> {
  const input = parseInput(createBatchSchema, raw);
  const row = {
    workspace_id: actor.workspaceId,
    key: input.key ?? null,
    name: input.name ?? null,
    open: true,
    created_by_key_id: actor.keyId ?? null,
  };
  const inserted = await batchesRepo.insertBatch(trx, row);
  if (!inserted) {
    // The key is taken: by a batch committed before, or one committing now (the insert waited for it).
    const existing = await batchesRepo.findBatchByKey(trx, actor.workspaceId, row.key!);
    if (!existing) throw new Error('batch key conflicted but no batch holds it');
    return { batch: toBatch(existing), created: false };
  }
  if (raw.onComplete) {
    const onComplete = raw.onComplete;
    if (onComplete.kind === 'CRON')
      throw ValidationError.at(['onComplete', 'kind'], 'is IMMEDIATE or DELAYED: it runs once, when the batch completes');
    if (onComplete.batchId != null)
      throw ValidationError.at(['onComplete', 'batchId'], 'must be absent: the onComplete job is not a member');
    await createJobIn(ctx, trx, actor, onComplete, { onCompleteOf: inserted.id }).catch((e) => {
      throw at(e, ['onComplete']);
    });
  }
  const jobs = (raw.jobs ?? []).map((job) => ({ ...job, batchId: inserted.id }));
  // Members as createJobs makes them: most in one statement, each with its job.create audit row.
  if (jobs.length > 0) {
    const { audit } = await createManyIn(ctx, trx, actor, jobs, (e, i) => at(e, ['jobs', i]));
    await auditDone(trx, actor, 'job.create', audit);
  }
  const batch = input.open
    ? (await batchesRepo.lockBatch(trx, actor.workspaceId, inserted.id))!
    : await batchesRepo.closeBatch(trx, inserted.id);
  return { batch: toBatch(batch), created: true };
}

/** Batches' first pages of members, read together from where the actor's lists read (../kernel/batched-reads.ts). */
function firstMembersOf(ctx: ServiceContext) {
  return perReader(ctx.reader, (from) =>
    batchedFirstPages(
      (ws, ids, args: { outcome?: 'SUCCEEDED' | 'FAILED' | 'CANCELLED' | null }, limit) =>
        batchesRepo.firstMembersOf(from, ws, ids, args.outcome, limit),
      (row) => row.batch_id!,
      undefined,
      !ctx.outer,
    ),
  );
}

export function createBatchService(ctx: ServiceContext) {
  const { db } = ctx;
  const batchById = batchedRead((ws, ids) => batchesRepo.findBatchesByIds(db, ws, ids).then(byId), !ctx.outer);
  const outcomeOf = batchedRead((ws, ids) => batchesRepo.memberOutcomes(db, ws, ids), !ctx.outer);
  const completedBy = batchedRead((ws, ids) => batchesRepo.findBatchesByOnCompleteJobIds(db, ws, ids), !ctx.outer);
  const firstMembers = firstMembersOf(ctx);

  return {
    /**
     * Creates a batch: its onComplete job (waiting until the batch completes), then each of `jobs`
     * as createJob would, as members, in one transaction, all or nothing. Closed at once unless
     * `open`: a closed batch whose members have all ended completes (an empty one at once), and
     * its onComplete job starts. A `key` already used returns that batch (created: false) and
     * creates nothing. Throws VALIDATION_FAILED, NOT_FOUND, FORBIDDEN and createJob's errors, naming
     * the job (`jobs.<i>`, `onComplete`).
     */
    async createBatch(actor: Actor, raw: CreateBatchInput): Promise<CreateBatchResult> {
      return mutate(
        ctx,
        actor,
        { action: 'batch.create', role: 'OPERATOR', input: raw, target: (r) => ({ type: 'Batch', id: r.batch.id }) },
        (trx) => createBatchIn(ctx, trx, actor, raw),
      );
    },

    /**
     * Closes a batch: no member can be added any more, and once every member has ended it
     * completes and its onComplete job starts (at once, if they all have). Closing a closed batch
     * returns it unchanged. Throws NOT_FOUND, and FORBIDDEN to an OPERATOR key that did not create it.
     */
    async closeBatch(actor: Actor, id: string): Promise<Batch> {
      return mutate(ctx, actor, { action: 'batch.close', role: 'OPERATOR', input: { id }, target: { type: 'Batch', id } }, async (trx) => {
        const batch = await batchesRepo.lockBatch(trx, actor.workspaceId, id);
        if (!batch) throw new NotFoundError('Batch', id);
        const refusal = batchRefusal(actor, batch);
        if (refusal) throw refusal;
        return toBatch(batch.open ? await batchesRepo.closeBatch(trx, batch.id) : batch);
      });
    },

    /**
     * Cancels a batch, in one transaction: its members that have not ended cancelled as cancelJob
     * would (counted as cancelled), then the batch closed and its onComplete job cancelled (so
     * nothing fans in: cancelling the last members may complete the batch and release that job,
     * but only inside this transaction), then any member added before the close. Members that
     * ended stay as they ended. The locks come in the order a worker ending the last member takes
     * them (members' executions, the batch's row, the onComplete job), so the two never wait on
     * each other in a cycle. Throws NOT_FOUND, and FORBIDDEN to an OPERATOR key that did not create
     * the batch: cancelling it cancels its members, which cancelJob would refuse that key.
     */
    async cancelBatch(actor: Actor, id: string): Promise<CancelBatchResult> {
      return mutate(ctx, actor, { action: 'batch.cancel', role: 'OPERATOR', input: { id }, target: { type: 'Batch', id } }, async (trx) => {
        const found = (await batchesRepo.findBatchesByIds(trx, actor.workspaceId, [id]))[0];
        if (!found) throw new NotFoundError('Batch', id);
        const refusal = batchRefusal(actor, found);
        if (refusal) throw refusal;
        let cancelledJobs = await batchesRepo.cancelUnfinishedMembers(trx, actor.workspaceId, id);
        const batch = await batchesRepo.lockBatch(trx, actor.workspaceId, id);
        if (!batch) throw new NotFoundError('Batch', id);
        const onComplete = batch.on_complete_job_id
          ? await jobsRepo.findJobById(trx, actor.workspaceId, batch.on_complete_job_id)
          : undefined;
        if (onComplete && onComplete.status !== 'RETIRED') await cancelJobIn(trx, actor, onComplete.id);
        if (batch.open) await batchesRepo.closeBatch(trx, batch.id);
        // A member added before the close took the batch's row (none once the first step counted one).
        if (await batchesRepo.hasUnfinishedMembers(trx, actor.workspaceId, id))
          cancelledJobs += await batchesRepo.cancelUnfinishedMembers(trx, actor.workspaceId, id);
        const after = (await batchesRepo.findBatchesByIds(trx, actor.workspaceId, [id]))[0]!;
        return { batch: toBatch(after), cancelledJobs };
      });
    },

    /** How a member was counted into its batch (once: a re-drive does not count again); null before, or for a job in no batch. */
    async batchOutcome(actor: Actor, jobId: string): Promise<'SUCCEEDED' | 'FAILED' | 'CANCELLED' | null> {
      return ((await outcomeOf(actor.workspaceId, jobId)) as 'SUCCEEDED' | 'FAILED' | 'CANCELLED' | undefined) ?? null;
    },

    /** The batch whose onComplete job this job is; null for any other job (one in no batch, or a member). */
    async completesBatch(actor: Actor, jobId: string): Promise<Batch | null> {
      const row = await completedBy(actor.workspaceId, jobId);
      return row ? toBatch(row) : null;
    },

    /** Throws NOT_FOUND. */
    async batch(actor: Actor, id: string): Promise<Batch> {
      const row = await batchById(actor.workspaceId, id);
      if (!row) throw new NotFoundError('Batch', id);
      return toBatch(row);
    },

    /** The workspace's batches, newest first; `state` narrows them (OPEN, CLOSED and not completed, COMPLETED). */
    async batches(actor: Actor, rawPage: PageInput = {}, state?: batchesRepo.BatchState): Promise<Connection<Batch>> {
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const afterId = page.after ? decodeCursor(page.after) : undefined;
      const rows = await batchesRepo.listBatches(ctx.reader(actor), actor.workspaceId, { limit: size + 1, afterId, state });
      return toConnection(rows, size, toBatch);
    },

    /** A batch's members in id order; `outcome` narrows them (null: those that have not ended). */
    async batchJobs(
      actor: Actor,
      batchId: string,
      rawPage: PageInput = {},
      outcome?: 'SUCCEEDED' | 'FAILED' | 'CANCELLED' | null,
    ): Promise<Connection<Job>> {
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      // A first page is read with the other batches' on the same page of batches.
      if (!page.after && isUuid(batchId))
        return toConnection(await firstMembers(actor)(actor.workspaceId, batchId, { outcome }, size).rows, size, toJob);
      const afterId = page.after ? decodeCursor(page.after) : undefined;
      const rows = await batchesRepo.listMembers(ctx.reader(actor), actor.workspaceId, batchId, { limit: size + 1, afterId, outcome });
      return toConnection(rows, size, toJob);
    },
  };
}
