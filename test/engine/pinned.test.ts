/**
 * Pinned inputs: an execution is delivered with the input it was created with, on every attempt;
 * editing the job changes only later executions; each HTTP attempt records the request it sent.
 * And the migration that pins executions not finished yet.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { createEmptyDatabase, createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, settled, type EngineHarness } from '../support/engine.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';
import { startHttpTarget, type HttpTarget } from '../support/http-target.js';

let t: TestDb;
let h: EngineHarness;
let target: HttpTarget;
let g: TestGateway;
const SECRET = 'tok-7f3a9c1e5b2d';

beforeAll(async () => {
  t = await createTestDb();
  h = engineHarness(t);
  target = await startHttpTarget();
  g = createTestGateway(t);
  const config = await t.service.setConfig(t.actor, { name: 'shop.auth', entries: [{ key: 'token', value: SECRET, secret: true }] });
  await t.service.registerEndpoint(t.actor, {
    name: 'shop.orders',
    kind: 'HTTP',
    url: `${target.url}/orders/{{input.order}}`,
    headers: { authorization: 'Bearer {{config.token}}', 'x-order': '{{input.order}}' },
    configId: config.id,
    backoffBaseMs: 10,
    backoffMaxMs: 20,
    jitter: false,
    maxAttempts: 3,
  });
});
afterAll(async () => {
  await h?.stopAll();
  await g?.close();
  await target?.close();
  await t?.close();
});

const EXECUTION = `query ($id: ID!) { execution(id: $id) { input status attempts { outcome target { url method headers } } } }`;

describe('an execution keeps the input it was created with', () => {
  it('delivers its retries with it after the job is edited, while an execution created after the edit gets the new input', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    // The first attempt is held until the test has edited the job, then fails (500); the retry succeeds.
    target.route('/orders/o-1', (_req, res, n) => {
      if (n === 1) void gate.then(() => res.writeHead(500).end('try again'));
      else res.writeHead(200).end('ok');
    });
    target.route('/orders/o-2', (_req, res) => res.writeHead(200).end('ok'));
    await h.worker({ outboundAllow: ['127.0.0.0/8'], defaultTimeoutMs: 10_000 });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'shop.orders', kind: 'IMMEDIATE', input: { order: 'o-1', qty: 1 } });
    await eventually(async () => target.hitsOf('/orders/o-1').length === 1, 10_000, 'the first attempt');
    await t.service.updateJob(t.actor, { id: job.id, input: { order: 'o-2', qty: 2 } });
    release();
    const ex = await settled(t, job.id);
    expect(ex.status).toBe('SUCCEEDED');
    const hits = target.hitsOf('/orders/o-1');
    expect(hits.map((x) => JSON.parse(x.body))).toEqual([
      { order: 'o-1', qty: 1 },
      { order: 'o-1', qty: 1 },
    ]);
    expect(hits.map((x) => x.headers['x-order'])).toEqual(['o-1', 'o-1']);

    const res = await g.gql(EXECUTION, { id: ex.id });
    expect(res.errors).toBeUndefined();
    const shown = res.data.execution;
    expect(shown.input).toEqual({ order: 'o-1', qty: 1 });
    expect(shown.attempts.map((a: { outcome: string }) => a.outcome)).toEqual(['FAILED', 'SUCCEEDED']);
    for (const a of shown.attempts) {
      expect(a.target.url).toBe(`${target.url}/orders/o-1`);
      expect(a.target.method).toBe('POST');
      expect(a.target.headers['x-order']).toBe('o-1');
      expect(a.target.headers.authorization).toBe('Bearer [redacted]');
      expect(a.target.headers['content-type']).toBe('application/json');
    }
    // The secret is nowhere in what was recorded.
    expect(JSON.stringify((await t.query(`select target from attempts where execution_id = $1`, [ex.id])).rows)).not.toContain(SECRET);

    // An execution created after the edit is delivered with the job's new input.
    const { execution } = await t.service.triggerJob(t.actor, { id: job.id });
    await eventually(async () => target.hitsOf('/orders/o-2').length === 1, 10_000, 'the new execution');
    expect(JSON.parse(target.hitsOf('/orders/o-2')[0]!.body)).toEqual({ order: 'o-2', qty: 2 });
    expect((await g.gql(EXECUTION, { id: execution.id })).data.execution.input).toEqual({ order: 'o-2', qty: 2 });
  });

  it('pins the input of a cron occurrence when it fires, and of a DELAYED job at its creation', async () => {
    const { job } = await t.service.createJob(t.actor, {
      endpointName: 'shop.orders',
      kind: 'DELAYED',
      runAt: new Date(Date.now() + 3_600_000),
      input: { order: 'later' },
    });
    await t.service.updateJob(t.actor, { id: job.id, input: { order: 'edited' } });
    const [ex] = (await t.query(`select id from executions where job_id = $1`, [job.id])).rows;
    expect((await g.gql(EXECUTION, { id: ex.id })).data.execution.input).toEqual({ order: 'later' });
    // An execution inserted without naming the input (as the scheduler does) is pinned by the database.
    await t.query(
      `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts)
                   select workspace_id, id, endpoint_id, now() + interval '2 hours', now() + interval '2 hours', 1 from jobs where id = $1`,
      [job.id],
    );
    const { rows } = await t.query(`select input from executions where job_id = $1 order by scheduled_for`, [job.id]);
    expect(rows.map((r) => r.input)).toEqual([{ order: 'later' }, { order: 'edited' }]);
  });
});

describe('migration 000018_pinned_inputs', () => {
  it('pins executions not finished yet to their job input, and leaves finished ones unknown (null)', async () => {
    const empty = await createEmptyDatabase();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-mig-'));
    const all = path.resolve(import.meta.dirname, '../../migrations');
    try {
      for (const f of fs.readdirSync(all)) if (f < '000018') fs.copyFileSync(path.join(all, f), path.join(dir, f));
      await migrate(empty.url, { dir });
      const c = new pg.Client({ connectionString: empty.url });
      await c.connect();
      try {
        const ws = (await c.query(`select id from workspaces where slug = 'default'`)).rows[0].id;
        const en = (
          await c.query(
            `insert into endpoints (workspace_id, name, kind, url, method) values ($1, 'old.target', 'HTTP', 'https://example.com', 'POST') returning id`,
            [ws],
          )
        ).rows[0].id;
        const job = (
          await c.query(
            `insert into jobs (workspace_id, endpoint_id, kind, input, max_attempts) values ($1, $2, 'IMMEDIATE', '{"v": 1}', 3) returning id`,
            [ws, en],
          )
        ).rows[0].id;
        for (const [status, at] of [
          ['PENDING', '1 hour'],
          ['RUNNING', '2 hours'],
          ['SUCCEEDED', '3 hours'],
        ]) {
          await c.query(
            `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, status)
                         values ($1, $2, $3, now() + $4::interval, now(), 3, $5)`,
            [ws, job, en, at, status],
          );
        }
        await migrate(empty.url);
        const { rows } = await c.query(`select status, input from executions order by scheduled_for`);
        expect(rows).toEqual([
          { status: 'PENDING', input: { v: 1 } },
          { status: 'RUNNING', input: { v: 1 } },
          { status: 'SUCCEEDED', input: null },
        ]);
      } finally {
        await c.end();
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
      await empty.drop();
    }
  });
});
