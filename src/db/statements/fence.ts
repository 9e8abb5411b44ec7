/**
 * The fence of a handler's own transaction (HandlerContext.transaction).
 *
 * The caller's lease is the current one when the execution has the same epoch and is still
 * RUNNING: nobody took it over. Expiry alone is not a taking (the same rule as recording an
 * outcome, see complete.ts): a lease that ran out while the worker could not reach the database,
 * or while it stalled, is still its owner's until a reconciler or a claim moves the row on.
 * Locking it renews it for `renewMs` (on clock_timestamp(), not now(), which is the start of a
 * transaction that may have run for a while), so what commits does not leave behind an expired
 * lease for a reconciler to take before the worker records the outcome. Once the lock returns
 * the row, nobody can take the lease over until the transaction ends: the reconciler's and a
 * claimer's updates wait on the row lock, then see the committed state. So a commit right after
 * it commits under a held lease.
 */
import type pg from 'pg';

const LOCK_LEASE = `
update executions
set lease_expires_at = greatest(lease_expires_at, clock_timestamp() + make_interval(secs => $3::double precision / 1000))
where id = $1 and lease_epoch = $2 and status = 'RUNNING'
returning id`;

/** Same check without the lock, to refuse early without blocking the worker's heartbeat. */
const CHECK_LEASE = `
select id from executions
where id = $1 and lease_epoch = $2 and status = 'RUNNING'`;

export async function leaseHeld(
  client: Pick<pg.ClientBase, 'query'>,
  executionId: string,
  epoch: number,
  opts: { lock: false } | { lock: true; renewMs: number },
): Promise<boolean> {
  const { rows } = opts.lock
    ? await client.query(LOCK_LEASE, [executionId, epoch, opts.renewMs])
    : await client.query(CHECK_LEASE, [executionId, epoch]);
  return rows.length === 1;
}
