import { sql } from 'kysely';
import type { ApiKeyRow } from '../types.js';
import type { Executor } from './scope.js';

/**
 * The channel live gateways listen on (src/subscriptions/hub.ts), and the hint that names a key
 * whose standing changed: `k:<key id>`. Sent inside the transaction that changes the key, so it
 * reaches every gateway replica when, and only if, the change commits.
 */
export const KEY_HINT_CHANNEL = 'jobgate_events';
export const keyHint = (keyId: string) => `k:${keyId}`;

export async function notifyKeyChanged(ex: Executor, keyId: string): Promise<void> {
  await sql`select pg_notify(${KEY_HINT_CHANNEL}, ${keyHint(keyId)})`.execute(ex);
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
