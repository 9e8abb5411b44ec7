/**
 * The interval crash sweep through a real database outage: ticks whose workers were merely cut off
 * are not recorded as crashed. Two worker hosts in this process, each with a pool and a view of the
 * database of its own, on a test database that is closed to connections (ALLOW_CONNECTIONS false,
 * every backend terminated) for longer than the staleness window, then opened again.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createDatabase, type Database } from '../../src/db/pool.js';
import { createLogger } from '../../src/log.js';
import { HandlerRegistry } from '../../src/service/engine/delivery/handler-registry.js';
import { createEngineHost, type EngineHost } from '../../src/service/engine/runtime/host.js';
import { IntervalRegistry, type IntervalHandler } from '../../src/service/engine/intervals/intervals.js';
import { RecoverableRegistry } from '../../src/service/engine/runs/recoverable.js';
import { adminQuery, createTestDb, hookedPool, type TestDb } from '../support/db.js';
import { eventually } from '../support/engine.js';

const STALE_MS = 3000;
let t: TestDb;
const hosts: EngineHost[] = [];
const pools: Database[] = [];

beforeEach(async () => {
  t = await createTestDb();
});
afterEach(async () => {
  await adminQuery(`alter database ${t.name} allow_connections true`);
  await Promise.all(hosts.splice(0).map((h) => h.stop({ graceMs: 1000 })));
  await Promise.all(pools.splice(0).map((p) => p.close()));
  await t.close();
});

/** A worker's engine host with a pool of its own (`hook` runs before each of its statements). */
async function host(
  name: string,
  lines: string[],
  handlers: IntervalHandler[],
  hook: (sql: string) => Promise<void> | void = () => {},
): Promise<EngineHost> {
  const database = createDatabase({ connectionString: t.url, max: 4 });
  pools.push(database);
  const intervals = new IntervalRegistry();
  for (const h of handlers) intervals.register(h);
  const h = createEngineHost({
    id: name,
    pool: hookedPool(database.pool, hook),
    log: createLogger('info', (l) => lines.push(l)),
    handlers: new HandlerRegistry(),
    recoverables: new RecoverableRegistry(),
    intervals,
    triggerRun: t.service.triggerRun,
    staleMs: STALE_MS,
    pollMs: 50,
  });
  await h.start();
  hosts.push(h);
  return h;
}

describe('the interval crash sweep after a database outage', () => {
  it('does not record as crashed a tick whose worker was cut off by the outage and is still running it', async () => {
    let release!: () => void;
    const done = new Promise<void>((r) => (release = r));
    let started = false;
    const long: IntervalHandler = {
      name: 'long',
      everyMs: 100,
      timeoutMs: 600_000,
      async run() {
        started = true;
        await done;
        return { count: 1 };
      },
    };
    // A's presence heartbeats can be held back after the outage: the sweep then sees its row as
    // stale for as long as the test likes, as it would if A's first heartbeat came late.
    let holdPresence = false;
    let letPresenceGo!: () => void;
    const presenceGate = new Promise<void>((r) => (letPresenceGo = r));
    const aLines: string[] = [];
    const bLines: string[] = [];
    const a = await host('worker-a', aLines, [long], async (sql) => {
      if (holdPresence && sql.startsWith('insert into workers')) await presenceGate;
    });
    const b = await host('worker-b', bLines, []);
    await eventually(async () => started, 10_000, "A's tick to start");
    expect((await t.query(`select owner from interval_handlers where name = 'long'`)).rows[0].owner).toBe('worker-a');

    await adminQuery(`alter database ${t.name} allow_connections false`);
    const since = (await adminQuery<{ at: string }>(`select now()::text as at`)).rows[0]!.at;
    await eventually(
      async () =>
        Number((await adminQuery(`select pg_terminate_backend(pid) from pg_stat_activity where datname = $1`, [t.name])).rowCount) === 0,
      10_000,
      'every backend of the database to be gone',
    );
    await eventually(
      async () => [aLines, bLines].every((l) => l.some((x) => x.includes('the database is unreachable'))),
      10_000,
      'both workers to see the outage',
    );
    // Past the staleness window on the database's clock: A's presence row is stale by now.
    await eventually(
      async () =>
        (await adminQuery(`select now() > $1::timestamptz + make_interval(secs => $2) as past`, [since, (1.5 * STALE_MS) / 1000])).rows[0]!
          .past,
      10_000,
      'the outage to outlast the staleness window',
    );
    holdPresence = true;
    await adminQuery(`alter database ${t.name} allow_connections true`);

    await eventually(async () => bLines.some((x) => x.includes('the database answers again')), 10_000, 'B to see the database back');
    // Whole passes of both sweeps with A's row stale: neither takes the outage for a crash.
    await b.intervals.kick();
    await b.intervals.kick();
    await a.intervals.kick();
    const during = (await t.query(`select owner, last_cause, error_runs from interval_handlers where name = 'long'`)).rows[0];
    expect(during).toEqual({ owner: 'worker-a', last_cause: null, error_runs: 0 });
    expect([...aLines, ...bLines].filter((l) => l.includes('recorded as crashed'))).toEqual([]);

    // A heartbeats again; past the hold-off the sweeps run as usual, and A is live.
    letPresenceGo();
    holdPresence = false;
    await eventually(
      async () =>
        (await t.query(`select heartbeat_at > now() - make_interval(secs => stale_ms / 1000.0) as live from workers where id = 'worker-a'`))
          .rows[0]?.live,
      10_000,
      "A's presence to be live again",
    );
    release();
    // Its outcome is recorded as its own (later ticks, every 100 ms, follow it): no crash recorded, ever.
    const after = await eventually(
      async () => {
        const row = (await t.query(`select last_status, last_cause, ok_runs, error_runs from interval_handlers where name = 'long'`))
          .rows[0];
        return row.ok_runs >= 1 ? row : undefined;
      },
      10_000,
      "A's tick to be recorded",
    );
    expect(after).toMatchObject({ last_status: 'OK', last_cause: null, error_runs: 0 });
    expect([...aLines, ...bLines].filter((l) => l.includes('recorded as crashed'))).toEqual([]);
  });
});
