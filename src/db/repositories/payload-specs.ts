import { LOCK_CLASS } from '../advisory-locks.js';
import { sql } from 'kysely';
import type { PayloadSpecRow } from '../types.js';
import { afterCursor } from './keyset.js';
import { isUuid, scoped, type Executor } from './scope.js';

export async function findPayloadSpecById(db: Executor, workspaceId: string, id: string): Promise<PayloadSpecRow | undefined> {
  if (!isUuid(id)) return undefined;
  return db.selectFrom('payload_specs').selectAll().where('workspace_id', '=', scoped(workspaceId)).where('id', '=', id).executeTakeFirst();
}

/** The workspace's payload specs among `ids`. */
export async function findPayloadSpecsByIds(db: Executor, workspaceId: string, ids: readonly string[]): Promise<PayloadSpecRow[]> {
  const valid = ids.filter(isUuid);
  if (valid.length === 0) return [];
  return db.selectFrom('payload_specs').selectAll().where('workspace_id', '=', scoped(workspaceId)).where('id', 'in', valid).execute();
}

export async function insertPayloadSpec(
  db: Executor,
  workspaceId: string,
  spec: { name: string; description: string | null; jsonSchema: unknown; createdByKeyId: string | null },
): Promise<PayloadSpecRow | undefined> {
  return db
    .insertInto('payload_specs')
    .values({
      workspace_id: scoped(workspaceId),
      name: spec.name,
      description: spec.description,
      json_schema: JSON.stringify(spec.jsonSchema),
      created_by_key_id: spec.createdByKeyId,
    })
    .onConflict((oc) => oc.columns(['workspace_id', 'name']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

export async function updatePayloadSpec(
  db: Executor,
  workspaceId: string,
  id: string,
  patch: { description?: string | null; jsonSchema?: unknown },
): Promise<PayloadSpecRow | undefined> {
  if (!isUuid(id)) return undefined;
  return db
    .updateTable('payload_specs')
    .set({
      ...(patch.description !== undefined ? { description: patch.description } : {}),
      ...(patch.jsonSchema !== undefined ? { json_schema: JSON.stringify(patch.jsonSchema), version: sql<number>`version + 1` } : {}),
      updated_at: sql<Date>`now()`,
    })
    .where('workspace_id', '=', scoped(workspaceId))
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export async function listPayloadSpecs(
  db: Executor,
  workspaceId: string,
  opts: { limit: number; afterId?: string | undefined },
): Promise<PayloadSpecRow[]> {
  let q = db.selectFrom('payload_specs').selectAll().where('workspace_id', '=', scoped(workspaceId));
  if (opts.afterId) q = q.where(afterCursor('payload_specs', opts.afterId, workspaceId));
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(opts.limit).execute();
}

/** The workspace's payload spec of this name, locked for update, if any. */
export async function findPayloadSpecByNameForUpdate(db: Executor, workspaceId: string, name: string): Promise<PayloadSpecRow | undefined> {
  return db
    .selectFrom('payload_specs')
    .selectAll()
    .where('workspace_id', '=', scoped(workspaceId))
    .where('name', '=', name)
    .forUpdate()
    .executeTakeFirst();
}

/**
 * Serialises definitions of one typed job in a workspace (the library's defineJob, from replicas
 * starting at once): each after the first finds its spec and endpoint there and leaves them.
 */
export async function lockJobDefinition(db: Executor, workspaceId: string, name: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(${JOB_DEFINITION_LOCK}, hashtext(${scoped(workspaceId)} || '/' || ${name}))`.execute(db);
}

const JOB_DEFINITION_LOCK = LOCK_CLASS.jobDefinitions;
