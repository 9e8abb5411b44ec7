/**
 * createJob's one-statement path: the endpoint read under FOR SHARE, the job, its first
 * execution and the audit row, written by one statement — one round trip and one commit instead
 * of seven round trips (begin, endpoint, clock, job, execution, audit, commit), which were most
 * of the enqueue-to-start latency on the engine benchmark.
 *
 * It only ever inserts when no rule of createJob could refuse or change the outcome: the caller
 * (the jobs service) takes it only for IMMEDIATE and DELAYED jobs without an idempotency key or a
 * lock key, from an actor whose role allows it, with input that parsed; the statement itself
 * inserts only when the endpoint exists, is live, is not INTERNAL (unless the actor is jobgate
 * itself) and has no payload spec to check the input against. Otherwise it inserts nothing and
 * returns no row, and the service runs the full transactional path, which raises the error or
 * checks the spec. One statement is one transaction: the job, its execution and the audit row
 * commit together or not at all (invariant 1), and the execution's insert trigger sends the
 * work notification inside it.
 */
import { sql, type RawBuilder } from 'kysely';
import type { JobRow } from '../types.js';
import { isUuid, scoped, type Executor } from '../repos/scope.js';

export interface OneStatementJob {
  workspaceId: string;
  endpoint: { id: string } | { name: string };
  /** Whether INTERNAL endpoints are allowed (the actor is jobgate itself). */
  system: boolean;
  name: string | null;
  kind: 'IMMEDIATE' | 'DELAYED';
  /** JSON text. */
  input: string;
  /** The job's own max attempts; null for the endpoint's, else `defaultMaxAttempts`. */
  maxAttempts: number | null;
  defaultMaxAttempts: number;
  /** DELAYED only; IMMEDIATE runs at the database's now(). */
  runAt: Date | null;
  createdByKeyId: string | null;
  audit: { actorKind: string; actorKeyId: string | null; action: string; input: string };
}

/** The job inserted, or undefined when a rule needs the full path (see above). */
export async function insertJobInOneStatement(db: Executor, j: OneStatementJob): Promise<JobRow | undefined> {
  scoped(j.workspaceId);
  // Not a UUID: no endpoint has that id; the full path answers NOT_FOUND.
  if ('id' in j.endpoint && !isUuid(j.endpoint.id)) return undefined;
  const endpoint: RawBuilder<unknown> =
    'id' in j.endpoint ? sql`en.id = ${j.endpoint.id}` : sql`en.name = ${j.endpoint.name} and en.archived_at is null`;
  const { rows } = await sql<JobRow>`
    with en as (
      -- FOR SHARE: an archive running now waits for this job, or this job sees the archive.
      select en.id, en.max_attempts
      from endpoints en
      where en.workspace_id = ${j.workspaceId} and ${endpoint}
        -- Only when no rule could refuse: live, not INTERNAL (unless jobgate), no payload spec.
        and en.archived_at is null
        and (en.type = 'USER' or ${j.system}::boolean)
        and en.payload_spec_id is null
      for share
    ), job as (
      insert into jobs (workspace_id, endpoint_id, name, kind, input, max_attempts, run_at, created_by_key_id)
      select ${j.workspaceId}, en.id, ${j.name}, ${j.kind}, ${j.input}::jsonb,
             coalesce(${j.maxAttempts}::int, en.max_attempts, ${j.defaultMaxAttempts}::int), ${j.runAt}::timestamptz,
             ${j.createdByKeyId}::uuid
      from en
      returning *
    ), execution as (
      insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, created_by_key_id)
      select workspace_id, id, endpoint_id, coalesce(run_at, now()), coalesce(run_at, now()), max_attempts, created_by_key_id
      from job
    ), audit as (
      insert into audit_log (workspace_id, actor_kind, actor_key_id, action, target_type, target_id, input, result_code)
      select ${j.workspaceId}, ${j.audit.actorKind}, ${j.audit.actorKeyId}::uuid, ${j.audit.action}, 'Job', id::text,
             ${j.audit.input}::jsonb, 'OK'
      from job
    )
    select * from job`.execute(db);
  return rows[0];
}
