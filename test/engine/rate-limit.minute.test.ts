/**
 * Rate limits held for a whole minute by three workers on their own pools, an endpoint's and one
 * per concurrency key over 50 keys at once: in no sliding one-second window do an endpoint's
 * starts, or one key's, exceed its count per second plus its burst, and the backlogs move at their
 * rates all the while. The starts are the claims' own moments (attempt_started_at, when each
 * claim spent its token), read from the attempts' history.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, type Database } from '../../src/db/pool.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, pauseOwnCronJobs, type EngineHarness } from '../support/engine.js';
import { mostInWindow } from '../support/windows.js';

let t: TestDb;
let h: EngineHarness;
const pools: Database[] = [];

beforeAll(async () => {
  t = await createTestDb();
  await pauseOwnCronJobs(t);
  h = engineHarness(t);
});
afterAll(async () => {
  await h?.stopAll();
  await Promise.all(pools.map((p) => p.close()));
  await t?.close();
});

const MINUTE = 60_000;
const KEYS = Array.from({ length: 50 }, (_, i) => `tenant-${String(i).padStart(2, '0')}`);

describe('rate limits over a minute', () => {
  it("keep an endpoint's and each of 50 keys' starts to count + burst in every one-second window, across three workers", async () => {
    h.handle('minute', async () => {});
    await t.service.registerEndpoint(t.actor, {
      name: 'minute.endpoint',
      kind: 'HANDLER',
      handlerName: 'minute',
      rateLimit: { count: 5, periodMs: 1000, burst: 5 },
    });
    await t.service.registerEndpoint(t.actor, {
      name: 'minute.keys',
      kind: 'HANDLER',
      handlerName: 'minute',
      keyRateLimit: { count: 2, periodMs: 1000, burst: 2 },
    });
    // More than a minute of work for each: 5 + 5 × 60 for the endpoint, 2 + 2 × 60 per key.
    await t.service.createJobs(
      t.actor,
      Array.from({ length: 400 }, () => ({ endpointName: 'minute.endpoint', kind: 'IMMEDIATE' as const })),
    );
    for (const key of KEYS)
      await t.service.createJobs(
        t.actor,
        Array.from({ length: 150 }, () => ({ endpointName: 'minute.keys', kind: 'IMMEDIATE' as const, concurrencyKey: key })),
      );
    for (const i of [1, 2, 3]) {
      const db = createDatabase({ connectionString: t.url, max: 4 });
      pools.push(db);
      await h.worker({ workerId: `minute-${i}`, pool: db.pool, concurrency: 10, pollMs: 1000 });
    }
    await new Promise((r) => setTimeout(r, MINUTE));
    await h.stopAll();

    const { rows } = await t.query<{ endpoint: string; key: string; at: number }>(
      `select en.name as endpoint, e.concurrency_key as key, extract(epoch from a.started_at) * 1000 as at
       from attempts a join executions e on e.id = a.execution_id join endpoints en on en.id = e.endpoint_id
       where en.name like 'minute.%'`,
    );
    const times = (endpoint: string, key?: string) =>
      rows.filter((r) => r.endpoint === endpoint && (key === undefined || r.key === key)).map((r) => Number(r.at));

    const endpoint = times('minute.endpoint');
    expect(mostInWindow(endpoint, 1_000)).toBeLessThanOrEqual(5 + 5);
    // It kept its rate: the burst, then five a second (a little given for the workers' start).
    expect(endpoint.length).toBeGreaterThanOrEqual(5 + 5 * 55);
    expect(endpoint.length).toBeLessThanOrEqual(5 + 5 * 61);

    const perKey = KEYS.map((key) => ({ key, starts: times('minute.keys', key) }));
    for (const { key, starts } of perKey) {
      expect(mostInWindow(starts, 1_000), key).toBeLessThanOrEqual(2 + 2);
      expect(starts.length, key).toBeLessThanOrEqual(2 + 2 * 61);
    }
    // Every key moved at its rate, side by side: none was left behind while others ran.
    const fewest = Math.min(...perKey.map((k) => k.starts.length));
    expect(fewest).toBeGreaterThanOrEqual(2 + 2 * 50);
  }, 120_000);
});
