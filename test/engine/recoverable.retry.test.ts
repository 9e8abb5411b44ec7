/**
 * Recoverable runs that survive a throw: retried from their last checkpoint within a budget that
 * progress gives back, visible while they wait, resumable from their checkpoint once FAILED, and
 * checkpoints committed with the handler's own writes under the run's fence.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { outcome, RecoverableRegistry, RunLostError, type RecoverableHandler } from '../../src/service/engine/runs/recoverable.js';
import { createRunner, type Runner } from '../../src/service/engine/runs/runner.js';
import { sweepStaleRuns } from '../../src/db/statements/run-fence.js';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/engine.js';
import { createTestGateway } from '../support/graphql.js';
import { collect, startLiveGateway } from '../support/live.js';

let t: TestDb;
let registry: RecoverableRegistry;
let runners: Runner[];
/** The cursor each call of a handler was handed, by handler name. */
let handed: Record<string, unknown[]>;

const run = (id: string) => t.service.run(t.actor, id);
const status = async (id: string) => (await run(id)).status;

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  registry = new RecoverableRegistry();
  runners = [];
  handed = {};
  await t.query(`create table domain_rows (run_id uuid, n int)`);
});
afterEach(async () => {
  await Promise.all(runners.map((r) => r.stop({ graceMs: 2000 })));
});
afterAll(() => t?.close());

async function runner(): Promise<Runner> {
  const r = createRunner({ pool: t.database.pool, registry, log: createLogger('silent'), heartbeatMs: 100, pollMs: 50, staleMs: 5000 });
  await r.start();
  runners.push(r);
  return r;
}

/** Registers a handler that records the cursor each of its calls is handed, then runs `body`. */
function register(name: string, retry: RecoverableHandler['retry'], body: (cursor: unknown, call: number, store: any) => Promise<unknown>) {
  handed[name] = [];
  registry.register({
    name,
    retry,
    async run(store) {
      const cursor = await store.loadCursor();
      handed[name]!.push(cursor);
      return (await body(cursor, handed[name]!.length, store)) as never;
    },
  });
}

/** Lets a run waiting to retry be taken now (its backoff is the database's time: moved, not waited out). */
const dueNow = (id: string) => t.query(`update runs set resume_after = now() where id = $1 and resume_after is not null`, [id]);

describe('retries after a throw', () => {
  it('retries a handler that throws twice from its last checkpoint (not from scratch), visibly waiting in between, and completes', async () => {
    register('flaky', { budget: 3, backoffMs: 3_600_000, maxBackoffMs: 3_600_000 }, async (cursor, call, store) => {
      if (call === 1) await store.checkpoint({ next: 5 }, { processed: 5 });
      if (call <= 2) throw new Error(`transient #${call}`);
      return outcome.completed();
    });
    const r = await runner();
    const { run: started } = await t.service.triggerRun(t.actor, { force: true, name: 'flaky' });
    await eventually(async () => (await run(started.id)).retryAttempt === 1);
    const waiting = await run(started.id);
    expect(waiting).toMatchObject({
      status: 'RUNNING',
      waitingToRetry: true,
      retryAttempt: 1,
      retryBudget: 3,
      error: 'Error: transient #1',
    });
    // Its backoff is an hour: nothing takes it before then.
    expect(waiting.nextAttemptAt!.getTime()).toBeGreaterThan(waiting.updatedAt.getTime() + 30 * 60_000);
    const g = createTestGateway(t);
    const res = await g.gql(`query ($id: ID!) { run(id: $id) { status waitingToRetry retryAttempt retryBudget nextAttemptAt error } }`, {
      id: started.id,
    });
    expect(res.data.run).toMatchObject({
      status: 'RUNNING',
      waitingToRetry: true,
      retryAttempt: 1,
      retryBudget: 3,
      error: 'Error: transient #1',
    });
    expect(new Date(res.data.run.nextAttemptAt).getTime()).toBe(waiting.nextAttemptAt!.getTime());
    expect(handed.flaky).toHaveLength(1);

    await dueNow(started.id);
    r.kick();
    await eventually(async () => (await run(started.id)).retryAttempt === 2);
    await dueNow(started.id);
    r.kick();
    await eventually(async () => (await status(started.id)) === 'COMPLETED');
    expect(handed.flaky).toEqual([null, { next: 5 }, { next: 5 }]);
    expect(await run(started.id)).toMatchObject({ processed: 5, waitingToRetry: false, nextAttemptAt: null, error: null });
  });

  it('pauses a run waiting to retry when cancelled; triggerRun resumes it at once, its budget whole', async () => {
    register('flaky.cancelled', { budget: 1, backoffMs: 3_600_000, maxBackoffMs: 3_600_000 }, async (_cursor, call) => {
      if (call === 1) throw new Error('blip');
      return outcome.completed();
    });
    await runner();
    const { run: started } = await t.service.triggerRun(t.actor, { force: true, name: 'flaky.cancelled' });
    await eventually(async () => (await run(started.id)).waitingToRetry);
    expect(await t.service.cancelRun(t.actor, started.id)).toMatchObject({
      status: 'PAUSED',
      pauseKind: 'CANCELLED',
      waitingToRetry: false,
    });
    const resumed = await t.service.triggerRun(t.actor, { force: true, name: 'flaky.cancelled' });
    expect(resumed).toMatchObject({ outcome: 'RESUMED', run: { retryAttempt: 0, nextAttemptAt: null } });
    await eventually(async () => (await status(started.id)) === 'COMPLETED');
    expect(handed['flaky.cancelled']).toHaveLength(2);
  });

  for (const budget of [0, 2]) {
    it(`an operator's cancel while the handler runs wins over its throw (${budget} retries left): PAUSED (CANCELLED), no retry spent`, async () => {
      let release!: () => void;
      const cancelled = new Promise<void>((r) => (release = r));
      register(`cancel-then-throw.${budget}`, { budget, backoffMs: 3_600_000, maxBackoffMs: 3_600_000 }, async () => {
        await cancelled;
        throw new Error('downstream 500');
      });
      await runner();
      const { run: started } = await t.service.triggerRun(t.actor, { force: true, name: `cancel-then-throw.${budget}` });
      await eventually(async () => (handed[`cancel-then-throw.${budget}`] ?? []).length === 1);
      expect(await t.service.cancelRun(t.actor, started.id)).toMatchObject({ status: 'CANCEL_REQUESTED' });
      release();
      await eventually(async () => (await status(started.id)) === 'PAUSED');
      expect(await run(started.id)).toMatchObject({
        pauseKind: 'CANCELLED',
        retryAttempt: 0,
        waitingToRetry: false,
        nextAttemptAt: null,
        error: 'Error: downstream 500',
      });
      // Nothing resumes it from a FAILED state behind the operator's back: it is not FAILED.
      expect(handed[`cancel-then-throw.${budget}`]).toHaveLength(1);
    });
  }

  it('ends FAILED once its budget is spent, saying why the last attempt failed', async () => {
    register('doomed', { budget: 2, backoffMs: 1 }, async (_cursor, call) => {
      throw new Error(`still broken #${call}`);
    });
    await runner();
    const { run: started } = await t.service.triggerRun(t.actor, { force: true, name: 'doomed' });
    await eventually(async () => (await status(started.id)) === 'FAILED');
    expect(handed.doomed).toHaveLength(3); // the first attempt and two retries
    expect(await run(started.id)).toMatchObject({
      error: 'Error: still broken #3',
      retryAttempt: 2,
      retryBudget: 2,
      waitingToRetry: false,
    });
  });

  it('gives the budget back on progress: a handler that advances its cursor before each throw is retried past its budget', async () => {
    // One retry per failure streak: without the reset the second throw would end the run.
    register('creeping', { budget: 1, backoffMs: 1 }, async (cursor, _call, store) => {
      const next = ((cursor as { next: number } | null)?.next ?? 0) + 1;
      if (next > 3) return outcome.completed();
      await store.checkpoint({ next }, { processed: 1 });
      throw new Error(`after ${next}`);
    });
    await runner();
    const { run: started } = await t.service.triggerRun(t.actor, { force: true, name: 'creeping' });
    await eventually(async () => (await status(started.id)) === 'COMPLETED');
    expect(handed.creeping).toEqual([null, { next: 1 }, { next: 2 }, { next: 3 }]);
    expect((await run(started.id)).processed).toBe(3);
  });

  it('fails at once, without retries, a run whose handler returns failed', async () => {
    register('verdict', { budget: 3, backoffMs: 1 }, async () => outcome.failed('bad data'));
    await runner();
    const { run: started } = await t.service.triggerRun(t.actor, { force: true, name: 'verdict' });
    await eventually(async () => (await status(started.id)) === 'FAILED');
    expect(handed.verdict).toHaveLength(1);
    expect((await run(started.id)).error).toBe('bad data');
  });

  it('shows a live runProgress subscriber the run waiting to retry, then completing', async () => {
    register('flaky.live', { budget: 1, backoffMs: 3_600_000, maxBackoffMs: 3_600_000 }, async (_cursor, call) => {
      if (call === 1) throw new Error('blip');
      return outcome.completed();
    });
    const live = await startLiveGateway(t);
    try {
      const key = (await t.service.bootstrapKey('default', 'VIEWER', 'live viewer')).key;
      const { run: started } = await t.service.triggerRun(t.actor, { force: true, name: 'flaky.live' });
      const sub = collect(
        live.client(key),
        `subscription($id: ID!) { runProgress(runId: $id) { status waitingToRetry retryAttempt error } }`,
        {
          id: started.id,
        },
      );
      await sub.until((xs) => xs.length >= 1);
      const r = await runner();
      await sub.until((xs) => xs.some((x) => x.waitingToRetry), 10_000, 'the wait to retry');
      expect(sub.items.find((x) => x.waitingToRetry)).toMatchObject({ status: 'RUNNING', retryAttempt: 1, error: 'Error: blip' });
      await dueNow(started.id);
      r.kick();
      await sub.until(() => sub.completed, 10_000, 'completion');
      expect(sub.items.at(-1)).toMatchObject({ status: 'COMPLETED', waitingToRetry: false });
      sub.stop();
    } finally {
      await live.close();
    }
  });
});

describe('resuming a FAILED run from its checkpoint', () => {
  it('resumes it with fromCheckpoint (RESUMED, same run, its cursor), audited, refused to a VIEWER; without it a trigger starts afresh', async () => {
    register('once', { budget: 0 }, async (cursor, call, store) => {
      if (call === 1) {
        await store.checkpoint({ next: 7 }, { processed: 7, stats: { seen: 7 } });
        throw new Error('disk on fire');
      }
      return outcome.completed();
    });
    await runner();
    const { run: failed } = await t.service.triggerRun(t.actor, { force: true, name: 'once' });
    await eventually(async () => (await status(failed.id)) === 'FAILED');

    expect(
      await codeOf(() => t.service.triggerRun({ ...t.actor, role: 'VIEWER' }, { force: true, name: 'once', fromCheckpoint: true })),
    ).toBe('FORBIDDEN');
    const g = createTestGateway(t);
    const res = await g.gql(
      `mutation { triggerRun(input: { name: "once", force: true, fromCheckpoint: true }) { result run { id status error } } }`,
    );
    expect(res.data.triggerRun).toMatchObject({ result: 'RESUMED', run: { id: failed.id, status: 'RUNNING', error: null } });
    await eventually(async () => (await status(failed.id)) === 'COMPLETED');
    expect(handed.once).toEqual([null, { next: 7 }]);
    expect(await run(failed.id)).toMatchObject({ processed: 7, stats: { seen: 7 }, startedAt: failed.startedAt });
    const audit = await t.query(`select count(*)::int as n from audit_log where action = 'run.trigger' and target_id = $1`, [failed.id]);
    expect(audit.rows[0].n).toBe(2);

    // The newest run did not fail: fromCheckpoint starts afresh, as a plain trigger does.
    const again = await t.service.triggerRun(t.actor, { force: true, name: 'once', fromCheckpoint: true });
    expect(again.outcome).toBe('STARTED');
    expect(again.run.id).not.toBe(failed.id);
  });
});

describe("a run's transaction", () => {
  it('rolls back the checkpoint with the domain write when the handler throws after writing; the retry commits both together', async () => {
    register('tx', { budget: 1, backoffMs: 1 }, async (cursor, call, store) => {
      await store.transaction(async (client: any, tx: any) => {
        await client.query(`insert into domain_rows (run_id, n) values ($1, $2)`, [store.runId, call]);
        tx.checkpoint({ next: 1 }, { processed: 1 });
        if (call === 1) throw new Error('after writing');
      });
      return outcome.completed();
    });
    await runner();
    const { run: started } = await t.service.triggerRun(t.actor, { force: true, name: 'tx' });
    await eventually(async () => (await status(started.id)) === 'COMPLETED');
    // The retry was handed the cursor from before the failed transaction: nothing of it committed.
    expect(handed.tx).toEqual([null, null]);
    expect((await t.query(`select n from domain_rows`)).rows).toEqual([{ n: 2 }]);
    expect(await run(started.id)).toMatchObject({
      processed: 1,
      cursorBase64: Buffer.from(JSON.stringify({ next: 1 })).toString('base64'),
    });
  });

  const lose = {
    // Another runner takes the run over (its epoch moves on).
    'taken over': (id: string) => t.query(`update runs set owner = 'another-runner', epoch = epoch + 1 where id = $1`, [id]),
    // Its heartbeat is judged stale and a sweep pauses it as crashed.
    'swept as stale': async (id: string) => {
      await t.query(`update runs set heartbeat_at = now() - interval '1 hour' where id = $1`, [id]);
      await sweepStaleRuns(t.database.pool, 1000);
    },
  };
  it.each(Object.keys(lose) as (keyof typeof lose)[])(
    'commits nothing for a run that lost its fence while its transaction ran (%s), and tells the handler',
    async (how) => {
      let thrown: unknown;
      register('stolen', { budget: 0 }, async (_cursor, _call, store) => {
        try {
          await store.transaction(async (client: any, tx: any) => {
            await client.query(`insert into domain_rows (run_id, n) values ($1, 1)`, [store.runId]);
            tx.checkpoint({ next: 1 }, { processed: 1 });
            await lose[how](store.runId);
          });
        } catch (error) {
          thrown = error;
        }
        return outcome.completed();
      });
      await runner();
      const { run: started } = await t.service.triggerRun(t.actor, { force: true, name: 'stolen' });
      await eventually(async () => thrown !== undefined);
      expect(thrown).toBeInstanceOf(RunLostError);
      expect((await t.query(`select count(*)::int as n from domain_rows`)).rows[0].n).toBe(0);
      const row = (await t.query(`select owner, status, cursor, processed::int as processed from runs where id = $1`, [started.id]))
        .rows[0];
      // Not checkpointed, and its outcome not recorded over what the run became.
      expect(row).toMatchObject(
        how === 'taken over'
          ? { owner: 'another-runner', status: 'RUNNING', cursor: null, processed: 0 }
          : { owner: null, status: 'PAUSED', cursor: null, processed: 0 },
      );
    },
  );
});
