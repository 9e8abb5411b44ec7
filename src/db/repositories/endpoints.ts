import { sql } from 'kysely';
import type { EndpointPatch, EndpointRow, NewEndpoint } from '../types.js';
import { afterCursor } from './keyset.js';
import { isUuid, scoped, type Executor } from './scope.js';

export async function findEndpointById(
  db: Executor,
  workspaceId: string,
  id: string,
  opts: { forUpdate?: boolean; forShare?: boolean } = {},
): Promise<EndpointRow | undefined> {
  if (!isUuid(id)) return undefined;
  let q = db.selectFrom('endpoints').selectAll().where('workspace_id', '=', scoped(workspaceId)).where('id', '=', id);
  if (opts.forUpdate) q = q.forUpdate();
  else if (opts.forShare) q = q.forShare();
  return q.executeTakeFirst();
}

/** The workspace's endpoints among `ids`. */
export async function findEndpointsByIds(db: Executor, workspaceId: string, ids: readonly string[]): Promise<EndpointRow[]> {
  const valid = ids.filter(isUuid);
  if (valid.length === 0) return [];
  return db.selectFrom('endpoints').selectAll().where('workspace_id', '=', scoped(workspaceId)).where('id', 'in', valid).execute();
}

/**
 * The ids of the workspace's INTERNAL endpoints, archived ones too: jobgate's own, made with the
 * workspace (migrations 000003, 000020); an endpoint's type never changes.
 */
export async function internalEndpointIds(db: Executor, workspaceId: string): Promise<string[]> {
  const rows = await db
    .selectFrom('endpoints')
    .select('id')
    .where('workspace_id', '=', scoped(workspaceId))
    .where('type', '=', 'INTERNAL')
    .execute();
  return rows.map((r) => r.id);
}

/** The live (not archived) endpoint with that name. */
export async function findEndpointByName(
  db: Executor,
  workspaceId: string,
  name: string,
  opts: { forShare?: boolean } = {},
): Promise<EndpointRow | undefined> {
  let q = db
    .selectFrom('endpoints')
    .selectAll()
    .where('workspace_id', '=', scoped(workspaceId))
    .where('name', '=', name)
    .where('archived_at', 'is', null);
  if (opts.forShare) q = q.forShare();
  return q.executeTakeFirst();
}

export async function insertEndpoint(db: Executor, row: NewEndpoint): Promise<EndpointRow> {
  scoped(row.workspace_id);
  return db.insertInto('endpoints').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function updateEndpoint(db: Executor, workspaceId: string, id: string, patch: EndpointPatch): Promise<EndpointRow> {
  return db
    .updateTable('endpoints')
    .set(patch)
    .set({ updated_at: sql<Date>`now()` })
    .where('workspace_id', '=', scoped(workspaceId))
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Names of the workspace's live HTTP endpoints that use config `configId` and whose url, headers
 * and config neither `keyId` nor an ADMIN key chose last (aimed_by_key_id; null `keyId`: a caller
 * without a key, which aims none of them).
 */
export async function endpointsOfOthersUsingConfig(
  db: Executor,
  workspaceId: string,
  configId: string,
  keyId: string | null,
): Promise<string[]> {
  const rows = await db
    .selectFrom('endpoints as e')
    .leftJoin('api_keys as k', 'k.id', 'e.aimed_by_key_id')
    .select('e.name')
    .where('e.workspace_id', '=', scoped(workspaceId))
    .where('e.config_id', '=', configId)
    .where('e.kind', '=', 'HTTP')
    .where('e.archived_at', 'is', null)
    // An endpoint aimed without a key (the embedding application, jobgate itself) is the
    // installation's own, as an ADMIN's is.
    .where('e.aimed_by_key_id', 'is not', null)
    .where((w) => w.or([w('k.role', 'is', null), w('k.role', '!=', 'ADMIN')]))
    .$if(keyId !== null, (q) => q.where('e.aimed_by_key_id', '!=', keyId!))
    .orderBy('e.name')
    .execute();
  return rows.map((r) => r.name);
}

/**
 * Live HTTP endpoints, installation-wide, whose config holds a secret that the key that aimed them
 * did not write and that is not an ADMIN's: delivery renders no such secret into their requests
 * (src/service/engine/delivery/deliver.ts). A database upgraded from before the rule can hold
 * them; an ADMIN's update of each makes its aim the ADMIN's own. At most `limit`, by name.
 */
export async function endpointsBarredFromSecrets(db: Executor, limit: number): Promise<{ workspace: string; name: string }[]> {
  const { rows } = await sql<{ workspace: string; name: string }>`
    select w.slug as workspace, e.name
    from endpoints e
    join workspaces w on w.id = e.workspace_id
    join configs c on c.id = e.config_id
    left join api_keys k on k.id = e.aimed_by_key_id
    where e.kind = 'HTTP' and e.archived_at is null
      and e.aimed_by_key_id is not null and k.role is distinct from 'ADMIN'
      and exists (
        select 1 from jsonb_each(c.entries) x
        where (x.value ->> 'secret')::boolean
          -- The secret's writer: its setBy (JSON null: a caller without a key), else the config's creator.
          and (case when x.value ? 'setBy' then x.value ->> 'setBy' else c.created_by_key_id::text end)
              is distinct from e.aimed_by_key_id::text)
    order by w.slug, e.name
    limit ${limit}`.execute(db);
  return rows;
}

/** Archives the endpoint (archived_at: the database's now()); the row as it is then. */
export async function archiveEndpoint(db: Executor, workspaceId: string, id: string): Promise<EndpointRow> {
  return db
    .updateTable('endpoints')
    .set({ archived_at: sql<Date>`now()`, updated_at: sql<Date>`now()` })
    .where('workspace_id', '=', scoped(workspaceId))
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Lifts a hold the endpoint's target asked for with Retry-After (src/db/statements/complete.ts writes it); whether
 * one was in force. The caller has checked the endpoint is the workspace's.
 */
export async function liftRetryAfter(db: Executor, endpointId: string): Promise<boolean> {
  const { rows } = await sql<{ active: boolean }>`
    delete from endpoint_retry_after where endpoint_id = ${endpointId} returning until > now() as active`.execute(db);
  return rows[0]?.active === true;
}

/**
 * The holds in force of the workspace's endpoints among `ids` that their targets asked for with
 * Retry-After (src/db/statements/complete.ts writes them): until when, and the answer's status.
 */
export async function activeRetryAfterHolds(
  db: Executor,
  workspaceId: string,
  ids: readonly string[],
): Promise<{ endpoint_id: string; until: Date; status_code: number }[]> {
  const valid = ids.filter(isUuid);
  if (valid.length === 0) return [];
  const { rows } = await sql<{ endpoint_id: string; until: Date; status_code: number }>`
    select ra.endpoint_id, ra.until, ra.status_code
    from endpoint_retry_after ra join endpoints en on en.id = ra.endpoint_id
    where en.workspace_id = ${scoped(workspaceId)} and ra.endpoint_id = any(${valid}::uuid[]) and ra.until > now()`.execute(db);
  return rows;
}

/** One concurrency key's load on an endpoint: its attempts in flight and its executions waiting. */
export interface KeyLoadRow {
  endpoint_id: string;
  key: string;
  running: number;
  pending: number;
}

/** How many keys busiestKeys gives per endpoint. */
export const BUSIEST_KEYS = 10;

/**
 * The busiest concurrency keys of each of `ids` that limits its keys (a per-key concurrency or rate
 * limit): up to BUSIEST_KEYS each, the most attempts in flight first, then the most waiting. Read
 * through the indexes of pending (gated, per key) and running executions.
 */
export async function busiestKeys(db: Executor, workspaceId: string, ids: readonly string[]): Promise<KeyLoadRow[]> {
  const valid = ids.filter(isUuid);
  if (valid.length === 0) return [];
  const { rows } = await sql<KeyLoadRow>`
    select endpoint_id, key, running, pending from (
      select k.*, row_number() over (partition by k.endpoint_id order by k.running desc, k.pending desc, k.key) as n
      from (
        select e.endpoint_id, e.concurrency_key as key,
               count(*) filter (where e.status = 'RUNNING')::int as running,
               count(*) filter (where e.status = 'PENDING')::int as pending
        from endpoints en
        join executions e on e.endpoint_id = en.id and e.status in ('PENDING', 'RUNNING') and e.concurrency_key <> ''
        where en.workspace_id = ${scoped(workspaceId)} and en.id = any(${valid}::uuid[])
          and (en.key_concurrency_limit is not null or en.key_rate_limit_count is not null)
        group by 1, 2
      ) k
    ) ranked
    where n <= ${BUSIEST_KEYS}
    order by endpoint_id, n`.execute(db);
  return rows;
}

/**
 * Pauses (`paused` true) or resumes the endpoint; a pause keeps the time it was first paused
 * (pausing again is a no-op). The row as it is then.
 */
export async function setEndpointPaused(db: Executor, workspaceId: string, id: string, paused: boolean): Promise<EndpointRow> {
  return db
    .updateTable('endpoints')
    .set({
      paused_at: paused ? sql<Date>`coalesce(paused_at, now())` : null,
      updated_at: sql<Date>`now()`,
    })
    .where('workspace_id', '=', scoped(workspaceId))
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function listEndpoints(
  db: Executor,
  workspaceId: string,
  opts: { limit: number; afterId?: string | undefined; includeArchived?: boolean; includeInternal?: boolean },
): Promise<EndpointRow[]> {
  let q = db.selectFrom('endpoints').selectAll().where('workspace_id', '=', scoped(workspaceId));
  if (!opts.includeInternal) q = q.where('type', '=', 'USER');
  if (!opts.includeArchived) q = q.where('archived_at', 'is', null);
  if (opts.afterId) q = q.where(afterCursor('endpoints', opts.afterId, workspaceId));
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(opts.limit).execute();
}
