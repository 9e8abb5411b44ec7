/**
 * The fence of a handler's own transaction (HandlerContext.transaction).
 *
 * Locks the execution row only if the caller's lease is the current one: same epoch, still
 * RUNNING, not expired by the wall clock (clock_timestamp(), not now(): now() is the start of a
 * transaction that may have run for a while). Once this returns the row, nobody can take the
 * lease over until the transaction ends: the reconciler's and a claimer's updates wait on the
 * row lock, then see the committed state. So a commit right after it commits under a held lease.
 */
import type pg from 'pg';

const LOCK_LEASE = `
select id from executions
where id = $1 and lease_epoch = $2 and status = 'RUNNING' and lease_expires_at > clock_timestamp()
for update`;

/** Same check without the lock, to refuse early without blocking the worker's heartbeat. */
const CHECK_LEASE = `
select id from executions
where id = $1 and lease_epoch = $2 and status = 'RUNNING' and lease_expires_at > clock_timestamp()`;

export async function leaseHeld(client: Pick<pg.ClientBase, 'query'>, executionId: string, epoch: number, opts: { lock: boolean }): Promise<boolean> {
  const { rows } = await client.query(opts.lock ? LOCK_LEASE : CHECK_LEASE, [executionId, epoch]);
  return rows.length === 1;
}
