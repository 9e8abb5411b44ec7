/**
 * `jobgate start` / `jobgate worker` (startApp): the worker role runs the recoverable runner, interval
 * handlers and the handler catalogue, even with no user handler registered; the gateway serves them.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startApp, type RunningApp } from '../src/app.js';
import { parseConfig } from '../src/environment.js';
import { createLogger } from '../src/log.js';
import pg from 'pg';
import { createEmptyDatabase, createTestDb, type TestDb } from './support/db.js';
import { eventually } from './support/engine.js';

let t: TestDb;
let app: RunningApp | undefined;

beforeEach(async () => {
  t = await createTestDb();
});
afterEach(async () => {
  await app?.stop();
  app = undefined;
  await t.close();
});

describe('startApp', () => {
  it('as gateway and worker, lists itself in the catalogue and sweeps crashed runs and interval ticks', async () => {
    // Work left by a worker that died: a recoverable run and an interval tick it owned.
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'orphan-scan' });
    await t.query(`update runs set owner = 'dead-worker', heartbeat_at = now() - interval '10 minutes' where id = $1`, [run.id]);
    await t.query(
      `insert into interval_handlers (name, every_ms, next_due_at, owner, epoch, run_started_at) values ('cleanup', 60000, now(), 'dead-worker', 1, now())`,
    );
    const config = parseConfig({ DATABASE_URL: t.url, PORT: '0', JOBGATE_LOG_LEVEL: 'silent' });
    app = await startApp({ config, log: createLogger('silent') });
    // Its sweeps ran at start.
    await eventually(async () => (await t.service.run(t.actor, run.id)).status === 'PAUSED');
    await eventually(
      async () => (await t.query(`select last_cause from interval_handlers where name = 'cleanup'`)).rows[0].last_cause === 'CRASHED',
    );
    // Over HTTP: the catalogue shows jobgate's own handler on this process's worker.
    const { key } = await t.service.bootstrapKey('default', 'VIEWER', 'app test');
    const res = await fetch(app.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ query: '{ handlers { kind name workers { id host pid } } }' }),
    });
    const body = (await res.json()) as {
      data: { handlers: { kind: string; name: string; workers: { id: string; host: string | null; pid: number | null }[] }[] };
    };
    // A tenant's key sees that the worker is there, not where it runs.
    expect(body.data.handlers).toContainEqual({
      kind: 'HANDLER',
      name: 'jobgate.reaper',
      workers: [{ id: expect.stringMatching(/^worker-[0-9a-f]{12}$/), host: null, pid: null }],
    });
    expect(JSON.stringify(body)).not.toContain(String(process.pid));
    await app.stop();
    app = undefined;
    // A clean stop leaves the catalogue.
    expect((await t.query(`select count(*)::int as n from workers`)).rows[0].n).toBe(0);
  });

  it('with JOBGATE_MIGRATIONS=verify, applies nothing: it stops on a database that lacks migrations, and starts on a migrated one', async () => {
    const empty = await createEmptyDatabase();
    try {
      const config = parseConfig({ DATABASE_URL: empty.url, PORT: '0', JOBGATE_MIGRATIONS: 'verify' });
      await expect(startApp({ config, log: createLogger('silent') })).rejects.toThrow(/lacks \d+ migration\(s\).*run `jobgate migrate`/);
      const { rows } = await t.query(`select count(*)::int as n from pg_database where datname = $1`, [empty.name]);
      expect(rows[0].n).toBe(1);
      const client = new pg.Client({ connectionString: empty.url });
      await client.connect();
      const tables = (await client.query(`select to_regclass('jobgate_migrations') as t`)).rows[0].t;
      await client.end();
      expect(tables).toBeNull();
    } finally {
      await empty.drop();
    }
    app = await startApp({
      config: parseConfig({ DATABASE_URL: t.url, PORT: '0', JOBGATE_MIGRATIONS: 'verify', JOBGATE_LOG_LEVEL: 'silent' }),
      log: createLogger('silent'),
    });
  });
});
