/**
 * A rate limit per concurrency key, with three workers on their own pools: each key's starts, seen
 * by the handler, stay within its own bucket's bound while the keys move side by side and keyless
 * work is not held; a waiting execution says its key is rate limited and until when; the limit is
 * set, changed and removed over GraphQL, and refused out of bounds; full buckets are tidied away.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDatabase, type Database } from '../../src/db/pool.js';
import { deleteFullKeyBuckets } from '../../src/db/statements/reap.js';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, pauseOwnCronJobs, settled, type EngineHarness } from '../support/engine.js';
import { createTestGateway } from '../support/graphql.js';
import { mostInWindow } from '../support/windows.js';

let t: TestDb;
let h: EngineHarness;
let pools: Database[] = [];
/** When each key's attempts started (ms, this process's clock); '(none)' for keyless work. */
const starts = new Map<string, number[]>();

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  await pauseOwnCronJobs(t);
  h = engineHarness(t);
  starts.clear();
  h.handle('keyed', async (input: { key: string }) => {
    const list = starts.get(input.key) ?? [];
    list.push(performance.now());
    starts.set(input.key, list);
  });
});
afterEach(async () => {
  await h.stopAll();
  await Promise.all(pools.map((p) => p.close()));
  pools = [];
});
afterAll(() => t?.close());

async function threeWorkers() {
  for (const i of [1, 2, 3]) {
    const db = createDatabase({ connectionString: t.url, max: 4 });
    pools.push(db);
    await h.worker({ workerId: `key-rate-${i}`, pool: db.pool, concurrency: 10, pollMs: 1000 });
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a rate limit per key', () => {
  it('holds each key to its own burst + count per period across three workers, keys side by side, keyless work not held', async () => {
    await t.service.registerEndpoint(t.actor, {
      name: 'keyrate.limited',
      kind: 'HANDLER',
      handlerName: 'keyed',
      keyRateLimit: { count: 2, periodMs: 1000, burst: 2 },
    });
    const keys = ['k1', 'k2', 'k3', 'k4', 'k5'];
    await t.service.createJobs(
      t.actor,
      keys.flatMap((key) =>
        Array.from({ length: 20 }, () => ({
          endpointName: 'keyrate.limited',
          kind: 'IMMEDIATE' as const,
          concurrencyKey: key,
          input: { key },
        })),
      ),
    );
    const keyless = await t.service.createJobs(
      t.actor,
      Array.from({ length: 15 }, () => ({ endpointName: 'keyrate.limited', kind: 'IMMEDIATE' as const, input: { key: '(none)' } })),
    );
    await threeWorkers();
    await sleep(4_000);
    // A handler starts a few ms after its claim spent the token, and not always the same few:
    // 250 ms of that is allowed, as in the endpoint's own rate test.
    const bound = (windowMs: number) => Math.floor(2 + (2 * (windowMs + 250)) / 1000);
    for (const key of keys) {
      const list = starts.get(key) ?? [];
      expect(mostInWindow(list, 1_000), key).toBeLessThanOrEqual(bound(1_000));
      expect(mostInWindow(list, 2_000), key).toBeLessThanOrEqual(bound(2_000));
      // Every key moved at about its rate: its burst, then two a second.
      expect(list.length, key).toBeGreaterThanOrEqual(2 + 2 * 2);
      expect(list.length, key).toBeLessThanOrEqual(bound(Math.max(...list) - Math.min(...list)));
    }
    // Executions without a key are not limited per key: all fifteen ran at once, long since.
    for (const k of keyless) await settled(t, k.job.id, ['SUCCEEDED']);
  });

  it('says a waiting execution waits for its key, and until when, while another key starts', async () => {
    await t.service.registerEndpoint(t.actor, {
      name: 'keyrate.slow',
      kind: 'HANDLER',
      handlerName: 'keyed',
      keyRateLimit: { count: 1, periodMs: 60_000 },
    });
    const create = async (key: string) =>
      (await t.service.createJob(t.actor, { endpointName: 'keyrate.slow', kind: 'IMMEDIATE', concurrencyKey: key, input: { key } })).job.id;
    const first = await create('acme');
    const second = await create('acme');
    const other = await create('globex');
    await h.worker();
    await settled(t, first, ['SUCCEEDED']);
    await settled(t, other, ['SUCCEEDED']);
    const waiting = (await t.service.executions(t.actor, { jobId: second })).edges[0]!.node;
    const w = await eventually(() => t.service.waitingFor(t.actor, waiting.id));
    expect(w.reason).toBe('KEY_RATE_LIMITED');
    expect(w.detail).toBe(
      `key "acme" has started its 1 per 60000 ms on endpoint "keyrate.slow"; the next may start at ${w.until!.toISOString()}`,
    );
    expect(w.until!.getTime() - Date.now()).toBeGreaterThan(50_000);
    expect(w.until!.getTime() - Date.now()).toBeLessThanOrEqual(61_000);
    expect(starts.get('acme')).toHaveLength(1);

    // Lifted: it starts.
    const ep = await t.service.endpoint(t.actor, { name: 'keyrate.slow' });
    expect((await t.service.updateEndpoint(t.actor, { id: ep.id, keyRateLimit: null })).keyRateLimit).toBeNull();
    await settled(t, second, ['SUCCEEDED']);
  });

  it('is set, read and removed over GraphQL, and refused out of bounds with VALIDATION_FAILED, changing nothing', async () => {
    const gw = await createTestGateway(t);
    try {
      const registered = await gw.gql(
        `mutation { registerEndpoint(input: { name: "keyrate.api", kind: HANDLER, handlerName: "keyed",
                                              keyRateLimit: { count: 10, periodMs: 60000 } }) { id keyRateLimit { count periodMs burst } } }`,
      );
      expect(registered.errors).toBeUndefined();
      const ep = registered.data!.registerEndpoint as { id: string; keyRateLimit: unknown };
      // The burst defaults to the count.
      expect(ep.keyRateLimit).toEqual({ count: 10, periodMs: 60_000, burst: 10 });
      for (const bad of ['{ count: 0, periodMs: 1000 }', '{ count: 1, periodMs: 999 }', '{ count: 1, periodMs: 1000, burst: 0 }']) {
        const refused = await gw.gql(`mutation { updateEndpoint(input: { id: "${ep.id}", keyRateLimit: ${bad} }) { id } }`);
        expect(refused.errors?.[0]?.extensions?.code, bad).toBe('VALIDATION_FAILED');
      }
      const read = await gw.gql(`{ endpoint(id: "${ep.id}") { keyRateLimit { count periodMs burst } } }`);
      expect(read.data).toEqual({ endpoint: { keyRateLimit: { count: 10, periodMs: 60_000, burst: 10 } } });
      const removed = await gw.gql(`mutation { updateEndpoint(input: { id: "${ep.id}", keyRateLimit: null }) { keyRateLimit { count } } }`);
      expect(removed.data).toEqual({ updateEndpoint: { keyRateLimit: null } });
    } finally {
      await gw.close();
    }
  });

  it("keeps a key's bucket while it is short, and the reaper deletes it once full (no row reads as full)", async () => {
    const ep = await t.service.registerEndpoint(t.actor, {
      name: 'keyrate.tidy',
      kind: 'HANDLER',
      handlerName: 'keyed',
      keyRateLimit: { count: 1, periodMs: 1000, burst: 1 },
    });
    const job = (
      await t.service.createJob(t.actor, {
        endpointName: 'keyrate.tidy',
        kind: 'IMMEDIATE',
        concurrencyKey: 'once',
        input: { key: 'once' },
      })
    ).job.id;
    await h.worker();
    await settled(t, job, ['SUCCEEDED']);
    const buckets = async () =>
      (await t.query(`select concurrency_key from endpoint_key_rate_buckets where endpoint_id = $1`, [ep.id])).rows.map(
        (r) => r.concurrency_key,
      );
    // Just spent: short of a token, kept.
    expect(await buckets()).toEqual(['once']);
    expect(await deleteFullKeyBuckets(t.database.pool, t.actor.workspaceId)).toBe(0);
    await sleep(1_100);
    expect(await deleteFullKeyBuckets(t.database.pool, t.actor.workspaceId)).toBe(1);
    expect(await buckets()).toEqual([]);
  });
});

describe('the refusals of a rate limit per key', () => {
  it('refuses a bad value through the service too, and changes nothing', async () => {
    const ep = await t.service.registerEndpoint(t.actor, { name: 'keyrate.bounds', kind: 'HANDLER', handlerName: 'keyed' });
    expect(ep.keyRateLimit).toBeNull();
    expect(await codeOf(() => t.service.updateEndpoint(t.actor, { id: ep.id, keyRateLimit: { count: 1, periodMs: 100 } }))).toBe(
      'VALIDATION_FAILED',
    );
    expect((await t.service.endpoint(t.actor, { id: ep.id })).keyRateLimit).toBeNull();
  });
});
