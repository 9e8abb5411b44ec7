/**
 * The live hub through a database outage says so once, and once when it reads again: not a line
 * per retry (a line a second through a long outage, found by an outside fault test). A real
 * outage of the test's own database: it refuses connections and its backends are ended.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminQuery, createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/eventually.js';
import { collect, startLiveGateway, type LiveGateway } from '../support/live.js';

let t: TestDb;
let live: LiveGateway;
let key: string;

beforeAll(async () => {
  t = await createTestDb();
  live = await startLiveGateway(t, { hub: { pollMs: 100, checkEveryMs: 200, probeTimeoutMs: 200 } });
  key = (await t.service.bootstrapKey('default', 'VIEWER', 'outage viewer')).key;
});
afterAll(async () => {
  await adminQuery(`alter database "${t.name}" allow_connections true`).catch(() => {});
  await live.close();
  await t.close();
});

const said = (pattern: RegExp) => live.logs.filter((line) => pattern.test(line)).length;

describe('the live hub through an outage', () => {
  it('logs the failure to read events once, and once when it reads again', async () => {
    const sub = collect(live.client(key), `subscription { jobEvents { cursor status } }`);
    await eventually(async () => live.hub.stats().events === 1, 5000, 'the subscription to go live');
    await adminQuery(`alter database "${t.name}" allow_connections false`);
    await adminQuery(`select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`, [t.name]);
    // Many retries at 100 ms apart: the first failure is said, the rest are not.
    await eventually(async () => said(/live: reading new events failed/) >= 1, 10_000, 'the failure to be said');
    await new Promise((r) => setTimeout(r, 1500));
    expect(said(/live: reading new events failed/)).toBe(1);
    await adminQuery(`alter database "${t.name}" allow_connections true`);
    await eventually(async () => said(/live: reading new events again after \d+\.\d s/) === 1, 20_000, 'the recovery to be said');
    expect(said(/live: reading new events failed/)).toBe(1);
    sub.stop();
  });
});
