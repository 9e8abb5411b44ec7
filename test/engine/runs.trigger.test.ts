/**
 * triggerRun checks for a live worker: a recoverable handler no live worker has registered is
 * NOT_FOUND (reason NO_LIVE_WORKER) and nothing is written, unless `force` queues the run for a
 * worker to come.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { HandlerRegistry } from '../../src/service/engine/delivery/handler-registry.js';
import { createEngineHost, type EngineHost } from '../../src/service/engine/runtime/host.js';
import { IntervalRegistry } from '../../src/service/engine/intervals/intervals.js';
import { outcome, RecoverableRegistry } from '../../src/service/engine/runs/recoverable.js';
import { NoLiveWorkerError } from '../../src/service/kernel/errors.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/engine.js';
import { createTestGateway } from '../support/graphql.js';

let t: TestDb;
let hosts: EngineHost[];
let scans: string[];

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  hosts = [];
  scans = [];
});
afterEach(async () => {
  await Promise.all(hosts.map((h) => h.stop({ graceMs: 1000 })));
});
afterAll(() => t?.close());

/** A worker process's engine (presence, runner, intervals) with a recoverable handler `name`. */
async function workerWith(name: string): Promise<EngineHost> {
  const recoverables = new RecoverableRegistry();
  recoverables.register({
    name,
    async run(store) {
      scans.push(store.runId);
      return outcome.completed();
    },
  });
  const intervals = new IntervalRegistry();
  // The same name as an interval handler elsewhere must not count for a recoverable.
  intervals.register({ name: 'cleanup', everyMs: 3_600_000, run: async () => {} });
  const host = createEngineHost({
    pool: t.database.pool,
    log: createLogger('silent'),
    handlers: new HandlerRegistry(),
    recoverables,
    intervals,
    triggerRun: t.service.triggerRun,
    staleMs: 2000,
    pollMs: 50,
  });
  await host.start();
  hosts.push(host);
  return host;
}

const runsOf = async (name: string) => (await t.query(`select id, status from runs where name = $1`, [name])).rows;

describe('triggerRun and live workers', () => {
  it('answers NOT_FOUND with reason NO_LIVE_WORKER for a handler no worker has, writes no run, and audits the refusal', async () => {
    const error = await t.service.triggerRun(t.actor, { name: 'orphan-scan' }).catch((e) => e);
    expect(error).toBeInstanceOf(NoLiveWorkerError);
    expect(error).toMatchObject({
      code: 'NOT_FOUND',
      details: { reason: 'NO_LIVE_WORKER', handlerKind: 'RECOVERABLE', handlerName: 'orphan-scan' },
    });
    expect(error.message).toBe(
      'no live worker has registered the recoverable handler "orphan-scan"; start a worker that registers it, or trigger with force: true to queue the run until one does',
    );
    expect(await runsOf('orphan-scan')).toEqual([]);
    const audit = (await t.query(`select result_code from audit_log where action = 'run.trigger'`)).rows;
    expect(audit).toEqual([{ result_code: 'NOT_FOUND' }]);
  });

  it('starts the run at once when a live worker has the handler, and that worker runs it', async () => {
    await workerWith('orphan-scan');
    const { run, outcome: result } = await t.service.triggerRun(t.actor, { name: 'orphan-scan' });
    expect(result).toBe('STARTED');
    await eventually(async () => (await t.service.run(t.actor, run.id)).status === 'COMPLETED');
    expect(scans).toEqual([run.id]);
  });

  it('queues the run with force, and a worker that registers the handler later runs it', async () => {
    const { run, outcome: result } = await t.service.triggerRun(t.actor, { name: 'late-scan', force: true });
    expect(result).toBe('STARTED');
    expect(await runsOf('late-scan')).toEqual([{ id: run.id, status: 'RUNNING' }]);
    await workerWith('late-scan');
    await eventually(async () => (await t.service.run(t.actor, run.id)).status === 'COMPLETED');
    expect(scans).toEqual([run.id]);
  });

  it('does not count a worker that stopped heartbeating, a clean stop, or another kind of handler with that name', async () => {
    await t.query(
      `insert into workers (id, host, pid, stale_ms, heartbeat_at, handlers)
       values ('ghost', 'h', 1, 1000, now() - interval '1 minute', '[{"kind":"RECOVERABLE","name":"haunted-scan"}]')`,
    );
    expect((await t.service.triggerRun(t.actor, { name: 'haunted-scan' }).catch((e) => e)).code).toBe('NOT_FOUND');
    const host = await workerWith('live-scan');
    // The worker has an INTERVAL handler "cleanup", not a recoverable one.
    expect((await t.service.triggerRun(t.actor, { name: 'cleanup' }).catch((e) => e)).code).toBe('NOT_FOUND');
    expect((await t.service.triggerRun(t.actor, { name: 'live-scan' })).outcome).toBe('STARTED');
    // A clean stop removes the worker from the catalogue: the next trigger is refused again.
    await host.stop({ graceMs: 1000 });
    hosts = [];
    const after = await t.service.triggerRun(t.actor, { name: 'live-scan' }).catch((e) => e);
    expect(after.code).toBe('NOT_FOUND');
    expect(await runsOf('haunted-scan')).toEqual([]);
    expect(await runsOf('cleanup')).toEqual([]);
  });

  it('is the same over GraphQL: a code and reason a client can switch on, and force', async () => {
    const g = createTestGateway(t);
    const refused = await g.gql(`mutation { triggerRun(input: { name: "gql-scan" }) { result run { id } } }`);
    expect(refused.data).toBeNull();
    expect(refused.errors?.[0]?.extensions).toMatchObject({
      code: 'NOT_FOUND',
      reason: 'NO_LIVE_WORKER',
      handlerKind: 'RECOVERABLE',
      handlerName: 'gql-scan',
    });
    expect(refused.errors?.[0]?.message).toContain('force: true');
    const forced = await g.gql(`mutation { triggerRun(input: { name: "gql-scan", force: true }) { result run { status } } }`);
    expect(forced.data.triggerRun).toEqual({ result: 'STARTED', run: { status: 'RUNNING' } });
    // A VIEWER is refused for its role first, whatever the handler.
    const viewer = await g.gql(`mutation { triggerRun(input: { name: "gql-scan" }) { result } }`, {}, { ...t.actor, role: 'VIEWER' });
    expect(viewer.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
  });
});
