/**
 * Concurrency per key, and fair turns between keys, with real workers: an endpoint's
 * keyConcurrencyLimit is never exceeded for any key, observed from the handlers themselves across
 * three workers on their own pools; a key with a long backlog does not hold back a key whose jobs
 * came after it; a waiting execution says its key is full; the key reaches every execution
 * however it is made, and bad values are refused.
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
});
afterAll(() => t?.close());

async function threeWorkers(concurrency: number) {
  for (const i of [1, 2, 3]) {
    const db = createDatabase({ connectionString: t.url, max: 4 });
    pools.push(db);
    await h.worker({ workerId: `keys-${i}`, pool: db.pool, concurrency });
  }
}

const register = (name: string, handlerName: string, more: { keyConcurrencyLimit?: number; concurrencyLimit?: number } = {}) =>
  t.service.registerEndpoint(t.actor, { name, kind: 'HANDLER', handlerName, ...more });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a per-key concurrency limit', () => {
  it('is never exceeded for any key across three workers, and keyless work is not limited by it', async () => {
    const inFlight = new Map<string, number>();
    const most = new Map<string, number>();
    h.handle('tracked', async (input: { key: string }) => {
      const now = (inFlight.get(input.key) ?? 0) + 1;
      inFlight.set(input.key, now);
      most.set(input.key, Math.max(most.get(input.key) ?? 0, now));
      await sleep(40);
      inFlight.set(input.key, inFlight.get(input.key)! - 1);
    });
    await register('keys.limited', 'tracked', { keyConcurrencyLimit: 2 });
    const jobs = [];
    for (const key of ['alpha', 'beta', 'gamma'])
      for (let i = 0; i < 12; i++)
        jobs.push(
          (await t.service.createJob(t.actor, { endpointName: 'keys.limited', kind: 'IMMEDIATE', concurrencyKey: key, input: { key } })).job
            .id,
        );
    for (let i = 0; i < 12; i++)
      jobs.push((await t.service.createJob(t.actor, { endpointName: 'keys.limited', kind: 'IMMEDIATE', input: { key: '(none)' } })).job.id);
    await threeWorkers(10);
    for (const id of jobs) await settled(t, id, ['SUCCEEDED'], 30_000);
    for (const key of ['alpha', 'beta', 'gamma']) expect(most.get(key)).toBe(2);
    // Thirty slots and twelve keyless jobs: more than two of them ran at once.
    expect(most.get('(none)')).toBeGreaterThan(2);
  });

  it('says a waiting execution waits for its key, and lets another key start meanwhile', async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const started: string[] = [];
    h.handle('held', async (input: { key: string }) => {
      started.push(input.key);
      await released;
    });
    await register('keys.wait', 'held', { keyConcurrencyLimit: 1 });
    const create = async (key: string) =>
      (await t.service.createJob(t.actor, { endpointName: 'keys.wait', kind: 'IMMEDIATE', concurrencyKey: key, input: { key } })).job;
    const first = await create('acme');
    const second = await create('acme');
    const other = await create('globex');
    await h.worker({ concurrency: 10 });
    try {
      await eventually(() => started.length === 2, 10_000, 'one attempt per key to start');
      expect(started.sort()).toEqual(['acme', 'globex']);
      const waiting = (await t.service.executions(t.actor, { jobId: second.id })).edges[0]!.node;
      expect(waiting.status).toBe('PENDING');
      expect(waiting.concurrencyKey).toBe('acme');
      expect(await t.service.waitingFor(t.actor, waiting.id)).toMatchObject({
        reason: 'KEY_CONCURRENCY_FULL',
        until: null,
        detail: `1 of key "acme"'s limit of 1 attempts on endpoint "keys.wait" are in flight`,
      });
    } finally {
      release();
    }
    for (const j of [first, second, other]) await settled(t, j.id, ['SUCCEEDED']);
  });
});

describe("an endpoint's busiest keys", () => {
  it('are read over GraphQL with their attempts in flight and waiting, the busiest first', async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    h.handle('busy', () => released);
    await register('keys.busy', 'busy', { keyConcurrencyLimit: 1 });
    await register('keys.none', 'busy');
    await t.service.createJobs(t.actor, [
      ...['acme', 'acme', 'acme', 'globex', 'globex', 'initech'].map((concurrencyKey) => ({
        endpointName: 'keys.busy',
        kind: 'IMMEDIATE' as const,
        concurrencyKey,
      })),
      { endpointName: 'keys.none', kind: 'IMMEDIATE' as const, concurrencyKey: 'acme' },
    ]);
    await h.worker({ concurrency: 10 });
    const g = createTestGateway(t);
    try {
      const read = async () =>
        (await g.gql(`{ endpoints { nodes { name busiestKeys { key running pending } } } }`)).data!.endpoints.nodes as {
          name: string;
          busiestKeys: unknown[];
        }[];
      // One attempt of each key of keys.busy in flight (its per-key limit), the rest waiting.
      const nodes = await eventually(async () => {
        const all = await read();
        const busy = all.find((n) => n.name === 'keys.busy')!;
        return busy.busiestKeys.length === 3 && (busy.busiestKeys as { running: number }[]).every((k) => k.running === 1) ? all : undefined;
      });
      expect(nodes.find((n) => n.name === 'keys.busy')!.busiestKeys).toEqual([
        { key: 'acme', running: 1, pending: 2 },
        { key: 'globex', running: 1, pending: 1 },
        { key: 'initech', running: 1, pending: 0 },
      ]);
      // No per-key limits: no keys to show.
      expect(nodes.find((n) => n.name === 'keys.none')!.busiestKeys).toEqual([]);
    } finally {
      release();
      await g.close();
    }
  });
});

describe('turns between keys', () => {
  it("starts a short backlog's jobs while a long one queued before it still waits", async () => {
    const started: string[] = [];
    h.handle('turns', async (input: { key: string }) => void started.push(input.key));
    // A per-key limit above the worker's slots: the turns, not the cap, keep the small key moving.
    const ep = await register('keys.fair', 'turns', { keyConcurrencyLimit: 50 });
    const BIG = 20_000;
    // The long backlog, written as createJob writes it (a job and its execution each, with the
    // key pinned), in two statements: twenty thousand createJob calls would take most of a minute.
    await t.query(
      `with j as (
         insert into jobs (workspace_id, endpoint_id, kind, input, max_attempts, concurrency_key)
         select $1, $2, 'IMMEDIATE', '{"key":"big"}', 5, 'big' from generate_series(1, $3::int)
         returning id, workspace_id, endpoint_id, input)
       insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, concurrency_key, input)
       select workspace_id, id, endpoint_id, now(), now(), 5, 'big', input from j`,
      [t.actor.workspaceId, ep.id, BIG],
    );
    const small = [];
    for (let i = 0; i < 20; i++)
      small.push(
        (
          await t.service.createJob(t.actor, {
            endpointName: 'keys.fair',
            kind: 'IMMEDIATE',
            concurrencyKey: 'small',
            input: { key: 'small' },
          })
        ).job.id,
      );
    await h.worker({ concurrency: 5 });
    for (const id of small) await settled(t, id, ['SUCCEEDED'], 60_000);
    // The keys took turns: by the small key's last start, the big key had started about as many
    // (one per turn, plus the slots a claim filled from it when the small key was at its limit).
    const lastSmall = started.lastIndexOf('small');
    const bigBefore = started.slice(0, lastSmall).filter((k) => k === 'big').length;
    expect(bigBefore).toBeLessThanOrEqual(20 + 2 * 5);
    const { rows } = await t.query(`select count(*)::int as n from executions where concurrency_key = 'big' and status = 'PENDING'`);
    expect(rows[0]!.n).toBeGreaterThan(BIG - 200);
  });
});

describe('the rotation past its window', () => {
  it("reaches a key after more than a claim's window of keys with nothing due", async () => {
    const started: string[] = [];
    h.handle('window', async (input: { key: string }) => void started.push(input.key));
    await register('keys.window', 'window', { keyConcurrencyLimit: 1 });
    const later = new Date(Date.now() + 3_600_000).toISOString();
    // 120 keys (a claim looks at 100) whose only work is delayed, sorting before the due one.
    await t.service.createJobs(
      t.actor,
      Array.from({ length: 120 }, (_, i) => ({
        endpointName: 'keys.window',
        kind: 'DELAYED' as const,
        runAt: later,
        concurrencyKey: `k${String(i).padStart(3, '0')}`,
        input: { key: 'delayed' },
      })),
    );
    const due = (
      await t.service.createJob(t.actor, { endpointName: 'keys.window', kind: 'IMMEDIATE', concurrencyKey: 'zz', input: { key: 'zz' } })
    ).job.id;
    await h.worker({ concurrency: 2 });
    await settled(t, due, ['SUCCEEDED']);
    expect(started).toEqual(['zz']);
  });
});

describe('where a concurrency key comes from', () => {
  it('is pinned on every execution however it is made, and refused when malformed', async () => {
    const ep = await register('keys.api', 'nobody', { keyConcurrencyLimit: 3 });
    expect(ep.keyConcurrencyLimit).toBe(3);
    const quick = await t.service.createJobs(t.actor, [{ endpointName: 'keys.api', kind: 'IMMEDIATE', concurrencyKey: 'k1' }]);
    const full = await t.service.createJob(t.actor, {
      endpointName: 'keys.api',
      kind: 'IMMEDIATE',
      concurrencyKey: 'k2',
      idempotencyKey: 'full-path',
    });
    const manual = await t.service.triggerJob(t.actor, { id: full.job.id, force: true });
    expect(quick[0]!.job.concurrencyKey).toBe('k1');
    expect(full.job.concurrencyKey).toBe('k2');
    expect(manual.execution.concurrencyKey).toBe('k2');
    const { rows } = await t.query(`select concurrency_key from executions where job_id = any($1::uuid[]) order by created_at`, [
      [quick[0]!.job.id, full.job.id],
    ]);
    expect(rows.map((r) => r.concurrency_key)).toEqual(['k1', 'k2', 'k2']);

    const before = (await t.query(`select count(*)::int as n from jobs`)).rows[0]!.n;
    for (const concurrencyKey of ['', 'x'.repeat(201)])
      expect(await codeOf(() => t.service.createJob(t.actor, { endpointName: 'keys.api', kind: 'IMMEDIATE', concurrencyKey }))).toBe(
        'VALIDATION_FAILED',
      );
    expect(await codeOf(() => t.service.updateEndpoint(t.actor, { id: ep.id, keyConcurrencyLimit: 0 }))).toBe('VALIDATION_FAILED');
    expect((await t.query(`select count(*)::int as n from jobs`)).rows[0]!.n).toBe(before);
    expect((await t.service.endpoint(t.actor, { id: ep.id })).keyConcurrencyLimit).toBe(3);
    // An idempotent repeat with another key is a conflict, naming the field.
    await t.service.createJob(t.actor, { endpointName: 'keys.api', kind: 'IMMEDIATE', idempotencyKey: 'once', concurrencyKey: 'a' });
    expect(
      await codeOf(() =>
        t.service.createJob(t.actor, { endpointName: 'keys.api', kind: 'IMMEDIATE', idempotencyKey: 'once', concurrencyKey: 'b' }),
      ),
    ).toBe('CONFLICT');

    const g = createTestGateway(t);
    try {
      const made = await g.gql(
        `mutation { createJob(input: { endpointName: "keys.api", kind: IMMEDIATE, concurrencyKey: "tenant-9" }) { job { concurrencyKey executions(first: 1) { nodes { concurrencyKey } } } } }`,
      );
      expect(made.errors).toBeUndefined();
      expect(made.data!.createJob.job).toEqual({ concurrencyKey: 'tenant-9', executions: { nodes: [{ concurrencyKey: 'tenant-9' }] } });
      const updated = await g.gql(
        'mutation ($id: ID!) { updateEndpoint(input: { id: $id, keyConcurrencyLimit: null }) { keyConcurrencyLimit } }',
        {
          id: ep.id,
        },
      );
      expect(updated.data!.updateEndpoint.keyConcurrencyLimit).toBeNull();
    } finally {
      await g.close();
    }
  });
});
