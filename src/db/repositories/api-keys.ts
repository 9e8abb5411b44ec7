/**
 * API keys: stored hashed (the key itself is never stored), each with a role and a workspace.
 */
import { sql } from 'kysely';
import { liveChannel } from '../channels.js';
import type { ApiKeyRow, ApiKeysTable } from '../types.js';
import { scoped, type Executor } from './scope.js';

/**
 * Tells the live gateways (src/db/channels.ts, liveChannel) that a key's standing changed. Sent
 * inside the transaction that changes the key, so it reaches every gateway replica when, and
 * only if, the change commits.
 */
export async function notifyKeyChanged(ex: Executor, keyId: string): Promise<void> {
  await sql`select pg_notify(${liveChannel.name}, ${liveChannel.encode({ kind: 'key', keyId })})`.execute(ex);
}

/** The keys among `ids` that are not revoked, with what they grant now. */
export async function activeKeysByIds(ex: Executor, ids: string[]): Promise<Pick<ApiKeyRow, 'id' | 'role' | 'installation_admin'>[]> {
  if (ids.length === 0) return [];
  return ex
    .selectFrom('api_keys')
    .select(['id', 'role', 'installation_admin'])
    .where('id', 'in', ids)
    .where('revoked_at', 'is', null)
    .execute();
}

/** One page of a workspace's keys, newest first, after the key `afterId` (keyset on created_at, id). */
export async function apiKeyPage(
  ex: Executor,
  workspaceId: string,
  opts: { limit: number; afterId?: string | undefined },
): Promise<ApiKeyRow[]> {
  const after = opts.afterId
    ? sql`and (k.created_at, k.id) < (select c.created_at, c.id from api_keys c where c.id = ${opts.afterId} and c.workspace_id = ${workspaceId})`
    : sql``;
  const { rows } = await sql<ApiKeyRow>`
    select * from api_keys k where k.workspace_id = ${workspaceId} ${after}
    order by k.created_at desc, k.id desc limit ${opts.limit}`.execute(ex);
  return rows;
}

/** How many keys the workspace has, revoked ones included. */
export async function countApiKeys(ex: Executor, workspaceId: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from api_keys where workspace_id = ${workspaceId}`.execute(ex);
  return rows[0]!.n;
}

/** The workspace's key with this id, if any. */
export async function findApiKey(ex: Executor, workspaceId: string, id: string): Promise<ApiKeyRow | undefined> {
  const { rows } = await sql<ApiKeyRow>`select * from api_keys where workspace_id = ${workspaceId} and id = ${id}`.execute(ex);
  return rows[0];
}

export interface NewApiKey {
  workspaceId: string;
  name: string;
  role: ApiKeysTable['role'];
  installationAdmin: boolean;
  prefix: string;
  keyHash: Buffer;
  createdByKeyId: string | null;
}

export async function insertApiKey(ex: Executor, key: NewApiKey): Promise<ApiKeyRow> {
  return ex
    .insertInto('api_keys')
    .values({
      workspace_id: scoped(key.workspaceId),
      name: key.name,
      role: key.role,
      installation_admin: key.installationAdmin,
      prefix: key.prefix,
      key_hash: key.keyHash,
      created_by_key_id: key.createdByKeyId,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** The key with this hash (revoked or not), in any workspace: what authentication looks up. */
export async function findApiKeyByHash(ex: Executor, keyHash: Buffer): Promise<ApiKeyRow | undefined> {
  return ex.selectFrom('api_keys').selectAll().where('key_hash', '=', keyHash).executeTakeFirst();
}

/**
 * Records that the key was used now, unless it was within the last minute: at most one write
 * per key per minute, however many requests it makes.
 */
export async function touchApiKeyLastUsed(ex: Executor, id: string): Promise<void> {
  await sql`update api_keys set last_used_at = now()
            where id = ${id} and (last_used_at is null or last_used_at < now() - interval '1 minute')`.execute(ex);
}

/**
 * The ids of the workspace's live ADMIN keys, locked for update in id order: two revokes of its
 * last two ADMIN keys run one after the other (no deadlock), and the second sees one left.
 */
export async function lockLiveAdminKeyIds(ex: Executor, workspaceId: string): Promise<string[]> {
  const rows = await ex
    .selectFrom('api_keys')
    .select('id')
    .where('workspace_id', '=', scoped(workspaceId))
    .where('role', '=', 'ADMIN')
    .where('revoked_at', 'is', null)
    .orderBy('id')
    .forUpdate()
    .execute();
  return rows.map((r) => r.id);
}

/** Whether the workspace's key with this id is an installation admin's, locked for update; undefined when there is none. */
export async function lockApiKey(
  ex: Executor,
  workspaceId: string,
  id: string,
): Promise<Pick<ApiKeyRow, 'installation_admin'> | undefined> {
  return ex
    .selectFrom('api_keys')
    .select('installation_admin')
    .where('workspace_id', '=', scoped(workspaceId))
    .where('id', '=', id)
    .forUpdate()
    .executeTakeFirst();
}

/** Revokes the key (idempotent: a revoked key keeps its first revoked_at). */
export async function revokeApiKey(ex: Executor, id: string): Promise<ApiKeyRow> {
  return ex
    .updateTable('api_keys')
    .set({ revoked_at: sql<Date>`coalesce(revoked_at, now())` })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** All the workspace's keys, newest first. */
export async function listApiKeys(ex: Executor, workspaceId: string): Promise<ApiKeyRow[]> {
  return ex
    .selectFrom('api_keys')
    .selectAll()
    .where('workspace_id', '=', scoped(workspaceId))
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .execute();
}

/** Whether any key exists at all, in any workspace. */
export async function anyApiKeyExists(ex: Executor): Promise<boolean> {
  return !!(await ex.selectFrom('api_keys').select('id').limit(1).executeTakeFirst());
}
