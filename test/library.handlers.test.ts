/**
 * Handlers through the library: a recoverable handler can be triggered once a worker that has it
 * is live (or with force before); an on-demand interval handler runs when triggered, and the
 * trigger can wait for its outcome.
 */
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobgate, NoLiveWorkerError, outcome, type Jobgate } from '../src/index.js';
import { createTestDb, type TestDb } from './support/db.js';
import { eventually } from './support/engine.js';

let t: TestDb;
let gate: Jobgate;
const ran: string[] = [];

beforeAll(async () => {
  t = await createTestDb();
  gate = await createJobgate({ databaseUrl: t.url, migrate: false, poolMax: 4 });
  gate.recoverable('lib.audit-scan', {
    async run(store) {
      ran.push(`scan:${store.runId}`);
      return outcome.completed();
    },
  });
  gate.interval('lib.rebuild-search', {
    onDemand: true,
    async run(ctx) {
      ran.push(`rebuild:${ctx.name}`);
      return { count: 12 };
    },
  });
});
afterAll(async () => {
  await gate?.close();
  await t?.close();
});

describe('library handlers', () => {
  it('refuses triggerRun before a worker with the handler is started (NoLiveWorkerError), and runs it after', async () => {
    const refused = await gate.client.triggerRun({ name: 'lib.audit-scan' }).catch((e) => e);
    expect(refused).toBeInstanceOf(NoLiveWorkerError);
    expect(refused.code).toBe('NOT_FOUND');
    await gate.startWorker({ staleMs: 2000, enginePollMs: 50 });
    const { run, outcome: result } = await gate.client.triggerRun({ name: 'lib.audit-scan' });
    expect(result).toBe('STARTED');
    await eventually(async () => (await gate.client.run(run.id)).status === 'COMPLETED');
    expect(ran).toContain(`scan:${run.id}`);
  });

  it("runs an on-demand interval handler when triggered, answering with the tick's outcome", async () => {
    const [entry] = await gate.client.handlers({ kind: 'INTERVAL', name: 'lib.rebuild-search' });
    expect(entry).toMatchObject({ cadence: null, interval: { onDemand: true, nextDueAt: null, okRuns: 0 } });
    expect(ran.filter((r) => r.startsWith('rebuild:'))).toEqual([]);
    const triggered = await gate.client.triggerHandler({ name: 'lib.rebuild-search', wait: true, waitTimeoutMs: 60_000 });
    expect(triggered).toMatchObject({ outcome: 'DUE_NOW', tick: { state: 'FINISHED', outcome: { status: 'OK', count: 12, cause: null } } });
    expect(triggered.tick!.durationMs).toBeGreaterThanOrEqual(0);
    expect(ran.filter((r) => r.startsWith('rebuild:'))).toEqual(['rebuild:lib.rebuild-search']);
  });

  it("holds leases under the process's own worker id, so a running attempt names its host and pid; a second worker's id says whose it is", async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    gate.handle('lib.held', () => held);
    await gate.client.registerEndpoint({ name: 'lib.held', kind: 'HANDLER', handlerName: 'lib.held' });
    const [process_] = (await t.query('select id from workers')).rows as { id: string }[];
    const second = await gate.startWorker();
    expect(second.id).toBe(`${process_!.id}/2`);
    expect((await t.query('select count(*)::int as n from workers')).rows[0].n).toBe(1);
    const { job } = await gate.client.createJob({ endpointName: 'lib.held', kind: 'IMMEDIATE' });
    let running: { id: string; lease_owner: string } | undefined;
    await eventually(async () => {
      running = (await t.query(`select id, lease_owner from executions where job_id = $1 and status = 'RUNNING'`, [job.id])).rows[0];
      return running !== undefined;
    });
    expect([process_!.id, second.id]).toContain(running!.lease_owner);
    const [attempt] = await gate.client.attempts(running!.id);
    expect(attempt).toMatchObject({ finishedAt: null, workerHost: hostname(), workerPid: process.pid });
    release();
    await eventually(
      async () => (await t.query('select status from executions where id = $1', [running!.id])).rows[0].status === 'SUCCEEDED',
    );
  });
});
