/**
 * The reconciler on time or not at all: a pass that reaches the database late (held in a queue,
 * as a pooler's PAUSE or a frozen server holds it, beside the owners' heartbeats and outcomes)
 * takes no lease, and no pass does for a lease after such a stall. The delay is put in front of
 * a real database, in the pool the passes use; the database itself is untouched.
 */
import type pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { claimExecutions } from '../../src/db/statements/claim.js';
import { reconcileExpiredLeases } from '../../src/db/statements/lease.js';
import { createReconciler } from '../../src/service/engine/worker/reconcile-pass.js';
import { createTestDb, type TestDb } from '../support/db.js';

let t: TestDb;
let executionId: string;

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
afterAll(() => t.close());

beforeEach(async () => {
  await t.reset();
  await t.service.registerEndpoint(t.actor, { name: 'late.h', kind: 'HANDLER', handlerName: 'h' });
  await t.service.createJob(t.actor, { endpointName: 'late.h', kind: 'IMMEDIATE' });
  const [claimed] = await claimExecutions(t.database.pool, {
    workerId: 'owner',
    limit: 1,
    handlers: ['h'],
    leaseMs: 30_000,
    limitedEndpoints: false,
  });
  executionId = claimed!.id;
  // Its lease ran out: the owner's heartbeats did not land (stuck in the same queue, say).
  await t.query(`update executions set lease_expires_at = now() - interval '1 second' where id = $1`, [executionId]);
});

const statusOf = async () => (await t.query(`select status from executions where id = $1`, [executionId])).rows[0].status as string;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The test's pool with `delayMs` before each query whose text matches `which`, as a queue would hold it. */
function delayed(which: RegExp, delayMs: () => number): pg.Pool {
  const pool = t.database.pool;
  return new Proxy(pool, {
    get(target, prop, receiver) {
      if (prop !== 'query') return Reflect.get(target, prop, receiver);
      return async (text: string | { text: string }, values?: unknown[]) => {
        if (which.test(typeof text === 'string' ? text : text.text)) await sleep(delayMs());
        return target.query(text as string, values);
      };
    },
  });
}

describe('a reconcile pass that comes late', () => {
  it('takes nothing when its statement reaches the server past its deadline, and takes the lease before it', async () => {
    const dbNow = (await t.query(`select now() as now`)).rows[0].now as Date;
    expect(await reconcileExpiredLeases(t.database.pool, 500, new Date(dbNow.getTime() - 1))).toEqual([]);
    expect(await statusOf()).toBe('RUNNING');
    expect(await reconcileExpiredLeases(t.database.pool, 500, new Date(Date.now() + 60_000))).toEqual([
      { id: executionId, status: 'PENDING' },
    ]);
  });

  it('takes nothing when the statement waited past a quarter of a lease after a prompt clock reading', async () => {
    const leaseMs = 400;
    const reconciler = createReconciler(
      delayed(/with expired as/, () => 300),
      leaseMs,
    );
    expect(await reconciler.pass()).toEqual([]);
    expect(await statusOf()).toBe('RUNNING');
  });

  it('holds off for a lease after a clock reading that waited, then reconciles', async () => {
    const leaseMs = 400;
    let delay = 250;
    const reconciler = createReconciler(
      delayed(/select now\(\) as now/, () => delay),
      leaseMs,
    );
    expect(await reconciler.pass()).toBeUndefined();
    delay = 0;
    // Prompt now, but within a lease of the stall: the owners' writes queued with it go first.
    expect(await reconciler.pass()).toBeUndefined();
    expect(await statusOf()).toBe('RUNNING');
    await sleep(leaseMs);
    expect(await reconciler.pass()).toEqual([{ id: executionId, status: 'PENDING' }]);
  });
});
