/**
 * A workspace's cap on attempts in flight, with three workers on their own pools: never exceeded
 * across the workspace's endpoints, observed from the handlers themselves, whatever the endpoints'
 * own limits; a waiting execution says the workspace is full; setting and clearing the cap moves
 * the workspace's pending work between the claim's paths (its gated flag) and reaches endpoints
 * registered later, but not jobgate's own; ADMIN only over GraphQL, bad values refused.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDatabase, type Database } from '../../src/db/pool.js';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, pauseOwnCronJobs, settled, type EngineHarness } from '../support/engine.js';
import { createTestGateway } from '../support/graphql.js';

let t: TestDb;
let h: EngineHarness;
let pools: Database[] = [];

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  await pauseOwnCronJobs(t);
  h = engineHarness(t);
});
afterEach(async () => {
  await h.stopAll();
  await Promise.all(pools.map((p) => p.close()));
  pools = [];
  await t.service.updateWorkspace(t.actor, { concurrencyLimit: null });
});
afterAll(() => t?.close());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const gatedOf = async (endpointId: string) =>
  (await t.query(`select gated from executions where endpoint_id = $1 and status = 'PENDING'`, [endpointId])).rows.map((r) => r.gated);

describe("a workspace's cap", () => {
  it("is never exceeded across its endpoints and three workers, whatever each endpoint's own limits", async () => {
    let inFlight = 0;
    let most = 0;
    h.handle('capped', async () => {
      most = Math.max(most, ++inFlight);
      await sleep(30);
      inFlight--;
    });
    expect((await t.service.updateWorkspace(t.actor, { concurrencyLimit: 4 })).concurrencyLimit).toBe(4);
    // One endpoint without limits of its own, one with a per-key limit, one with a concurrency limit above the cap.
    await t.service.registerEndpoint(t.actor, { name: 'cap.plain', kind: 'HANDLER', handlerName: 'capped' });
    await t.service.registerEndpoint(t.actor, { name: 'cap.keyed', kind: 'HANDLER', handlerName: 'capped', keyConcurrencyLimit: 3 });
    await t.service.registerEndpoint(t.actor, { name: 'cap.wide', kind: 'HANDLER', handlerName: 'capped', concurrencyLimit: 50 });
    const made = await t.service.createJobs(t.actor, [
      ...Array.from({ length: 30 }, () => ({ endpointName: 'cap.plain', kind: 'IMMEDIATE' as const })),
      ...Array.from({ length: 30 }, (_, i) => ({ endpointName: 'cap.keyed', kind: 'IMMEDIATE' as const, concurrencyKey: `k${i % 3}` })),
      ...Array.from({ length: 30 }, () => ({ endpointName: 'cap.wide', kind: 'IMMEDIATE' as const })),
    ]);
    for (const i of [1, 2, 3]) {
      const db = createDatabase({ connectionString: t.url, max: 4 });
      pools.push(db);
      await h.worker({ workerId: `cap-${i}`, pool: db.pool, concurrency: 10 });
    }
    for (const m of made) await settled(t, m.job.id, ['SUCCEEDED'], 30_000);
    // Thirty slots, ninety jobs: the cap, not the slots, held them to four.
    expect(most).toBe(4);
  });

  it("says a waiting execution waits for its workspace, while jobgate's own work is not held", async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    h.handle('held', () => released);
    await t.service.updateWorkspace(t.actor, { concurrencyLimit: 1 });
    await t.service.registerEndpoint(t.actor, { name: 'cap.one', kind: 'HANDLER', handlerName: 'held' });
    await t.service.registerEndpoint(t.actor, { name: 'cap.two', kind: 'HANDLER', handlerName: 'held' });
    const first = (await t.service.createJob(t.actor, { endpointName: 'cap.one', kind: 'IMMEDIATE' })).job.id;
    await h.worker({ concurrency: 10 });
    try {
      await eventually(async () => (await t.service.lastExecution(t.actor, first))?.status === 'RUNNING', 10_000, 'the first to run');
      const second = (await t.service.createJob(t.actor, { endpointName: 'cap.two', kind: 'IMMEDIATE' })).job.id;
      const waiting = (await t.service.executions(t.actor, { jobId: second })).edges[0]!.node;
      expect(await t.service.waitingFor(t.actor, waiting.id)).toMatchObject({
        reason: 'WORKSPACE_CONCURRENCY_FULL',
        until: null,
        detail: "1 of the workspace's limit of 1 attempts are in flight",
      });
      // jobgate's INTERNAL endpoints are not capped: their executions stay on the unlimited path.
      const { rows } = await t.query(
        `select bool_or(workspace_capped) as any from endpoints where workspace_id = $1 and type = 'INTERNAL'`,
        [t.actor.workspaceId],
      );
      expect(rows[0]!.any).toBe(false);
    } finally {
      release();
    }
  });

  it("moves the workspace's pending work between the claim's paths when set and cleared, and reaches endpoints registered later", async () => {
    const before = await t.service.registerEndpoint(t.actor, { name: 'cap.before', kind: 'HANDLER', handlerName: 'nobody' });
    await t.service.createJobs(t.actor, [
      { endpointName: 'cap.before', kind: 'IMMEDIATE' },
      { endpointName: 'cap.before', kind: 'IMMEDIATE' },
    ]);
    expect(await gatedOf(before.id)).toEqual([false, false]);
    await t.service.updateWorkspace(t.actor, { concurrencyLimit: 10 });
    expect(await gatedOf(before.id)).toEqual([true, true]);
    const later = await t.service.registerEndpoint(t.actor, { name: 'cap.later', kind: 'HANDLER', handlerName: 'nobody' });
    await t.service.createJob(t.actor, { endpointName: 'cap.later', kind: 'IMMEDIATE' });
    expect(await gatedOf(later.id)).toEqual([true]);
    // A new value keeps it capped; clearing it frees them all.
    await t.service.updateWorkspace(t.actor, { concurrencyLimit: 20 });
    expect(await gatedOf(later.id)).toEqual([true]);
    await t.service.updateWorkspace(t.actor, { concurrencyLimit: null });
    expect(await gatedOf(before.id)).toEqual([false, false]);
    expect(await gatedOf(later.id)).toEqual([false]);
  });

  it("gives way to a statement that makes several endpoints' executions pending, in whatever order: no deadlock", async () => {
    const one = await t.service.registerEndpoint(t.actor, { name: 'cap.order-one', kind: 'HANDLER', handlerName: 'nobody' });
    const two = await t.service.registerEndpoint(t.actor, { name: 'cap.order-two', kind: 'HANDLER', handlerName: 'nobody' });
    // The cap's trigger locks endpoints in id order; this transaction reads them the other way round.
    const [low, high] = [one, two].sort((a, b) => (a.id < b.id ? -1 : 1));
    const made = await t.service.createJobs(t.actor, [
      { endpointId: high!.id, kind: 'IMMEDIATE' },
      { endpointId: low!.id, kind: 'IMMEDIATE' },
    ]);
    const executionOf = async (jobId: string) => (await t.service.executions(t.actor, { jobId })).edges[0]!.node.id;
    const [onHigh, onLow] = [await executionOf(made[0]!.job.id), await executionOf(made[1]!.job.id)];
    await t.query(`update executions set status = 'FAILED', finished_at = now() where id = any($1::uuid[])`, [[onHigh, onLow]]);
    const engine = await t.database.pool.connect();
    try {
      await engine.query('begin');
      await engine.query(`update executions set status = 'PENDING', finished_at = null where id = $1`, [onHigh]);
      const capped = t.service.updateWorkspace(t.actor, { concurrencyLimit: 5 });
      await sleep(100);
      // Without giving way, the cap's change would hold the low endpoint and wait for the high one
      // while this waits for the low one: a deadlock, with either side aborted.
      await engine.query(`update executions set status = 'PENDING', finished_at = null where id = $1`, [onLow]);
      await engine.query('commit');
      expect((await capped).concurrencyLimit).toBe(5);
    } finally {
      engine.release();
    }
    const { rows } = await t.query(`select gated from executions where id = any($1::uuid[])`, [[onHigh, onLow]]);
    expect(rows.map((r) => r.gated)).toEqual([true, true]);
  });

  it('is set by an ADMIN over GraphQL, refused to an OPERATOR and out of bounds, changing nothing', async () => {
    const gw = await createTestGateway(t);
    try {
      const set = await gw.gql(`mutation { updateWorkspace(input: { concurrencyLimit: 25 }) { concurrencyLimit name } }`);
      expect(set.errors).toBeUndefined();
      expect(set.data!.updateWorkspace.concurrencyLimit).toBe(25);
      const operator = { ...t.actor, role: 'OPERATOR' as const };
      const refused = await gw.gql(`mutation { updateWorkspace(input: { concurrencyLimit: 1 }) { concurrencyLimit } }`, {}, operator);
      expect(refused.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
      for (const bad of [0, 100_001]) {
        const out = await gw.gql(`mutation { updateWorkspace(input: { concurrencyLimit: ${bad} }) { concurrencyLimit } }`);
        expect(out.errors?.[0]?.extensions?.code, String(bad)).toBe('VALIDATION_FAILED');
      }
      expect((await gw.gql(`{ workspace { concurrencyLimit } }`)).data).toEqual({ workspace: { concurrencyLimit: 25 } });
      expect(await codeOf(() => t.service.updateWorkspace(t.actor, { name: '' }))).toBe('VALIDATION_FAILED');
      // Audited: the change, the refused role, and the service's refusal (GraphQL's argument
      // validation refuses the out-of-bounds values before they reach the service, as for every mutation).
      const audited = await t.query(`select result_code from audit_log where action = 'workspace.update' order by id`);
      expect(audited.rows.map((r) => r.result_code)).toEqual(['OK', 'FORBIDDEN', 'VALIDATION_FAILED']);
    } finally {
      await gw.close();
    }
  });
});
