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
  return ex.selectFrom('api_keys').select(['id', 'role', 'installation_admin']).where('id', 'in', ids).where('revoked_at', 'is', null).execute();
}
