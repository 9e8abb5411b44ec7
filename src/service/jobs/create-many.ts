/**
 * createJobs: many jobs in one transaction, each by createJob's rules, all or nothing.
 *
 * Every item is parsed before anything is written, so malformed input is refused naming its item
 * (`jobs.<i>.<field>`). Then, in one transaction: the items the one-statement path may take
 * (./create.ts, `oneStatementJob`) are written by one statement for all of them (jobs, first
 * executions and audit rows: src/db/statements/create-job.ts); the rest (cron jobs, idempotency
 * and lock keys, payload specs, and whatever the statement declined) go through the full path in
 * the order asked, each with its audit row. An item refused there (CONFLICT, LOCK_HELD, NOT_FOUND,
 * a payload spec's VALIDATION_FAILED) rolls every item back, and the error names the item (its
 * `index`, and a path under `jobs.<i>` for validation). An item's idempotency key may name a job
 * created earlier in the same call: it is that job, `created: false`, as in two calls.
 *
 * Jobs created in one call share one creation time (the transaction's), so they carry no order
 * among themselves: as with createJob calls in one transaction, the engine starts them in any order.
 */
import type { Transaction } from 'kysely';
import { lockBatch } from '../../db/repositories/batches.js';
import { insertJobsInOneStatement, type OneStatementJob } from '../../db/statements/create-job.js';
import type { DB } from '../../db/types.js';
import type { Actor } from '../kernel/actor.js';
import { mutateAll } from '../kernel/audited-mutation.js';
import type { ServiceContext } from '../kernel/context.js';
import { DomainError, ValidationError } from '../kernel/errors.js';
import { createJobSchema, type CreateJobInput } from '../kernel/inputs.js';
import { parseInput } from '../kernel/context.js';
import { toJob } from '../kernel/models.js';
import { createJobIn, oneStatementJob, type CreateJobResult } from './create.js';

/** At most this many jobs in one call. */
export const MAX_JOBS_PER_CALL = 1000;

/** An item's refusal, naming the item: its index in the details, its validation paths under `jobs.<i>`. */
function atItem(error: unknown, index: number): unknown {
  const named =
    error instanceof ValidationError ? new ValidationError(error.issues.map((i) => ({ ...i, path: ['jobs', index, ...i.path] }))) : error;
  if (!(named instanceof DomainError)) return named;
  if (named === error) named.message = `jobs.${index}: ${named.message}`;
  named.details.index = index;
  return named;
}

/**
 * Creates `raws` in `trx` by createJob's rules, in order: those the one-statement path takes in
 * one statement (with their audit rows), the rest one by one on the full path. Returns each
 * result and the audit rows still to write (the full path's); an item's refusal is thrown as
 * `nameError` names it.
 */
export async function createManyIn(
  ctx: ServiceContext,
  trx: Transaction<DB>,
  actor: Actor,
  raws: readonly CreateJobInput[],
  nameError: (error: unknown, index: number) => unknown,
): Promise<{ result: CreateJobResult[]; audit: { target: { type: string; id: string }; input: unknown }[] }> {
  const results: (CreateJobResult | undefined)[] = raws.map(() => undefined);
  // The batches joined, locked in id order before any is locked in the items' order below.
  const batchIds = [...new Set(raws.map((r) => r?.batchId).filter((id): id is string => typeof id === 'string'))].sort();
  for (const id of batchIds) await lockBatch(trx, actor.workspaceId, id);
  const quick = raws.map((raw) => oneStatementJob(ctx, actor, raw));
  const quickAt = quick.flatMap((job, i) => (job ? [i] : []));
  if (quickAt.length > 0) {
    // Writes its own audit rows; a job it declines (a payload spec, an archived endpoint) takes the full path below.
    const rows = await insertJobsInOneStatement(
      trx,
      undefined,
      quickAt.map((i) => quick[i] as OneStatementJob),
    );
    rows.forEach((row, k) => {
      if (row) results[quickAt[k]!] = { job: toJob(row), created: true, outcome: 'CREATED' };
    });
  }
  const audit: { target: { type: string; id: string }; input: unknown }[] = [];
  for (let i = 0; i < raws.length; i++) {
    if (results[i]) continue;
    try {
      results[i] = await createJobIn(ctx, trx, actor, raws[i]!);
    } catch (error) {
      throw nameError(error, i);
    }
    audit.push({ target: { type: 'Job', id: results[i]!.job.id }, input: raws[i] });
  }
  return { result: results as CreateJobResult[], audit };
}

/**
 * createJobs (see the file's comment). Throws VALIDATION_FAILED (also for an empty list or more
 * than MAX_JOBS_PER_CALL), FORBIDDEN, and createJob's errors, naming the item.
 */
export async function createJobs(ctx: ServiceContext, actor: Actor, raws: readonly CreateJobInput[]): Promise<CreateJobResult[]> {
  let failed: number | undefined;
  return mutateAll(
    ctx,
    actor,
    {
      action: 'job.create',
      role: 'OPERATOR',
      failedInput: () => (failed === undefined ? { jobs: Array.isArray(raws) ? raws.length : null } : raws[failed]),
    },
    async (trx) => {
      if (!Array.isArray(raws) || raws.length === 0 || raws.length > MAX_JOBS_PER_CALL)
        throw ValidationError.at(['jobs'], `must hold 1 to ${MAX_JOBS_PER_CALL} jobs`);
      raws.forEach((raw, i) => {
        try {
          parseInput(createJobSchema, raw);
        } catch (error) {
          failed = i;
          throw atItem(error, i);
        }
      });
      return createManyIn(ctx, trx, actor, raws, (error, i) => {
        failed = i;
        return atItem(error, i);
      });
    },
  );
}
