/**
 * `viewer` and `executionStats`: who a key is, and the overview's aggregate over real rows.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
});
afterAll(async () => {
  await g.close();
  await t.close();
});

/** An execution of a fresh job on `endpoint`, put in `status`, finished `finishedAgo` ago. */
async function execution(
  endpoint: string,
  status: string,
  opts: { finishedAgo?: string; startedAfterMs?: number; actor?: typeof t.actor } = {},
) {
  const { job } = await t.service.createJob(opts.actor ?? t.actor, {
    endpointName: endpoint,
    kind: 'DELAYED',
    runAt: new Date(Date.now() + 86_400_000),
  });
  const { rows } = await t.query(`select id from executions where job_id = $1`, [job.id]);
  const { id } = rows[0];
  const finished = opts.finishedAgo ? `now() - interval '${opts.finishedAgo}'` : 'null';
  await t.query(`update executions set status = $2, scheduled_for = now() - interval '1 hour', finished_at = ${finished} where id = $1`, [
    id,
    status,
  ]);
  if (opts.startedAfterMs !== undefined) {
    // Claimed just now, `startedAfterMs` after it was due.
    await t.query(
      `update executions set attempt_count = 1, attempt_started_at = now(), run_after = now() - make_interval(secs => $2 / 1000.0) where id = $1`,
      [id, opts.startedAfterMs],
    );
  }
  return id as string;
}

describe('viewer', () => {
  it("answers the key's role, workspace, name and prefix, never the key", async () => {
    const created = await t.service.createApiKey(t.actor, { name: 'console viewer', role: 'VIEWER' });
    const actor = await t.service.authenticate(created.key);
    const res = await g.gql('{ viewer { role installationAdmin workspace { slug } apiKey { name prefix role } } }', {}, actor);
    expect(res.errors).toBeUndefined();
    expect(res.data.viewer).toEqual({
      role: 'VIEWER',
      installationAdmin: false,
      workspace: { slug: 'default' },
      apiKey: { name: 'console viewer', prefix: created.apiKey.prefix, role: 'VIEWER' },
    });
    expect(JSON.stringify(res)).not.toContain(created.key);
  });
});

describe('executionStats', () => {
  it('counts live and dead-letter executions per endpoint, and what ended in the window, per minute', async () => {
    await t.service.registerEndpoint(t.actor, { name: 'stats.a', kind: 'HANDLER', handlerName: 'a' });
    await t.service.registerEndpoint(t.actor, { name: 'stats.b', kind: 'HANDLER', handlerName: 'b' });
    await execution('stats.a', 'PENDING');
    await execution('stats.a', 'RUNNING');
    await execution('stats.a', 'SUCCEEDED', { finishedAgo: '1 second', startedAfterMs: 400 });
    await execution('stats.a', 'SUCCEEDED', { finishedAgo: '1 second', startedAfterMs: 200 });
    await execution('stats.a', 'FAILED', { finishedAgo: '2 hours' });
    await execution('stats.b', 'FAILED', { finishedAgo: '1 second' });
    await execution('stats.b', 'SUCCEEDED', { finishedAgo: '3 hours' });
    const res = await g.gql(`{ executionStats(windowMinutes: 60) { windowMinutes workersAlive
      byEndpoint { endpointName pending running failed succeededInWindow failedInWindow cancelledInWindow }
      perMinute { minute succeeded failed started latencyP50Ms latencyP95Ms } } }`);
    expect(res.errors).toBeUndefined();
    const s = res.data.executionStats;
    expect(s.windowMinutes).toBe(60);
    expect(s.workersAlive).toBe(0);
    expect(s.byEndpoint).toEqual([
      { endpointName: 'stats.a', pending: 1, running: 1, failed: 1, succeededInWindow: 2, failedInWindow: 0, cancelledInWindow: 0 },
      { endpointName: 'stats.b', pending: 0, running: 0, failed: 1, succeededInWindow: 0, failedInWindow: 1, cancelledInWindow: 0 },
    ]);
    expect(s.perMinute).toHaveLength(60);
    const minutes = s.perMinute.map((m: { minute: string }) => Date.parse(m.minute));
    expect(minutes.every((m: number, i: number) => i === 0 || m - minutes[i - 1] === 60_000)).toBe(true);
    const total = (k: string) => s.perMinute.reduce((n: number, m: Record<string, number>) => n + m[k]!, 0);
    expect(total('succeeded')).toBe(2);
    expect(total('failed')).toBe(1);
    expect(total('started')).toBe(2);
    const busy = s.perMinute.find((m: { started: number }) => m.started > 0);
    expect(busy.latencyP50Ms).toBeGreaterThanOrEqual(200);
    expect(busy.latencyP95Ms).toBeGreaterThanOrEqual(busy.latencyP50Ms);
    expect(busy.latencyP95Ms).toBeLessThanOrEqual(400);
  });

  it('says which endpoints are paused, and which their target holds until when, beside their backlog', async () => {
    const paused = await t.service.registerEndpoint(t.actor, { name: 'stats.paused', kind: 'HANDLER', handlerName: 'p' });
    const held = await t.service.registerEndpoint(t.actor, { name: 'stats.held', kind: 'HANDLER', handlerName: 'h' });
    await t.service.registerEndpoint(t.actor, { name: 'stats.was-held', kind: 'HANDLER', handlerName: 'w' });
    for (const name of ['stats.paused', 'stats.held', 'stats.was-held']) await execution(name, 'PENDING');
    await t.service.pauseEndpoint(t.actor, paused.id);
    await t.query(`insert into endpoint_retry_after (endpoint_id, until, status_code) values ($1, now() + interval '1 hour', 429)`, [
      held.id,
    ]);
    await t.query(
      `insert into endpoint_retry_after (endpoint_id, until, status_code)
       select id, now() - interval '1 minute', 503 from endpoints where name = 'stats.was-held'`,
    );
    const res = await g.gql(`{ executionStats { byEndpoint { endpointName pending pausedAt heldUntil } } }`);
    expect(res.errors).toBeUndefined();
    const row = (name: string) => res.data.executionStats.byEndpoint.find((e: { endpointName: string }) => e.endpointName === name);
    expect(row('stats.paused')).toMatchObject({ pending: 1, pausedAt: expect.any(String), heldUntil: null });
    expect(Date.parse(row('stats.held').heldUntil) - Date.now()).toBeGreaterThan(50 * 60_000);
    expect(row('stats.held').pausedAt).toBeNull();
    // A hold that has run out is no hold.
    expect(row('stats.was-held')).toMatchObject({ pausedAt: null, heldUntil: null });
  });

  it("leaves jobgate's INTERNAL endpoints out of the workspace's counts and lists them apart, labelled", async () => {
    await t.service.registerEndpoint(
      t.systemActor,
      { name: 'jobgate.stats-internal', kind: 'HANDLER', handlerName: 'i' },
      { type: 'INTERNAL' },
    );
    const query = `{ executionStats(windowMinutes: 60) {
      byEndpoint { endpointName internal }
      internalEndpoints { endpointName internal pending succeededInWindow }
      perMinute { succeeded started } } }`;
    const before = (await g.gql(query)).data.executionStats;
    await execution('jobgate.stats-internal', 'PENDING', { actor: t.systemActor });
    await execution('jobgate.stats-internal', 'SUCCEEDED', { actor: t.systemActor, finishedAgo: '1 second', startedAfterMs: 10 });
    const res = await g.gql(query);
    expect(res.errors).toBeUndefined();
    const s = res.data.executionStats;
    expect(s.byEndpoint.map((e: { endpointName: string }) => e.endpointName)).not.toContain('jobgate.stats-internal');
    expect(s.byEndpoint.every((e: { internal: boolean }) => !e.internal)).toBe(true);
    expect(s.internalEndpoints).toEqual([{ endpointName: 'jobgate.stats-internal', internal: true, pending: 1, succeededInWindow: 1 }]);
    // The per-minute activity is the workspace's: unchanged by the internal executions.
    const sum = (m: { succeeded: number; started: number }[], k: 'succeeded' | 'started') => m.reduce((n, x) => n + x[k], 0);
    expect(sum(s.perMinute, 'succeeded')).toBe(sum(before.perMinute, 'succeeded'));
    expect(sum(s.perMinute, 'started')).toBe(sum(before.perMinute, 'started'));
  });

  it('is scoped to the workspace of the caller', async () => {
    const res = await g.gql('{ executionStats { byEndpoint { endpointName } } }', {}, t.otherActor);
    expect(res.data.executionStats.byEndpoint).toEqual([]);
  });

  it('gives a duration past a GraphQL Int as its cap instead of an error (a job started a month late, a retry weeks after)', async () => {
    await t.service.registerEndpoint(t.actor, { name: 'stats.late', kind: 'HANDLER', handlerName: 'l' });
    const id = await execution('stats.late', 'SUCCEEDED', { finishedAgo: '1 second', startedAfterMs: 30 * 86_400_000 });
    const stats = await g.gql('{ executionStats(windowMinutes: 60) { perMinute { latencyP50Ms latencyP95Ms } } }');
    expect(stats.errors).toBeUndefined();
    expect(stats.data.executionStats.perMinute.map((m: { latencyP95Ms: number | null }) => m.latencyP95Ms)).toContain(2_147_483_647);
    // Two attempts 40 days apart: the first failed, an operator retried it since.
    await t.query(
      `insert into attempts (workspace_id, execution_id, attempt_number, lease_epoch, worker_id, started_at, finished_at, outcome, duration_ms)
       select workspace_id, id, n, n, 'w', now() - make_interval(days => case n when 1 then 40 else 0 end),
              now() - make_interval(days => case n when 1 then 40 else 0 end) + interval '5 ms', case n when 1 then 'FAILED' else 'SUCCEEDED' end, 5
       from executions, generate_series(1, 2) n where id = $1`,
      [id],
    );
    const res = await g.gql('query ($id: ID!) { execution(id: $id) { attempts { attemptNumber gapBeforeNextMs } } }', { id });
    expect(res.errors).toBeUndefined();
    expect(res.data.execution.attempts).toEqual([
      { attemptNumber: 1, gapBeforeNextMs: 2_147_483_647 },
      { attemptNumber: 2, gapBeforeNextMs: null },
    ]);
  });

  it('refuses a window out of range with VALIDATION_FAILED', async () => {
    const res = await g.gql('{ executionStats(windowMinutes: 2) { windowMinutes } }');
    expect(res.errors?.[0]?.extensions?.code).toBe('VALIDATION_FAILED');
  });
});
