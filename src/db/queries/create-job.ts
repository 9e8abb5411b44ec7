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
import { CompiledQuery } from 'kysely';
import type pg from 'pg';
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

// $1 workspace, $2 endpoint id or name, $3 system actor, $4 job name, $5 kind, $6 input,
// $7 max attempts, $8 default max attempts, $9 run at, $10 creating key, $11 actor kind,
// $12 actor key, $13 action, $14 audit input.
const statement = (endpoint: string) => `
with en as (
  -- FOR SHARE: an archive running now waits for this job, or this job sees the archive.
  select en.id, en.max_attempts
  from endpoints en
  where en.workspace_id = $1 and ${endpoint}
    -- Only when no rule could refuse: live, not INTERNAL (unless jobgate), no payload spec.
    and en.archived_at is null
    and (en.type = 'USER' or $3::boolean)
    and en.payload_spec_id is null
  for share
), job as (
  insert into jobs (workspace_id, endpoint_id, name, kind, input, max_attempts, run_at, created_by_key_id)
  select $1, en.id, $4, $5, $6::jsonb, coalesce($7::int, en.max_attempts, $8::int), $9::timestamptz, $10::uuid
  from en
  returning *
), execution as (
  insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, created_by_key_id, input)
  select workspace_id, id, endpoint_id, coalesce(run_at, now()), coalesce(run_at, now()), max_attempts, created_by_key_id, input
  from job
), audit as (
  insert into audit_log (workspace_id, actor_kind, actor_key_id, action, target_type, target_id, input, result_code)
  select $1, $11, $12::uuid, $13, 'Job', id::text, $14::jsonb, 'OK'
  from job
)
select * from job`;

const BY_ID = { name: 'jobgate.create-job/by-id', text: statement('en.id = $2::uuid') };
const BY_NAME = { name: 'jobgate.create-job/by-name', text: statement('en.name = $2') };

/**
 * The job inserted, or undefined when a rule needs the full path (see above). With `pool`, a
 * named statement (parsed and planned once per connection: planning was a third of the
 * statement's server time); otherwise the same text through `db`.
 */
export async function insertJobInOneStatement(db: Executor, pool: pg.Pool | undefined, j: OneStatementJob): Promise<JobRow | undefined> {
  scoped(j.workspaceId);
  // Not a UUID: no endpoint has that id; the full path answers NOT_FOUND.
  if ('id' in j.endpoint && !isUuid(j.endpoint.id)) return undefined;
  const { name, text } = 'id' in j.endpoint ? BY_ID : BY_NAME;
  const values = [
    j.workspaceId,
    'id' in j.endpoint ? j.endpoint.id : j.endpoint.name,
    j.system,
    j.name,
    j.kind,
    j.input,
    j.maxAttempts,
    j.defaultMaxAttempts,
    j.runAt,
    j.createdByKeyId,
    j.audit.actorKind,
    j.audit.actorKeyId,
    j.audit.action,
    j.audit.input,
  ];
  const { rows } = pool ? await pool.query<JobRow>({ name, text, values }) : await db.executeQuery<JobRow>(CompiledQuery.raw(text, values));
  return rows[0];
}
