/**
 * Subscription tickets (migration 000024): minted for a key, redeemed once.
 */
import { sql } from 'kysely';
import type { Executor } from './scope.js';

/** Stores a ticket's hash for `keyId`, valid for `ttlMs`; prunes tickets expired over an hour ago. */
export async function insertTicket(
  ex: Executor,
  t: { workspaceId: string; keyId: string; role: 'ADMIN' | 'OPERATOR' | 'VIEWER'; hash: Buffer; ttlMs: number },
): Promise<{ id: string; expires_at: Date }> {
  await sql`delete from subscription_tickets where expires_at < now() - interval '1 hour'`.execute(ex);
  const { rows } = await sql<{ id: string; expires_at: Date }>`
    insert into subscription_tickets (workspace_id, api_key_id, role, ticket_hash, expires_at)
    values (${t.workspaceId}, ${t.keyId}, ${t.role}, ${t.hash}, now() + make_interval(secs => ${t.ttlMs / 1000}))
    returning id, expires_at`.execute(ex);
  return rows[0]!;
}

/**
 * Redeems a ticket by its hash, once: the compare-and-set on `used_at` lets one caller through
 * however many race, and only while the ticket is unexpired and its key is not revoked and still
 * has the role the ticket was minted with. What the ticket grants, or undefined.
 */
export async function redeemTicket(
  ex: Executor,
  hash: Buffer,
): Promise<{ workspace_id: string; role: 'ADMIN' | 'OPERATOR' | 'VIEWER'; key_id: string; installation_admin: boolean } | undefined> {
  const { rows } = await sql<{ workspace_id: string; role: 'ADMIN' | 'OPERATOR' | 'VIEWER'; key_id: string; installation_admin: boolean }>`
    update subscription_tickets t set used_at = now()
    from api_keys k
    where t.ticket_hash = ${hash} and t.used_at is null and t.expires_at > now()
      and k.id = t.api_key_id and k.revoked_at is null and k.role = t.role and k.workspace_id = t.workspace_id
    returning t.workspace_id, t.role, k.id as key_id, k.installation_admin`.execute(ex);
  return rows[0];
}

/**
 * Whether a ticket would redeem now (the conditions of redeemTicket), without using it up: for a
 * request the gateway answers before redeeming (a hash-only persisted query it does not hold).
 */
export async function ticketRedeemable(ex: Executor, hash: Buffer): Promise<boolean> {
  const { rows } = await sql<{ ok: number }>`
    select 1 as ok from subscription_tickets t
    join api_keys k on k.id = t.api_key_id
    where t.ticket_hash = ${hash} and t.used_at is null and t.expires_at > now()
      and k.revoked_at is null and k.role = t.role and k.workspace_id = t.workspace_id`.execute(ex);
  return rows.length > 0;
}
