/**
 * The two statements of API-key authentication (src/service/authenticate.ts): the key by its
 * hash, and the refresh of its `last_used_at`, written at most once a minute per key: the
 * predicate re-checks the age, so concurrent requests of one key write it once.
 */
import { sql } from 'kysely';
import type { ApiKeyRow } from '../types.js';
import type { Executor } from '../repos/scope.js';

/** The key with this hash (revoked or not), if any. */
export async function findApiKeyByHash(ex: Executor, hash: Buffer): Promise<ApiKeyRow | undefined> {
  const { rows } = await sql<ApiKeyRow>`select * from api_keys where key_hash = ${hash}`.execute(ex);
  return rows[0];
}

/** Records that the key was used now, unless that was recorded within the last minute. */
export async function touchApiKey(ex: Executor, id: string): Promise<void> {
  await sql`update api_keys set last_used_at = now()
            where id = ${id} and (last_used_at is null or last_used_at < now() - interval '1 minute')`.execute(ex);
}
