/**
 * Declared schedules: cron jobs the embedding application's code declares by name at start-up
 * (the library's gate.schedule). Declaring is convergent: the named job is created if missing,
 * updated in place when the declaration changed (a new expression updates it; it is never a
 * CONFLICT), replaced when it moved to another endpoint, and left alone when nothing changed.
 * With `retireUndeclared`, live declared schedules the call does not name are retired.
 *
 * Replicas starting at once all declare the same set: each call takes a transaction-scoped
 * advisory lock per workspace first, so they run one after another and every one after the first
 * finds its work done (UNCHANGED). The partial unique index on live schedule names stays the
 * authority should anything bypass the lock.
 */
import type { Transaction } from 'kysely';
import { z } from 'zod';
import { HANDLER_NAME, HANDLER_NAME_RULE } from '../../db/handler-name.js';
import * as endpointsRepo from '../../db/repositories/endpoints.js';
import { declaredJobsNotNamed, findDeclaredJobForUpdate, lockScheduleDeclarations } from '../../db/repositories/declared-schedules.js';
import type { DB, EndpointRow } from '../../db/types.js';
import type { Actor } from '../kernel/actor.js';
import { mutate } from '../kernel/audited-mutation.js';
import { canonicalJson } from '../kernel/canonical-json.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { normalizeCron } from '../cron/expressions.js';
import { ConflictError, ValidationError } from '../kernel/errors.js';
import { cronScheduleSchema, ENDPOINT_NAME, jsonValue, text } from '../kernel/inputs.js';
import { createJobsInternals } from './jobs.js';
import { toJob, type Job } from '../kernel/models.js';

export const declaredScheduleSchema = cronScheduleSchema
  .omit({ expression: true })
  .extend({
    name: text().regex(HANDLER_NAME, HANDLER_NAME_RULE),
    /** The cron expression. */
    cron: text().min(1).max(200),
    /** The endpoint (by name) the schedule delivers to; or `handler`. */
    endpoint: text().max(200).nullish(),
    /** An in-process handler: its HANDLER endpoint, named after it, is registered if missing. */
    handler: text()
      .max(200)
      .regex(ENDPOINT_NAME, 'must be dotted lowercase words (it names its endpoint), e.g. "billing.nightly"')
      .nullish(),
    input: jsonValue().optional(),
    maxAttempts: z.number().int().min(1).max(100).nullish(),
  })
  .superRefine((v, ctx) => {
    if ((v.endpoint == null) === (v.handler == null))
      ctx.addIssue({ code: 'custom', path: ['endpoint'], message: 'give exactly one of endpoint or handler' });
  });
export type DeclaredScheduleInput = z.input<typeof declaredScheduleSchema>;

export const declareSchedulesSchema = z
  .object({
    schedules: z.array(declaredScheduleSchema).max(1000),
    /** Retire the workspace's live declared schedules that `schedules` does not name. Default false. */
    retireUndeclared: z.boolean().nullish(),
  })
  .superRefine((v, ctx) => {
    const seen = new Set<string>();
    v.schedules.forEach((s, i) => {
      if (seen.has(s.name)) ctx.addIssue({ code: 'custom', path: ['schedules', i, 'name'], message: `"${s.name}" is declared twice` });
      seen.add(s.name);
    });
  });
export type DeclareSchedulesInput = z.input<typeof declareSchedulesSchema>;

export interface DeclaredSchedule {
  name: string;
  job: Job;
  /** CREATED, UPDATED (changed in place), REPLACED (moved endpoint: old job retired, new one made) or UNCHANGED. */
  outcome: 'CREATED' | 'UPDATED' | 'REPLACED' | 'UNCHANGED';
}

export interface DeclareSchedulesResult {
  schedules: DeclaredSchedule[];
  /** Declared schedules retired because the call no longer names them (retireUndeclared). */
  retired: Job[];
}

type Declared = z.output<typeof declaredScheduleSchema>;

const same = (a: Date | null | undefined, b: Date | null | undefined) => (a?.getTime() ?? null) === (b?.getTime() ?? null);

// eslint-disable-next-line max-lines-per-function -- an area factory: short methods sharing one context, its length theirs added up
export function createSchedulesService(ctx: ServiceContext) {
  const jobs = createJobsInternals(ctx);

  /** The endpoint a declaration delivers to; a handler's HANDLER endpoint is registered if missing. */
  async function endpointFor(trx: Transaction<DB>, actor: Actor, d: Declared, path: (string | number)[]): Promise<EndpointRow> {
    const name = (d.endpoint ?? d.handler)!;
    const found = await endpointsRepo.findEndpointByName(trx, actor.workspaceId, name);
    if (d.endpoint != null) {
      if (!found) throw ValidationError.at([...path, 'endpoint'], `no live endpoint is named "${name}"`);
      return found;
    }
    if (found) {
      if (found.kind !== 'HANDLER' || found.handler_name !== name) {
        throw new ConflictError(`endpoint "${name}" exists and is not the HANDLER endpoint of handler "${name}"`, { name });
      }
      return found;
    }
    if (name.startsWith('jobgate.')) throw ValidationError.at([...path, 'handler'], 'names starting with "jobgate." are reserved');
    return endpointsRepo.insertEndpoint(trx, {
      workspace_id: actor.workspaceId,
      name,
      description: `the handler of declared schedule "${d.name}"`,
      kind: 'HANDLER',
      type: 'USER',
      url: null,
      method: null,
      headers: '{}',
      timeout_ms: null,
      signing_secret: null,
      handler_name: name,
      payload_spec_id: null,
      config_id: null,
      max_attempts: null,
      concurrency_limit: null,
      created_by_key_id: actor.keyId ?? null,
    });
  }

  async function declareOne(trx: Transaction<DB>, actor: Actor, d: Declared, i: number): Promise<DeclaredSchedule> {
    const path = ['schedules', i];
    const endpoint = await endpointFor(trx, actor, d, path);
    const expression = normalizeCron(d.cron, [...path, 'cron']);
    const cron = {
      expression,
      timezone: d.timezone ?? 'UTC',
      startsAt: d.startsAt ?? null,
      endsAt: d.endsAt ?? null,
      misfirePolicy: d.misfirePolicy ?? 'FIRE_LATEST',
      overlapPolicy: d.overlapPolicy ?? 'SKIP',
    } as const;
    const input = d.input ?? {};
    const existing = await findDeclaredJobForUpdate(trx, actor.workspaceId, d.name);
    const create = () =>
      jobs.createJobIn(
        trx,
        actor,
        { endpointId: endpoint.id, kind: 'CRON', name: d.name, input, maxAttempts: d.maxAttempts ?? null, cron },
        { scheduleName: d.name },
      );
    if (!existing) return { name: d.name, job: (await create()).job, outcome: 'CREATED' };
    if (existing.endpoint_id !== endpoint.id) {
      // A job's endpoint is fixed; the schedule moves by retiring the old job for a new one.
      await jobs.cancelJobIn(trx, actor, existing.id);
      return { name: d.name, job: (await create()).job, outcome: 'REPLACED' };
    }
    const changed =
      existing.cron_expression !== cron.expression ||
      existing.timezone !== cron.timezone ||
      !same(existing.starts_at, cron.startsAt) ||
      !same(existing.ends_at, cron.endsAt) ||
      existing.misfire_policy !== cron.misfirePolicy ||
      existing.overlap_policy !== cron.overlapPolicy;
    const inputChanged = canonicalJson(existing.input) !== canonicalJson(input);
    const attemptsChanged = d.maxAttempts != null && existing.max_attempts !== d.maxAttempts;
    if (!changed && !inputChanged && !attemptsChanged) return { name: d.name, job: toJob(existing), outcome: 'UNCHANGED' };
    const job = await jobs.updateJobIn(trx, actor, {
      id: existing.id,
      ...(changed ? { cron } : {}),
      ...(inputChanged ? { input } : {}),
      ...(attemptsChanged ? { maxAttempts: d.maxAttempts } : {}),
    });
    return { name: d.name, job, outcome: 'UPDATED' };
  }

  return {
    /**
     * Creates or updates the workspace's declared cron schedules, by name, in one transaction
     * (see the file comment): CREATED, UPDATED, REPLACED or UNCHANGED each; with
     * `retireUndeclared`, live declared schedules not named are retired (their pending executions
     * cancelled). A paused schedule stays paused. Convergent and safe from many replicas at once.
     * Throws VALIDATION_FAILED (naming the declaration's field), CONFLICT (a handler's name is
     * taken by another kind of endpoint), FORBIDDEN.
     */
    async declareSchedules(actor: Actor, raw: DeclareSchedulesInput): Promise<DeclareSchedulesResult> {
      return mutate(
        ctx,
        actor,
        { action: 'schedule.declare', role: 'OPERATOR', input: raw, target: { type: 'Workspace', id: actor.workspaceId } },
        async (trx) => {
          const input = parseInput(declareSchedulesSchema, raw);
          await lockScheduleDeclarations(trx, actor.workspaceId);
          const schedules: DeclaredSchedule[] = [];
          for (const [i, d] of input.schedules.entries()) schedules.push(await declareOne(trx, actor, d, i));
          const retired: Job[] = [];
          if (input.retireUndeclared) {
            const names = input.schedules.map((s) => s.name);
            for (const id of await declaredJobsNotNamed(trx, actor.workspaceId, names))
              retired.push((await jobs.cancelJobIn(trx, actor, id)).job);
          }
          return { schedules, retired };
        },
      );
    },
  };
}
